package score

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func mustNew(t *testing.T, cfg Config) *Scorer {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return s
}

func TestCreditCost_MatchesDynamoDocExamples(t *testing.T) {
	// dynamo-compat §4.2: credit 1, raw prefill 10 blocks.
	for _, c := range []struct{ overlap, decode, want float64 }{{2, 10, 18}, {5, 5, 10}, {8, 9, 11}} {
		if got := CreditCost(10, c.overlap, c.decode, 1); got != c.want {
			t.Errorf("CreditCost(10, %v, %v, 1) = %v, want %v", c.overlap, c.decode, got, c.want)
		}
	}
	if got := CreditCost(3, 5, 2, 1); got != 2 {
		t.Errorf("CreditCost(3, 5, 2, 1) = %v, want 2 (prefill term floors at 0)", got)
	}
}

func TestScore_CreditPicksDocsWinner(t *testing.T) {
	// Three candidates shaped like the docs example; request 10 blocks of 16
	// tokens, no queued prefill, decode blocks chosen so totals are 18/10/11.
	s := mustNew(t, Config{Policy: Credit, BlockSize: 16})
	cands := []Candidate{
		{ID: 1, CachedBlocks: 2, HasLoad: true, ActiveDecodeBlocks: 2}, // 8 + (2 + 8) = 18
		{ID: 2, CachedBlocks: 5, HasLoad: true, ActiveDecodeBlocks: 0}, // 5 + (0 + 5) = 10
		{ID: 3, CachedBlocks: 8, HasLoad: true, ActiveDecodeBlocks: 7}, // 2 + (7 + 2) = 11
	}
	r, err := s.Score(Request{ISLTokens: 160}, cands, rand.New(rand.NewPCG(1, 1)))
	if err != nil || r.Index != 1 || r.Cost != 10 || r.Eligible != 3 {
		t.Errorf("Score(credit) = %+v, %v; want index 1 cost 10 eligible 3", r, err)
	}
}

func TestScore_TTFTTradesRTTAgainstPrefill(t *testing.T) {
	s := mustNew(t, Config{Policy: TTFT, BlockSize: 512, PrefillTokensPerMs: 10})
	// 40 blocks = 20480 tokens. Near DC: nothing cached, 5 ms away → 5 + 2048.
	// Far DC: 38 blocks cached, 150 ms away → 150 + 1024/10 = 252.4.
	near := Candidate{ID: 1, HasLoad: true, HasRTT: true, RTTms: 5}
	far := Candidate{ID: 2, HasLoad: true, HasRTT: true, RTTms: 150, CachedBlocks: 38}
	r, err := s.Score(Request{ISLTokens: 40 * 512}, []Candidate{near, far}, nil)
	if err != nil || r.Index != 1 {
		t.Fatalf("Score = %+v, %v; want the far DC with the cache", r, err)
	}
	want := Parts{RTTms: 150, QueueMs: 0, PrefillMs: 102.4}
	if math.Abs(r.Parts.PrefillMs-want.PrefillMs) > 1e-9 || r.Parts.RTTms != want.RTTms || r.Parts.QueueMs != 0 {
		t.Errorf("Parts = %+v, want %+v", r.Parts, want)
	}
	if r.CachedTokens != 38*512 || math.Abs(r.Cost-252.4) > 1e-9 {
		t.Errorf("CachedTokens, Cost = %d, %v; want %d, 252.4", r.CachedTokens, r.Cost, 38*512)
	}
	// A short prompt is not worth a long WAN trip: 5 + 153.6 ms beats 200 ms.
	r, _ = s.Score(Request{ISLTokens: 3 * 512}, []Candidate{near, {ID: 2, HasLoad: true, HasRTT: true, RTTms: 200, CachedBlocks: 3}}, nil)
	if r.Index != 0 {
		t.Errorf("short prompt: Score chose %d, want the near DC", r.Index)
	}
}

