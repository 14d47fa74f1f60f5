package bench

import (
	"slices"
	"time"
)

// Latency summarizes the per-query latencies of one structure: nearest-rank
// percentiles in microseconds. Each sample includes one time.Now pair (tens
// of ns on Linux's vDSO clock).
type Latency struct {
	Queries int `json:"queries"`
	// Overlaps is the structure's answer summed over the timed queries
	// (member overlaps or lane depths, per benchmark): the sink a check
	// holds against the untimed answers.
	Overlaps int     `json:"overlaps"`
	P50us    float64 `json:"p50_us"`
	P99us    float64 `json:"p99_us"`
	MeanUs   float64 `json:"mean_us"`
	MaxUs    float64 `json:"max_us"`
}

// LatencyOf summarizes lat, which it sorts in place.
func LatencyOf(lat []time.Duration) Latency {
	m := Latency{Queries: len(lat)}
	if len(lat) == 0 {
		return m
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	m.P50us, m.P99us, m.MaxUs = micros(rank(lat, 0.50)), micros(rank(lat, 0.99)), micros(lat[len(lat)-1])
	m.MeanUs = micros(sum) / float64(len(lat))
	return m
}

// rank returns the nearest-rank p-quantile of the sorted, non-empty lat.
func rank(lat []time.Duration, p float64) time.Duration {
	return lat[max(0, int(p*float64(len(lat))+0.999999)-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratio is a/b, or 0 when b is 0.
func ratio[T int | int64 | uint64 | float64](a T, b T) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
