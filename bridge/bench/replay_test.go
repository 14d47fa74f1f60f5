package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

// tinyTrace is three requests whose replay on one worker is worked out by
// hand in the tests: [0 1 2], then [0 1 3] (shares two blocks), then [0 1 2].
const tinyTrace = `{"timestamp": 0, "input_length": 1500, "output_length": 1, "hash_ids": [0, 1, 2]}
{"timestamp": 1, "input_length": 1400, "output_length": 2, "hash_ids": [0, 1, 3]}
{"timestamp": 2, "input_length": 1500, "output_length": 3, "hash_ids": [0, 1, 2]}
`

func writeTrace(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	return p
}

var radixTarget = ReplayTarget{
	Name: "radix",
	New:  func() kv.Index { return radix.New(radix.Config{}) },
	Sizes: func(x kv.Index) (int, int) {
		st := x.(*radix.Index).Stats()
		return st.Nodes, st.Blocks
	},
}

func replay(t *testing.T, cfg ReplayConfig) *ReplayReport {
	t.Helper()
	rep, err := Replay(context.Background(), cfg, radixTarget)
	if err != nil {
		t.Fatalf("Replay(%+v): %v", cfg, err)
	}
	if err := rep.Check(); err != nil {
		t.Fatalf("Replay(%+v).Check: %v", cfg, err)
	}
	return rep
}

func TestReplay_TinyTraceFiguresAreExact(t *testing.T) {
	path := writeTrace(t, tinyTrace)
	cases := []struct {
		name     string
		capacity int
		cache    CacheFigures
		apply    ApplyFigures // counts only
		held     int
	}{
		// Room for all four distinct blocks: [0 1 3] stores one block below
		// the shared two, the repeat of [0 1 2] is a full hit.
		{"fits", 4, CacheFigures{PromptBlocks: 9, HitBlocks: 5, StoredBlocks: 4}, ApplyFigures{Events: 2, StoredEvents: 2, BlockOps: 4}, 4},
		// Three blocks: each request evicts the other's leaf.
		{"evicts", 3, CacheFigures{PromptBlocks: 9, HitBlocks: 4, StoredBlocks: 5, EvictedBlocks: 2}, ApplyFigures{Events: 5, StoredEvents: 3, RemovedEvents: 2, BlockOps: 7}, 3},
	}
	for _, c := range cases {
		rep := replay(t, ReplayConfig{TracePath: path, Workers: 1, CapacityBlocks: c.capacity, Examples: 2})
		c.cache.HitRate = float64(c.cache.HitBlocks) / 9
		if rep.Cache != c.cache {
			t.Errorf("%s: cache = %+v, want %+v", c.name, rep.Cache, c.cache)
		}
		got := ApplyFigures{Events: rep.Apply.Events, StoredEvents: rep.Apply.StoredEvents, RemovedEvents: rep.Apply.RemovedEvents, BlockOps: rep.Apply.BlockOps}
		if got != c.apply || rep.Apply.Errors != 0 {
			t.Errorf("%s: apply counts = %+v (%d errors), want %+v", c.name, got, rep.Apply.Errors, c.apply)
		}
		if rep.Index.MemberBlocks != c.held || rep.Index.DistinctBlocks != c.held || rep.Workers[0].HeldBlocks != c.held ||
			*rep.Index.Reported != (ReportedSizes{DistinctBlocks: c.held, MemberBlocks: c.held}) {
			t.Errorf("%s: index holds %d member / %d distinct blocks, worker row %d; want %d", c.name, rep.Index.MemberBlocks, rep.Index.DistinctBlocks, rep.Workers[0].HeldBlocks, c.held)
		}
		if rep.Match.Queries != 3 || rep.Match.Overlaps != 3 || rep.Overlap.Verified != 3 || rep.Overlap.Mismatches != 0 {
			t.Errorf("%s: %d queries returning %d overlaps, %d verified, %d mismatches; want 3, 3, 3, 0", c.name, rep.Match.Queries, rep.Match.Overlaps, rep.Overlap.Verified, rep.Overlap.Mismatches)
		}
		// The final cache holds [0 1 2] in both cases, so request 1 ([0 1 3])
		// matches 2 blocks when it was evicted and 3 when it fits.
		wantEx := []ExampleQuery{
			{Request: 0, Worker: 0, Blocks: 3, Matches: []ExampleHold{{Worker: 0, Blocks: 3}}},
			{Request: 1, Worker: 0, Blocks: 3, Matches: []ExampleHold{{Worker: 0, Blocks: 3}}},
		}
		if c.name == "evicts" {
			wantEx[1].Matches[0].Blocks = 2
		}
		if !reflect.DeepEqual(rep.Examples, wantEx) {
			t.Errorf("%s: examples = %+v, want %+v", c.name, rep.Examples, wantEx)
		}
	}
}

