//go:build goindex_bench

package main

/*
#include "goindex.h"
*/
import "C"

import (
	"unsafe"

	"github.com/goindex/goindex/goindex/hostindex"
	"github.com/goindex/goindex/goindex/kv"
)

// goindex_bench_inprocess exists only in the benchmark build of the library
// (go build -tags goindex_bench; tests/c/run.sh builds it apart from the
// real one when GOINDEX_BENCH_ABI=1, since it would break the real one's
// export list). It runs n in-process Go probes of an exact handle over the
// host's queries (queries[q*depth:][:depth] for q < n): Match plus the sort
// the ABI promises, into one reused buffer as BenchmarkProbe's impl=radix
// does, and checks each answer as tests/c/bench.c checks goindex_probe's
// (wantEntries entries whose depths sum to wantBlocks), so both sides do the
// same work. It returns how many probes passed (0 for a bad handle).
//
// tests/c/bench.c calls it with n = 64 (one crossing per 64 probes: the
// in-process figure the ABI's are held against, in the same rounds, process
// and tree as goindex_probe and goindex_probe_batch, free of the ±15 % that
// a tree's placement in another process's heap makes) and with n = 1 (one
// bare crossing per probe, with nothing of the ABI layer but the guard and
// the handle lookup: the floor any single-probe export stands on).
//
//export goindex_bench_inprocess
func goindex_bench_inprocess(handle C.uint64_t, queries *C.goindex_in_u64, n, depth, wantEntries, wantBlocks C.size_t) (passed C.size_t) {
	return benchProbes(handle, hostindex.Exact, queries, n, depth, func(int) (C.size_t, C.size_t) { return wantEntries, wantBlocks })
}

// goindex_bench_inprocess_global is goindex_bench_inprocess for a global
// handle (tests/c/bench.c's global mode: 13 DC lanes of an attached replica
// file): each probe is the one goindex_probe runs in global mode (acquire
// the view, search every lane, one entry per lane with a positive depth)
// plus the sort; query q's entries must number wantEntries[q] and their
// depths sum to wantBlocks[q].
//
//export goindex_bench_inprocess_global
func goindex_bench_inprocess_global(handle C.uint64_t, queries *C.goindex_in_u64, n, depth C.size_t,
	wantEntries, wantBlocks *C.size_t) (passed C.size_t) {
	if wantEntries == nil || wantBlocks == nil {
		return 0
	}
	entries := unsafe.Slice((*C.size_t)(unsafe.Pointer(wantEntries)), int(n))
	blocks := unsafe.Slice((*C.size_t)(unsafe.Pointer(wantBlocks)), int(n))
	return benchProbes(handle, hostindex.Global, queries, n, depth, func(q int) (C.size_t, C.size_t) { return entries[q], blocks[q] })
}

// benchProbes runs the n probes of a handle in mode and counts those whose
// answer is want(q); 0 for a bad handle, a handle of another mode or a
// panic.
func benchProbes(handle C.uint64_t, mode hostindex.Mode, queries *C.goindex_in_u64, n, depth C.size_t,
	want func(q int) (entries, blocks C.size_t)) (passed C.size_t) {
	defer func() {
		if recover() != nil {
			passed = 0
		}
	}()
	h := handles.Get(uint64(handle))
	if h == nil || queries == nil || h.ix.Mode() != mode {
		return 0
	}
	q := unsafe.Slice((*uint64)(unsafe.Pointer(queries)), int(n*depth))
	// The size of goindex_probe's buffer, so that n = 1 zeroes what it does.
	var buf [probeStackEntries]kv.Overlap
	for i, off := 0, 0; off < len(q); i, off = i+1, off+int(depth) {
		dst := h.ix.Match(buf[:0], q[off:off+int(depth)])
		hostindex.SortMembers(dst)
		sum := 0
		for _, o := range dst {
			sum += o.Blocks
		}
		if e, b := want(i); len(dst) == int(e) && sum == int(b) {
			passed++
		}
	}
	return passed
}
