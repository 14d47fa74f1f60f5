package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// dcState is everything of a DC's workers a shadow could change: each
// worker's queues, marks, clocks, rates and bookkeeping, and its pool.
func dcState(d *dc) string {
	var b strings.Builder
	for _, w := range d.workers {
		c := *w
		c.dc, c.pool = nil, nil
		fmt.Fprintf(&b, "%+v\n%s\n", c, poolState(w.pool))
	}
	fmt.Fprintf(&b, "active %d stats %+v", d.active, d.stats)
	return b.String()
}

// runUntil fires s's events up to time at.
func runUntil(t *testing.T, s *simulation, at float64) {
	t.Helper()
	for s.q.len() > 0 && s.q.h[0].at <= at {
		e := s.q.pop()
		s.now = e.at
		if err := s.fire(e); err != nil {
			t.Fatalf("fire %+v: %v", e, err)
		}
	}
}

// TestClairvoyantShadow_EvolvesLikeTheRunAndLeavesItAlone clones a DC in
// the middle of a run, after the last request was sent but with some still
// on their way to it, and runs the clone to the end: the run's DC is
// untouched by it, and once the run goes on (no request is sent any more)
// every request of that DC gets its first token at the time the clone
// gave it, on the same worker, after as many preemptions, with the same
// cache hit. Two workers with 8 KV blocks each make the DC's router, the
// KV admission and preemption all take part.
func TestClairvoyantShadow_EvolvesLikeTheRunAndLeavesItAlone(t *testing.T) {
	var lines []string
	for k := range 16 {
		// Four prefixes shared in turns, 2–4 blocks of prompt, long outputs.
		lines = append(lines, fmt.Sprintf("%d %d %d %d,%d,%d", k, 1024+256*(k%5), 700+40*k, 100+k%4, 200+k%4, 300+k))
	}
	w := timedTrace(t, lines...)
	c := oneWorker()
	c.Grid = lineGrid(0, 40)
	c.RouterSite, c.WorkersPerDC, c.KVBlocksPerWorker, c.BatchLimit = "s0", 2, 8, 4
	s := newSim(t, c, w, RoundRobin)
	runUntil(t, s, s.startMs+15.5) // every request sent; those to s1 arrive 20 ms later
	sh := s.shadowSim()
	sh.reqs = append(sh.reqs[:0], s.reqs...)
	before := dcState(s.dcs[1])
	s.cloneInto(sh, 1)
	inFlight := 0
	for _, e := range sh.q.h {
		inFlight += boolInt(e.kind == evArrive)
	}
	if inFlight == 0 {
		t.Fatalf("no request on its way to the cloned DC: the test exercises no arrival")
	}
	for sh.q.len() > 0 {
		e := sh.q.pop()
		sh.now = e.at
		if err := sh.fire(e); err != nil {
			t.Fatalf("shadow: %v", err)
		}
	}
	if got := dcState(s.dcs[1]); got != before {
		t.Fatalf("running the clone changed the run's DC:\n%s\nwas\n%s", got, before)
	}
	runUntil(t, s, math.Inf(1))
	checked, preempted := 0, 0
	for i := range s.reqs {
		got, want := &sh.reqs[i], &s.reqs[i]
		if want.dc != 1 {
			continue
		}
		checked++
		preempted += want.preemptions
		if !got.done || math.Abs(got.firstTokenMs-want.firstTokenMs) > 1e-6 || got.worker != want.worker ||
			got.preemptions != want.preemptions || got.hitTokens != want.hitTokens {
			t.Errorf("request %d: the clone gave first token %.6f on worker %d (%d preemptions, %d cached tokens, done %v); the run %.6f on %d (%d, %d)",
				i, got.firstTokenMs, got.worker, got.preemptions, got.hitTokens, got.done, want.firstTokenMs, want.worker, want.preemptions, want.hitTokens)
		}
	}
	if checked != 8 || preempted == 0 {
		t.Errorf("%d requests on the cloned DC, %d preemptions; want 8 and some", checked, preempted)
	}
}

