package sim

import (
	"cmp"
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/score"
)

func runAll(t *testing.T, c Config, w *Workload) *Report {
	t.Helper()
	rep, err := Run(context.Background(), c, w)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func TestRun_SameSeedGivesIdenticalResults(t *testing.T) {
	w := shippedWorkload(t, 300, 40)
	c := Config{Grid: fourSites(t), Concurrency: 64, Seed: testSeed(t), Policies: []Policy{SingleDC, LoadOnly, GORGO, TTFT}}
	a, b := runAll(t, c, w), runAll(t, c, w)
	for k := range a.Results {
		a.Results[k].WallSeconds, b.Results[k].WallSeconds = 0, 0
		if !reflect.DeepEqual(a.Results[k], b.Results[k]) {
			t.Errorf("%s: two runs with seed %d differ:\n%+v\n%+v", a.Results[k].Policy, c.Seed, a.Results[k], b.Results[k])
		}
	}
	// Another seed draws other jitter, so the RTTs paid differ.
	c.Seed++
	other := runAll(t, c, w)
	if x, y := a.Results[0].MeanRTTms, other.Results[0].MeanRTTms; x == y {
		t.Errorf("%s: seeds %d and %d both paid a mean RTT of %v ms", a.Results[0].Policy, c.Seed-1, c.Seed, x)
	}
}

func TestRun_EveryRequestCompletesOnceWithinItsBounds(t *testing.T) {
	w := shippedWorkload(t, 400, 100)
	c := Config{Grid: fourSites(t), Concurrency: 128, Seed: testSeed(t)}
	for _, p := range AllPolicies {
		s := simulate(t, c, w, p, nil)
		if s.completed != len(w.Requests) || s.next != len(w.Requests) {
			t.Errorf("%v: completed %d, sent %d of %d", p, s.completed, s.next, len(w.Requests))
		}
		served := 0
		for _, d := range s.dcs {
			served += d.stats.requests
			for k, wk := range d.workers {
				if wk.running() != 0 || wk.pool.held() != 0 || wk.decoding != 0 || wk.queuedTokens(s) > 1e-6 || wk.routedBlocks != 0 || len(wk.waiting)+len(wk.prefillQ) != 0 {
					t.Errorf("%v: %s worker %d not idle at the end: %+v", p, d.name, k, *wk)
				}
			}
			if d.active != 0 {
				t.Errorf("%v: %s ends with %d requests in flight", p, d.name, d.active)
			}
		}
		if served != len(w.Requests) {
			t.Errorf("%v: DCs served %d requests, want %d", p, served, len(w.Requests))
		}
		for i := range s.reqs {
			st, r := &s.reqs[i], &w.Requests[i]
			ok := st.done && st.hitTokens >= 0 && st.hitTokens <= r.InputTokens-1 &&
				st.hitTokens <= st.hitBlocks*w.BlockSize && st.uncached == r.InputTokens-st.hitTokens &&
				st.sentMs <= st.arriveMs && st.arriveMs <= st.prefillStartMs && st.prefillStartMs <= st.firstTokenMs &&
				st.ttftMs() >= st.rttMs-1e-9 && st.doneMs-st.sentMs >= st.ttftMs()-1e-9
			if !ok {
				t.Errorf("%v: request %d (input %d) ends inconsistent: %+v", p, i, r.InputTokens, *st)
			}
		}
		res := s.result(0)
		if res.HitTokens > res.PromptTokens || res.Completed != res.Requests {
			t.Errorf("%v: result %d/%d hit/prompt tokens, %d/%d completed", p, res.HitTokens, res.PromptTokens, res.Completed, res.Requests)
		}
	}
}

func TestRun_EnginePathIsUsedAndExactWithinCKFBounds(t *testing.T) {
	w := shippedWorkload(t, 400, 120)
	c := Config{Grid: fourSites(t), Concurrency: 96, Seed: testSeed(t), Policies: []Policy{TTFT, PrefixThenLoad}}
	rep := runAll(t, c, w)
	lanes := len(c.Grid.Sites)
	for _, r := range rep.Results {
		a, x := r.CKF, r.Relay
		if a.Decisions != len(w.Requests) || a.LaneChecks != a.Decisions*lanes {
			t.Errorf("%s: %d decisions, %d lane checks; want %d and %d (every lane ready at every decision)", r.Policy, a.Decisions, a.LaneChecks, len(w.Requests), len(w.Requests)*lanes)
		}
		if a.Undercounts != 0 || a.CapacityOmissions != 0 {
			t.Errorf("%s: %d undercounts, %d capacity omissions; the CKF misses no tracked block", r.Policy, a.Undercounts, a.CapacityOmissions)
		}
		// Per-position false-positive rate ≈ 8α/65535 (spec §7); a probe
		// overcounts only through a false hit at its first miss, so even
		// 100× that rate per lane check is a loose bound.
		if bound := 100 * 8 * a.MaxLoadFactor / 65535 * float64(a.LaneChecks); float64(a.Overcounts) > bound+1 {
			t.Errorf("%s: %d overcounts in %d lane checks at load %.2f, beyond %v", r.Policy, a.Overcounts, a.LaneChecks, a.MaxLoadFactor, bound)
		}
		if a.LanesConverged != lanes || x.Snapshots != lanes || x.DrainMarkers != lanes {
			t.Errorf("%s: %d lanes converged, %d snapshots, %d drain markers; want %d each", r.Policy, a.LanesConverged, x.Snapshots, x.DrainMarkers, lanes)
		}
		if x.Deltas == 0 || x.Images < int64(x.Deltas) || x.LoadReports < lanes {
			t.Errorf("%s: relay sent %d deltas, %d images, %d load reports", r.Policy, x.Deltas, x.Images, x.LoadReports)
		}
		if r.HitRate == 0 {
			t.Errorf("%s: hit rate 0: the CKF depths never found a cached prefix", r.Policy)
		}
	}
}

// TestRun_ProbeDepthsMatchTheDeliveredState checks the audit directly:
// after a run with a router at every site, each router's lane probe
// depths are at least the exact depth of what the lane received, and
// they agree on nearly every check.
func TestRun_ProbeDepthsMatchTheDeliveredState(t *testing.T) {
	w := shippedWorkload(t, 300, 100)
	c := Config{Grid: fourSites(t), Concurrency: 64, Seed: testSeed(t)}
	s := simulate(t, c, w, TTFT, nil)
	if len(s.routers) != len(c.Grid.Sites) {
		t.Fatalf("%d routers, want one per site (%d)", len(s.routers), len(c.Grid.Sites))
	}
	checks, equal := 0, 0
	for _, rt := range s.routers {
		for i := range w.Requests {
			r := &w.Requests[i]
			depth, ready := rt.searcher.Search(nil, r.Seqs, rt.all)
			for l := range s.dcs {
				if ready&(1<<l) == 0 {
					t.Fatalf("router %d lane %d not ready after the run", rt.idx, l)
				}
				exact := rt.audit[l].depth(r.Seqs)
				if int(depth[l]) < exact {
					t.Errorf("router %d request %d lane %d: probe depth %d < exact %d", rt.idx, i, l, depth[l], exact)
				}
				if current := rt.deepest(s.dcs[l].index, r.Locals); current != exact {
					t.Errorf("router %d request %d lane %d: delivered exact %d ≠ current %d after the drain", rt.idx, i, l, exact, current)
				}
				checks++
				if int(depth[l]) == exact {
					equal++
				}
			}
		}
	}
	if equal < checks-checks/100 {
		t.Errorf("final state: probe = exact on %d of %d lane checks, want ≥ 99%%", equal, checks)
	}
}

func TestRun_CorruptFrameStopsTheRun(t *testing.T) {
	w := shippedWorkload(t, 50, 50)
	c := quiet(lineGrid(0, 20), TTFT)
	c.Concurrency = 8
	s := newSim(t, c, w, TTFT)
	// The far DC's snapshot is still on its link: flip one body byte.
	it := &s.dcs[1].links[0][0]
	it.frame[len(it.frame)-1] ^= 0x40
	err := s.loop(context.Background())
	var fe *wire.FrameError
	if !errors.Is(err, ErrEngine) || !errors.As(err, &fe) {
		t.Errorf("loop with a corrupt frame = %v, want ErrEngine wrapping a *wire.FrameError", err)
	}
}

func TestRun_OpenLoopSendsAtScaledTimestamps(t *testing.T) {
	w := handTrace(t, "600 2 1", "600 2 2", "600 2 3", "600 2 4")
	for k := range w.Requests {
		w.Requests[k].ArrivalMs = float64(1000 * k)
	}
	c := quiet(lineGrid(0, 10), LoadOnly)
	c.OpenLoop, c.TimeScale = true, 0.25
	s := simulate(t, c, w, LoadOnly, nil)
	for k := range s.reqs {
		if want := s.startMs + 250*float64(k); s.reqs[k].sentMs != want {
			t.Errorf("request %d sent at %v ms, want %v", k, s.reqs[k].sentMs, want)
		}
	}
}

func TestRun_CancelledContextStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, Config{Grid: shippedGrid(t)}, shippedWorkload(t, 50, 50))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run(cancelled) = %v, want context.Canceled", err)
	}
}

