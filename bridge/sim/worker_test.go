package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/trace"
)

// oneWorker is a single worker at RTT 0 with round numbers: 10 tokens/ms
// of compute, 5 ms per decode iteration, no KV read cost, a budget of
// 1,000 tokens per iteration (so a prefill iteration takes 100 ms), open
// loop at the trace's timestamps.
func oneWorker() Config {
	c := quiet(lineGrid(0))
	c.WorkersPerDC, c.PrefillTokensPerMs, c.DecodeMsPerToken, c.DecodeMsPerKToken = 1, 10, 5, -1
	c.TokenBudget, c.BatchLimit, c.OpenLoop = 1000, 64, true
	return c
}

func near(got, want float64) bool { return math.Abs(got-want) < 1e-6 }

// TestWorker_ChunkedPrefillAndDecodeInterfere checks both directions of
// the interference by hand. r0 (1000 tokens, 101 output tokens) prefills
// 0→100 ms at the full budget and decodes at 5 ms per token. r1 (500
// tokens) arrives at 200 ms: a decode takes one token of each 100 ms
// iteration, so r1 prefills at 999/100 tokens/ms (TTFT 500/9.99 =
// 50.05005 ms, not 50), and r0 gets one token per 100 ms meanwhile: by
// 200 ms it ran 20 iterations, 0.5005 more during r1's prefill, and its
// last 79.4995 take 5 ms each, ending at 647.5475 ms instead of 600.
func TestWorker_ChunkedPrefillAndDecodeInterfere(t *testing.T) {
	w := timedTrace(t, "0 1000 101 1,2", "200 500 1 3")
	s := simulate(t, oneWorker(), w, SingleDC, nil)
	r1Prefill := 500 / (999.0 / 100)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"r0 TTFT", s.reqs[0].ttftMs(), 100},
		{"r1 TTFT", s.reqs[1].ttftMs(), r1Prefill},
		{"r0 e2e", s.reqs[0].doneMs - s.reqs[0].sentMs, 200 + r1Prefill + (100-20-r1Prefill/100)*5},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %.6f ms, want %.6f", c.name, c.got, c.want)
		}
	}
}

// TestWorker_DecodeSlowsWithTheKVItReads checks the memory-bound term: at
// 1 ms per 1,000 context tokens, a 1000-token prompt's decode iterations
// read 1,001 tokens and take 6.001 ms each (the rate is set at each state
// change; none happens during these 10 tokens).
func TestWorker_DecodeSlowsWithTheKVItReads(t *testing.T) {
	w := timedTrace(t, "0 1000 11 1,2")
	c := oneWorker()
	c.DecodeMsPerKToken = 1
	s := simulate(t, c, w, SingleDC, nil)
	if got, want := s.reqs[0].doneMs-s.reqs[0].sentMs, 100+10*6.001; !near(got, want) {
		t.Errorf("e2e = %.6f ms, want %.6f", got, want)
	}
}

// TestWorker_KVAdmissionAndPreemption runs two 2-block prompts on a
// 4-block worker. Both are admitted; r0's first decoded token needs a
// third block, so r1 (admitted last, not yet prefilled) is preempted and
// waits until r0 ends; then it is recomputed from scratch.
//
//	r0: prefill 0→102.4, tokens 2 and 3 at 5 ms: done 112.4
//	r1: admitted at 0, head at 102.4, preempted at once; readmitted at
//	    112.4, prefill 102.4 ms: TTFT 214.8
func TestWorker_KVAdmissionAndPreemption(t *testing.T) {
	w := timedTrace(t, "0 1024 3 1,2", "0 1024 1 3,4")
	c := oneWorker()
	c.KVBlocksPerWorker = 4
	s := simulate(t, c, w, SingleDC, nil)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"r0 TTFT", s.reqs[0].ttftMs(), 102.4},
		{"r0 e2e", s.reqs[0].doneMs - s.reqs[0].sentMs, 112.4},
		{"r1 TTFT", s.reqs[1].ttftMs(), 214.8},
		{"r1 queue (arrival to head of the prefill queue)", s.reqs[1].prefillStartMs - s.reqs[1].arriveMs, 102.4},
		{"r1 preemptions", float64(s.reqs[1].preemptions), 1},
		{"r0 preemptions", float64(s.reqs[0].preemptions), 0},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %.6f, want %.6f", c.name, c.got, c.want)
		}
	}
	if got := s.result(0).Preemptions; got != 1 {
		t.Errorf("Result.Preemptions = %d, want 1", got)
	}
}

// TestWorker_CacheEvictsLeastRecentlyFreedLeafFirst: on a 2-block worker
// r0 ([1 2]) finishes and frees its blocks tail first, r1 ([3]) then
// evicts block 2, the oldest free one, so r2 ([1 2 4]) hits only block 1:
// 1400 − 512 = 888 tokens to prefill. The events keep the DC's index
// consistent (the run's own checks pass) and the hit counts.
func TestWorker_CacheEvictsLeastRecentlyFreedLeafFirst(t *testing.T) {
	w := timedTrace(t, "0 1000 1 1,2", "500 500 1 3", "1000 1400 1 1,2,4")
	c := oneWorker()
	c.KVBlocksPerWorker = 2
	s := simulate(t, c, w, SingleDC, nil)
	if got := s.reqs[2].hitTokens; got != 512 {
		t.Errorf("r2 hit %d tokens, want 512 (block 1 only)", got)
	}
	if got, want := s.reqs[2].ttftMs(), 888.0/10; !near(got, want) {
		t.Errorf("r2 TTFT = %.6f ms, want %.6f", got, want)
	}
	if got := s.dcs[0].workers[0].pool.cached(); got != 2 {
		t.Errorf("cached blocks at the end = %d, want 2", got)
	}
}

