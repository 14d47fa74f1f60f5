package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchCKF_JSONShapeAndChecks(t *testing.T) {
	slice := filepath.Join("..", "..", "..", "testdata", "mooncake", "conversation_head400.jsonl")
	var stdout, stderr bytes.Buffer
	args := []string{"--trace", slice, "--lanes", "2,8", "--blocks", "4K", "--queries", "300", "--radix-max-blocks", "16K", "--json"}
	if err := runBenchCKF(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench ckf %q: %v (stderr %q)", args, err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	var shape map[string]any
	if err := dec.Decode(&shape); err != nil || dec.More() {
		t.Fatalf("bench ckf --json: decode = %v, more = %v; want exactly one object", err, dec.More())
	}
	var rep ckfReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode into ckfReport: %v", err)
	}
	cells, _ := shape["cells"].([]any)
	if len(cells) != 2 || len(rep.Cells) != 2 {
		t.Fatalf("bench ckf: %d cells, want 2 (lanes 2 and 8)", len(cells))
	}
	for _, k := range []string{"probe", "ratios", "checks", "ingest", "memory", "load"} {
		if _, ok := cells[0].(map[string]any)[k]; !ok {
			t.Errorf("cell lacks key %q", k)
		}
	}
	for _, c := range rep.Cells {
		if c.Checks.Underestimates != 0 || c.Checks.ChunkedVsLinear != 0 || c.Checks.RadixMismatches != 0 || c.Checks.LocalsVsChunked != 0 {
			t.Errorf("lanes=%d: checks %+v, want no underestimates or mismatches", c.Lanes, c.Checks)
		}
		if c.Checks.Results != c.Lanes*300 || c.Probe.Chunked.Queries != 300 || c.Probe.PerLane.Queries != 300 {
			t.Errorf("lanes=%d: %d results, %d/%d timed queries; want %d and 300", c.Lanes, c.Checks.Results, c.Probe.Chunked.Queries, c.Probe.PerLane.Queries, c.Lanes*300)
		}
		if c.Probe.ChunkedLocals.Queries != 300 || c.Probe.ChunkedLocals.Overlaps != c.Probe.Chunked.Overlaps {
			t.Errorf("lanes=%d: chunked from locals timed %d queries summing to %d blocks; want 300 and chunked's %d", c.Lanes, c.Probe.ChunkedLocals.Queries, c.Probe.ChunkedLocals.Overlaps, c.Probe.Chunked.Overlaps)
		}
		if c.HitLanes <= 0 || c.Probe.Chunked.Overlaps == 0 {
			t.Errorf("lanes=%d: %.2f hit lanes per query, sink %d; want real hits", c.Lanes, c.HitLanes, c.Probe.Chunked.Overlaps)
		}
		if c.Load < 0.4 || c.Load > 0.8 || c.Ingest.BlockOps < c.Lanes*4096 || c.Ingest.ProducerOpsSec <= 0 {
			t.Errorf("lanes=%d: load %.3f, %d block ops, %v producer ops/s; want a full sized lane of 4096 blocks", c.Lanes, c.Load, c.Ingest.BlockOps, c.Ingest.ProducerOpsSec)
		}
		// Memory per tracked block: the table is 8 bytes per bucket per
		// lane (lanes padded to 8), the per-lane filter one byte per slot.
		if want := 8 * float64(c.Buckets) * float64((c.Lanes+7)/8*8) / float64(c.Lanes*4096); c.Memory.ReplicaBytesPerBlock < want || c.Memory.ReplicaBytesPerBlock > want*1.01 {
			t.Errorf("lanes=%d: replica %.3f B/block, want %.3f", c.Lanes, c.Memory.ReplicaBytesPerBlock, want)
		}
	}
	if rep.Cells[0].Probe.Radix == nil || rep.Cells[1].Probe.Radix != nil || rep.Cells[1].Skipped == "" {
		t.Errorf("radix: cell 2×4K measured %v, cell 8×4K skipped %q; want measured, then skipped over --radix-max-blocks",
			rep.Cells[0].Probe.Radix != nil, rep.Cells[1].Skipped)
	}
}

func TestBenchCKF_HumanTablesAndFlagErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	slice := filepath.Join("..", "..", "..", "testdata", "mooncake", "synthetic_head400.jsonl")
	if err := runBench(context.Background(), []string{"ckf", "--trace", slice, "--lanes", "3", "--blocks", "2K", "--queries", "100"}, &stdout, &stderr); err != nil {
		t.Fatalf("bench ckf: %v", err)
	}
	for _, want := range []string{"probe latency", "replica chunked", "ingest", "producer", "checks against the engines"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("bench ckf report lacks %q:\n%s", want, stdout.String())
		}
	}
	bad := [][]string{
		{"--lanes", "0"},
		{"--lanes", "65"},
		{"--blocks", "x"},
		{"--blocks", "100M"},
		{"--queries", "0"},
		{"--block-size", "100"},
		{"--radix-max-blocks", "1,2"},
		{"--lanes", "1,2,3,4,5,6,7,8,9", "--blocks", "1K,2K"},
		{"extra"},
	}
	for _, args := range bad {
		err := runBenchCKF(context.Background(), args, &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("bench ckf %q = %v, want a usage error", args, err)
		}
	}
	stderr.Reset()
	if err := runBenchCKF(context.Background(), []string{"--help"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("bench ckf --help = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: goindex bench ckf", "--radix-max-blocks", "seiflotfy/cuckoofilter", "AppendMooncakeLocal"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("bench ckf --help lacks %q", want)
		}
	}
}

func TestParseCounts_Suffixes(t *testing.T) {
	got, err := parseCounts("1M, 10M,4K,7", 1, 1<<30)
	if want := []int{1 << 20, 10_000_000, 4096, 7}; err != nil || len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("parseCounts(1M,10M,4K,7) = %v, %v; want %v", got, err, want)
	}
}