func TestConfig_RejectsBadValues(t *testing.T) {
	g := lineGrid(0, 5)
	bad := []Config{
		{},
		{Grid: g, RouterSite: "nowhere"},
		{Grid: g, WorkersPerDC: -1},
		{Grid: g, WorkersPerDC: MaxWorkersPerDC + 1},
		{Grid: g, KVBlocksPerWorker: -3},
		{Grid: g, BlockSize: 100},
		{Grid: g, PrefillTokensPerMs: -1},
		{Grid: g, PrefillTokensPerMs: math.Inf(1)},
		{Grid: g, DecodeMsPerToken: math.NaN()},
		{Grid: g, BatchLimit: -1},
		{Grid: g, Concurrency: -5},
		{Grid: g, TimeScale: -1},
		{Grid: g, LoadReportInterval: time.Microsecond},
		{Grid: g, SampleInterval: -time.Second},
		{Grid: g, Policies: []Policy{TTFT, TTFT}},
		{Grid: g, Policies: []Policy{99}},
	}
	for _, c := range bad {
		if _, err := c.withDefaults(); !errors.Is(err, ErrConfig) {
			t.Errorf("withDefaults(%+v) = %v, want ErrConfig", c, err)
		}
	}
	c, err := Config{Grid: g, RouterSite: "s1"}.withDefaults()
	if err != nil || c.WorkersPerDC != DefaultWorkersPerDC || c.RTTJitter != DefaultRTTJitter || len(c.Policies) != len(AllPolicies) || c.Seed != DefaultSeed {
		t.Errorf("withDefaults fills %+v, %v", c, err)
	}
	if _, err := Run(context.Background(), Config{Grid: g, RouterSite: "s0", BlockSize: 256}, handTrace(t, "10 1 1")); !errors.Is(err, ErrConfig) {
		t.Errorf("Run with a 512-token workload and block size 256 = %v, want ErrConfig", err)
	}
}

