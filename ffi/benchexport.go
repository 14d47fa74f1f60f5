//go:build goindex_bench

package main

/*
#include "goindex.h"
*/
import "C"

import (
	"unsafe"

	"github.com/goindex/goindex/goindex/kv"
)

// goindex_bench_inprocess exists only in the benchmark build of the library
// (go build -tags goindex_bench; tests/c/run.sh builds it apart from the
// real one when GOINDEX_BENCH_ABI=1, since it would break the real one's
// export list). It runs n in-process Go probes of an exact handle over the
// host's queries (queries[q*depth:][:depth] for q < n): Match plus the sort
// the ABI promises, with the result buffer reused as BenchmarkProbe's
// impl=radix does, and returns the number of entries they found (0 for a
// bad handle). tests/c/bench.c calls it for 64 probes at a time (one
// crossing per 64 probes), in the same rounds, process and tree as
// goindex_probe and goindex_probe_batch: the in-process figure the ABI's
// are held against, free of the ±15 % that a tree's placement in another
// process's heap makes.
//
//export goindex_bench_inprocess
func goindex_bench_inprocess(handle C.uint64_t, queries *C.goindex_in_u64, n, depth C.size_t) (found C.size_t) {
	defer func() {
		if recover() != nil {
			found = 0
		}
	}()
	h := handles.get(uint64(handle))
	if h == nil || queries == nil {
		return 0
	}
	ix := h.ix.Load()
	if ix == nil || ix.exact == nil {
		return 0
	}
	q := unsafe.Slice((*uint64)(unsafe.Pointer(queries)), int(n*depth))
	var buf [64]kv.Overlap
	total := 0
	for off := 0; off < len(q); off += int(depth) {
		dst := ix.exact.Match(buf[:0], q[off:off+int(depth)])
		sortMembers(dst)
		total += len(dst)
	}
	return C.size_t(total)
}
