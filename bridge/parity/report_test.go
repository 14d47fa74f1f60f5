package parity

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckfindex"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
)

// The report's sweep is the tests' sweep with the totals pooled over the
// loads, and its text and verdict follow from them.
func TestReport_SweepPoolsTheLoads(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "mooncake", "synthetic_head400.jsonl")
	newRun := func() (*Study, *Report, [][]uint64) {
		s := newStudy(t, Config{Lanes: 4, BlocksPerLane: 4096, Seed: 3})
		rep := &Report{Setup: Setup{Lanes: 4, BlocksPerLane: 4096, Buckets: s.Buckets(), Search: "chunked"}}
		base, err := rep.ReplayTraceFile(s, path, TraceConfig{Workers: 4})
		if err != nil {
			t.Fatalf("ReplayTraceFile(%s): %v", path, err)
		}
		return s, rep, base
	}
	s, rep, base := newRun()
	qs := Queries{Base: base, Count: 300, Seed: 5}
	if err := rep.Sweep(context.Background(), s, qs, []float64{0.5, 0.8}); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	ref, _, refBase := newRun()
	want := sweep(t, ref, Queries{Base: refBase, Count: 300, Seed: 5}, 0.5, 0.8)
	if !reflect.DeepEqual(rep.Loads, want) {
		t.Errorf("Sweep's loads differ from Fill and Measure by hand:\n%+v\n%+v", rep.Loads, want)
	}
	if rep.Source.Kind != "trace" || rep.Source.Requests != 400 || rep.Source.BaseQueries != len(base) || rep.Setup.Workers != 4 {
		t.Errorf("ReplayTraceFile source %+v, setup %+v; want 400 requests of a trace over 4 workers", rep.Source, rep.Setup)
	}
	if rep.Queries != 600 || rep.Underestimates != 0 || rep.Failed() || rep.Apply != s.Counts() {
		t.Errorf("Sweep totals: %d queries, %d underestimates, Failed %v; want 600, 0, false", rep.Queries, rep.Underestimates, rep.Failed())
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	for _, line := range []string{"goindex parity: trace " + path + ": 400 requests over 4 workers", "  50%   50.0%", "  80%   80.0%", "\ntotal    600 queries: 0 underestimates"} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("WriteText lacks %q:\n%s", line, text.String())
		}
	}

	rep.Loads[1].Underestimates = 2
	if !rep.Failed() {
		t.Errorf("Failed() = false with a load of 2 underestimates")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := rep.Sweep(ctx, s, qs, []float64{0.9}); !errors.Is(err, context.Canceled) {
		t.Errorf("Sweep with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestReport_ReplayLogFileAndMissingFiles(t *testing.T) {
	x, err := ckfindex.New(ckfindex.Config{Lanes: 2, ExpectedBlocksPerLane: 1024})
	if err != nil {
		t.Fatal(err)
	}
	s := newStudy(t, Config{Lanes: 2, BlocksPerLane: 1024, CKF: x})
	log := filepath.Join(t.TempDir(), "events.jsonl")
	var lines []byte
	for _, ev := range []dynamo.RouterEvent{
		{WorkerID: 1, Event: dynamo.CacheEvent{EventID: 1, Kind: kv.Stored, Stored: dynamo.StoreData{Blocks: []dynamo.StoredBlock{{BlockHash: 5, TokensHash: 50}}}}},
		{WorkerID: 1, StorageTier: dynamo.TierHostPinned, Event: dynamo.CacheEvent{EventID: 2, Kind: kv.Removed, Removed: []uint64{5}}},
	} {
		if lines, err = dynamo.AppendJSON(lines, &ev); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, '\n')
	}
	if err := os.WriteFile(log, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	var rep Report
	base, err := rep.ReplayLogFile(s, log, 8)
	if err != nil || len(base) != 1 || rep.Source != (Source{Kind: "events", Path: log, SkippedTier: 1, BaseQueries: 1}) {
		t.Errorf("ReplayLogFile = %v, %v, source %+v; want one base query and one skipped event", base, err, rep.Source)
	}
	if _, err := rep.ReplayLogFile(s, log+".missing", 8); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReplayLogFile(missing) = %v, want os.ErrNotExist", err)
	}
	if _, err := rep.ReplayTraceFile(s, log+".missing", TraceConfig{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReplayTraceFile(missing) = %v, want os.ErrNotExist", err)
	}
}

func TestParseLoadsAndSearch(t *testing.T) {
	if got, err := ParseLoads("0.9, 0.5,0.9,0.8"); err != nil || !reflect.DeepEqual(got, []float64{0.5, 0.8, 0.9}) {
		t.Errorf("ParseLoads(0.9, 0.5,0.9,0.8) = %v, %v; want [0.5 0.8 0.9]", got, err)
	}
	for _, bad := range []string{"", "x", "0", "1", "-0.1", strings.Repeat("0.5,", MaxLoads) + "0.5"} {
		if got, err := ParseLoads(bad); err == nil {
			t.Errorf("ParseLoads(%q) = %v, want an error", bad, got)
		}
	}
	for _, m := range []replica.Mode{replica.Chunked, replica.Bisect, replica.Linear} {
		if got, err := ParseSearch(m.String()); err != nil || got != m {
			t.Errorf("ParseSearch(%s) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseSearch("binary"); err == nil {
		t.Errorf("ParseSearch(binary) = nil error")
	}
}
