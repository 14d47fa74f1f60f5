package replica

// prefetchLines issues one PREFETCHT1 (into L2) for the cache line of
// rows[off] for every off in offsets, without waiting for any of them
// (prefetch_amd64.s). Offsets must be below len(rows); a prefetch never
// faults, and it is not a memory access the race detector sees.
//
//go:noescape
func prefetchLines(rows []uint64, offsets []uint32)
