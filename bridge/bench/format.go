package bench

import "fmt"

// si formats a rate with a k/M/G suffix.
func si(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// bytesIEC formats a byte count in KiB/MiB/GiB.
func bytesIEC(n int64) string {
	v := float64(n)
	switch {
	case v >= 1<<30 || v <= -(1<<30):
		return fmt.Sprintf("%.2f GiB", v/(1<<30))
	case v >= 1<<20 || v <= -(1<<20):
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10 || v <= -(1<<10):
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
