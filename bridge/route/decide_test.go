package route

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/goindex/shm"
)

// refDC is the reference model of one DC in TestDecide_MatchesReferenceTTFT.
type refDC struct {
	name         string
	rttMicros    int64 // 0: none measured
	rttStale     bool
	hasLoad      bool
	loadStale    bool
	queued       uint64
	cachedBlocks int // leading blocks of the prompt the DC stores
}

// TestDecide_MatchesReferenceTTFT checks Decide against a plain model of
// the ttft rule on random DC sets: signals missing or stale, random
// queues, RTTs and cached prefixes (real CKF lanes), random prompt
// lengths. The reference computes eligibility and
// RTT + queued/20 + uncached/20 by hand and sorts; Decide must return the
// same DCs in the same order with the same costs and cached tokens, then
// (failing open) every other DC, the default first. With no DC eligible on
// fresh signals the reference fails open as Decide must: the same rule on
// the last known signals with no cached prefix, else the default DC, and
// signals-stale as the reason; with FailClosed, ErrNoEligibleDC. A CKF
// false positive can only lengthen a depth; such cases are counted and
// must stay rare.
func TestDecide_MatchesReferenceTTFT(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 9))
	cases := 300
	if testing.Short() {
		cases = 60
	}
	const rate = 20.0 // the scorer's default prefill and queue rate, tokens/ms
	overReported := 0
	for c := range cases {
		n := 2 + rng.IntN(5)
		tokens := randomTokens(rng, 1+rng.IntN(2048))
		blocks := len(tokens) / testBlockSize
		dcs := make([]refDC, n)
		ids := make([]uint64, n)
		for i := range dcs {
			d := &dcs[i]
			d.name = fmt.Sprintf("dc%d", i)
			ids[i] = DCID(d.name)
			if rng.IntN(6) > 0 {
				d.rttMicros = int64(1000 + rng.IntN(200_000))
				d.rttStale = rng.IntN(6) == 0
			}
			d.hasLoad = rng.IntN(6) > 0
			d.loadStale = d.hasLoad && rng.IntN(6) == 0
			d.queued = uint64(rng.IntN(4) * rng.IntN(50_000))
			if rng.IntN(3) > 0 {
				d.cachedBlocks = rng.IntN(blocks + 1)
			}
		}
		fx := newFixture(t, ids...)
		cfg := Config{ReplicaPath: fx.path, BlockSize: testBlockSize, MaxStaleness: time.Minute}
		for i, d := range dcs {
			cfg.DCs = append(cfg.DCs, DC{ID: ids[i], Name: d.name, URL: mustURL(t, "http://127.0.0.1:1")})
			if d.cachedBlocks > 0 {
				fx.cache(i, hasher(t, "", ""), tokens[:d.cachedBlocks*testBlockSize])
			}
			age := func(stale bool) time.Time {
				if stale {
					return time.Now().Add(-time.Hour)
				}
				return time.Now()
			}
			if d.rttMicros > 0 {
				fx.w.SetRTT(i, time.Duration(d.rttMicros)*time.Microsecond, age(d.rttStale))
			}
			if d.hasLoad {
				fx.w.SetLoad(i, &shm.Load{ReceivedAt: age(d.loadStale), QueuedPrefillTokens: d.queued})
			}
		}
		fx.w.Touch(time.Now())
		rt, err := New(cfg)
		if err != nil {
			t.Fatalf("case %d: New: %v", c, err)
		}
		got, err := rt.Decide(&Prompt{Tokens: tokens, HasTokens: true})
		rt.Close()
		cfg.FailClosed = true
		closed, err := New(cfg)
		if err != nil {
			t.Fatalf("case %d: New: %v", c, err)
		}
		gotClosed, errClosed := closed.Decide(&Prompt{Tokens: tokens, HasTokens: true})
		closed.Close()

		type want struct {
			name   string
			cost   float64
			cached int
		}
		// rank lists the DCs the ttft rule finds eligible, by cost; fresh
		// says whether stale signals count as missing.
		rank := func(fresh bool) []want {
			var ref []want
			for _, d := range dcs {
				if d.rttMicros == 0 || !d.hasLoad || fresh && (d.rttStale || d.loadStale) {
					continue
				}
				cached := 0
				if fresh {
					cached = d.cachedBlocks * testBlockSize
				}
				cost := float64(d.rttMicros)/1000 + float64(d.queued)/rate + float64(len(tokens)-cached)/rate
				ref = append(ref, want{d.name, cost, cached})
			}
			slices.SortStableFunc(ref, func(a, b want) int { return cmp.Compare(a.cost, b.cost) })
			return ref
		}
		ref := rank(true)
		if len(ref) == 0 {
			if !errors.Is(errClosed, ErrNoEligibleDC) || gotClosed == nil || gotClosed.Eligible != 0 {
				t.Errorf("case %d: FailClosed Decide with no eligible DC = %v, want ErrNoEligibleDC", c, errClosed)
			}
		} else if errClosed != nil || len(gotClosed.Order) != len(ref) {
			t.Errorf("case %d: FailClosed Decide = %v, %v; want only the %d eligible DCs", c, gotClosed, errClosed, len(ref))
		}
		if err != nil {
			t.Errorf("case %d: Decide = %v, want a decision (fail open)", c, err)
			continue
		}
		wantReason := "healthy"
		if len(ref) == 0 {
			wantReason = "signals-stale"
			ref = rank(false) // the last known signals
		}
		if got.Degraded.String() != wantReason {
			t.Errorf("case %d: Decide degraded %q, want %q", c, got.Degraded, wantReason)
		}
		eligible := len(ref)
		for i := -1; i < len(dcs); i++ { // the default DC (the first), then the rest in order
			name := dcs[max(i, 0)].name
			if !slices.ContainsFunc(ref, func(w want) bool { return w.name == name }) {
				ref = append(ref, want{name, 0, 0})
			}
		}
		tied := false
		for i := 1; i < eligible; i++ {
			tied = tied || ref[i].cost == ref[i-1].cost
		}
		if tied {
			continue // the scorer breaks ties at random
		}
		over := false
		for _, ch := range got.Order {
			for _, d := range dcs {
				if d.name == ch.DC.Name && ch.CachedTokens > d.cachedBlocks*testBlockSize {
					over = true
				}
			}
		}
		if over {
			overReported++
			continue
		}
		var gotNames, wantNames []string
		for _, ch := range got.Order {
			gotNames = append(gotNames, fmt.Sprintf("%s/%.3f/%d", ch.DC.Name, ch.Cost, ch.CachedTokens))
		}
		for _, w := range ref {
			wantNames = append(wantNames, fmt.Sprintf("%s/%.3f/%d", w.name, w.cost, w.cached))
		}
		if strings.Join(gotNames, " ") != strings.Join(wantNames, " ") || got.Eligible != eligible || got.PromptTokens != len(tokens) || got.PromptBlocks != blocks {
			t.Errorf("case %d: Decide(%d tokens) = %v (eligible %d, %d tokens, %d blocks), want %v (eligible %d, %d blocks)",
				c, len(tokens), gotNames, got.Eligible, got.PromptTokens, got.PromptBlocks, wantNames, eligible, blocks)
		}
		for i, ch := range got.Order {
			if p := ch.Parts; i < eligible && math.Abs(p.RTTms+p.QueueMs+p.PrefillMs-ch.Cost) > 1e-9 {
				t.Errorf("case %d: %s parts %+v do not add up to cost %g", c, ch.DC.Name, p, ch.Cost)
			}
		}
	}
	// 16-bit fingerprints: one false hit per ~8000 probes of absent blocks.
	if overReported > cases/50 {
		t.Errorf("%d of %d cases over-reported a cached prefix, want at most %d", overReported, cases, cases/50)
	}
}

