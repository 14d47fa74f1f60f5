package score

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKVOthersMs_ByHand: occupancy 0.5, a 20-block prompt against a mean of
// 10, 2 blocks freed per ms (x = 10 ms) and a 30 ms wait: ρ/(1−ρ) = 1,
// b/b̄ = 2, v + x/2 = 35: 70 ms. Occupancy above the cap counts as
// MaxFleetUtilization (19×); unknown inputs price nothing.
func TestKVOthersMs_ByHand(t *testing.T) {
	if got := KVOthersMs(0.5, 20, 10, 2, 30); math.Abs(got-70) > 1e-9 {
		t.Errorf("KVOthersMs = %v, want 70", got)
	}
	if got := KVOthersMs(3, 20, 10, 2, 30); math.Abs(got-19*70) > 1e-9 {
		t.Errorf("over capacity: KVOthersMs = %v, want %v", got, 19*70)
	}
	for _, in := range [][5]float64{{0, 20, 10, 2, 30}, {0.5, 0, 10, 2, 30}, {0.5, 20, 0, 2, 30}, {0.5, 20, 10, 0, 30}, {math.NaN(), 20, 10, 2, 30}} {
		if got := KVOthersMs(in[0], in[1], in[2], in[3], in[4]); got != 0 {
			t.Errorf("KVOthersMs%v = %v, want 0", in, got)
		}
	}
}

// TestKVOthersMs_GrowsWithPressure: at a fixed request the price never
// falls as the occupancy or the wait grows, and an idle candidate is free.
func TestKVOthersMs_GrowsWithPressure(t *testing.T) {
	prev := 0.0
	for occ := 0.0; occ <= 1.5; occ += 0.05 {
		for wait := 0.0; wait <= 100; wait += 25 {
			got := KVOthersMs(occ, 12, 10, 1, wait)
			if occ == 0 && got != 0 {
				t.Fatalf("idle candidate priced %v", got)
			}
			if wait > 0 && got < KVOthersMs(occ, 12, 10, 1, wait-25) {
				t.Fatalf("price fell with the wait at occupancy %v", occ)
			}
		}
		got := KVOthersMs(occ, 12, 10, 1, 0)
		if got < prev {
			t.Fatalf("price fell from %v to %v at occupancy %v", prev, got, occ)
		}
		prev = got
	}
}

// TestKVOthersMs_MatchesAnMG1Queue checks the formula against the queue it
// comes from: an FCFS M/M/1 queue at utilization ρ = λ·s̄ (s̄ = b̄ /
// release rate) run twice on the same arrivals, with and without a job of
// x = b / release rate arriving at workload v; the mean of the total extra
// wait of the later arrivals over many runs is KVOthersMs within 3%.
func TestKVOthersMs_MatchesAnMG1Queue(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	const release = 2.0 // blocks per ms
	for _, tc := range []struct{ rho, b, mean, v float64 }{
		{0.5, 20, 10, 0}, {0.8, 10, 10, 0}, {0.6, 30, 10, 8}, {0.3, 5, 10, 20},
	} {
		sMean, x := tc.mean/release, tc.b/release
		lambda := tc.rho / sMean
		runs := 40000
		if testing.Short() {
			runs = 10000
		}
		sum := 0.0
		for range runs {
			with, without, extra := tc.v+x, tc.v, 0.0
			for with > without {
				dt := rng.ExpFloat64() / lambda
				with, without = max(with-dt, 0), max(without-dt, 0)
				extra += with - without
				s := rng.ExpFloat64() * sMean
				with, without = with+s, without+s
			}
			sum += extra
		}
		got, want := sum/float64(runs), KVOthersMs(tc.rho, tc.b, tc.mean, release, tc.v)
		if math.Abs(got-want) > 0.03*want+0.05 {
			t.Errorf("seed %d, %+v: simulated externality %.3f ms, KVOthersMs %.3f", seed, tc, got, want)
		}
	}
}

