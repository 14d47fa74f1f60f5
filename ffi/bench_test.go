package main

import (
	"runtime"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/hostindex"
	"github.com/goindex/goindex/goindex/kv"
)

// The workload of tests/c/bench.c, built the same way so that the C
// benchmark (impl=abi) lines up with these: 16 members, 1024 documents of
// 64 blocks sharing a 16-block system prefix; member m holds document d in
// full when d % 16 == m and its first 32 blocks when (d + 1) % 16 == m. A
// probe of one document answers 16 members with 320 blocks in all.
const (
	benchMembers = 16
	benchDocs    = 1024
	benchDepth   = 64
	benchShared  = 16
	benchPartial = 32
	benchBatch   = 64
	benchBlocks  = benchDepth + benchPartial + (benchMembers-2)*benchShared
)

func benchLocal(d, i int) uint64 {
	if i < benchShared {
		return mix64(0x5157<<32 | uint64(i))
	}
	return mix64(uint64(d+1)<<32 | uint64(i))
}

// benchIndex opens a handle holding the workload and returns it with the
// query of every document.
func benchIndex(b *testing.B) (cU64, [][]uint64) {
	h := openT(b, "{}")
	queries := make([][]uint64, benchDocs)
	for d := range queries {
		q := make([]uint64, benchDepth)
		for i := range q {
			q[i] = benchLocal(d, i)
		}
		ext := chainOf(q)
		if goindex_insert(h, cU64(d%benchMembers), 0, 0, nil, u64p(ext), u64p(q), benchDepth) != 0 ||
			goindex_insert(h, cU64((d+1)%benchMembers), 0, 0, nil, u64p(ext), u64p(q), benchPartial) != 0 {
			b.Fatalf("loading document %d: %s", d, lastError(h))
		}
		queries[d] = q
	}
	// Loading allocated; collect now so that no GC cycle runs into the
	// first timed case (impl=radix would pay for the setup otherwise).
	runtime.GC()
	return h, queries
}

func checkBlocks(b *testing.B, n int, blocks func(i int) int) {
	sum := 0
	for i := 0; i < n; i++ {
		sum += blocks(i)
	}
	if n != benchMembers || sum != benchBlocks {
		b.Fatalf("a probe answered %d members and %d blocks, want %d and %d", n, sum, benchMembers, benchBlocks)
	}
}

// BenchmarkProbe is one 64-block probe: impl=radix calls the index in
// process (Match plus the sort the ABI adds), impl=handle runs the export
// as a Go call (guard, handle lookup, checks, Match, the counter, the sort
// while writing the caller's buffer),
// and tests/c/bench.c reports impl=abi through the C boundary.
func BenchmarkProbe(b *testing.B) {
	h, queries := benchIndex(b)
	b.Run("impl=radix/blocks=64", func(b *testing.B) {
		ix := handles.Get(uint64(h)).ix
		dst := make([]kv.Overlap, 0, benchMembers)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			dst = ix.Match(dst[:0], queries[i%benchDocs])
			hostindex.SortMembers(dst)
			checkBlocks(b, len(dst), func(j int) int { return dst[j].Blocks })
		}
	})
	b.Run("impl=handle/blocks=64", func(b *testing.B) {
		out := make([]overlapC, benchMembers)
		var n cSize
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if rc := goindex_probe(h, u64p(queries[i%benchDocs]), benchDepth, &out[0], benchMembers, &n); rc != 0 {
				b.Fatalf("goindex_probe = %d", rc)
			}
			checkBlocks(b, int(n), func(j int) int { return int(out[j].blocks) })
		}
	})
}

