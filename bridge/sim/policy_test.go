package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
)

// TestPolicy_SingleDCHoldsTheGridsCapacityAtTheBestSite: with clients at
// every site, single-dc runs one DC holding every site's workers, at the
// site whose mean RTT to the clients is least (found here by brute force),
// serves everything there and pays each client's RTT to it.
func TestPolicy_SingleDCHoldsTheGridsCapacityAtTheBestSite(t *testing.T) {
	w := shippedWorkload(t, 200, 60)
	g := shippedGrid(t)
	c := Config{Grid: g, Concurrency: 64, Seed: testSeed(t)}
	s := simulate(t, c, w, SingleDC, nil)
	best, bestMean := -1, math.Inf(1)
	for d := range g.Sites {
		mean := 0.0
		for o := range g.Sites {
			mean += g.RTTms[o][d] / float64(len(g.Sites))
		}
		if mean < bestMean {
			best, bestMean = d, mean
		}
	}
	if len(s.dcs) != 1 || s.dcs[0].site != best || len(s.dcs[0].workers) != len(g.Sites)*DefaultWorkersPerDC {
		t.Fatalf("single-dc runs %d DCs, the first at %s with %d workers; want one at %s with %d",
			len(s.dcs), g.Sites[s.dcs[0].site], len(s.dcs[0].workers), g.Sites[best], len(g.Sites)*DefaultWorkersPerDC)
	}
	res := s.result(0)
	local := 0
	for i := range s.reqs {
		if s.topo.origin[i] == best {
			local++
		}
		if want := g.RTTms[s.topo.origin[i]][best]; math.Abs(s.reqs[i].rttMs-want) > ms(DefaultRTTJitter)+1e-9 {
			t.Errorf("request %d from %s paid %.1f ms RTT, want %.1f + jitter", i, g.Sites[s.topo.origin[i]], s.reqs[i].rttMs, want)
		}
	}
	if res.PerDC[0].Requests != len(w.Requests) || res.WANHops != len(w.Requests)-local {
		t.Errorf("single-dc: DC served %d of %d, %d WAN hops; want all, %d", res.PerDC[0].Requests, len(w.Requests), res.WANHops, len(w.Requests)-local)
	}
}

// TestPolicy_SingleDCSliceUsesOneDCsShare: the original baseline keeps
// every DC but sends everything to the router site's, with its own
// workers only.
func TestPolicy_SingleDCSliceUsesOneDCsShare(t *testing.T) {
	w := shippedWorkload(t, 200, 60)
	c := Config{Grid: shippedGrid(t), RouterSite: "par", OneSite: true, Concurrency: 64, Seed: testSeed(t)}
	res := simulate(t, c, w, SingleDCSlice, nil).result(0)
	home, _ := c.Grid.Index("par")
	if res.WANHops != 0 || res.PerDC[home].Requests != len(w.Requests) {
		t.Errorf("single-dc-slice: %d WAN hops, home served %d of %d", res.WANHops, res.PerDC[home].Requests, len(w.Requests))
	}
	if res.LoadImbalance != float64(len(c.Grid.Sites)) {
		t.Errorf("single-dc-slice load imbalance = %v, want %d (all busy time in one of %d DCs)", res.LoadImbalance, len(c.Grid.Sites), len(c.Grid.Sites))
	}
}

func TestPolicy_RoundRobinCycles(t *testing.T) {
	w := shippedWorkload(t, 90, 90)
	c := quiet(lineGrid(0, 30, 60))
	s := simulate(t, c, w, RoundRobin, nil)
	for i := range s.reqs {
		if s.reqs[i].dc != i%3 {
			t.Fatalf("round-robin sent request %d to DC %d, want %d", i, s.reqs[i].dc, i%3)
		}
	}
}

func TestPolicy_LoadOnlySpreadsEvenLoad(t *testing.T) {
	// Four DCs close to the router, one worker each, a closed loop that
	// keeps them all busy: load-only balances the work (in blocks, not
	// request counts), so every DC gets a real share and busy times stay
	// close.
	w := shippedWorkload(t, 400, 160)
	c := quiet(lineGrid(0, 10, 10, 10))
	c.WorkersPerDC, c.Concurrency = 1, 32
	res := simulate(t, c, w, LoadOnly, nil).result(0)
	n := len(w.Requests)
	for _, d := range res.PerDC {
		if d.Requests < n/8 {
			t.Errorf("load-only sent %d of %d requests to %s, want at least %d", d.Requests, n, d.Name, n/8)
		}
	}
	if res.LoadImbalance > 1.25 {
		t.Errorf("load-only load imbalance = %v, want ≤ 1.25 (single-dc's would be 4)", res.LoadImbalance)
	}
}

