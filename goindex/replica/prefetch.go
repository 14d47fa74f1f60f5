package replica

import "sync/atomic"

// prefetchBudgetLines is how many cache lines the chunked scan keeps in
// flight: it addresses and prefetches the next chunk of positions while it
// tests the last one of the current chunk, sizing chunks so that chunk ×
// lines per position stays within this budget. On the measured machine
// (Zen 4, 2 vCPU) random lines cost ~190 ns alone and ~12 ns each when
// overlapped; PREFETCHT1 sustains up to ~96 lines in flight, where
// PREFETCHT0 lost prefetches beyond ~24 (BenchmarkProbe: p50 at 16 lanes
// 1.0 µs at 96 lines vs 1.5 µs at 24 and 1.8 µs with the pure-Go touch
// pass).
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
