package selector

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/internal/testseed"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{"policy":"credit","prefill_tokens_per_ms":40}`))
	if err != nil || c.Policy != "credit" || c.PrefillTokensPerMs != 40 {
		t.Errorf("ParseConfig = %+v, %v", c, err)
	}
	if c, err := ParseConfig(nil); err != nil || c != (Config{}) {
		t.Errorf("ParseConfig(empty) = %+v, %v; want defaults", c, err)
	}
	for _, bad := range []string{`{"polcy":"ttft"}`, `{"policy":1}`, `{} {}`, `[`, string(make([]byte, MaxConfigBytes+1))} {
		if _, err := ParseConfig([]byte(bad)); !errors.Is(err, ErrBadConfig) {
			t.Errorf("ParseConfig(%.20q) err = %v, want ErrBadConfig", bad, err)
		}
	}
	for _, p := range []string{"fastest", "round-robin", "single-dc"} {
		if _, err := New(Config{Policy: p}, nil); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(policy %q) err = %v, want ErrBadConfig", p, err)
		}
	}
}

func TestSelector_RequiredInputs(t *testing.T) {
	for _, c := range []struct {
		policy string
		want   uint64
	}{
		{"ttft", InputIdentity | InputLoad | InputCachedTokens | InputCapacity},
		{"credit", InputIdentity | InputLoad | InputCachedTokens},
		{"load-only", InputIdentity | InputLoad},
	} {
		s, err := New(Config{Policy: c.policy}, nil)
		if err != nil {
			t.Fatalf("New(%s): %v", c.policy, err)
		}
		if got := s.RequiredInputs(); got != c.want {
			t.Errorf("%s: RequiredInputs = %#x, want %#x", c.policy, got, c.want)
		}
	}
}

func TestSelector_TTFTPrefersCacheUnlessQueued(t *testing.T) {
	s, _ := New(Config{PrefillTokensPerMs: 10}, nil)
	req := Request{BlockSize: 16, ISLTokens: 1600}
	cands := []Candidate{
		{WorkerID: 1, HasCachedTokens: true, CachedTokens: 0, HasLoad: true},
		{WorkerID: 2, HasCachedTokens: true, CachedTokens: 1280, HasLoad: true},
	}
	if d, err := s.Select(req, cands); err != nil || d.UseDefault || d.Index != 1 {
		t.Errorf("Select = %+v, %v; want the worker with 1280 cached tokens", d, err)
	}
	// Worker 2's queue (2000 tokens = 200 ms) outweighs the 128 ms of prefill it saves.
	cands[1].ActivePrefillTokens = 2000
	if d, _ := s.Select(req, cands); d.Index != 0 {
		t.Errorf("Select with a long queue on worker 2 = %+v, want worker 1", d)
	}
	// An overfull worker waits for decodes to release blocks: 300 active +
	// 20 new blocks over 100 is 220 ms at 1 block/ms, more than the 128 ms saved.
	cands[1].ActivePrefillTokens = 0
	cands[1].HasCapacity, cands[1].TotalKVBlocks, cands[1].ActiveDecodeBlocks = true, 100, 300
	cands[0].HasCapacity, cands[0].TotalKVBlocks = true, Unavailable
	if d, _ := s.Select(req, cands); d.Index != 0 {
		t.Errorf("Select with worker 2 full = %+v, want worker 1", d)
	}
}

func TestSelector_UseDefaultWhenInputsMissing(t *testing.T) {
	s, _ := New(Config{}, nil)
	req := Request{BlockSize: 16, ISLTokens: 64}
	for name, cands := range map[string][]Candidate{
		"no candidates": nil,
		"no load":       {{WorkerID: 1, HasCachedTokens: true}},
		"no cache":      {{WorkerID: 1, HasLoad: true}},
	} {
		if d, err := s.Select(req, cands); err != nil || !d.UseDefault || !errors.Is(d.Why, ErrUseDefault) {
			t.Errorf("%s: Select = %+v, %v; want UseDefault", name, d, err)
		}
	}
	if _, err := s.Select(Request{BlockSize: 0}, []Candidate{{HasLoad: true, HasCachedTokens: true}}); !errors.Is(err, ErrBadInput) {
		t.Errorf("Select(block size 0) err = %v, want ErrBadInput", err)
	}
	lo, _ := New(Config{Policy: "load-only"}, nil)
	if d, _ := lo.Select(req, []Candidate{{HasLoad: true, ActiveDecodeBlocks: 9}, {HasLoad: true, ActiveDecodeBlocks: 2}}); d.UseDefault || d.Index != 1 {
		t.Errorf("load-only without cache columns = %+v, want index 1", d)
	}
}