// TestPolicy_FarPrefixWinsOnlyWhenPrefillSavedExceedsRTT warms a DC 200 ms
// away with a prompt's prefix, then sends the prompt plus one block. At 15
// tokens/ms, a cached 40-block prefix saves 1,365 ms of prefill, more than
// the RTT, so ttft (and the oracle) go far; a 2-block prefix saves 68 ms,
// less than the RTT, so they stay home. prefix-then-load goes far either
// way: it ignores the RTT.
func TestPolicy_FarPrefixWinsOnlyWhenPrefillSavedExceedsRTT(t *testing.T) {
	for _, c := range []struct {
		prefix  int
		wantFar bool
	}{{40, true}, {2, false}} {
		prompt := append(ids(1000, c.prefix), 5000)
		line := fmt.Sprintf("%d 1 %v", 512*len(prompt), joinIDs(prompt))
		for _, p := range []Policy{TTFT, ExactOracle, ExactNow, PrefixThenLoad} {
			cfg := quiet(lineGrid(0, 200))
			cfg.Concurrency = 1
			s := simulate(t, cfg, handTrace(t, line), p, func(s *simulation) { warm(t, s, 1, ids(1000, c.prefix), 0) })
			st := &s.reqs[0]
			want := c.wantFar || p == PrefixThenLoad
			if got := st.dc == 1; got != want {
				t.Errorf("%v, %d-block prefix 200 ms away: went far = %v, want %v", p, c.prefix, got, want)
			}
			if st.believed != c.prefix && st.dc == 1 {
				t.Errorf("%v, %d-block prefix: router believed %d cached blocks", p, c.prefix, st.believed)
			}
			if st.dc == 1 && st.hitBlocks != c.prefix {
				t.Errorf("%v: far DC hit %d blocks, want the warmed %d", p, st.hitBlocks, c.prefix)
			}
		}
	}
}

func joinIDs(xs []uint64) string {
	s := ""
	for k, x := range xs {
		if k > 0 {
			s += ","
		}
		s += fmt.Sprint(x)
	}
	return s
}

// TestPolicy_StaleReplicaIsCountedAgainstTheExactChoice warms the far DC
// at the very moment the request is routed: its blocks are in the DC's
// exact index but still crossing the WAN to the replica, so ttft stays
// home while exact, current depths would have gone far. The audit must
// count one stale lane and one decision the exact, current depths would
// change, but no decision the CKF itself changed (the delivered state has
// the same depths). exact-oracle, an exact index over the same delivered
// events, stays home too; exact-now, reading the DC's own index, goes far
// and disagrees with nobody.
func TestPolicy_StaleReplicaIsCountedAgainstTheExactChoice(t *testing.T) {
	prompt := append(ids(1000, 40), 5000)
	line := fmt.Sprintf("%d 1 %v", 512*len(prompt), joinIDs(prompt))
	for _, c := range []struct {
		p       Policy
		wantFar bool
		wantDis int
	}{{TTFT, false, 1}, {ExactOracle, false, 1}, {ExactNow, true, 0}} {
		cfg := quiet(lineGrid(0, 200))
		cfg.Concurrency = 1
		s := simulate(t, cfg, handTrace(t, line), c.p, func(s *simulation) { warm(t, s, 1, ids(1000, 40), s.startMs) })
		a := s.acc
		if got := s.reqs[0].dc == 1; got != c.wantFar {
			t.Errorf("%v: went far = %v, want %v", c.p, got, c.wantFar)
		}
		if a.ExactDisagreements != c.wantDis || a.CKFDisagreements != 0 || a.StaleBehind != 1 || a.Undercounts != 0 {
			t.Errorf("%v: %d exact and %d CKF disagreements, %d stale-behind lanes, %d undercounts; want %d, 0, 1, 0",
				c.p, a.ExactDisagreements, a.CKFDisagreements, a.StaleBehind, a.Undercounts, c.wantDis)
		}
	}
}

// TestRouter_DrainedQueueEstimateIsExactOnOneWorker sends a burst of
// uncached prompts to one single-worker DC (single-dc-slice at the router's
// site), with report ages of up to 100 ms. One FIFO worker that admits everything and decodes nothing
// (one output token each, so no decode takes a share of the token budget)
// is exactly the work-conserving queue score.Backlog models, and without cache hits the
// router's in-flight tokens are exact, so every request's queue estimate
// must equal the wait it then saw (to the token). Read as current (NoQueueDrain), the
// same reports overstate the wait: the check can fail.
func TestRouter_DrainedQueueEstimateIsExactOnOneWorker(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 6))
	var lines []string
	for k := range 60 {
		n := 1 + rng.IntN(12) // blocks of 512 tokens
		lines = append(lines, fmt.Sprintf("%d 1 %v", 512*n, joinIDs(ids(10000*(k+1), n))))
	}
	w := handTrace(t, lines...)
	for _, noDrain := range []bool{false, true} {
		cfg := quiet(lineGrid(0, 40))
		cfg.RouterSite, cfg.WorkersPerDC, cfg.Concurrency, cfg.NoQueueDrain = "s1", 1, 6, noDrain
		s := simulate(t, cfg, w, SingleDCSlice, nil)
		worst := 0.0
		for i := range s.reqs {
			st := &s.reqs[i]
			if !st.hasEst {
				t.Fatalf("noDrain=%v: request %d has no queue estimate", noDrain, i)
			}
			wait := st.prefillStartMs - st.arriveMs
			if e := math.Abs(st.est.QueueMs - wait); e > worst {
				worst = e
			}
			// A load report counts whole tokens: up to one token's time off.
			if !noDrain && math.Abs(st.est.QueueMs-wait) > 1.01/DefaultPrefillTokensPerMs {
				t.Errorf("request %d: queue estimate %.3f ms, waited %.3f ms", i, st.est.QueueMs, wait)
			}
		}
		if noDrain && worst < 10 {
			t.Errorf("NoQueueDrain: worst queue error %.3f ms, want ≥ 10 (reports read as current are stale)", worst)
		}
	}
}

