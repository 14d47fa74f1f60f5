package replica

import "sync/atomic"

// prefetchBudgetLines bounds the lines of one chunk of row-A prefetches in
// the chunked scan (positions × lane groups). On the measured machine (Zen
// 4, 2 vCPU) a random line costs ~190 ns alone and ~12 ns when overlapped
// with others; PREFETCHT1 sustained ~96 lines in flight, while PREFETCHT0
// lost prefetches beyond ~24 and the pure-Go touch pass stalls on every
// chunk (BenchmarkProbe, impl=replica-fast vs impl=replica-fast-touch).
const prefetchBudgetLines = 96

// touchLines loads one word of each line at rows[off], off in offsets: the
// pure-Go prefetch. The loads are independent, so their misses overlap,
// but each blocks retirement until its line arrives; it is the portable
// fallback of prefetchLines and runs on amd64 in the tests. Atomic loads
// are never removed by the compiler, so no result needs to be kept.
func touchLines(rows []uint64, offsets []uint32) {
	for _, off := range offsets {
		atomic.LoadUint64(&rows[off])
	}
}