func TestScore_TTFTQueueAndAdmissionWait(t *testing.T) {
	s := mustNew(t, Config{Policy: TTFT, BlockSize: 16, PrefillTokensPerMs: 10, QueueTokensPerMs: 40, DecodeBlocksPerMs: 2})
	c := Candidate{HasLoad: true, HasRTT: true, RTTms: 1, ActivePrefillTokens: 800, HasCapacity: true, CapacityBlocks: 100, ActiveDecodeBlocks: 46}
	// 160-token prompt = 10 new blocks; 46 running + 800/16 = 50 queued
	// + 10 − 100 = 6 excess blocks → 3 ms for KV room, overlapping the queue
	// 800/40 = 20 ms; prefill 160/10 = 16 ms.
	cost, ok := s.Cost(Request{ISLTokens: 160}, c)
	if !ok || cost != 1+20+16 {
		t.Errorf("Cost = %v, %v; want 37, true", cost, ok)
	}
	c.QueueTokensPerMs, c.PrefillTokensPerMs = 80, 20 // per-candidate overrides from the load report
	if cost, _ = s.Cost(Request{ISLTokens: 160}, c); cost != 1+10+8 {
		t.Errorf("Cost with overrides = %v, want 19", cost)
	}
	c.DecodeBlocksPerMs = 0.25 // the report's release rate: 6 excess blocks → 24 ms, now the longer wait
	if cost, _ = s.Cost(Request{ISLTokens: 160}, c); cost != 1+24+8 {
		t.Errorf("Cost with a decode-rate override = %v, want 33", cost)
	}
	// A learned residence: the 100 blocks turn over every 2 s, so 6 excess
	// blocks are free in 120 ms (Little's law), whatever the release rate.
	c.ResidenceMs = 2000
	if cost, _ = s.Cost(Request{ISLTokens: 160}, c); cost != 1+120+8 {
		t.Errorf("Cost with a residence = %v, want 129", cost)
	}
	// Learned weights scale each term.
	c.Weights = Weights{RTT: 2, Queue: 0.5, Prefill: 0.25}
	if cost, _ = s.Cost(Request{ISLTokens: 160}, c); cost != 2+60+2 {
		t.Errorf("Cost with weights = %v, want 64", cost)
	}
}

