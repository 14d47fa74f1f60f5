package score

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
)

// testSeed is the randomized tests' seed; GOINDEX_SCORE_SEED overrides it.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(20261202)
	if v := os.Getenv("GOINDEX_SCORE_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("GOINDEX_SCORE_SEED=%q: %v", v, err)
		}
		seed = n
	}
	return seed
}

// stepBacklog is the slow reference of Backlog: a clock advancing in steps
// of dt ms from the sample, adding each arrival's tokens at its step and
// draining rate·dt per step while work is queued. Times are multiples of
// dt, so the steps land on every arrival exactly.
func stepBacklog(queued, sampledMs, rate float64, arrivals []Arrival, atMs, dt float64) float64 {
	q := queued
	steps := int(math.Round((atMs - sampledMs) / dt))
	next := 0
	for next < len(arrivals) && arrivals[next].AtMs <= sampledMs {
		next++
	}
	for k := 1; k <= steps; k++ {
		now := sampledMs + float64(k)*dt
		q = math.Max(0, q-rate*dt)
		for next < len(arrivals) && arrivals[next].AtMs <= now+dt/2 {
			q += arrivals[next].Tokens
			next++
		}
	}
	return q
}

func TestBacklog_MatchesStepSimulation(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	const dt = 0.25
	grid := func(maxMs int) float64 { return float64(rng.IntN(maxMs*4)) * dt }
	for trial := range 2000 {
		sampled := grid(100)
		at := sampled + grid(400)
		rate := float64(rng.IntN(80)) // tokens/ms, 0 included: no drain
		queued := float64(rng.IntN(20000))
		var arr []Arrival
		for range rng.IntN(12) {
			// Some arrivals fall before the sample (already counted) or
			// after the request (not ahead of it).
			arr = append(arr, Arrival{AtMs: sampled - 20 + grid(440), Tokens: float64(rng.IntN(15000))})
		}
		slices.SortFunc(arr, func(a, b Arrival) int { return int(math.Copysign(1, a.AtMs-b.AtMs)) })
		got := Backlog(queued, sampled, rate, arr, at)
		want := stepBacklog(queued, sampled, rate, arr, at, dt)
		if math.Abs(got-want) > 1e-6*math.Max(1, want) {
			t.Errorf("seed %d trial %d: Backlog(queued=%v, sampled=%v, rate=%v, %d arrivals %v, at=%v) = %v, want %v",
				seed, trial, queued, sampled, rate, len(arr), arr, at, got, want)
		}
	}
}

func TestBacklog_HandWorkedCases(t *testing.T) {
	for _, c := range []struct {
		name                      string
		queued, sampled, rate, at float64
		arr                       []Arrival
		want                      float64
	}{
		{"drains over the report's age", 3000, 0, 20, 100, nil, 1000},
		{"empties, never negative", 1000, 0, 20, 100, nil, 0},
		{"no rate, no drain", 1000, 0, 0, 100, nil, 1000},
		// Idle from 50 to 60, then 500 tokens drained by 80: 1000 − 400.
		{"idle time is not banked", 1000, 0, 20, 80, []Arrival{{AtMs: 60, Tokens: 1000}}, 600},
		{"counted by the sample", 0, 10, 20, 20, []Arrival{{AtMs: 10, Tokens: 500}}, 0},
		{"arrives after the request", 0, 0, 20, 20, []Arrival{{AtMs: 21, Tokens: 500}}, 0},
		{"arrives with the request, ahead of it", 0, 0, 20, 20, []Arrival{{AtMs: 20, Tokens: 500}}, 500},
	} {
		if got := Backlog(c.queued, c.sampled, c.rate, c.arr, c.at); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: Backlog(%v, %v, %v, %v, %v) = %v, want %v", c.name, c.queued, c.sampled, c.rate, c.arr, c.at, got, c.want)
		}
	}
}

