package replica

import (
	"golang.org/x/sys/cpu"

	"github.com/goindex/goindex/goindex/ckf"
)

// prefetchRowsT1 is the prefetch row kernel with one PREFETCHT1 (into L2) a
// line: unlike a load it retires at once, so the chunk under test keeps
// running while the next chunks' misses are in flight (BenchmarkProbe,
// impl=replica-fast vs impl=replica-fast-go). It never faults and the race
// detector does not see it.
//
//go:noescape
func prefetchRowsT1(rows []uint64, ps []ckf.Probe, stride uint64, groups []uint32)

// testRowsAVX512 is the test row kernel with AVX-512: a group of 8 lanes
// is one VPCMPEQW of its 32 slots in row A and one in row B against the
// broadcast fingerprint, their masks ORed (a lane's word sits at the same
// position in both lines), then a per-word any-match (VPMOVM2W, VPTESTMQ)
// that yields the group's 8 lane bits at once. Each 8-byte word of a
// 64-byte-aligned vector load is read atomically, as the weak-read
// contract needs (spec §5.4). It needs AVX512F, AVX512BW and BMI2 with the
// OS saving the vector state (hasAVX512).
//
//go:noescape
func testRowsAVX512(rows []uint64, ps []ckf.Probe, stride uint64, groups []uint32, need uint64, hits []uint64)

// storeColumnMOV stores words[i] into the word at dst + i·stride words,
// one plain 8-byte MOV each. An aligned 8-byte store is single-copy atomic
// on amd64 (Intel SDM vol. 3A §9.1.1; AMD APM vol. 2 §7.3.2), which is all
// the weak-read contract asks of an image (spec §5.4), while Go's
// atomic.StoreUint64 is an XCHG: a locked, fully fenced instruction that
// lets only one of a snapshot's strided line fills be in flight at a time.
// The plain stores keep many in flight: a 16-lane, 2^22-bucket lane
// install in 40–80 ms against 90–230 ms (TestStoreColumn_MatchesAtomic
// holds the words equal; the timing was one run on the 2-vCPU EPYC). The
// lane's ready bit is set afterwards by a locked OR, which orders these
// stores before it.
//
//go:noescape
func storeColumnMOV(dst *uint64, stride uintptr, words []uint64)

// storeColumn stores words[i] into rows[start+i·stride]; the caller has
// checked that the last index is inside rows.
func storeColumn(rows []uint64, start, stride int, words []uint64) {
	if len(words) == 0 {
		return
	}
	_ = rows[start+(len(words)-1)*stride] // bounds, before any store
	storeColumnMOV(&rows[start], uintptr(stride), words)
}

// hasAVX512 reports whether the CPU has AVX512F, AVX512BW and BMI2 and the
// OS saves the opmask and ZMM state (x/sys/cpu checks XCR0).
func hasAVX512() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasBMI2
}

// nativeKernels returns the fastest row kernels this CPU runs.
func nativeKernels() rowKernels {
	k := rowKernels{prefetch: prefetchRowsT1, test: testRowsGo}
	if hasAVX512() {
		k.test = testRowsAVX512
	}
	return k
}
