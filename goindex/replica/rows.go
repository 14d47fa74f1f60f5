package replica

import (
	"sync/atomic"
	"unsafe"

	"github.com/goindex/goindex/goindex/ckf"
)

// rowField selects which bucket of a probe a row kernel reads: the byte
// offset of ckf.Probe's A or B field, which is what the assembly kernels
// load from.
type rowField uintptr

const (
	rowA rowField = 4
	rowB rowField = 8
)

// The assembly kernels read a probe's fingerprint at byte 0, its buckets at
// rowA and rowB, and step 12 bytes a probe; these fail to compile if
// ckf.Probe's layout ever changes.
var (
	_ [1]struct{} = [unsafe.Offsetof(ckf.Probe{}.A) - uintptr(rowA) + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(ckf.Probe{}.B) - uintptr(rowB) + 1]struct{}{}
	_ [1]struct{} = [unsafe.Sizeof(ckf.Probe{}) - probeBytes + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(ckf.Probe{}.FP) + 1]struct{}{}
)

const probeBytes = 12

// rowKernels are the two loops every search runs over a batch of probes.
// Both visit, for each probe j and each listed group offset g (a word
// offset 8k within a row) whose lanes meet masks[j], the cache line at
// word bucket(ps[j], field)·stride + g of rows:
//
//   - prefetch brings each such line towards the cache without waiting;
//   - test replaces masks[j] by the lanes among masks[j] whose word in that
//     line holds ps[j].FP (ckf.Contains per lane).
//
// A search uses the assembly versions where the CPU has them (amd64:
// PREFETCHT1 always, an AVX-512 line test when the CPU and OS support it)
// and the pure-Go ones elsewhere; the tests run both and hold them equal.
// Buckets must be below the table's bucket count and masks as long as ps.
type rowKernels struct {
	prefetch func(rows []uint64, ps []ckf.Probe, field rowField, stride uint64, groups []uint32, masks []uint64)
	test     func(rows []uint64, ps []ckf.Probe, field rowField, stride uint64, groups []uint32, masks []uint64)
}

// goKernels are the portable row kernels: the prefetch is a touch pass (one
// atomic load a line: the loads are independent, so their misses overlap,
// but each blocks retirement until its line arrives), the test is the SWAR
// lineHits a line.
var goKernels = rowKernels{prefetch: touchRowsGo, test: testRowsGo}

func bucketOf(p *ckf.Probe, field rowField) uint32 {
	if field == rowB {
		return p.B
	}
	return p.A
}

func touchRowsGo(rows []uint64, ps []ckf.Probe, field rowField, stride uint64, groups []uint32, masks []uint64) {
	for j := range masks {
		r := uint64(bucketOf(&ps[j], field)) * stride
		for _, g := range groups {
			if masks[j]>>g&0xFF != 0 {
				atomic.LoadUint64(&rows[r+uint64(g)])
			}
		}
	}
}

func testRowsGo(rows []uint64, ps []ckf.Probe, field rowField, stride uint64, groups []uint32, masks []uint64) {
	for j, need := range masks {
		p := &ps[j]
		r := uint64(bucketOf(p, field)) * stride
		f := uint64(p.FP) * swarOnes
		var hits uint64
		for _, g := range groups {
			if need>>g&0xFF != 0 {
				o := r + uint64(g)
				hits |= lineHits((*[GroupLanes]uint64)(rows[o:o+GroupLanes]), f) << g
			}
		}
		masks[j] = hits & need
	}
}
