package ckf

// prefetchLines asks the CPU to bring the cache line of every address
// towards L1 without waiting for any (PREFETCHT0): unlike loads, the
// prefetches retire at once, so the work after them overlaps the misses.
// An address may be stale or unmapped: a prefetch never faults.
//
//go:noescape
func prefetchLines(addrs []uintptr)