// TestClairvoyant_PicksTheEarliestFirstToken routes four one-token
// requests (no decode) over a DC at the router's site and one 30 ms away,
// one worker each at 10 tokens/ms, and checks each choice and foreseen
// TTFT by hand:
//
//	r0 (5,000 tokens, sent at 0): here 500 ms, there 30 + 500: here, 500
//	r1 (1,000, at 1): here after r0, 599; there 15 + 100 + 15 = 130: there
//	r2 (100, at 2): here 508; there behind r1 (ends at 116), 126 + 15 − 2 = 139: there
//	r3 (2,000, at 3): here 500 + 200 − 3 = 697; there 126 + 200 + 15 − 3 = 338: there
//
// and that every TTFT is the foreseen one.
func TestClairvoyant_PicksTheEarliestFirstToken(t *testing.T) {
	w := timedTrace(t, "0 5000 1 1,2,3,4,5,6,7,8,9,10", "1 1000 1 11,12", "2 100 1 13", "3 2000 1 14,15,16,17")
	c := oneWorker()
	c.Grid = lineGrid(0, 30)
	c.RouterSite = "s0"
	s := simulate(t, c, w, Clairvoyant, nil)
	for i, want := range []struct {
		dc   int
		ttft float64
	}{{0, 500}, {1, 130}, {1, 139}, {1, 338}} {
		st := &s.reqs[i]
		if st.dc != want.dc || !near(st.foreseenMs, want.ttft) || !near(st.ttftMs(), want.ttft) {
			t.Errorf("request %d: DC %d, foreseen TTFT %.6f, TTFT %.6f; want DC %d, %.1f", i, st.dc, st.foreseenMs, st.ttftMs(), want.dc, want.ttft)
		}
	}
	res := s.result(0)
	if cv := res.Clairvoyance; cv == nil || cv.Requests != 4 || cv.Exact != 4 {
		t.Errorf("clairvoyance %+v, want 4 of 4 exact", cv)
	}
}

// TestClairvoyant_ForeseesEveryTTFTWithOneSiteAndNoJitter is the argument
// of clairvoyant.go, checked: with every client at one site and no RTT
// jitter, a request sent later can never reach a DC earlier, so nothing
// the clairvoyant could not see precedes any request, and every request's
// TTFT is the one foreseen. Under KV pressure (a sixteenth of the default
// KV: preemptions), later admissions refresh a worker's fluid rates
// sooner than the shadow did: no TTFT comes earlier than foreseen and
// none later by more than 0.1% of it. With clients everywhere, requests
// sent later from nearer sites overtake some, which the figures show.
func TestClairvoyant_ForeseesEveryTTFTWithOneSiteAndNoJitter(t *testing.T) {
	w := shippedWorkload(t, 160, 80)
	c := Config{Grid: fourSites(t), RouterSite: "fra", OneSite: true, RTTJitter: -1, Concurrency: 24,
		Policies: []Policy{Clairvoyant}, Seed: testSeed(t), Warmup: -1}
	run := func(c Config) (*Result, *simulation) {
		t.Helper()
		s := simulate(t, c, w, Clairvoyant, nil)
		return s.result(0), s
	}
	res, _ := run(c)
	if cv := res.Clairvoyance; cv == nil || cv.Requests != len(w.Requests) || cv.Exact != cv.Requests {
		t.Errorf("default KV: clairvoyance %+v over %d requests: want every TTFT foreseen", cv, len(w.Requests))
	}
	c.KVBlocksPerWorker = 64
	res, s := run(c)
	if cv := res.Clairvoyance; cv.Earlier != 0 {
		t.Errorf("KV 64 blocks: %+v: a first token came earlier than foreseen", cv)
	}
	for i := range s.reqs {
		st := &s.reqs[i]
		if late := st.ttftMs() - st.foreseenMs; late > 1e-3*st.foreseenMs {
			t.Errorf("KV 64 blocks: request %d: TTFT %.3f ms, foreseen %.3f", i, st.ttftMs(), st.foreseenMs)
		}
	}
	if res.Preemptions == 0 {
		t.Errorf("KV 64 blocks: no preemption: the run exercised no KV pressure")
	}
	c.OneSite, c.RTTJitter, c.KVBlocksPerWorker = false, 0, 0
	if res, _ = run(c); res.Clairvoyance.Later == 0 || res.Clairvoyance.Exact == 0 {
		t.Errorf("clients everywhere: %+v; want some requests overtaken and some exact", res.Clairvoyance)
	}
}