// BenchmarkProbeMiss is a probe whose first block no member holds, so
// Match does almost nothing and impl=handle − impl=radix is the layer's own
// cost per call (handle lookup, checks, guard, stack buffer, the probe
// counter, output); impl=counter is the probe counter's atomic add alone.
func BenchmarkProbeMiss(b *testing.B) {
	h, _ := benchIndex(b)
	miss := []uint64{12345}
	b.Run("impl=radix", func(b *testing.B) {
		ix := handles.Get(uint64(h)).ix
		dst := make([]kv.Overlap, 0, benchMembers)
		for b.Loop() {
			dst = ix.Match(dst[:0], miss)
			hostindex.SortMembers(dst)
		}
		if len(dst) != 0 {
			b.Fatalf("the miss matched %d members", len(dst))
		}
	})
	b.Run("impl=handle", func(b *testing.B) {
		out := make([]overlapC, benchMembers)
		n := cSize(1)
		for b.Loop() {
			if rc := goindex_probe(h, u64p(miss), 1, &out[0], benchMembers, &n); rc != 0 {
				b.Fatalf("goindex_probe = %d", rc)
			}
		}
		if n != 0 {
			b.Fatalf("the miss matched %d members", n)
		}
	})
	b.Run("impl=counter", func(b *testing.B) {
		hd := handles.Get(uint64(h))
		for b.Loop() {
			hd.ix.CountProbe()
		}
	})
}

// BenchmarkProbeBatch is 64 probes per op (one goindex_probe_batch call
// for impl=handle); ns/probe is the figure to compare.
func BenchmarkProbeBatch(b *testing.B) {
	h, queries := benchIndex(b)
	flat := slices.Concat(queries...)
	b.Run("impl=radix/blocks=64/batch=64", func(b *testing.B) {
		ix := handles.Get(uint64(h)).ix
		dst := make([]kv.Overlap, 0, benchMembers*benchBatch)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			first := (i * benchBatch) % benchDocs
			dst = dst[:0]
			for q := first; q < first+benchBatch; q++ {
				start := len(dst)
				dst = ix.Match(dst, queries[q])
				hostindex.SortMembers(dst[start:])
				checkBlocks(b, len(dst)-start, func(j int) int { return dst[start+j].Blocks })
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/probe")
	})
	b.Run("impl=handle/blocks=64/batch=64", func(b *testing.B) {
		out := make([]overlapC, benchMembers*benchBatch)
		lens, counts := make([]inSize, benchBatch), make([]cSize, benchBatch)
		for i := range lens {
			lens[i] = benchDepth
		}
		var n cSize
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q := flat[(i*benchBatch)%benchDocs*benchDepth:]
			if rc := goindex_probe_batch(h, u64p(q), &lens[0], benchBatch, &out[0], cSize(len(out)), &counts[0], &n); rc != 0 {
				b.Fatalf("goindex_probe_batch = %d", rc)
			}
			off := 0
			for _, c := range counts {
				checkBlocks(b, int(c), func(j int) int { return int(out[off+j].blocks) })
				off += int(c)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/probe")
	})
}

// BenchmarkTrivialCall is goindex_abi_version as a Go call (impl=go); the
// C benchmark reports impl=abi, the bare cost of one crossing.
func BenchmarkTrivialCall(b *testing.B) {
	b.Run("impl=go", func(b *testing.B) {
		var sink uint32
		for b.Loop() {
			sink += uint32(goindex_abi_version())
		}
		if sink == 0 {
			b.Fatal("goindex_abi_version returned 0")
		}
	})
}

// BenchmarkSortMembers sorts one probe's 16 entries in Match's order:
// impl=insertion is hostindex.SortMembers, impl=slices is slices.SortFunc.
func BenchmarkSortMembers(b *testing.B) {
	h, queries := benchIndex(b)
	ix := handles.Get(uint64(h)).ix
	unsorted := ix.Match(nil, queries[5])
	work := make([]kv.Overlap, len(unsorted))
	for _, c := range []struct {
		name string
		sort func([]kv.Overlap)
	}{
		{"impl=insertion", hostindex.SortMembers},
		{"impl=slices", func(o []kv.Overlap) { slices.SortFunc(o, byMember) }},
	} {
		b.Run(c.name+"/members=16", func(b *testing.B) {
			for b.Loop() {
				copy(work, unsorted)
				c.sort(work)
			}
			if !slices.IsSortedFunc(work, byMember) || len(work) != benchMembers {
				b.Fatalf("%s left %v", c.name, work)
			}
		})
	}
}