// TestScore_TTFTKVWaitGrowsWithTheExcess: a DC whose KV is full waits for
// room for its queued requests' blocks as well as the new one's, freed at
// its capacity per learned hold time; the estimate grows with every
// queued block beyond the capacity, and the hold time, when known, rules
// over the residence.
func TestScore_TTFTKVWaitGrowsWithTheExcess(t *testing.T) {
	s := mustNew(t, Config{Policy: TTFT, BlockSize: 16, PrefillTokensPerMs: 10, QueueTokensPerMs: 1000})
	c := Candidate{HasLoad: true, HasRTT: true, HasCapacity: true, CapacityBlocks: 100, ActiveDecodeBlocks: 100, ResidenceMs: 1000, HoldMs: 4000}
	prev := -1.0
	for queuedBlocks := 0; queuedBlocks <= 200; queuedBlocks += 50 {
		c.ActivePrefillTokens = uint64(queuedBlocks * 16)
		r, err := s.Score(Request{ISLTokens: 160}, []Candidate{c}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Excess: 100 running + queued + 10 new − 100; 100 blocks per 4 s.
		want := float64(queuedBlocks+10) * 4000 / 100
		if math.Abs(r.Parts.QueueMs-want) > 1e-9 || r.Parts.QueueMs <= prev {
			t.Errorf("%d queued blocks: QueueMs = %v, want %v, above the %v with fewer", queuedBlocks, r.Parts.QueueMs, want, prev)
		}
		prev = r.Parts.QueueMs
	}
	// Room for everything: the wait is the compute queue's alone.
	c.CapacityBlocks = 1000
	if r, _ := s.Score(Request{ISLTokens: 160}, []Candidate{c}, nil); r.Parts.QueueMs != 200*16/1000.0 {
		t.Errorf("KV with room: QueueMs = %v, want the compute queue's 3.2", r.Parts.QueueMs)
	}
}

// TestScore_TTFTChargesEvictionsToOthers: with an EvictionFactor, the
// uncached part of a prompt costs that share of its prefill again, in
// OthersMs (not in the request's own TTFT), so a DC whose cache turns over
// fast loses an otherwise even choice; a fully cached prompt evicts
// nothing.
func TestScore_TTFTChargesEvictionsToOthers(t *testing.T) {
	s := mustNew(t, Config{Policy: TTFT, BlockSize: 16, PrefillTokensPerMs: 10})
	calm := Candidate{ID: 1, HasLoad: true, HasRTT: true, RTTms: 10}
	churn := calm
	churn.ID, churn.RTTms, churn.EvictionFactor = 2, 9, 0.5
	r, err := s.Score(Request{ISLTokens: 160}, []Candidate{churn, calm}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Index != 1 {
		t.Errorf("chose %d, want the calm DC (1 ms further, but 8 ms of evictions less)", r.Index)
	}
	one, _ := s.Score(Request{ISLTokens: 160}, []Candidate{churn}, nil)
	if one.Parts.OthersMs != 8 || one.Parts.TTFTms() != 9+16 {
		t.Errorf("Parts = %+v, want OthersMs 0.5 × 16 = 8 and TTFT 25", one.Parts)
	}
	churn.CachedBlocks = 10
	if one, _ = s.Score(Request{ISLTokens: 160}, []Candidate{churn}, nil); one.Parts.OthersMs != 0 {
		t.Errorf("cached prompt: OthersMs = %v, want 0", one.Parts.OthersMs)
	}
}

// TestScore_TTFTPrefersTheLessUncertainOfCloseEstimates: two candidates
// whose costs differ by less than their combined queue spread are a tie,
// won by the better-known one; apart by more, the cheaper wins.
func TestScore_TTFTPrefersTheLessUncertainOfCloseEstimates(t *testing.T) {
	s := mustNew(t, Config{Policy: TTFT, BlockSize: 16, PrefillTokensPerMs: 10, QueueTokensPerMs: 10})
	cheap := Candidate{ID: 1, HasLoad: true, HasRTT: true, RTTms: 0, ActivePrefillTokens: 100, QueueSpreadTokens: 300} // 10 ms ± 30
	sure := Candidate{ID: 2, HasLoad: true, HasRTT: true, RTTms: 0, ActivePrefillTokens: 300, QueueSpreadTokens: 10}   // 30 ms ± 1
	if r, _ := s.Score(Request{ISLTokens: 16}, []Candidate{cheap, sure}, nil); r.Index != 1 {
		t.Errorf("costs 10 ± 30 and 30 ± 1 ms: chose %d, want 1 (within √(30² + 1²) = 30 ms: the better known)", r.Index)
	}
	sure.ActivePrefillTokens = 500 // 50 ms: 40 ms apart, beyond the spread
	if r, _ := s.Score(Request{ISLTokens: 16}, []Candidate{cheap, sure}, nil); r.Index != 0 {
		t.Errorf("costs 10 ± 30 and 50 ± 1 ms: chose %d, want 0 (the cheaper)", r.Index)
	}
}

// TestCalibration_LearnsTheComputeFactorAndTheResidence feeds requests of
// a candidate that computes twice as fast as its model says (its queue
// waits and prefills take half the estimate), with noise of 200 ms: the
// factor approaches 0.5 within 3% after 1,000 requests, the RTT's weight
// stays 1, and a noiseless stream of a correctly configured candidate
// keeps it at 1; the residence mean follows the observed decode times; bad
// inputs change nothing.
func TestCalibration_LearnsTheComputeFactorAndTheResidence(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 9))
	c := NewCalibration(0)
	if w := c.Weights(); w != (Weights{RTT: 1, Queue: 1, Prefill: 1}) {
		t.Errorf("fresh weights %+v, want all 1", w)
	}
	accepted := 0 // a noisy TTFT below 0 is refused
	for range 1000 {
		p := Parts{RTTms: 20 + 100*rng.Float64(), QueueMs: 2000 * rng.Float64(), PrefillMs: 3000 * rng.Float64()}
		y := p.RTTms + 0.5*(p.QueueMs+p.PrefillMs) + 200*rng.NormFloat64()
		if y >= 0 {
			accepted++
		}
		c.ObserveTTFT(p, y)
	}
	if w := c.Weights(); math.Abs(w.Prefill-0.5) > 0.015 || w.Queue != w.Prefill || w.RTT != 1 {
		t.Errorf("weights after 1,000 requests at half the estimate = %+v, want 0.5 on queue and prefill, 1 on RTT", w)
	}
	exact := NewCalibration(0)
	for range 50 {
		p := Parts{RTTms: 30, QueueMs: 100 * rng.Float64(), PrefillMs: 1 + 900*rng.Float64()}
		exact.ObserveTTFT(p, p.TTFTms())
	}
	if w := exact.Weights(); math.Abs(w.Prefill-1) > 1e-12 {
		t.Errorf("weights after exact estimates = %+v, want 1", w)
	}
	if c.Observations() != accepted {
		t.Errorf("Observations() = %d, want %d", c.Observations(), accepted)
	}
	for k := range 200 {
		c.ObserveResidence(float64(k)*1000, 12000)
	}
	if got := c.ResidenceMs(); math.Abs(got-12000) > 1e-6 {
		t.Errorf("ResidenceMs() = %v, want 12000", got)
	}
	w := c.Weights()
	c.ObserveTTFT(Parts{RTTms: math.NaN(), QueueMs: 1}, 5)
	c.ObserveTTFT(Parts{RTTms: 1, QueueMs: 1}, math.Inf(1))
	c.ObserveTTFT(Parts{RTTms: 1}, 5) // nothing to scale
	c.ObserveResidence(0, -1)
	if c.Observations() != accepted || c.Weights() != w || c.ResidenceMs() != 12000 {
		t.Errorf("bad observations changed the calibration: %+v, %d", c.Weights(), c.Observations())
	}
}