func TestParsePolicies(t *testing.T) {
	all, err := ParsePolicies("all")
	if err != nil || !reflect.DeepEqual(all, AllPolicies) {
		t.Errorf("ParsePolicies(all) = %v, %v", all, err)
	}
	got, err := ParsePolicies("ttft, single-dc,exact-oracle")
	if want := []Policy{TTFT, SingleDC, ExactOracle}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParsePolicies = %v, %v; want %v", got, err, want)
	}
	for _, p := range AllPolicies {
		if got, err := ParsePolicies(p.String()); err != nil || got[0] != p {
			t.Errorf("ParsePolicies(%q) = %v, %v", p.String(), got, err)
		}
	}
	for _, bad := range []string{"", "fastest", "ttft,ttft"} {
		if _, err := ParsePolicies(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParsePolicies(%q) err = %v, want ErrConfig", bad, err)
		}
	}
}

// TestRun_WarmupLeavesTheStartBurstOutOfTheFigures checks that the
// per-request figures cover exactly the requests after the warm-up, that
// AllRequests covers every request, and the warm-up each setting resolves
// to.
func TestRun_WarmupLeavesTheStartBurstOutOfTheFigures(t *testing.T) {
	w := shippedWorkload(t, 200, 60)
	n := len(w.Requests)
	c := Config{Grid: fourSites(t), Concurrency: 24, Seed: testSeed(t), Policies: []Policy{TTFT}}
	s := simulate(t, c, w, TTFT, nil)
	const warm = 24
	res, all := s.result(warm), s.result(0)
	var ttft []float64
	var prompt, hit int64
	for i := warm; i < n; i++ {
		ttft = append(ttft, s.reqs[i].ttftMs())
		prompt += int64(w.Requests[i].InputTokens)
		hit += int64(s.reqs[i].hitTokens)
	}
	slices.Sort(ttft)
	if len(res.TTFTsMs) != n-warm || res.WarmupRequests != warm || res.TTFTp95Ms != percentile(ttft, 95) || res.PromptTokens != prompt || res.HitTokens != hit {
		t.Errorf("warm-up %d of %d: %d TTFTs, p95 %v, tokens %d/%d; want %d, %v, %d/%d",
			warm, n, len(res.TTFTsMs), res.TTFTp95Ms, res.HitTokens, res.PromptTokens, n-warm, percentile(ttft, 95), hit, prompt)
	}
	// The whole run's figures are the same in both, and AllRequests equals
	// the figures of a result without warm-up.
	if res.AllRequests != all.AllRequests || all.AllRequests.Requests != n || all.AllRequests.TTFTp95Ms != all.TTFTp95Ms ||
		all.AllRequests.ThroughputRPS != all.ThroughputRPS || res.LoadImbalance != all.LoadImbalance || res.SimulatedSeconds != all.SimulatedSeconds {
		t.Errorf("AllRequests %+v (warm-up) vs %+v; whole-run figures differ", res.AllRequests, all.AllRequests)
	}
	// The measured window starts with the first measured send, later than
	// the run's start in a closed loop.
	first := s.reqs[warm].sentMs
	if want := float64(n-warm) / ((all.SimulatedSeconds*1000 + s.startMs - first) / 1000); first <= s.startMs || math.Abs(res.ThroughputRPS-want) > 1e-9*want {
		t.Errorf("throughput %v over the measured window from %v ms", res.ThroughputRPS, first)
	}

	for _, k := range []struct {
		cfg  Config
		n    int
		want int
	}{
		{Config{Concurrency: 256}, 5000, 256},
		{Config{Concurrency: 256}, 300, 150},
		{Config{Concurrency: 256, OpenLoop: true}, 5000, 0},
		{Config{Concurrency: 256, Warmup: -1}, 5000, 0},
		{Config{Concurrency: 8, Warmup: 100}, 5000, 100},
	} {
		if got, err := k.cfg.warmupFor(k.n); err != nil || got != k.want {
			t.Errorf("warm-up of %+v over %d requests = %d, %v; want %d", k.cfg, k.n, got, err, k.want)
		}
	}
	if _, err := (&Config{Warmup: 10}).warmupFor(10); !errors.Is(err, ErrConfig) {
		t.Errorf("a warm-up of every request = %v, want ErrConfig", err)
	}
}