// bruteTTFT is the TTFT cost written out from the doc's formula, apart from
// cost.go: RTT + queued tokens / queue rate + KV admission wait + uncached
// tokens / prefill rate, with the prompt's cached part capped at its blocks,
// plus the others' wait at fleet utilization rho.
func bruteTTFT(c Candidate, isl int, rho float64, blockSize int, cfg Config) float64 {
	rate := func(v, def float64) float64 {
		if v > 0 {
			return v
		}
		return def
	}
	blocks := (isl + blockSize - 1) / blockSize
	cached := c.CachedBlocks
	if cached > blocks {
		cached = blocks
	}
	if cached < 0 {
		cached = 0
	}
	cachedTokens := cached * blockSize
	if cachedTokens > isl {
		cachedTokens = isl
	}
	uncached := isl - cachedTokens
	wait := float64(c.ActivePrefillTokens) / rate(c.QueueTokensPerMs, cfg.QueueTokensPerMs)
	if c.HasCapacity && c.CapacityBlocks > 0 {
		need := (uncached + blockSize - 1) / blockSize
		// The KV taken: running requests' blocks and the queued prompts'.
		taken := float64(c.ActiveDecodeBlocks) + float64(c.ActivePrefillTokens)/float64(blockSize)
		if excess := taken + float64(need) - float64(c.CapacityBlocks); excess > 0 {
			// Waiting for KV room overlaps waiting for the prefills ahead.
			release := rate(c.DecodeBlocksPerMs, cfg.DecodeBlocksPerMs)
			if c.ResidenceMs > 0 {
				release = float64(c.CapacityBlocks) / c.ResidenceMs
			}
			if c.HoldMs > 0 { // the hold time rules over the residence
				release = float64(c.CapacityBlocks) / c.HoldMs
			}
			wait = math.Max(wait, excess/release)
		}
	}
	weight := func(w float64) float64 { return rate(w, 1) }
	wait *= weight(c.Weights.Queue)
	prefill := weight(c.Weights.Prefill) * float64(uncached) / rate(c.PrefillTokensPerMs, cfg.PrefillTokensPerMs)
	// The others' wait: prefill × ρ/(1−ρ), ρ capped at 0.95 (0 without ρ).
	others := 0.0
	if rho > 0 {
		r := math.Min(rho, 0.95)
		others = prefill * r / (1 - r)
	}
	// Evictions: the factor's share of the unweighted uncached prefill.
	others += c.EvictionFactor * float64(uncached) / rate(c.PrefillTokensPerMs, cfg.PrefillTokensPerMs)
	return weight(c.Weights.RTT)*c.RTTms + wait + prefill + others
}

// TestScore_TTFTChoosesTheBruteForceMinimum draws DC-shaped candidate sets
// (some without load or RTT, some with per-candidate rates, some
// calibrated, backlogs from Backlog) and fleet utilizations (none, below and above the cap) and checks that Score picks a candidate whose brute-force TTFT is
// the minimum over the eligible ones, and reports that cost.
func TestScore_TTFTChoosesTheBruteForceMinimum(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	cfg := Config{Policy: TTFT, BlockSize: 16 << rng.IntN(6), PrefillTokensPerMs: 15, QueueTokensPerMs: 30, DecodeBlocksPerMs: 1}
	s := mustNew(t, cfg)
	for trial := range 5000 {
		cands := make([]Candidate, 1+rng.IntN(13))
		for k := range cands {
			c := Candidate{ID: uint64(k), CachedBlocks: rng.IntN(80) - 5,
				HasLoad: rng.IntN(8) > 0, HasRTT: rng.IntN(8) > 0, RTTms: float64(rng.IntN(240)),
				HasCapacity: rng.IntN(2) == 0, CapacityBlocks: uint64(rng.IntN(4096)), ActiveDecodeBlocks: uint64(rng.IntN(4096))}
			c.ActivePrefillTokens = uint64(Backlog(float64(rng.IntN(60000)), 0, 30, []Arrival{{AtMs: float64(rng.IntN(100)), Tokens: float64(rng.IntN(20000))}}, float64(rng.IntN(200))))
			if rng.IntN(2) == 0 {
				c.PrefillTokensPerMs, c.QueueTokensPerMs, c.DecodeBlocksPerMs = 5+rng.Float64()*20, 10+rng.Float64()*100, rng.Float64()*4
			}
			if rng.IntN(2) == 0 { // calibrated: learned weights and residence
				c.Weights = Weights{RTT: 0.5 + rng.Float64(), Queue: 0.2 + 2*rng.Float64(), Prefill: 0.2 + 2*rng.Float64()}
				c.ResidenceMs = rng.Float64() * 30000
				if rng.IntN(2) == 0 {
					c.HoldMs = rng.Float64() * 30000
				}
			}
			if rng.IntN(2) == 0 {
				c.EvictionFactor = rng.Float64()
			}
			cands[k] = c
		}
		isl := rng.IntN(80000)
		rho := 0.0 // unknown in a third of the trials, up to past the cap otherwise
		if rng.IntN(3) > 0 {
			rho = rng.Float64() * 1.1
		}
		r, err := s.Score(Request{ISLTokens: isl, FleetUtilization: rho}, cands, rng)
		lo, eligible := math.Inf(1), 0
		for _, c := range cands {
			if c.HasLoad && c.HasRTT {
				eligible++
				lo = math.Min(lo, bruteTTFT(c, isl, rho, cfg.BlockSize, s.Config()))
			}
		}
		if eligible == 0 {
			if err == nil {
				t.Errorf("seed %d trial %d: Score with no eligible candidate = %+v, want ErrNoCandidate", seed, trial, r)
			}
			continue
		}
		if err != nil {
			t.Errorf("seed %d trial %d: Score(isl=%d, %d candidates) error %v", seed, trial, isl, len(cands), err)
			continue
		}
		got := bruteTTFT(cands[r.Index], isl, rho, cfg.BlockSize, s.Config())
		if math.Abs(got-lo) > 1e-9*math.Max(1, lo) || math.Abs(r.Cost-lo) > 1e-9*math.Max(1, lo) || r.Eligible != eligible {
			t.Errorf("seed %d trial %d: Score(isl=%d) chose %d (brute cost %v, reported %v, %d eligible), brute minimum %v over %d eligible",
				seed, trial, isl, r.Index, got, r.Cost, r.Eligible, lo, eligible)
		}
	}
}
