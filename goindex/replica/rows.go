package replica

import (
	"sync/atomic"
	"unsafe"

	"github.com/goindex/goindex/goindex/ckf"
)

// The assembly kernels read a probe's fingerprint at byte 0 and its buckets
// at bytes 4 (A) and 8 (B), and step 12 bytes a probe; these fail to
// compile if ckf.Probe's layout ever changes.
var (
	_ [1]struct{} = [unsafe.Offsetof(ckf.Probe{}.FP) + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(ckf.Probe{}.A) - 4 + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(ckf.Probe{}.B) - 8 + 1]struct{}{}
	_ [1]struct{} = [unsafe.Sizeof(ckf.Probe{}) - 12 + 1]struct{}{}
)

// rowKernels are the two loops the chunked scan runs over each chunk of
// probes. Both visit, for each probe j and each listed group offset g (a
// word offset 8k within a row), the two cache lines at words r·stride + g
// of rows for r = ps[j].A and r = ps[j].B:
//
//   - prefetch brings each line towards the cache without waiting;
//   - test sets hits[j] to the lanes of need whose word in either line
//     holds ps[j].FP (ckf.Contains per lane, bucket A or B).
//
// groups must list every group holding a lane of need (groupList), every
// bucket must be below the table's bucket count and hits must be as long
// as ps. A search uses the assembly versions where the CPU has them (amd64:
// PREFETCHT1 always, an AVX-512 line test when the CPU and OS support it)
// and the pure-Go ones elsewhere; the tests run both and hold them equal.
type rowKernels struct {
	prefetch func(rows []uint64, ps []ckf.Probe, stride uint64, groups []uint32)
	test     func(rows []uint64, ps []ckf.Probe, stride uint64, groups []uint32, need uint64, hits []uint64)
}

// goKernels are the portable row kernels: the prefetch is a touch pass (one
// atomic load a line: the loads are independent, so their misses overlap,
// but each blocks retirement until its line arrives), the test is the SWAR
// pairHits a group.
var goKernels = rowKernels{prefetch: touchRowsGo, test: testRowsGo}

func touchRowsGo(rows []uint64, ps []ckf.Probe, stride uint64, groups []uint32) {
	for j := range ps {
		a, b := uint64(ps[j].A)*stride, uint64(ps[j].B)*stride
		for _, g := range groups {
			atomic.LoadUint64(&rows[a+uint64(g)])
			atomic.LoadUint64(&rows[b+uint64(g)])
		}
	}
}

func testRowsGo(rows []uint64, ps []ckf.Probe, stride uint64, groups []uint32, need uint64, hits []uint64) {
	hits = hits[:len(ps)]
	for j := range ps {
		p := &ps[j]
		a, b := uint64(p.A)*stride, uint64(p.B)*stride
		f := uint64(p.FP) * swarOnes
		var h uint64
		for _, g := range groups {
			oa, ob := a+uint64(g), b+uint64(g)
			h |= pairHits((*[GroupLanes]uint64)(rows[oa:oa+GroupLanes]), (*[GroupLanes]uint64)(rows[ob:ob+GroupLanes]), f) << g
		}
		hits[j] = h & need
	}
}

// storeColumnGo stores words[i] into rows[start+i·stride], one atomic store
// each: the portable column store (a lane's run of buckets) and the
// reference storeColumn is held to. The caller checks the bounds.
func storeColumnGo(rows []uint64, start, stride int, words []uint64) {
	i := start
	for _, w := range words {
		atomic.StoreUint64(&rows[i], w)
		i += stride
	}
}
