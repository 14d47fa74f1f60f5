package score

import (
	"math"
	"testing"
)

// TestHolding_BlockWeightedAndShrunkToTheFleet: a candidate's hold time is
// its requests' block-weighted mean, pulled towards the fleet's by
// holdPrior requests' worth; a candidate never observed reads the fleet's
// mean, and bad input is ignored.
func TestHolding_BlockWeightedAndShrunkToTheFleet(t *testing.T) {
	h := NewHolding(3, 1_000_000) // memory so long that forgetting is below the 0.01 ms tolerance
	if got := h.HoldMs(0); got != 0 {
		t.Fatalf("HoldMs before any observation = %v, want 0", got)
	}
	// Candidate 0: one request of 1 block for 1 s, one of 3 blocks for 5 s:
	// block-weighted mean (1 + 15) / 4 = 4 s, not the plain 3 s.
	h.Observe(0, 1000, 1)
	h.Observe(0, 5000, 3)
	// Candidate 1: 40 requests of 1 block for 1 s. Fleet: (16 + 40) s / 44 blocks.
	for range 40 {
		h.Observe(1, 1000, 1)
	}
	fleet := (16000.0 + 40000) / 44
	want0 := (2*4000 + holdPrior*fleet) / (2 + holdPrior)
	want1 := (40*1000 + holdPrior*fleet) / (40 + holdPrior)
	for k, want := range []float64{want0, want1, fleet} {
		if got := h.HoldMs(k); math.Abs(got-want) > 0.01 {
			t.Errorf("HoldMs(%d) = %v, want %v", k, got, want)
		}
	}
	for _, bad := range [][2]float64{{-1, 1}, {math.Inf(1), 1}, {math.NaN(), 1}, {1000, 0}, {1000, math.Inf(1)}} {
		h.Observe(2, bad[0], bad[1])
	}
	h.Observe(7, 1000, 1) // no such candidate
	if got := h.HoldMs(2); math.Abs(got-fleet) > 0.01 {
		t.Errorf("HoldMs(2) after bad input = %v, want the fleet's %v", got, fleet)
	}
}

// TestHolding_ForgetsOldRequests: after a change of hold time, a
// candidate's estimate follows within a few memories of requests.
func TestHolding_ForgetsOldRequests(t *testing.T) {
	h := NewHolding(1, 10)
	for range 100 {
		h.Observe(0, 1000, 2)
	}
	for range 100 {
		h.Observe(0, 9000, 2)
	}
	if got := h.HoldMs(0); math.Abs(got-9000) > 50 {
		t.Errorf("HoldMs after 100 requests of 9 s = %v, want about 9000", got)
	}
}

// TestHolding_ObserveStream: a request seen by its first and last tokens
// holds its blocks for the time between them plus the estimated prefill
// before the first; a negative prefill adds nothing, NaN is ignored.
func TestHolding_ObserveStream(t *testing.T) {
	h := NewHolding(1, 1_000_000)
	h.ObserveStream(0, 3000, 500, 2)
	if got := h.HoldMs(0); math.Abs(got-3500) > 0.01 {
		t.Errorf("HoldMs after a 3 s stream with 0.5 s of prefill = %v, want 3500", got)
	}
	h = NewHolding(1, 1_000_000)
	h.ObserveStream(0, 3000, -500, 2)
	h.ObserveStream(0, math.NaN(), 500, 2)
	if got := h.HoldMs(0); math.Abs(got-3000) > 0.01 {
		t.Errorf("HoldMs after a negative prefill and a NaN stream = %v, want 3000", got)
	}
}
