package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goindex/goindex/bridge/bench"
)

func TestBenchCKF_FlagsReachTheRunAndItsJSON(t *testing.T) {
	slice := filepath.Join("..", "..", "..", "testdata", "mooncake", "conversation_head400.jsonl")
	var stdout, stderr bytes.Buffer
	prof := filepath.Join(t.TempDir(), "ckf.prof")
	args := []string{"--trace", slice, "--lanes", "2,8", "--blocks", "4K", "--queries", "300", "--radix-max-blocks", "16K",
		"--radix-churned=false", "--small-pages=false", "--interleave=false", "--json", "--cpuprofile", prof}
	if err := runBenchCKF(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench ckf %q: %v (stderr %q)", args, err, stderr.String())
	}
	if b, err := os.ReadFile(prof); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("bench ckf --cpuprofile: %d bytes (%v), want a gzipped pprof profile", len(b), err)
	}
	var rep bench.CKFReport
	shape := decodeOne(t, stdout.Bytes(), &rep)
	if _, ok := shape["machine"]; !ok || len(rep.Cells) != 2 || rep.Interleaved {
		t.Fatalf("bench ckf %q: %d cells, interleaved %v, keys %v; want 2 sequential cells and the machine", args, len(rep.Cells), rep.Interleaved, shape)
	}
	for _, c := range rep.Cells {
		if c.Queries != 300 || c.BlocksPerLane != 4096 || c.Probe.RadixChurned != nil || c.Probe.ChunkedSmallPages != nil {
			t.Errorf("lanes=%d: %d queries, %d blocks, churned %v, small pages %v; want 300, 4096, neither", c.Lanes, c.Queries, c.BlocksPerLane, c.Probe.RadixChurned != nil, c.Probe.ChunkedSmallPages != nil)
		}
	}
	if rep.Cells[0].Probe.Radix == nil || rep.Cells[1].Probe.Radix != nil {
		t.Errorf("radix: measured %v at 2×4K, %v at 8×4K; want measured, then skipped over --radix-max-blocks", rep.Cells[0].Probe.Radix != nil, rep.Cells[1].Probe.Radix != nil)
	}
}

func TestBenchCKF_HumanTablesAndFlagErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	slice := filepath.Join("..", "..", "..", "testdata", "mooncake", "synthetic_head400.jsonl")
	if err := runBench(context.Background(), []string{"ckf", "--trace", slice, "--lanes", "3", "--blocks", "2K", "--queries", "100"}, &stdout, &stderr); err != nil {
		t.Fatalf("bench ckf: %v", err)
	}
	for _, want := range []string{"probe latency", "replica chunked", "ratios", "ingest", "checks against the engines", "machine"} {
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
		{"--radix-max-blocks", "lots"},
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
	for _, want := range []string{"Usage: goindex bench ckf", "--radix-max-blocks", "--radix-churned", "--small-pages", "seiflotfy/cuckoofilter", "AppendMooncakeLocal"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("bench ckf --help lacks %q", want)
		}
	}
}
