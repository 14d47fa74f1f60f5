package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

func sliceTrace(name string) string {
	return filepath.Join("..", "..", "testdata", "mooncake", name)
}

func TestCKF_SmallRunTimesEveryStructureAndPassesItsChecks(t *testing.T) {
	cfg := CKFConfig{TracePath: sliceTrace("conversation_head400.jsonl"), Lanes: []int{2, 8}, Blocks: []int{4096}, Queries: 300, RadixMaxBlocks: 16 << 10, Seed: 42}
	rep, err := CKF(context.Background(), cfg)
	if err != nil {
		t.Fatalf("CKF(%+v): %v", cfg, err)
	}
	if err := rep.Check(); err != nil {
		t.Errorf("CKF(%+v).Check: %v", cfg, err)
	}
	if len(rep.Cells) != 2 || !rep.Interleaved || rep.Machine.CPUs < 1 {
		t.Fatalf("CKF: %d cells, interleaved %v, machine %+v; want 2 interleaved cells and the machine", len(rep.Cells), rep.Interleaved, rep.Machine)
	}
	for _, c := range rep.Cells {
		k := c.Checks
		if k.Underestimates != 0 || k.ChunkedVsLinear != 0 || k.RadixMismatches != 0 || k.LocalsVsChunked != 0 || k.SmallVsChunked != 0 || k.AFirstVsChunked != 0 {
			t.Errorf("lanes=%d: checks %+v, want no underestimates or mismatches", c.Lanes, k)
		}
		p := &c.Probe
		if k.Results != c.Lanes*300 || p.Chunked.Queries != 300 || p.PerLane.Queries != 300 || p.Chain.Queries != 300 {
			t.Errorf("lanes=%d: %d results, %d/%d timed queries; want %d and 300", c.Lanes, k.Results, p.Chunked.Queries, p.PerLane.Queries, c.Lanes*300)
		}
		// Every replica search answers the same depths: their timed sums agree.
		if p.ChunkedLocals.Overlaps != p.Chunked.Overlaps || p.AFirst.Overlaps != p.Chunked.Overlaps || p.AFirst.Queries != 300 || p.ChunkedSmallPages == nil && hasSmallPages() || p.ChunkedSmallPages != nil && p.ChunkedSmallPages.Overlaps != p.Chunked.Overlaps {
			t.Errorf("lanes=%d: chunked %d, from locals %d, A first %+v, small pages %+v: want one sum of depths", c.Lanes, p.Chunked.Overlaps, p.ChunkedLocals.Overlaps, p.AFirst, p.ChunkedSmallPages)
		}
		if c.HitLanes <= 0 || p.Chunked.Overlaps == 0 {
			t.Errorf("lanes=%d: %.2f hit lanes per query, sink %d; want real hits", c.Lanes, c.HitLanes, p.Chunked.Overlaps)
		}
		if c.Load < 0.4 || c.Load > 0.8 || c.Ingest.BlockOps < c.Lanes*4096 || c.Ingest.ProducerOpsSec <= 0 {
			t.Errorf("lanes=%d: load %.3f, %d block ops, %v producer ops/s; want a full sized lane of 4096 blocks", c.Lanes, c.Load, c.Ingest.BlockOps, c.Ingest.ProducerOpsSec)
		}
		// The table is 8 bytes per bucket per lane (lanes padded to 8) plus
		// its header line.
		if want := 8 * float64(c.Buckets) * float64((c.Lanes+7)/8*8) / float64(c.Lanes*4096); c.Memory.ReplicaBytesPerBlock < want || c.Memory.ReplicaBytesPerBlock > want*1.01 {
			t.Errorf("lanes=%d: replica %.3f B/block, want %.3f", c.Lanes, c.Memory.ReplicaBytesPerBlock, want)
		}
		// Both cells' lanes are one lane group: 2 lines a position.
		if s := c.Shape; s.TestedPositions <= 0 || s.TestedPositions > s.FetchedPositions || s.FetchedPositions > c.QueryBlocks ||
			math.Abs(s.FetchedLines-2*s.FetchedPositions) > 1e-9 || s.TestedLines < 2*s.TestedPositions || s.LeadLines <= 0 || s.LeadLines > s.FetchedLines ||
			s.Pages < 1 || s.Pages > 4*s.FetchedPositions || s.PagesP99 < 1 || s.QueryBlocksP50 > s.QueryBlocksP99 || s.HitDepth <= 0 ||
			s.BHitShare < 0 || s.BHitShare > 0.5 || s.BPositions > s.TestedPositions {
			t.Errorf("lanes=%d: shape %+v (%.1f query blocks); want tested ≤ fetched ≤ query blocks, 2 lines a position, 1–4 pages a fetched position", c.Lanes, s, c.QueryBlocks)
		}
		if r := c.Ratios; r.AFirstP99 != p.Chunked.P99us/p.AFirst.P99us || r.BisectP50 != p.Chunked.P50us/p.Bisect.P50us || r.PerLaneP99 != p.Chunked.P99us/p.PerLane.P99us {
			t.Errorf("lanes=%d: ratios %+v do not follow the latencies %+v", c.Lanes, r, p)
		}
	}
	measured, skipped := rep.Cells[0], rep.Cells[1]
	if measured.Probe.Radix == nil || measured.Probe.RadixChurned == nil || measured.Ratios.RadixP50 != measured.Probe.Chunked.P50us/measured.Probe.Radix.P50us ||
		measured.Ratios.ChurnedP99 != measured.Probe.Chunked.P99us/measured.Probe.RadixChurned.P99us || measured.Memory.RadixBytesPerBlock <= 0 {
		t.Errorf("cell 2×4K: radix %+v, churned %+v, ratios %+v, %.1f B/block; want both measured with their ratios", measured.Probe.Radix, measured.Probe.RadixChurned, measured.Ratios, measured.Memory.RadixBytesPerBlock)
	}
	if skipped.Probe.Radix != nil || skipped.Probe.RadixChurned != nil || skipped.RadixSkipped == "" || skipped.Ratios.RadixP50 != 0 {
		t.Errorf("cell 8×4K: radix %+v, skipped %q; want skipped over the radix limit", skipped.Probe.Radix, skipped.RadixSkipped)
	}
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"probe latency", "replica chunked", "radix churned", "ratios from the same run", "what the chunked search reads", "ingest", "producer", "checks against the engines", "radix skipped", "machine"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("CKF report lacks %q:\n%s", want, out.String())
		}
	}
}