// TestDrift_LearnsTheUnseenRateAndItsSpread feeds reports every 100 ms
// whose queue exceeds the router's prediction by 3 tokens/ms on average,
// with independent noise of variance 400 tokens² per ms: Rate approaches
// 3 and Spread(τ) approaches 20·√τ, within sampling error; spans that are
// not positive are ignored.
func TestDrift_LearnsTheUnseenRateAndItsSpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 10))
	d := NewDrift(0)
	if d.Rate() != 0 || d.Spread(100) != 0 {
		t.Errorf("empty Drift: rate %v, spread %v; want 0, 0", d.Rate(), d.Spread(100))
	}
	const dt = 100.0
	rate, spread := 0.0, 0.0
	for k := range 20000 {
		predicted := 1000 * rng.Float64()
		d.Observe(predicted, predicted+3*dt+rng.NormFloat64()*math.Sqrt(400*dt), dt)
		if k >= 2000 { // average the estimator's own fluctuation
			rate += d.Rate()
			spread += d.Spread(250)
		}
	}
	rate, spread = rate/18000, spread/18000
	if math.Abs(rate-3) > 0.1 || math.Abs(spread-20*math.Sqrt(250)) > 0.05*20*math.Sqrt(250) {
		t.Errorf("Rate ≈ %v, Spread(250) ≈ %v; want 3 and %v", rate, spread, 20*math.Sqrt(250))
	}
	before := d.Rate()
	d.Observe(0, 1e9, 0)
	d.Observe(0, 1e9, -5)
	d.Observe(math.NaN(), 0, 100)
	if d.Rate() != before {
		t.Errorf("ignored observations moved the rate from %v to %v", before, d.Rate())
	}
}

func TestScore_MissingSignalsExcludeNeverZero(t *testing.T) {
	s := mustNew(t, Config{Policy: TTFT, BlockSize: 16})
	// The candidate without load would look free if read as zero.
	cands := []Candidate{
		{ID: 1, HasRTT: true, RTTms: 1, CachedBlocks: 10},
		{ID: 2, HasLoad: true, HasRTT: true, RTTms: 50, ActivePrefillTokens: 1000},
		{ID: 3, HasLoad: true, CachedBlocks: 10},
	}
	r, err := s.Score(Request{ISLTokens: 160}, cands, nil)
	if err != nil || r.Index != 1 || r.Eligible != 1 {
		t.Errorf("Score = %+v, %v; want index 1 with 1 eligible", r, err)
	}
	if _, err := s.Score(Request{ISLTokens: 160}, cands[:1], nil); !errors.Is(err, ErrNoCandidate) {
		t.Errorf("Score(no eligible) err = %v, want ErrNoCandidate", err)
	}
	for _, p := range []Policy{PrefixThenLoad, LoadOnly, Credit} {
		s := mustNew(t, Config{Policy: p, BlockSize: 16})
		if r, err := s.Score(Request{ISLTokens: 160}, cands, nil); err != nil || r.Index == 0 {
			t.Errorf("%v: Score = %+v, %v; candidate without load must not win", p, r, err)
		}
	}
}

func TestScore_PrefixThenLoadAndLoadOnly(t *testing.T) {
	cands := []Candidate{
		{ID: 1, CachedBlocks: 4, HasLoad: true, ActiveDecodeBlocks: 500},
		{ID: 2, CachedBlocks: 4, HasLoad: true, ActiveDecodeBlocks: 100},
		{ID: 3, CachedBlocks: 1, HasLoad: true, ActiveDecodeBlocks: 0},
	}
	p := mustNew(t, Config{Policy: PrefixThenLoad, BlockSize: 16})
	if r, _ := p.Score(Request{ISLTokens: 64}, cands, nil); r.Index != 1 {
		t.Errorf("prefix-then-load chose %d, want 1 (longest prefix, lower load)", r.Index)
	}
	l := mustNew(t, Config{Policy: LoadOnly, BlockSize: 16})
	if r, _ := l.Score(Request{ISLTokens: 64}, cands, nil); r.Index != 2 {
		t.Errorf("load-only chose %d, want 2", r.Index)
	}
}