// TestWorker_FullyCachedPromptStillComputesOneToken checks the hit cap: a
// prompt whose every block is cached still prefills its last token.
func TestWorker_FullyCachedPromptStillComputesOneToken(t *testing.T) {
	w := timedTrace(t, "0 1024 1 7,8", "500 1024 1 7,8")
	c := oneWorker()
	c.PrefillTokensPerMs = 8
	s := simulate(t, c, w, SingleDC, nil)
	st := &s.reqs[1]
	if st.hitBlocks != 2 || st.hitTokens != 1023 || st.uncached != 1 {
		t.Errorf("second request: hit %d blocks = %d tokens, %d uncached; want 2 = 1023, 1", st.hitBlocks, st.hitTokens, st.uncached)
	}
	if got := st.ttftMs(); !near(got, 1.0/8) {
		t.Errorf("second request TTFT = %v ms, want 0.125 (one token at 8 tokens/ms)", got)
	}
}

// TestWorker_ALoneRequestLargerThanTheKVStillRuns: a 3-block prompt on a
// 2-block worker is admitted alone and completes; its cache holds what
// fits.
func TestWorker_ALoneRequestLargerThanTheKVStillRuns(t *testing.T) {
	w := timedTrace(t, "0 1500 600 1,2,3", "0 100 1 9")
	c := oneWorker()
	c.KVBlocksPerWorker = 2
	s := simulate(t, c, w, SingleDC, nil)
	if !s.reqs[0].done || !s.reqs[1].done {
		t.Fatalf("requests done: %v, %v", s.reqs[0].done, s.reqs[1].done)
	}
	if got := s.reqs[1].prefillStartMs; got < s.reqs[0].doneMs-1e-9 {
		t.Errorf("r1 started prefill at %v ms, before the oversized r0 ended at %v", got, s.reqs[0].doneMs)
	}
}

// TestWorker_TTFTRisesSuperlinearlyNearSaturation reproduces the textbook
// shape of a serving queue before any policy is judged with the model:
// one worker fed Poisson arrivals of uncached prompts (1–12 blocks of 512
// tokens, one output token, so the worker is an M/G/1 queue) must wait, on
// average, what the Pollaczek–Khinchine formula gives,
// Wq = λ·E[S²] / (2(1 − ρ)), at utilizations 0.4, 0.6 and 0.8, within 30%
// (about three standard errors of 4,000 samples at ρ = 0.8), and the wait
// must grow faster than linearly as ρ nears 1 (the TTFT-versus-load curves
// of DistServe and Splitwise have this shape).
func TestWorker_TTFTRisesSuperlinearlyNearSaturation(t *testing.T) {
	seed := testSeed(t)
	const n, rate = 4000, 15.0 // requests, tokens/ms
	c := oneWorker()
	c.PrefillTokensPerMs, c.TokenBudget = rate, 2048
	c.LoadReportInterval = 10 * time.Second // single-dc reads no load; fewer frames
	// E[S] and E[S²] of S = 512·k/rate, k uniform in 1..12.
	unit := 512 / rate
	es, es2 := unit*6.5, unit*unit*650/12
	rng := rand.New(rand.NewPCG(seed, 7))
	reqs := make([]trace.Request, n)
	for i := range reqs {
		k := 1 + rng.IntN(12)
		reqs[i] = trace.Request{InputLength: 512 * k, OutputLength: 1, HashIDs: ids(100*i+1, k)}
	}
	base, err := NewWorkload(reqs, 512)
	if err != nil {
		t.Fatalf("NewWorkload: %v", err)
	}
	var waits []float64
	for _, rho := range []float64{0.4, 0.6, 0.8} {
		lambda := rho / es // arrivals per ms
		w := &Workload{BlockSize: base.BlockSize, Requests: slices.Clone(base.Requests)}
		at := 0.0
		for i := range w.Requests {
			at += rng.ExpFloat64() / lambda
			w.Requests[i].ArrivalMs = at
		}
		s := simulate(t, c, w, SingleDC, nil)
		wait := 0.0
		for i := range s.reqs {
			wait += s.reqs[i].prefillStartMs - s.reqs[i].arriveMs
		}
		wait /= n
		pk := lambda * es2 / (2 * (1 - rho))
		t.Logf("ρ=%.1f: mean wait %.1f ms, Pollaczek–Khinchine %.1f ms", rho, wait, pk)
		if math.Abs(wait-pk) > 0.3*pk {
			t.Errorf("ρ=%.1f: mean wait %.1f ms, want within 30%% of Pollaczek–Khinchine's %.1f ms", rho, wait, pk)
		}
		waits = append(waits, wait)
	}
	if lo, hi := (waits[1]-waits[0])/0.2, (waits[2]-waits[1])/0.2; !(hi > 1.5*lo) {
		t.Errorf("wait grows %.0f ms per unit of ρ over 0.4–0.6 and %.0f over 0.6–0.8; want the second > 1.5× the first", lo, hi)
	}
}
