package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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

// benchJSON runs `goindex bench radix --json args...` and decodes its one
// JSON object.
func benchJSON(t *testing.T, args ...string) (*replayReport, map[string]any) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := runBenchRadix(context.Background(), append(args, "--json"), &stdout, &stderr); err != nil {
		t.Fatalf("bench radix %q: %v (stderr %q)", args, err, stderr.String())
	}
	return decodeReport(t, stdout.Bytes())
}

func decodeReport(t *testing.T, out []byte) (*replayReport, map[string]any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	var shape map[string]any
	if err := dec.Decode(&shape); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if err := dec.Decode(&shape); err != io.EOF {
		t.Fatalf("output %q holds more than one JSON object (%v)", out, err)
	}
	var rep replayReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("decode %q into replayReport: %v", out, err)
	}
	return &rep, shape
}

func TestBenchRadix_TinyTraceFiguresAreExact(t *testing.T) {
	path := writeTrace(t, tinyTrace)
	cases := []struct {
		name     string
		capacity string
		cache    cacheFigures
		apply    applyFigures // counts only
		held     int
	}{
		// Room for all four distinct blocks: [0 1 3] stores one block below
		// the shared two, the repeat of [0 1 2] is a full hit.
		{"fits", "4", cacheFigures{PromptBlocks: 9, HitBlocks: 5, StoredBlocks: 4}, applyFigures{Events: 2, StoredEvents: 2, BlockOps: 4}, 4},
		// Three blocks: each request evicts the other's leaf.
		{"evicts", "3", cacheFigures{PromptBlocks: 9, HitBlocks: 4, StoredBlocks: 5, EvictedBlocks: 2}, applyFigures{Events: 5, StoredEvents: 3, RemovedEvents: 2, BlockOps: 7}, 3},
	}
	for _, c := range cases {
		rep, _ := benchJSON(t, "--trace", path, "--workers", "1", "--capacity-blocks", c.capacity, "--examples", "2")
		c.cache.HitRate = float64(c.cache.HitBlocks) / 9
		if rep.Cache != c.cache {
			t.Errorf("%s: cache = %+v, want %+v", c.name, rep.Cache, c.cache)
		}
		got := applyFigures{Events: rep.Apply.Events, StoredEvents: rep.Apply.StoredEvents, RemovedEvents: rep.Apply.RemovedEvents, BlockOps: rep.Apply.BlockOps}
		if got != c.apply || rep.Apply.Errors != 0 {
			t.Errorf("%s: apply counts = %+v (%d errors), want %+v", c.name, got, rep.Apply.Errors, c.apply)
		}
		if rep.Index.MemberBlocks != c.held || rep.Index.DistinctBlocks != c.held || rep.Workers[0].HeldBlocks != c.held ||
			*rep.Index.Reported != (reportedSizes{DistinctBlocks: c.held, MemberBlocks: c.held}) {
			t.Errorf("%s: index holds %d member / %d distinct blocks, worker row %d; want %d", c.name, rep.Index.MemberBlocks, rep.Index.DistinctBlocks, rep.Workers[0].HeldBlocks, c.held)
		}
		if rep.Match.Queries != 3 || rep.Match.Overlaps != 3 || rep.Overlap.Verified != 3 || rep.Overlap.Mismatches != 0 {
			t.Errorf("%s: %d queries returning %d overlaps, %d verified, %d mismatches; want 3, 3, 3, 0", c.name, rep.Match.Queries, rep.Match.Overlaps, rep.Overlap.Verified, rep.Overlap.Mismatches)
		}
		// The final cache holds [0 1 2] in both cases, so request 1 ([0 1 3])
		// matches 2 blocks when it was evicted and 3 when it fits.
		wantEx := []exampleQuery{
			{Request: 0, Worker: 0, Blocks: 3, Matches: []exampleHold{{Worker: 0, Blocks: 3}}},
			{Request: 1, Worker: 0, Blocks: 3, Matches: []exampleHold{{Worker: 0, Blocks: 3}}},
		}
		if c.name == "evicts" {
			wantEx[1].Matches[0].Blocks = 2
		}
		if !reflect.DeepEqual(rep.Examples, wantEx) {
			t.Errorf("%s: examples = %+v, want %+v", c.name, rep.Examples, wantEx)
		}
	}
}

func TestBenchRadix_BlockSizeAndSchemeScalePromptBlocks(t *testing.T) {
	path := writeTrace(t, tinyTrace)
	for _, c := range []struct {
		args   []string
		blocks int
	}{
		{[]string{"--block-size", "128"}, 36},                            // split: 4 blocks per id
		{[]string{"--block-size", "128", "--scheme", "per-id"}, 9},       // one block per id
		{[]string{"--stretch", "2", "--duplicate", "3"}, 9 * 2 * 3},      // 2× longer, 3 copies
		{[]string{"--block-size", "16", "--duplicate", "2"}, 9 * 32 * 2}, // 32 blocks per id
	} {
		rep, _ := benchJSON(t, append([]string{"--trace", path, "--workers", "2"}, c.args...)...)
		if rep.Trace.PromptBlocks != c.blocks || rep.Overlap.Mismatches != 0 || rep.Apply.Errors != 0 {
			t.Errorf("bench radix %q: %d prompt blocks, %d mismatches, %d errors; want %d, 0, 0", c.args, rep.Trace.PromptBlocks, rep.Overlap.Mismatches, rep.Apply.Errors, c.blocks)
		}
	}
}