func TestConfig_ReplicaKeys(t *testing.T) {
	c, err := ParseConfig([]byte(`{"replica": "/dev/shm/goindex-1.replica", "dc": 0, "max_staleness_ms": 250}`))
	if err != nil || c.Replica != "/dev/shm/goindex-1.replica" || c.DC == nil || *c.DC != 0 || c.Staleness() != 250 {
		t.Fatalf("ParseConfig(replica, dc 0, 250 ms) = %+v, %v", c, err)
	}
	if _, err := New(c, fixedRates{}); err != nil {
		t.Errorf("New(replica config, a source) = %v, want nil", err)
	}
	if (&Config{}).Staleness() != 5000 {
		t.Errorf("default staleness = %v, want 5000 ms", (&Config{}).Staleness())
	}
	dc := uint64(3)
	for _, bad := range []struct {
		name string
		cfg  Config
		src  Source
	}{
		{"relative replica", Config{Replica: "goindex.replica", DC: &dc}, fixedRates{}},
		{"replica without dc", Config{Replica: "/r"}, fixedRates{}},
		{"dc without replica", Config{DC: &dc}, nil},
		{"replica without a source", Config{Replica: "/r", DC: &dc}, nil},
		{"negative staleness", Config{MaxStalenessMs: -1}, nil},
		{"staleness over a day", Config{MaxStalenessMs: 2 * maxStalenessMs}, nil},
	} {
		if _, err := New(bad.cfg, bad.src); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(%s) err = %v, want ErrBadConfig", bad.name, err)
		}
	}
}

// fixedRates is a Source with fixed rates, or a fixed error.
type fixedRates struct {
	r   DCRates
	err error
}

func (f fixedRates) DCRates() (DCRates, error) { return f.r, f.err }

// The DC's measured rates replace the config's: a slow measured prefill
// makes the cached worker worth its queue; a failing Source defers to the
// host with the Source's reason.
func TestSelector_SourceRatesAndFailures(t *testing.T) {
	dc := uint64(1)
	cfg := Config{PrefillTokensPerMs: 40, QueueTokensPerMs: 20, Replica: "/r", DC: &dc}
	req := Request{BlockSize: 16, ISLTokens: 1600}
	cands := []Candidate{
		{WorkerID: 1, HasCachedTokens: true, HasLoad: true},
		// 1280 cached tokens saves 32 ms at 40 tokens/ms, 128 ms at 10;
		// its queue of 1000 tokens costs 50 ms at 20 tokens/ms.
		{WorkerID: 2, HasCachedTokens: true, CachedTokens: 1280, HasLoad: true, ActivePrefillTokens: 1000},
	}
	for _, c := range []struct {
		name  string
		rates DCRates
		want  int
	}{
		{"unmeasured: the config's 40 tokens/ms", DCRates{}, 0},
		{"measured 10 tokens/ms, queue 40/ms over 2 workers", DCRates{PrefillTokensPerMs: 10, QueueTokensPerMs: 40, LiveWorkers: 2}, 1},
		{"measured 10 tokens/ms, queue 40/ms over 8 workers", DCRates{PrefillTokensPerMs: 10, QueueTokensPerMs: 40, LiveWorkers: 8}, 0},
	} {
		s, err := New(cfg, fixedRates{r: c.rates})
		if err != nil {
			t.Fatal(err)
		}
		if d, err := s.Select(req, cands); err != nil || d.UseDefault || d.Index != c.want {
			t.Errorf("%s: Select = %+v, %v; want index %d", c.name, d, err, c.want)
		}
	}
	stale := errors.New("replica stale")
	s, _ := New(cfg, fixedRates{err: stale})
	if d, err := s.Select(req, cands); err != nil || !d.UseDefault || !errors.Is(d.Why, stale) {
		t.Errorf("Select with a failing source = %+v, %v; want UseDefault because of it", d, err)
	}
}