// TestRun_PriceOthersMeasuresTheFleetsUtilization checks the router's
// measure of the fleet's utilization against a recount from the run's
// requests: at every decision, the prompt tokens the router believed
// uncached in the requests it had sent within the last window, over the
// window's length times the fleet's reported prefill rate (the configured
// one, which the relay copies into its reports); and that without
// PriceOthers the router measures nothing.
func TestRun_PriceOthersMeasuresTheFleetsUtilization(t *testing.T) {
	w := shippedWorkload(t, 400, 120)
	c := Config{Grid: shippedGrid(t), OneSite: true, Concurrency: 128, Seed: testSeed(t)}
	if r := simulate(t, c, w, TTFT, nil).result(0); r.FleetUtilizationMean != 0 {
		t.Errorf("without PriceOthers the router measured ρ = %v", r.FleetUtilizationMean)
	}
	c.PriceOthers = true
	s := simulate(t, c, w, TTFT, nil)
	order := make([]int, len(s.reqs))
	for i := range order {
		order[i] = i
	}
	// Decisions ran in send order; sends at one instant in index order.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(s.reqs[a].sentMs, s.reqs[b].sentMs) })
	window := float64(score.DefaultDemandWindow / time.Millisecond)
	fleetRate := float64(len(s.dcs)*s.cfg.WorkersPerDC) * s.cfg.PrefillTokensPerMs
	sum := 0.0
	for k, i := range order {
		now, tokens := s.reqs[i].sentMs, 0.0
		for _, j := range order[:k] {
			if st := &s.reqs[j]; st.sentMs > now-window {
				r := &w.Requests[j]
				tokens += float64(r.InputTokens - min(st.believed*w.BlockSize, r.InputTokens-1))
			}
		}
		sum += tokens / (window * fleetRate)
	}
	want := sum / float64(len(order))
	if got := s.result(0).FleetUtilizationMean; want == 0 || math.Abs(got-want) > 1e-9*want {
		t.Errorf("router's mean ρ %v, recounted %v", got, want)
	}
}