func TestReplay_BlockSizeAndSchemeScalePromptBlocks(t *testing.T) {
	path := writeTrace(t, tinyTrace)
	for _, c := range []struct {
		cfg    ReplayConfig
		blocks int
	}{
		{ReplayConfig{BlockSize: 128}, 36},                      // split: 4 blocks per id
		{ReplayConfig{BlockSize: 128, Scheme: trace.PerID}, 9},  // one block per id
		{ReplayConfig{Stretch: 2, Duplicate: 3}, 9 * 2 * 3},     // 2× longer, 3 copies
		{ReplayConfig{BlockSize: 16, Duplicate: 2}, 9 * 32 * 2}, // 32 blocks per id
	} {
		c.cfg.TracePath, c.cfg.Workers = path, 2
		rep := replay(t, c.cfg)
		if rep.Trace.PromptBlocks != c.blocks || rep.Overlap.Mismatches != 0 || rep.Apply.Errors != 0 {
			t.Errorf("Replay(%+v): %d prompt blocks, %d mismatches, %d errors; want %d, 0, 0", c.cfg, rep.Trace.PromptBlocks, rep.Overlap.Mismatches, rep.Apply.Errors, c.blocks)
		}
	}
}

func TestReplay_FiguresHoldTogetherOnTheShippedSlice(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "mooncake", "synthetic_head400.jsonl")
	if testing.Short() {
		path = writeTrace(t, tinyTrace)
	}
	rep := replay(t, ReplayConfig{TracePath: path, Workers: 4, CapacityBlocks: 200, Queries: 150, Examples: 3})
	if rep.Benchmark != "radix" || rep.Match.Queries != 150 || len(rep.Workers) != 4 {
		t.Errorf("benchmark %q, %d queries, %d worker rows; want radix, 150, 4", rep.Benchmark, rep.Match.Queries, len(rep.Workers))
	}
	// Figures hold together (their values are timing-dependent, their
	// relations are not).
	if rep.Match.P50us > rep.Match.P99us || rep.Match.P99us > rep.Match.MaxUs {
		t.Errorf("latency p50 %v, p99 %v, max %v out of order", rep.Match.P50us, rep.Match.P99us, rep.Match.MaxUs)
	}
	requests, hits, held := 0, 0, 0
	for _, w := range rep.Workers {
		requests += w.Requests
		hits += w.HitBlocks
		held += w.HeldBlocks
		if w.HeldBlocks > 200 {
			t.Errorf("worker %d holds %d blocks, over its capacity 200", w.Worker, w.HeldBlocks)
		}
	}
	if requests != rep.Trace.Requests || hits != rep.Cache.HitBlocks || held != rep.Index.MemberBlocks {
		t.Errorf("per-worker sums: %d requests, %d hits, %d held; want %d, %d, %d", requests, hits, held, rep.Trace.Requests, rep.Cache.HitBlocks, rep.Index.MemberBlocks)
	}
	for i := 1; i < len(rep.Examples); i++ {
		if len(rep.Examples[i].Matches) > len(rep.Examples[i-1].Matches) {
			t.Errorf("example %d has %d holders, more than example %d's %d: want the most-shared queries first", i, len(rep.Examples[i].Matches), i-1, len(rep.Examples[i-1].Matches))
		}
	}
	if rep.Apply.Events != rep.Apply.StoredEvents+rep.Apply.RemovedEvents || rep.Overlap.Mismatches != 0 {
		t.Errorf("events %d ≠ %d stored + %d removed, or %d mismatches", rep.Apply.Events, rep.Apply.StoredEvents, rep.Apply.RemovedEvents, rep.Overlap.Mismatches)
	}
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"goindex bench radix:", "apply ", "events/s", "match ", "p99", "heap", "hit rate", "0 mismatches", "worker", "example queries", "machine"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// lossyIndex drops every removal: it over-reports what members hold, which
// the replay's check must catch.
type lossyIndex struct{ *radix.Index }

