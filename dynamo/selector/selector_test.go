package selector

import (
	"errors"
	"testing"
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
		if _, err := New(Config{Policy: p}); !errors.Is(err, ErrBadConfig) {
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
		s, err := New(Config{Policy: c.policy})
		if err != nil {
			t.Fatalf("New(%s): %v", c.policy, err)
		}
		if got := s.RequiredInputs(); got != c.want {
			t.Errorf("%s: RequiredInputs = %#x, want %#x", c.policy, got, c.want)
		}
	}
}

func TestSelector_TTFTPrefersCacheUnlessQueued(t *testing.T) {
	s, _ := New(Config{PrefillTokensPerMs: 10})
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
	s, _ := New(Config{})
	req := Request{BlockSize: 16, ISLTokens: 64}
	for name, cands := range map[string][]Candidate{
		"no candidates": nil,
		"no load":       {{WorkerID: 1, HasCachedTokens: true}},
		"no cache":      {{WorkerID: 1, HasLoad: true}},
	} {
		if d, err := s.Select(req, cands); err != nil || !d.UseDefault {
			t.Errorf("%s: Select = %+v, %v; want UseDefault", name, d, err)
		}
	}
	if _, err := s.Select(Request{BlockSize: 0}, []Candidate{{HasLoad: true, HasCachedTokens: true}}); !errors.Is(err, ErrBadInput) {
		t.Errorf("Select(block size 0) err = %v, want ErrBadInput", err)
	}
	lo, _ := New(Config{Policy: "load-only"})
	if d, _ := lo.Select(req, []Candidate{{HasLoad: true, ActiveDecodeBlocks: 9}, {HasLoad: true, ActiveDecodeBlocks: 2}}); d.UseDefault || d.Index != 1 {
		t.Errorf("load-only without cache columns = %+v, want index 1", d)
	}
}