// hasSmallPages reports whether this platform can map a 4 KiB-page table.
func hasSmallPages() bool {
	_, free, err := mapWords(8, false)
	if err == nil {
		free()
	}
	return err == nil
}

func TestCKF_SequentialAndSkipsLeaveTheirColumnsOut(t *testing.T) {
	cfg := CKFConfig{TracePath: sliceTrace("synthetic_head400.jsonl"), Lanes: []int{3}, Blocks: []int{2048}, Queries: 100,
		RadixMaxBlocks: 1 << 20, SkipChurnedRadix: true, SkipSmallPages: true, Sequential: true}
	rep, err := CKF(context.Background(), cfg)
	if err != nil {
		t.Fatalf("CKF(%+v): %v", cfg, err)
	}
	if err := rep.Check(); err != nil {
		t.Errorf("CKF(%+v).Check: %v", cfg, err)
	}
	c := rep.Cells[0]
	if rep.Interleaved || c.Probe.Radix == nil || c.Probe.RadixChurned != nil || c.ChurnedSkipped == "" || c.Probe.ChunkedSmallPages != nil || c.Ratios.SmallPagesP50 != 0 {
		t.Errorf("CKF(%+v): interleaved %v, radix %v, churned %v (%q), small pages %v; want sequential, radix only", cfg, rep.Interleaved,
			c.Probe.Radix != nil, c.Probe.RadixChurned != nil, c.ChurnedSkipped, c.Probe.ChunkedSmallPages != nil)
	}
}