// TestScore_GORGOWeighsRTTQueueAndPrefillAlike works GORGO's cost out by
// hand: RTT + queued tokens at the candidate's drain rate + uncached
// tokens at its prefill rate, with no KV-admission term (a full candidate
// costs the same), and needs load and RTT.
func TestScore_GORGOWeighsRTTQueueAndPrefillAlike(t *testing.T) {
	g := mustNew(t, Config{Policy: GORGO, BlockSize: 16, PrefillTokensPerMs: 10, QueueTokensPerMs: 20})
	// 320-token prompt, 10 blocks cached → 160 uncached tokens.
	c := Candidate{CachedBlocks: 10, HasLoad: true, ActivePrefillTokens: 400, HasRTT: true, RTTms: 30,
		HasCapacity: true, CapacityBlocks: 10, ActiveDecodeBlocks: 1000}
	if got, ok := g.Cost(Request{ISLTokens: 320}, c); !ok || got != 30+400.0/20+160.0/10 {
		t.Errorf("gorgo cost = %v, %v; want 30 + 20 + 16 = 66", got, ok)
	}
	for _, miss := range []Candidate{{HasRTT: true}, {HasLoad: true}} {
		if _, ok := g.Cost(Request{ISLTokens: 320}, miss); ok {
			t.Errorf("gorgo: candidate %+v without load or RTT is eligible", miss)
		}
	}
}

func TestScore_RoundRobinAndSingleDC(t *testing.T) {
	cands := []Candidate{{ID: 7}, {ID: 8}, {ID: 9}}
	rr := mustNew(t, Config{Policy: RoundRobin, BlockSize: 16})
	for i := 0; i < 7; i++ {
		if r, _ := rr.Score(Request{}, cands, nil); r.Index != i%3 {
			t.Errorf("round-robin call %d chose %d, want %d", i, r.Index, i%3)
		}
	}
	home := mustNew(t, Config{Policy: SingleDC, BlockSize: 16, Home: 8})
	if r, err := home.Score(Request{}, cands, nil); err != nil || r.Index != 1 {
		t.Errorf("single-dc = %+v, %v; want index 1", r, err)
	}
	if _, err := home.Score(Request{}, cands[:1], nil); !errors.Is(err, ErrNoCandidate) {
		t.Errorf("single-dc without home: err = %v, want ErrNoCandidate", err)
	}
}

func TestScore_TiesBrokenUniformly(t *testing.T) {
	s := mustNew(t, Config{Policy: LoadOnly, BlockSize: 16})
	cands := []Candidate{{HasLoad: true}, {HasLoad: true, ActiveDecodeBlocks: 1}, {HasLoad: true}, {HasLoad: true}}
	rng := rand.New(rand.NewPCG(5, 6))
	counts := make([]int, len(cands))
	const n = 30000
	for i := 0; i < n; i++ {
		r, _ := s.Score(Request{}, cands, rng)
		counts[r.Index]++
	}
	if counts[1] != 0 {
		t.Errorf("the costlier candidate won %d times, want 0", counts[1])
	}
	for _, i := range []int{0, 2, 3} {
		if math.Abs(float64(counts[i])-n/3) > 0.05*n/3 {
			t.Errorf("tie candidate %d won %d of %d, want ≈ %d", i, counts[i], n, n/3)
		}
	}
}

