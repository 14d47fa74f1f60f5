package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseCounts parses a comma-separated list of counts in [lo, hi] with
// optional K (2^10) or M (10^6) suffixes, except that 1M alone is 2^20, the
// upstream relay's default lane size.
func ParseCounts(s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		switch {
		case f == "1M":
			f, mult = "1", 1<<20
		case strings.HasSuffix(f, "M"):
			f, mult = strings.TrimSuffix(f, "M"), 1_000_000
		case strings.HasSuffix(f, "K"):
			f, mult = strings.TrimSuffix(f, "K"), 1<<10
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 || v > hi/mult {
			return nil, fmt.Errorf("%q is not a count in [%d, %d]", f, lo, hi)
		}
		if v *= mult; v < lo {
			return nil, fmt.Errorf("%d is below %d", v, lo)
		}
		out = append(out, v)
	}
	return out, nil
}
