package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goindex/goindex/bridge/parity"
)

// parityJSON runs `goindex parity --json args...` and decodes its one JSON
// object both into the report type and into a generic map (for its shape).
func parityJSON(t *testing.T, args ...string) (*parity.Report, map[string]any) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := runParity(context.Background(), append(args, "--json"), &stdout, &stderr); err != nil {
		t.Fatalf("parity %q: %v (stderr %q)", args, err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	var shape map[string]any
	if err := dec.Decode(&shape); err != nil {
		t.Fatalf("decode %q: %v", stdout.String(), err)
	}
	if dec.More() {
		t.Fatalf("parity --json printed more than one JSON object: %q", stdout.String())
	}
	var rep parity.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode into parityReport: %v", err)
	}
	return &rep, shape
}

func TestParity_JSONShapeAndNoUnderestimates(t *testing.T) {
	slice := filepath.Join("..", "..", "..", "testdata", "mooncake", "synthetic_head400.jsonl")
	rep, shape := parityJSON(t, "--trace", slice, "--lanes", "8", "--workers", "8", "--blocks-per-lane", "4096", "--queries", "800")
	for _, k := range []string{"queries", "underestimates", "wrong_best", "fp_rate", "mean_overcount_blocks", "loads", "source", "setup", "apply"} {
		if _, ok := shape[k]; !ok {
			t.Errorf("parity --json lacks key %q (got %v)", k, keys(shape))
		}
	}
	loads, _ := shape["loads"].([]any)
	if len(loads) != 3 {
		t.Fatalf("parity --json has %d per-load objects, want 3 (default sweep 0.5,0.8,0.9)", len(loads))
	}
	for i, want := range []float64{0.5, 0.8, 0.9} {
		l := loads[i].(map[string]any)
		for _, k := range []string{"queries", "underestimates", "wrong_best", "fp_rate", "mean_overcount_blocks", "depth_error", "best", "probes", "fill"} {
			if _, ok := l[k]; !ok {
				t.Errorf("load %d lacks key %q", i, k)
			}
		}
		if got := rep.Loads[i].Fill.TargetLoad; got != want {
			t.Errorf("load %d target = %v, want %v", i, got, want)
		}
		if got := rep.Loads[i].Fill.MeanLoad; got < want || got > want+0.001 {
			t.Errorf("load %d actual mean load = %v, want %v", i, got, want)
		}
	}
	if rep.Queries != 2400 || rep.Underestimates != 0 || rep.FalseNegatives != 0 || rep.CapacityMisses != 0 {
		t.Errorf("parity totals: %d queries, %d underestimates, %d false negatives, %d capacity misses; want 2400, 0, 0, 0",
			rep.Queries, rep.Underestimates, rep.FalseNegatives, rep.CapacityMisses)
	}
	if rep.Source.Kind != "trace" || rep.Source.Requests != 400 || rep.Apply.Events == 0 {
		t.Errorf("parity source %+v, apply %+v; want the trace's 400 requests and their events", rep.Source, rep.Apply)
	}
}

func TestParity_EventLogAndHumanTable(t *testing.T) {
	log := strings.Join([]string{
		`{"worker_id":1,"event":{"event_id":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":11,"tokens_hash":11},{"block_hash":12,"tokens_hash":12}]}},"dp_rank":0}}`,
		`{"worker_id":2,"event":{"event_id":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":21,"tokens_hash":11}]}},"dp_rank":0}}`,
		`{"worker_id":2,"storage_tier":"disk","event":{"event_id":1,"data":{"removed":{"block_hashes":[21]}},"dp_rank":0}}`,
		``,
	}, "\n")
	p := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(p, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, _ := parityJSON(t, "--events", p, "--lanes", "2", "--blocks-per-lane", "1024", "--load", "0.8", "--queries", "50")
	if rep.Source.Kind != "events" || rep.Source.SkippedTier != 1 || rep.Source.BaseQueries != 2 || rep.Apply.Events != 2 {
		t.Errorf("parity --events: source %+v, apply %+v; want 2 events, 1 skipped, 2 sampled paths", rep.Source, rep.Apply)
	}
	if len(rep.Loads) != 1 || rep.Queries != 50 || rep.Underestimates != 0 {
		t.Errorf("parity --events: %d loads, %d queries, %d underestimates; want 1, 50, 0", len(rep.Loads), rep.Queries, rep.Underestimates)
	}
	var out, stderr bytes.Buffer
	if err := runParity(context.Background(), []string{"--events", p, "--lanes", "2", "--blocks-per-lane", "1024", "--load", "0.8"}, &out, &stderr); err != nil {
		t.Fatalf("parity --events (table): %v", err)
	}
	for _, want := range []string{"goindex parity: event log", "wrong best", "8α/65535", "80%", "depth error", "total"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("parity table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParity_FlagErrorsAndHelp(t *testing.T) {
	bad := [][]string{
		{"--trace", "a", "--events", "b"},
		{"--lanes", "65"},
		{"--lanes", "4", "--workers", "5"},
		{"--loads", "0.5,1.2"},
		{"--loads", "x"},
		{"--load", "0.5", "--loads", "0.8"},
		{"--search", "fast"},
		{"--events", "e.jsonl", "--workers", "4"},
		{"--samples", "10"},
		{"--queries", "-1"},
		{"--blocks-per-lane", "0"},
		{"stray"},
	}
	for _, args := range bad {
		var stdout, stderr bytes.Buffer
		err := runParity(context.Background(), args, &stdout, &stderr)
		if !errors.Is(err, errUsage) || exitCode(err) != 2 {
			t.Errorf("parity %q = %v (exit %d), want a usage error (exit 2)", args, err, exitCode(err))
		}
	}
	var stdout, stderr bytes.Buffer
	if err := runParity(context.Background(), []string{"--help"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parity --help = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: goindex parity", "Source", "--events FILE", "--loads LIST", "Exits 1"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("parity --help lacks %q", want)
		}
	}
	if err := runParity(context.Background(), []string{"--events", filepath.Join(t.TempDir(), "missing")}, &stdout, &stderr); err == nil || errors.Is(err, errUsage) {
		t.Errorf("parity on a missing event log = %v, want a plain (exit 1) error", err)
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