func TestScore_TemperatureMatchesSoftmax(t *testing.T) {
	s := mustNew(t, Config{Policy: LoadOnly, BlockSize: 1})
	cands := []Candidate{{HasLoad: true, ActiveDecodeBlocks: 0}, {HasLoad: true, ActiveDecodeBlocks: 5}, {HasLoad: true, ActiveDecodeBlocks: 10}}
	const temp = 0.5
	want := []float64{1, math.Exp(-0.5 / temp), math.Exp(-1 / temp)}
	total := want[0] + want[1] + want[2]
	rng := rand.New(rand.NewPCG(7, 8))
	counts := make([]float64, 3)
	const n = 60000
	for i := 0; i < n; i++ {
		r, _ := s.Score(Request{Temperature: temp}, cands, rng)
		counts[r.Index]++
	}
	for i := range want {
		p := want[i] / total
		if math.Abs(counts[i]/n-p) > 0.01 {
			t.Errorf("temperature %v: candidate %d share %.4f, want %.4f", temp, i, counts[i]/n, p)
		}
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{BlockSize: 0}, {BlockSize: 16, Policy: 99}, {BlockSize: 16, PrefillTokensPerMs: -1}} {
		if _, err := New(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(%+v) err = %v, want ErrBadConfig", cfg, err)
		}
	}
	for _, name := range []string{"ttft", "prefix-then-load", "load-only", "credit", "round-robin", "single-dc", "gorgo"} {
		p, err := ParsePolicy(name)
		if err != nil || p.String() != name {
			t.Errorf("ParsePolicy(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := ParsePolicy("fastest"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("ParsePolicy(fastest) err = %v, want ErrBadConfig", err)
	}
}

// TestScore_FleetUtilizationPricesTheOthersWait checks the others' term on
// hand-worked numbers: at ρ = 0.5 a request's prefill counts twice, at
// ρ = 0.8 five times, above 0.95 as at 0.95, and without ρ not at all; and
// that the busier the fleet, the more a cache far away is worth.
func TestScore_FleetUtilizationPricesTheOthersWait(t *testing.T) {
	s := mustNew(t, Config{Policy: TTFT, BlockSize: 512, PrefillTokensPerMs: 10})
	// Near DC: nothing cached, 5 ms, no queue → prefill 4096/10 = 409.6 ms.
	// Far DC: 4 of 8 blocks cached, 300 ms → prefill 2048/10 = 204.8 ms.
	near := Candidate{ID: 1, HasLoad: true, HasRTT: true, RTTms: 5}
	far := Candidate{ID: 2, HasLoad: true, HasRTT: true, RTTms: 300, CachedBlocks: 4}
	for _, c := range []struct {
		rho, others float64
		wantFar     bool
	}{
		{0, 0, false},          // 414.6 vs 504.8
		{0.5, 409.6, true},     // 824.2 vs 709.6
		{0.8, 4 * 409.6, true}, // ×5
		{2, 19 * 409.6, true},  // capped at 0.95: ×20
		{math.NaN(), 0, false}, // not a utilization: unknown
		{-0.5, 0, false},       // below 0: unknown
	} {
		r, err := s.Score(Request{ISLTokens: 8 * 512, FleetUtilization: c.rho}, []Candidate{near, far}, nil)
		if err != nil {
			t.Fatalf("ρ %v: %v", c.rho, err)
		}
		if got := r.Index == 1; got != c.wantFar {
			t.Errorf("ρ %v: chose far = %v, want %v (parts %+v)", c.rho, got, c.wantFar, r.Parts)
		}
		nearCost, _ := s.Cost(Request{ISLTokens: 8 * 512, FleetUtilization: c.rho}, near)
		if want := 5 + 409.6 + c.others; math.Abs(nearCost-want) > 1e-9 {
			t.Errorf("ρ %v: near cost %v, want %v", c.rho, nearCost, want)
		}
		one, _ := s.Score(Request{ISLTokens: 8 * 512, FleetUtilization: c.rho}, []Candidate{near}, nil)
		if p := one.Parts; math.Abs(p.OthersMs-c.others) > 1e-9 || math.Abs(p.TTFTms()-414.6) > 1e-9 || math.Abs(p.Total()-one.Cost) > 1e-9 {
			t.Errorf("ρ %v: parts %+v (TTFT %v, total %v, cost %v), want others %v and own TTFT 414.6", c.rho, p, p.TTFTms(), p.Total(), one.Cost, c.others)
		}
	}
	// Other policies ignore ρ.
	lo := mustNew(t, Config{Policy: LoadOnly, BlockSize: 512})
	a, _ := lo.Cost(Request{ISLTokens: 4096}, near)
	b, _ := lo.Cost(Request{ISLTokens: 4096, FleetUtilization: 0.9}, near)
	if a != b {
		t.Errorf("load-only cost moved with ρ: %v vs %v", a, b)
	}
}

func TestScorer_FleetTokensPerMs(t *testing.T) {
	s := mustNew(t, Config{Policy: TTFT, BlockSize: 16, PrefillTokensPerMs: 10, QueueTokensPerMs: 25})
	cands := []Candidate{{HasLoad: true, QueueTokensPerMs: 40}, {HasLoad: true}, {QueueTokensPerMs: 1000}}
	if got := s.FleetTokensPerMs(cands); got != 65 {
		t.Errorf("FleetTokensPerMs = %v, want 40 + 25 (default) and nothing for the one without load", got)
	}
}