// TestForesight_MeasuresWithoutChangingTheRun runs ttft and load-only with
// and without Foresight: every request's TTFT is the same (the shadows
// touch nothing and draw nothing the run draws); with one site and no
// jitter every chosen DC's foreseen TTFT is the one the request saw, no
// regret is negative, and every (decision, candidate) pair is in a band.
func TestForesight_MeasuresWithoutChangingTheRun(t *testing.T) {
	w := shippedWorkload(t, 120, 60)
	c := Config{Grid: fourSites(t), RouterSite: "fra", OneSite: true, RTTJitter: -1, Concurrency: 16, Seed: testSeed(t), Warmup: -1}
	for _, p := range []Policy{TTFT, LoadOnly} {
		plain := simulate(t, c, w, p, nil)
		fc := c
		fc.Foresight = true
		seen := simulate(t, fc, w, p, nil)
		for i := range plain.reqs {
			if a, b := plain.reqs[i].ttftMs(), seen.reqs[i].ttftMs(); a != b || plain.reqs[i].dc != seen.reqs[i].dc {
				t.Fatalf("%v: request %d: TTFT %v at DC %d without Foresight, %v at %d with it", p, i, a, plain.reqs[i].dc, b, seen.reqs[i].dc)
			}
			if r := seen.reqs[i].regretMs; r < 0 {
				t.Errorf("%v: request %d: negative regret %v", p, i, r)
			}
		}
		res := seen.result(0)
		if cv := res.Clairvoyance; cv == nil || cv.Exact != len(w.Requests) {
			t.Errorf("%v: %+v: want every chosen DC's TTFT foreseen", p, cv)
		}
		f := res.Foresight
		n := 0
		for _, b := range f.ByPressure {
			n += b.Estimates
		}
		if f.Decisions != len(w.Requests) || n != len(seen.sight) || n < len(w.Requests) || f.BestChosen > f.Decisions {
			t.Errorf("%v: foresight %+v over %d decisions and %d comparisons", p, f, len(w.Requests), len(seen.sight))
		}
		if plain.result(0).Foresight != nil {
			t.Errorf("%v: a run without Foresight reports one", p)
		}
	}
}