func TestCKF_RefusesBadConfigs(t *testing.T) {
	good := CKFConfig{TracePath: sliceTrace("synthetic_head400.jsonl"), Lanes: []int{2}, Blocks: []int{1024}, Queries: 10}
	cases := map[string]func(c *CKFConfig){
		"no lanes":       func(c *CKFConfig) { c.Lanes = nil },
		"0 lanes":        func(c *CKFConfig) { c.Lanes = []int{0} },
		"65 lanes":       func(c *CKFConfig) { c.Lanes = []int{65} },
		"huge blocks":    func(c *CKFConfig) { c.Blocks = []int{MaxCKFBlocks + 1} },
		"0 queries":      func(c *CKFConfig) { c.Queries = 0 },
		"block size 100": func(c *CKFConfig) { c.BlockSize = 100 },
		"too many cells": func(c *CKFConfig) { c.Lanes, c.Blocks = []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, []int{1024, 2048} },
		"radix max -2":   func(c *CKFConfig) { c.RadixMaxBlocks = -2 },
	}
	for name, mutate := range cases {
		cfg := good
		mutate(&cfg)
		if _, err := CKF(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("CKF(%s) = %v, want ErrConfig", name, err)
		}
	}
	cfg := good
	cfg.TracePath = filepath.Join(t.TempDir(), "missing.jsonl")
	if _, err := CKF(context.Background(), cfg); err == nil || errors.Is(err, ErrConfig) {
		t.Errorf("CKF(missing trace) = %v, want a file error", err)
	}
}

func TestChurnRadix_SameAnswersAsTheTreeBuiltInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var events []kv.Event
	ext := uint64(0)
	for range 300 {
		m := kv.Member{Worker: uint64(rng.IntN(4))}
		ev := kv.Event{Member: m, Kind: kv.Stored}
		for i := range 1 + rng.IntN(6) {
			ext++
			ev.Blocks = append(ev.Blocks, kv.Block{External: ext, Local: uint64(rng.IntN(3) + 10*i)})
		}
		events = append(events, ev)
	}
	built, churned := radix.New(radix.Config{}), radix.New(radix.Config{})
	if err := churnRadix(churned, 500, 9); err != nil {
		t.Fatalf("churnRadix: %v", err)
	}
	for i := range events {
		// The same event may be rejected by both (a conflicting store);
		// what matters is that both decide alike.
		e1, e2 := built.Apply(&events[i]), churned.Apply(&events[i])
		if (e1 == nil) != (e2 == nil) {
			t.Fatalf("event %d: built %v, churned %v", i, e1, e2)
		}
	}
	if _, ok := churned.TreeSize(churnMember); ok {
		t.Errorf("churnRadix left its member known")
	}
	if b, c := built.Stats(), churned.Stats(); b.Nodes != c.Nodes || b.Blocks != c.Blocks {
		t.Errorf("stats: built %+v, churned %+v; want the same nodes and blocks", b, c)
	}
	var a, b []kv.Overlap
	for range 500 {
		q := make([]uint64, 1+rng.IntN(6))
		for i := range q {
			q[i] = uint64(rng.IntN(3) + 10*i)
		}
		a, b = built.Match(a[:0], q), churned.Match(b[:0], q)
		slices.SortFunc(a, compareOverlap)
		slices.SortFunc(b, compareOverlap)
		if !slices.Equal(a, b) {
			t.Errorf("Match(%v): built %v, churned %v", q, a, b)
		}
	}
}

func TestParseCounts_Suffixes(t *testing.T) {
	got, err := ParseCounts("1M, 10M,4K,7", 1, 1<<30)
	if want := []int{1 << 20, 10_000_000, 4096, 7}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ParseCounts(1M,10M,4K,7) = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"x", "0", "2G", "-1", "100M"} {
		if _, err := ParseCounts(bad, 1, 64<<20); err == nil {
			t.Errorf("ParseCounts(%q) accepted it", bad)
		}
	}
}