// TestDecide_LongHoldsGrowAFullDCsKVWait: the KV wait ttft estimates for a
// DC whose KV is full frees its capacity once per hold time learned from
// the streams relayed to it (first to last event plus the estimated
// prefill, weighted by prompt blocks): after a 10 s stream near's wait for
// room for a 10-block prompt is 10 blocks × (10 s + prefill) / 100
// blocks, after a 30 s one more, while far, with room, waits for nothing.
func TestDecide_LongHoldsGrowAFullDCsKVWait(t *testing.T) {
	s := setupTwoDCs(t, nil)
	s.fx.signals(0, 5*time.Millisecond, 0, shm.Load{CapacityBlocks: 100, ActiveDecodeBlocks: 100, DecodeBlocksPerMs: 1, PrefillTokensPerMs: 0.1})
	s.fx.signals(1, 100*time.Millisecond, 0, shm.Load{CapacityBlocks: 100})
	p := &Prompt{Tokens: make([]uint32, 160), HasTokens: true} // 10 blocks
	choices := func() (near, far Choice) {
		t.Helper()
		d, err := s.rt.Decide(p)
		if err != nil || len(d.Order) != 2 || d.Policy != score.TTFT {
			t.Fatalf("Decide: %v, %d choices under %v; want 2 under ttft", err, len(d.Order), d.Policy)
		}
		for _, c := range d.Order {
			if c.Index == 0 {
				near = c
			} else {
				far = c
			}
		}
		return near, far
	}
	near, far := choices()
	// Nothing learned: the reported release rate, 1 block per ms.
	if near.Parts.QueueMs != 10 || far.Parts.QueueMs != 0 {
		t.Fatalf("before any stream: near's queue %v ms, far's %v; want 10 and 0", near.Parts.QueueMs, far.Parts.QueueMs)
	}
	d := &Decision{Policy: score.TTFT, PromptTokens: len(p.Tokens)}
	start := time.Now()
	first := start.Add(50 * time.Millisecond)
	s.rt.learn(d, &near, start, first, first.Add(10*time.Second))
	// Admission is a prefill before the first event: 160 tokens at 0.1
	// per ms, 1.6 s on top of the stream's 10 s.
	prefill := near.Parts.PrefillMs
	if prefill != 1600 {
		t.Fatalf("near's prefill estimate %v ms, want 1600", prefill)
	}
	hold := 10_000 + prefill
	after, far := choices()
	if want := 10 * hold / 100; math.Abs(after.Parts.QueueMs-want) > 1e-6 || far.Parts.QueueMs != 0 {
		t.Fatalf("after a 10 s stream: near's queue %v ms, far's %v; want %v and 0", after.Parts.QueueMs, far.Parts.QueueMs, want)
	}
	s.rt.learn(d, &near, start, first, first.Add(30*time.Second))
	if longer, _ := choices(); !(longer.Parts.QueueMs > after.Parts.QueueMs) {
		t.Errorf("after a 30 s stream near's queue %v ms, not above the %v after 10 s", longer.Parts.QueueMs, after.Parts.QueueMs)
	}
}