// TestForesightOf_BandsTheErrors checks the summary on hand-made
// comparisons: each lands in its KV-pressure band, with the band's bias,
// spread (population standard deviation) and mean absolute error; the
// warm-up's requests are left out.
func TestForesightOf_BandsTheErrors(t *testing.T) {
	s := &simulation{cfg: &Config{Foresight: true}, policy: TTFT, reqs: make([]reqState, 4)}
	s.reqs[1].regretMs, s.reqs[2].regretMs, s.reqs[3].regretMs = 0, 30, 10
	s.sight = []sightError{
		{req: 0, pressure: 0.1, errMs: 1000, trueMs: 1}, // warm-up
		{req: 1, pressure: 0.2, errMs: -100, queueErrMs: -90, prefillErrMs: -10, trueMs: 300},
		{req: 2, pressure: 0.4, errMs: 300, queueErrMs: 290, prefillErrMs: 30, trueMs: 500},
		{req: 3, pressure: 1.0, errMs: -50, trueMs: 900},
		{req: 3, pressure: 5, errMs: -4000, trueMs: 6000},
	}
	f := s.foresightOf(1)
	if f.Decisions != 3 || f.BestChosen != 1 || !near(f.RegretMeanMs, 40.0/3) {
		t.Errorf("decisions %d, best chosen %d, mean regret %v; want 3, 1, 13.33", f.Decisions, f.BestChosen, f.RegretMeanMs)
	}
	want := []PressureError{
		{From: 0, To: 0.5, Estimates: 2, BiasMs: 100, QueueBiasMs: 100, PrefillBiasMs: 10, SpreadMs: 200, AbsErrorMs: 200, TrueMeanMs: 400},
		{From: 0.5, To: 0.9},
		{From: 0.9, To: 1.1, Estimates: 1, BiasMs: -50, AbsErrorMs: 50, TrueMeanMs: 900},
		{From: 1.1, To: 2},
		{From: 2, Estimates: 1, BiasMs: -4000, AbsErrorMs: 4000, TrueMeanMs: 6000},
	}
	if len(f.ByPressure) != len(want) {
		t.Fatalf("%d bands, want %d", len(f.ByPressure), len(want))
	}
	for k, b := range f.ByPressure {
		if b != want[k] {
			t.Errorf("band %d: %+v, want %+v", k, b, want[k])
		}
	}
}

// TestClairvoyantMeanOutput_IsTheClairvoyantWhenEveryOutputIsTheMean runs
// both clairvoyants on requests that all decode the same length, so the
// mean-output copies know every decode's true end: the choices and
// foreseen TTFTs are the clairvoyant's (to rounding: the copies' decode
// milestones are set again). With the trace's own outputs they part, and
// the mean-output copies miss some TTFTs the clairvoyant foresees.
func TestClairvoyantMeanOutput_IsTheClairvoyantWhenEveryOutputIsTheMean(t *testing.T) {
	w := shippedWorkload(t, 120, 120) // fewer requests under -short meet no KV pressure
	c := Config{Grid: fourSites(t), RouterSite: "fra", OneSite: true, RTTJitter: -1, Concurrency: 16, KVBlocksPerWorker: 64, Seed: testSeed(t)}
	same := &Workload{BlockSize: w.BlockSize, Requests: slices.Clone(w.Requests)}
	for k := range same.Requests {
		same.Requests[k].OutputTokens = 300
	}
	a, b := simulate(t, c, same, Clairvoyant, nil), simulate(t, c, same, ClairvoyantMeanOutput, nil)
	for i := range a.reqs {
		if a.reqs[i].dc != b.reqs[i].dc || math.Abs(a.reqs[i].foreseenMs-b.reqs[i].foreseenMs) > 1e-6 || math.Abs(a.reqs[i].ttftMs()-b.reqs[i].ttftMs()) > 1e-6 {
			t.Fatalf("request %d: clairvoyant DC %d foreseen %.6f, mean-output DC %d foreseen %.6f", i, a.reqs[i].dc, a.reqs[i].foreseenMs, b.reqs[i].dc, b.reqs[i].foreseenMs)
		}
	}
	if a.result(0).Preemptions == 0 {
		t.Errorf("no preemption: the decodes' ends never mattered")
	}
	a, b = simulate(t, c, w, Clairvoyant, nil), simulate(t, c, w, ClairvoyantMeanOutput, nil)
	differ := 0
	for i := range a.reqs {
		differ += boolInt(a.reqs[i].dc != b.reqs[i].dc)
	}
	if differ == 0 {
		t.Errorf("with the trace's outputs the two clairvoyants chose alike for every request")
	}
	if cv := b.result(0).Clairvoyance; cv.Exact == cv.Requests {
		t.Errorf("the mean-output clairvoyant foresaw every TTFT (%+v) without knowing the outputs", cv)
	}
}