func TestBenchRadix_JSONShape(t *testing.T) {
	args := []string{"--workers", "4", "--capacity-blocks", "200", "--queries", "150"}
	if testing.Short() {
		args = append(args, "--trace", writeTrace(t, tinyTrace))
	}
	// Without --trace: the shipped slice, found from the package directory up.
	rep, shape := benchJSON(t, args...)
	for _, key := range []string{"benchmark", "trace", "setup", "apply", "match", "index", "cache", "overlap", "per_worker", "examples", "machine"} {
		if _, ok := shape[key]; !ok {
			t.Errorf("JSON output lacks %q: %v", key, shape)
		}
	}
	for section, keys := range map[string][]string{
		"apply": {"events", "block_ops", "seconds", "events_per_sec", "block_ops_per_sec", "errors"},
		"match": {"queries", "p50_us", "p99_us", "mean_us"},
		"index": {"member_blocks", "distinct_blocks", "heap_bytes", "heap_bytes_per_member_block", "heap_bytes_per_block"},
	} {
		m, _ := shape[section].(map[string]any)
		for _, k := range keys {
			if _, ok := m[k].(float64); !ok {
				t.Errorf("JSON %s.%s = %v, want a number", section, k, m[k])
			}
		}
	}
	if !testing.Short() && !strings.HasSuffix(rep.Trace.Path, filepath.FromSlash(defaultBenchTrace)) {
		t.Errorf("default trace = %q, want …/%s", rep.Trace.Path, defaultBenchTrace)
	}
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
}

func TestBenchRadix_HumanReport(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runBenchRadix(context.Background(), []string{"--trace", writeTrace(t, tinyTrace), "--workers", "2"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench radix: %v", err)
	}
	for _, want := range []string{"goindex bench radix:", "apply ", "events/s", "match ", "p99", "heap", "hit rate", "0 mismatches", "worker", "example queries", "request 0 (3-block prompt"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}

// lossyIndex drops every removal: it over-reports what members hold, which
// the benchmark's check must catch.
type lossyIndex struct{ *radix.Index }

func (x lossyIndex) Apply(ev *kv.Event) error {
	if ev.Kind == kv.Removed {
		return nil
	}
	return x.Index.Apply(ev)
}

func TestReplayBench_FailsWhenTheIndexDisagreesWithTheEngines(t *testing.T) {
	var stdout, stderr bytes.Buffer
	target := replayTarget{name: "lossy", newIndex: func() kv.Index { return lossyIndex{radix.New(radix.Config{})} }}
	err := runReplayBench(context.Background(), target,
		[]string{"--trace", writeTrace(t, tinyTrace), "--workers", "1", "--capacity-blocks", "3", "--json"}, &stdout, &stderr)
	if !errors.Is(err, errBenchCheck) {
		t.Fatalf("bench with an index that ignores removals = %v, want errBenchCheck", err)
	}
	rep, _ := decodeReport(t, stdout.Bytes())
	// The final cache is [0 1 2]; the lossy index still credits [0 1 3]
	// with 3 blocks instead of 2.
	if rep.Overlap.Mismatches != 1 || !strings.Contains(rep.Overlap.FirstMismatch, "request 1") {
		t.Errorf("mismatches = %d (%q), want 1 at request 1", rep.Overlap.Mismatches, rep.Overlap.FirstMismatch)
	}
}

func TestBenchRadix_RejectsBadInput(t *testing.T) {
	good := writeTrace(t, tinyTrace)
	bad := writeTrace(t, tinyTrace+`{"timestamp": 3, "hash_ids": [1, -2]}`+"\n")
	cases := []struct {
		args  []string
		usage bool   // a usage error (exit status 2)
		msg   string // in the error
	}{
		{[]string{"--workers", "0"}, true, "--workers"},
		{[]string{"--workers", "100000"}, true, "--workers"},
		{[]string{"--queries", "100000000"}, true, "--queries"},
		{[]string{"--examples", "-2"}, true, "--examples"},
		{[]string{"--block-size", "100"}, true, "block size 100"},
		{[]string{"--scheme", "upstream"}, true, "--scheme"},
		{[]string{"--capacity-blocks", "0"}, true, "--capacity-blocks"},
		{[]string{"--duplicate", "0"}, true, "duplication factor 0"},
		{[]string{"--queries", "-1"}, true, "--queries"},
		{[]string{"--bogus"}, true, "bogus"},
		{[]string{"--trace", filepath.Join(t.TempDir(), "missing.jsonl")}, false, "missing.jsonl"},
		{[]string{"--trace", bad}, false, "line 4"},
	}
	for _, c := range cases {
		args := c.args
		if args[0] != "--trace" {
			args = append([]string{"--trace", good}, args...)
		}
		err := runBenchRadix(context.Background(), args, io.Discard, io.Discard)
		if err == nil || errors.Is(err, errUsage) != c.usage || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("bench radix %q = %v, want an error mentioning %q (usage error: %v)", args, err, c.msg, c.usage)
		}
	}
}
