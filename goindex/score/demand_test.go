package score

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestDemand_SlidingWindow(t *testing.T) {
	d := NewDemand(time.Second) // 1000 ms
	if got := d.Utilization(0, 10); got != 0 {
		t.Errorf("empty: %v, want 0", got)
	}
	d.Add(0, 2000)
	d.Add(500, 3000)
	d.Add(400, 1000) // earlier than the last: counted at 500
	d.Add(600, 0)    // ignored
	d.Add(600, -5)   // ignored
	for _, c := range []struct{ now, rate, want float64 }{
		{500, 10, 6000.0 / 10000}, // all three in (−500, 500]
		{999, 10, 0.6},
		{1000, 10, 4000.0 / 10000}, // the one at 0 leaves at exactly 1000
		{1499, 20, 4000.0 / 20000},
		{1500, 10, 0}, // every send expired
		{1500, 0, 0},  // no capacity known
	} {
		if got := d.Utilization(c.now, c.rate); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Utilization(%v, %v) = %v, want %v", c.now, c.rate, got, c.want)
		}
	}
	d.Add(2000, 500)
	if got := d.Utilization(2000, 1); got != 0.5 {
		t.Errorf("after expiry and a new send: %v, want 0.5", got)
	}
	if NewDemand(0).window != float64(DefaultDemandWindow/time.Millisecond) {
		t.Errorf("NewDemand(0) does not take the default window")
	}
}

// TestDemand_MatchesBruteForce replays random sends and queries against a
// sum over every send inside the window.
func TestDemand_MatchesBruteForce(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	d := NewDemand(250 * time.Millisecond)
	var all []Arrival
	now := 0.0
	for step := range 20000 {
		now += rng.ExpFloat64() * 3
		if rng.IntN(3) > 0 {
			tok := float64(rng.IntN(5000))
			d.Add(now, tok)
			if tok > 0 {
				all = append(all, Arrival{AtMs: now, Tokens: tok})
			}
			continue
		}
		want := 0.0
		for _, a := range all {
			if a.AtMs > now-250 {
				want += a.Tokens
			}
		}
		want /= 40 * 250
		if got := d.Utilization(now, 40); math.Abs(got-want) > 1e-9*math.Max(1, want) {
			t.Fatalf("seed %d step %d: Utilization = %v, want %v", seed, step, got, want)
		}
	}
}

func TestDemand_ConcurrentUse(t *testing.T) {
	d := NewDemand(time.Second)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 2000 {
				at := float64(k)
				if g%2 == 0 {
					d.Add(at, 10)
				} else if u := d.Utilization(at, 1); u < 0 {
					t.Errorf("negative utilization %v", u)
				}
			}
		}()
	}
	wg.Wait()
}