// TestPolicy_ForgedCollisionIsCountedAsCKFDisagreement plants the
// fingerprints of a prompt's 40-block prefix in the far DC's lane, which
// holds nothing: a collision on every block. ttft, reading the probe, goes
// far and the audit counts the overcount and one decision the CKF alone
// changed; exact-oracle, reading the delivered state, stays home.
func TestPolicy_ForgedCollisionIsCountedAsCKFDisagreement(t *testing.T) {
	prompt := append(ids(1000, 40), 5000)
	w := handTrace(t, fmt.Sprintf("%d 1 %v", 512*len(prompt), joinIDs(prompt)))
	for _, c := range []struct {
		p       Policy
		wantFar bool
		wantCKF int
	}{{TTFT, true, 1}, {ExactOracle, false, 0}} {
		cfg := quiet(lineGrid(0, 50), c.p)
		cfg.Concurrency = 1
		s := newSim(t, cfg, w, c.p)
		rt := s.routers[0]
		// Run up to the first send: snapshots and load reports delivered.
		for s.q.len() > 0 && s.q.h[0].at < s.startMs {
			e := s.q.pop()
			s.now = e.at
			if err := s.fire(e); err != nil {
				t.Fatal(err)
			}
		}
		for _, h := range w.Requests[0].Seqs[:40] {
			p := s.format.Probe(h)
			b := ckf.Bucket(rt.table.Word(1, uint64(p.A)))
			rt.table.StoreWord(1, uint64(p.A), uint64(b.WithSlot(b.FirstEmpty(), p.FP)))
		}
		dc, believed, err := s.decide(rt, 0, s.startMs)
		if err != nil {
			t.Fatal(err)
		}
		a := s.acc
		if got := dc == 1; got != c.wantFar || a.CKFDisagreements != c.wantCKF || a.ExactDisagreements != c.wantCKF || a.Overcounts != 1 || a.OverBlocks != 40 {
			t.Errorf("%v: went far = %v (believed %d), %d CKF and %d exact disagreements, %d overcounts (%d blocks); want %v, %d, %d, 1 (40)",
				c.p, got, believed, a.CKFDisagreements, a.ExactDisagreements, a.Overcounts, a.OverBlocks, c.wantFar, c.wantCKF, c.wantCKF)
		}
	}
}

// TestRouter_CalibrationFindsADCFasterThanConfigured: two DCs 10 ms from
// the router, one of them computing twice as fast as the configuration its
// reports carry. With Calibrate, the router's learned compute factor for
// the fast DC ends near 0.5 and the other's near 1; without, the factors
// are not applied: every estimate is the model's own.
func TestRouter_CalibrationFindsADCFasterThanConfigured(t *testing.T) {
	var lines []string
	rng := rand.New(rand.NewPCG(testSeed(t), 12))
	for k := range 300 {
		n := 1 + rng.IntN(8)
		lines = append(lines, fmt.Sprintf("%d 1 %v", 512*n, joinIDs(ids(1000*(k+1), n))))
	}
	w := handTrace(t, lines...)
	cfg := quiet(lineGrid(0, 10, 10), TTFT)
	cfg.WorkersPerDC, cfg.Concurrency, cfg.Calibrate = 1, 8, true
	cfg.DCSpeed = map[string]float64{"s1": 2}
	s := simulate(t, cfg, w, TTFT, nil)
	fast, normal := s.routers[0].cal[1].Weights().Prefill, s.routers[0].cal[2].Weights().Prefill
	if s.routers[0].cal[1].Observations() < 30 || math.Abs(fast-0.5) > 0.1 || math.Abs(normal-1) > 0.15 {
		t.Errorf("learned factors: fast DC %.3f (%d requests), normal DC %.3f; want about 0.5 and 1",
			fast, s.routers[0].cal[1].Observations(), normal)
	}
	t.Logf("learned factors: fast DC %.3f, normal DC %.3f", fast, normal)
	cfg.Calibrate = false
	s = simulate(t, cfg, w, TTFT, nil)
	for i := range s.reqs {
		if st := &s.reqs[i]; st.est != st.raw {
			t.Fatalf("without Calibrate request %d was estimated %+v, the model says %+v", i, st.est, st.raw)
		}
	}
}