// The scorer cache keeps at most maxScorers block sizes; later sizes are
// still scored.
func TestSelector_ScorerCacheIsBounded(t *testing.T) {
	s, _ := New(Config{}, nil)
	cands := []Candidate{{HasLoad: true, HasCachedTokens: true}, {HasLoad: true, HasCachedTokens: true, CachedTokens: 4096}}
	for bs := uint32(1); bs <= 4*maxScorers; bs++ {
		if d, err := s.Select(Request{BlockSize: bs, ISLTokens: 8192}, cands); err != nil || d.Index != 1 {
			t.Fatalf("Select(block size %d) = %+v, %v; want index 1", bs, d, err)
		}
	}
	if len(s.byBS) > maxScorers {
		t.Errorf("%d scorers cached after %d block sizes, want at most %d", len(s.byBS), 4*maxScorers, maxScorers)
	}
}

// Costs agrees with Select: the lowest cost is the chosen candidate's (ties
// aside), on random candidates under every policy; a candidate missing a
// needed signal costs NaN; a failing Source degrades to the config's rates
// instead of failing.
func TestSelector_CostsAgreeWithSelect(t *testing.T) {
	seed := testseed.For(t, 17)
	rng := rand.New(rand.NewPCG(seed, 5))
	for _, policy := range []string{"ttft", "credit", "load-only", "prefix-then-load"} {
		s, err := New(Config{Policy: policy, PrefillTokensPerMs: 8}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 300 {
			cands := make([]Candidate, 1+rng.IntN(10))
			for i := range cands {
				cands[i] = Candidate{WorkerID: uint64(i), HasCachedTokens: true, CachedTokens: uint64(rng.IntN(4096)), HasLoad: true,
					ActivePrefillTokens: uint64(rng.IntN(8192)), ActiveDecodeBlocks: uint64(rng.IntN(3000)),
					HasCapacity: rng.IntN(2) == 0, TotalKVBlocks: uint64(500 + rng.IntN(3000))}
			}
			req := Request{BlockSize: 16, ISLTokens: uint64(1 + rng.IntN(8192))}
			d, err := s.Select(req, cands)
			costs := make([]float64, len(cands))
			if _, cerr := s.Costs(req, cands, costs); err != nil || cerr != nil || d.UseDefault {
				t.Fatalf("%s: Select = %+v, %v; Costs err %v", policy, d, err, cerr)
			}
			if low := slices.Min(costs); costs[d.Index] != low {
				t.Errorf("%s: Select chose %d (cost %v), the lowest cost is %v: %v (GOINDEX_SEED=%d)", policy, d.Index, costs[d.Index], low, costs, seed)
			}
		}
	}
	s, _ := New(Config{}, nil)
	costs := []float64{7, 7}
	if _, err := s.Costs(Request{BlockSize: 16, ISLTokens: 64}, []Candidate{{HasLoad: true, HasCachedTokens: true}, {HasCachedTokens: true}}, costs); err != nil ||
		math.IsNaN(costs[0]) || !math.IsNaN(costs[1]) {
		t.Errorf("Costs with one candidate lacking load = %v, %v; want a number then NaN", costs, err)
	}
	dc := uint64(1)
	stale := errors.New("stale")
	s, _ = New(Config{Replica: "/r", DC: &dc}, fixedRates{err: stale})
	if degraded, err := s.Costs(Request{BlockSize: 16, ISLTokens: 64}, []Candidate{{HasLoad: true, HasCachedTokens: true}}, costs); err != nil ||
		!errors.Is(degraded, stale) || math.IsNaN(costs[0]) {
		t.Errorf("Costs with a failing source = %v, degraded %v, %v; want a cost and the source's error", costs, degraded, err)
	}
}