func (x lossyIndex) Apply(ev *kv.Event) error {
	if ev.Kind == kv.Removed {
		return nil
	}
	return x.Index.Apply(ev)
}

func TestReplay_CheckFailsWhenTheIndexDisagreesWithTheEngines(t *testing.T) {
	target := ReplayTarget{Name: "lossy", New: func() kv.Index { return lossyIndex{radix.New(radix.Config{})} }}
	rep, err := Replay(context.Background(), ReplayConfig{TracePath: writeTrace(t, tinyTrace), Workers: 1, CapacityBlocks: 3}, target)
	if err != nil {
		t.Fatalf("Replay(lossy): %v", err)
	}
	if err := rep.Check(); !errors.Is(err, ErrCheck) {
		t.Fatalf("Check of an index that ignores removals = %v, want ErrCheck", err)
	}
	// The final cache is [0 1 2]; the lossy index still credits [0 1 3]
	// with 3 blocks instead of 2.
	if rep.Overlap.Mismatches != 1 || !strings.Contains(rep.Overlap.FirstMismatch, "request 1") {
		t.Errorf("mismatches = %d (%q), want 1 at request 1", rep.Overlap.Mismatches, rep.Overlap.FirstMismatch)
	}
}

func TestReplay_RefusesBadConfigs(t *testing.T) {
	good := writeTrace(t, tinyTrace)
	bad := writeTrace(t, tinyTrace+`{"timestamp": 3, "hash_ids": [1, -2]}`+"\n")
	cases := []struct {
		cfg    ReplayConfig
		config bool   // ErrConfig
		msg    string // in the error
	}{
		{ReplayConfig{Workers: 0}, true, "workers"},
		{ReplayConfig{Workers: MaxReplayWorkers + 1}, true, "workers"},
		{ReplayConfig{Workers: 1, Queries: MaxQueries + 1}, true, "queries"},
		{ReplayConfig{Workers: 1, Queries: -1}, true, "queries"},
		{ReplayConfig{Workers: 1, Examples: -2}, true, "examples"},
		{ReplayConfig{Workers: 1, BlockSize: 100}, true, "block size 100"},
		{ReplayConfig{Workers: 1, CapacityBlocks: -1}, true, "capacity"},
		{ReplayConfig{Workers: 1, Duplicate: -1}, true, "duplication factor"},
		{ReplayConfig{Workers: 1, TracePath: filepath.Join(t.TempDir(), "missing.jsonl")}, false, "missing.jsonl"},
		{ReplayConfig{Workers: 1, TracePath: bad}, false, "line 4"},
	}
	for _, c := range cases {
		if c.cfg.TracePath == "" {
			c.cfg.TracePath = good
		}
		_, err := Replay(context.Background(), c.cfg, radixTarget)
		if err == nil || errors.Is(err, ErrConfig) != c.config || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Replay(%+v) = %v, want an error mentioning %q (ErrConfig: %v)", c.cfg, err, c.msg, c.config)
		}
	}
}