// TestCascadeFactor: p/(1−p), capped at MaxRefetchShare, 0 for none.
func TestCascadeFactor(t *testing.T) {
	for _, tc := range []struct{ p, want float64 }{
		{0, 0}, {-1, 0}, {math.NaN(), 0}, {0.5, 1}, {0.2, 0.25}, {1, 19}, {0.99, 19},
	} {
		if got := CascadeFactor(tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("CascadeFactor(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

// TestRefetch_ByHand: a ghost list of 3; a, b, c, d evicted (a falls off
// the list): storing a again is no refetch, storing d is, storing d twice
// counts once. No eviction: share 0.
func TestRefetch_ByHand(t *testing.T) {
	r := NewRefetch(3, 1e9)
	if r.Share() != 0 {
		t.Fatal("share before any eviction is not 0")
	}
	r.Prefill(9)
	for _, h := range []uint64{1, 2, 3, 4} {
		r.Evict(h)
	}
	r.Prefill(1)
	r.Prefill(4)
	r.Prefill(4)
	if got := r.Share(); math.Abs(got-0.25) > 1e-6 {
		t.Errorf("share = %v, want 1/4", got)
	}
}

// TestRefetch_MatchesTheEvictionLog feeds a real LRU cache's evictions and
// stores (random requests over a skewed key space) to Refetch, with
// forgetting off, and compares its share with the same share computed
// from the whole log: each eviction counts as refetched when its block is
// stored again before capacity more evictions follow it (and before it is
// evicted again).
func TestRefetch_MatchesTheEvictionLog(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	const capacity, keys = 50, 400
	r := NewRefetch(capacity, 1e12)
	type ev struct {
		evict bool
		hash  uint64
	}
	var log []ev
	lru := map[uint64]int{} // key → last use
	for step := range 20000 {
		k := uint64(math.Floor(math.Pow(rng.Float64(), 3) * keys))
		if _, ok := lru[k]; !ok {
			if len(lru) == capacity {
				old, oldest := uint64(0), math.MaxInt
				for h, at := range lru {
					if at < oldest {
						old, oldest = h, at
					}
				}
				delete(lru, old)
				r.Evict(old)
				log = append(log, ev{true, old})
			}
			r.Prefill(k)
			log = append(log, ev{false, k})
		}
		lru[k] = step
	}
	evictions, refetched := 0, 0
	for i, e := range log {
		if !e.evict {
			continue
		}
		evictions++
		later := 0
		for _, f := range log[i+1:] {
			if f.hash == e.hash {
				if !f.evict && later < capacity {
					refetched++
				}
				break
			}
			if f.evict {
				later++
			}
		}
	}
	want := float64(refetched) / float64(evictions)
	if got := r.Share(); math.Abs(got-want) > 1e-9 {
		t.Errorf("seed %d: Refetch share %v, log's %v (%d of %d)", seed, got, want, refetched, evictions)
	}
	if want <= 0 || want >= 1 {
		t.Errorf("seed %d: degenerate stream (share %v)", seed, want)
	}
}

// TestRequestSize_Mean: a steady stream reads as its size; bad sizes are
// ignored; nothing before the first.
func TestRequestSize_Mean(t *testing.T) {
	var q RequestSize
	if q.MeanBlocks() != 0 {
		t.Fatal("mean before any request is not 0")
	}
	for range 10 {
		q.Observe(8)
	}
	q.Observe(-1)
	q.Observe(math.Inf(1))
	if got := q.MeanBlocks(); math.Abs(got-8) > 1e-9 {
		t.Errorf("mean = %v, want 8", got)
	}
}

// TestScore_TTFTPricesTheKVOthersWait: with a MeanRequestBlocks, OthersMs
// carries KVOthersMs (not the request's own TTFT), so of two DCs alike but
// for their KV occupancy the emptier one wins even 1 ms further away;
// without it, the nearer one.
func TestScore_TTFTPricesTheKVOthersWait(t *testing.T) {
	s := mustNew(t, Config{Policy: TTFT, BlockSize: 16, PrefillTokensPerMs: 10, DecodeBlocksPerMs: 1})
	full := Candidate{ID: 1, HasLoad: true, HasRTT: true, RTTms: 9, HasCapacity: true, CapacityBlocks: 100, ActiveDecodeBlocks: 80}
	empty := full
	empty.ID, empty.RTTms, empty.ActiveDecodeBlocks = 2, 10, 20
	r, err := s.Score(Request{ISLTokens: 160}, []Candidate{full, empty}, nil)
	if err != nil || r.Index != 0 {
		t.Fatalf("without the price: chose %d (%v), want the nearer", r.Index, err)
	}
	full.MeanRequestBlocks, empty.MeanRequestBlocks = 10, 10
	if r, _ = s.Score(Request{ISLTokens: 160}, []Candidate{full, empty}, nil); r.Index != 1 {
		t.Errorf("with the price: chose %d, want the emptier", r.Index)
	}
	// full: occupancy 0.8, b = b̄ = 10, x = 10 ms, no wait: 4 × 5 = 20 ms.
	one, _ := s.Score(Request{ISLTokens: 160}, []Candidate{full}, nil)
	if math.Abs(one.Parts.OthersMs-20) > 1e-9 || one.Parts.TTFTms() != 9+16 {
		t.Errorf("Parts = %+v, want OthersMs 20 and TTFT 25", one.Parts)
	}
}
