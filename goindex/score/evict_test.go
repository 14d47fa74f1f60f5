package score

import (
	"math"
	"testing"
)

// TestEvictionFactor: 1 / (1 + turnover / DefaultReuseWindow): near 1 for
// a cache that turns over in a fraction of the window, a half at one
// window, a tenth at nine, a twenty-first at twenty (where an exponential
// would give 2e-9), 0 when a rate or capacity is unknown.
func TestEvictionFactor(t *testing.T) {
	w := windowMs()
	for _, tc := range []struct{ capacity, rate, want float64 }{
		{1000, 1000 / w, 0.5},
		{1000, 1000 / (w / 100), 1 / 1.01},
		{1000, 1000 / (w * 9), 0.1},
		{1000, 1000 / (w * 20), 1.0 / 21},
		{0, 1, 0}, {1000, 0, 0}, {-5, 1, 0}, {1000, math.NaN(), 0},
	} {
		if got := EvictionFactor(tc.capacity, tc.rate); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("EvictionFactor(%v, %v) = %v, want %v", tc.capacity, tc.rate, got, tc.want)
		}
	}
}

// TestInsertRate_ConvergesAndDecays: a steady stream of 5 blocks every
// 10 ms reads as 0.5 blocks/ms after many windows; with no events the rate
// decays by 1/e per window; nothing is read before the first event.
func TestInsertRate_ConvergesAndDecays(t *testing.T) {
	var r InsertRate
	if r.At(0) != 0 {
		t.Fatal("rate before any event is not 0")
	}
	w := windowMs()
	end := 10 * w
	for at := 0.0; at <= end; at += 10 {
		r.Add(at, 5)
	}
	if got := r.At(end); math.Abs(got-0.5) > 0.01 {
		t.Errorf("steady rate = %v, want 0.5 blocks/ms", got)
	}
	before := r.At(end)
	if got := r.At(end + w); math.Abs(got-before/math.E) > 1e-12 {
		t.Errorf("rate one window later = %v, want %v", got, before/math.E)
	}
	r.Add(end, math.NaN())
	r.Add(end, -3)
	if got := r.At(end); got != before {
		t.Errorf("rate after bad input = %v, want %v", got, before)
	}
}