// TestDecide_EvictionChargeTurnsAwayFromAFastTurningDC: two DCs alike but
// for their caches' turnover and a 1 ms RTT edge of the one that turns
// over fast (churn: its 1000-block cache stores 1000 blocks a second;
// calm: none). Their load records are what the consumer writes from
// the relays' load-report frames (wire-encoded, decoded, shm.LoadOf).
// With one report per DC the insert rates are unknown and ttft picks
// churn on its RTT edge; after the second, churn's uncached 80 ms prefill
// carries a half × 80 ms of eviction charge (score.EvictionFactor at a
// turnover of one reuse window) in its others part and calm
// wins; a relay restart at churn makes its rate unknown again. The other
// policies never see the charge.
func TestDecide_EvictionChargeTurnsAwayFromAFastTurningDC(t *testing.T) {
	fx := newFixture(t, DCID("churn"), DCID("calm"))
	dcs := []DC{{ID: DCID("churn"), Name: "churn", URL: mustURL(t, "http://127.0.0.1:1")},
		{ID: DCID("calm"), Name: "calm", URL: mustURL(t, "http://127.0.0.1:1")}}
	format := fx.w.Format()
	now := time.Now()
	// report writes lane l's record as the consumer does from DC l's load
	// report of incarnation inc, sampled at, counting stored blocks.
	report := func(l int, inc uint64, at time.Time, stored uint64) {
		t.Helper()
		r := relayproto.LoadReport{Identity: relayproto.ProducerIdentity{Pool: relayproto.PoolID{Domain: 1, DC: relayproto.DCID(dcs[l].ID)},
			Incarnation: inc, LayoutGeneration: 1, Format: relayproto.FormatOf(format)},
			TimestampUnixNano: uint64(at.UnixNano()), IntervalMs: 1000, LiveWorkers: 1, CapacityBlocks: 1000, StoredBlocks: stored}
		frame, err := wire.AppendFrame(nil, &r)
		if err != nil {
			t.Fatalf("AppendFrame: %v", err)
		}
		var got relayproto.LoadReport
		if _, err := wire.DecodeLoadReport(&got, frame); err != nil {
			t.Fatalf("DecodeLoadReport: %v", err)
		}
		ld := shm.LoadOf(&got, now)
		fx.w.SetLoad(l, &ld)
	}
	fx.w.SetRTT(0, 10*time.Millisecond, now)
	fx.w.SetRTT(1, 11*time.Millisecond, now)
	routers := map[score.Policy]*Router{}
	for _, p := range []score.Policy{score.TTFT, score.LoadOnly, score.PrefixThenLoad} {
		rt, err := New(Config{ReplicaPath: fx.path, BlockSize: testBlockSize, DCs: dcs, Score: score.Config{Policy: p}})
		if err != nil {
			t.Fatalf("New(%v): %v", p, err)
		}
		t.Cleanup(func() { rt.Close() })
		routers[p] = rt
	}
	prompt := &Prompt{Tokens: randomTokens(rand.New(rand.NewPCG(testSeed(t), 3)), 1600), HasTokens: true} // 100 blocks, 80 ms at 20 tokens/ms
	decide := func(p score.Policy) []Choice {
		t.Helper()
		d, err := routers[p].Decide(prompt)
		if err != nil || len(d.Order) != 2 {
			t.Fatalf("Decide under %v: %v, %d choices; want 2", p, err, len(d.Order))
		}
		return d.Order
	}
	costs := map[score.Policy]map[string]float64{} // the other policies' costs by DC
	step := func(name, first string, churnOthers float64) {
		t.Helper()
		for p := range routers {
			order := decide(p)
			if p != score.TTFT {
				got := map[string]float64{order[0].DC.Name: order[0].Cost, order[1].DC.Name: order[1].Cost}
				if before, ok := costs[p]; ok && !maps.Equal(got, before) {
					t.Errorf("%s: %v costs %v changed from %v", name, p, got, before)
				}
				costs[p] = got
				continue
			}
			churn, calm := order[0], order[1]
			if churn.DC.Name != "churn" {
				churn, calm = calm, churn
			}
			if order[0].DC.Name != first || math.Abs(churn.Parts.OthersMs-churnOthers) > 1e-9 || calm.Parts.OthersMs > 1e-9 {
				t.Errorf("%s: ttft picks %s (churn %.3f ms with others %.6f, calm %.3f ms with others %.6f); want %s, churn's others %.6f, calm's 0",
					name, order[0].DC.Name, churn.Cost, churn.Parts.OthersMs, calm.Cost, calm.Parts.OthersMs, first, churnOthers)
			}
		}
	}
	report(0, 7, now.Add(-2*time.Second), 5000)
	report(1, 9, now.Add(-2*time.Second), 5000)
	step("one report each (rates unknown)", "churn", 0)
	report(0, 7, now.Add(-time.Second), 6000)
	report(1, 9, now.Add(-time.Second), 5000)
	charge := 0.5 * 80
	step("a second report each", "calm", charge)
	step("the same records read again", "calm", charge)
	// The charge shows in the diagnostic headers without PriceOthers.
	for _, c := range decide(score.TTFT) {
		want := map[string]string{"churn": "40.000", "calm": ""}[c.DC.Name]
		if got := diagnostics(&Decision{Policy: score.TTFT}, &c, nil).Get(HeaderOthersMs); got != want {
			t.Errorf("%s: %s = %q, want %q", c.DC.Name, HeaderOthersMs, got, want)
		}
	}
	report(0, 8, now, 100) // churn's relay restarted
	step("churn's relay restarted", "churn", 0)
}