// TestRun_PriceKVAndEvictionsReachOnlyTTFT: on a KV-starved fleet, each of
// PriceKV and PriceEvictions changes ttft's run (the prices reach its
// decisions) and leaves prefix-then-load's untouched; with PriceEvictions
// every router measures each DC's refetch share from the events its lane
// receives (some DC's is above 0, none above 1), and without it measures
// nothing.
func TestRun_PriceKVAndEvictionsReachOnlyTTFT(t *testing.T) {
	w := shippedWorkload(t, 400, 160)
	c := Config{Grid: shippedGrid(t), OneSite: true, Concurrency: 64, KVBlocksPerWorker: 96, Seed: testSeed(t)}
	base := simulate(t, c, w, TTFT, nil)
	if base.routers[0].refetch != nil {
		t.Fatal("without PriceEvictions the router measures refetches")
	}
	ptl := simulate(t, c, w, PrefixThenLoad, nil).result(0).TTFTp95Ms
	for _, on := range []func(*Config){func(c *Config) { c.PriceKV = true }, func(c *Config) { c.PriceEvictions = true }} {
		cc := c
		on(&cc)
		s := simulate(t, cc, w, TTFT, nil)
		if got, was := s.result(0).TTFTp95Ms, base.result(0).TTFTp95Ms; got == was {
			t.Errorf("%+v: ttft's p95 unchanged (%v ms)", cc, got)
		}
		if got := simulate(t, cc, w, PrefixThenLoad, nil).result(0).TTFTp95Ms; got != ptl {
			t.Errorf("prefix-then-load's p95 moved from %v to %v ms", ptl, got)
		}
		if !cc.PriceEvictions {
			continue
		}
		most := 0.0
		for l, r := range s.routers[0].refetch {
			p := r.Share()
			if p < 0 || p > 1 {
				t.Errorf("lane %d: refetch share %v", l, p)
			}
			most = max(most, p)
		}
		if most == 0 {
			t.Error("no DC's refetch share above 0 on a KV-starved fleet")
		}
	}
}
