package replica

import (
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/internal/testseed"
)

// TestRowKernels_TestMatchesContains holds both row-test kernels (the
// native one, AVX-512 where the CPU has it, and the portable SWAR one) to
// one ckf.Contains per asked lane, on rows of random words in which the
// probe's fingerprint sits in a random slot (any of the four) of some lanes,
// for random lane counts, group lists, masks and batch lengths. The prefetch
// kernels run over the same batches (they must not fault or change masks).
func TestRowKernels_TestMatchesContains(t *testing.T) {
	seed := testseed.For(t, 0x20E5)
	rng := rand.New(rand.NewPCG(seed, 3))
	const n = 256
	kernels := map[string]rowKernels{"native": nativeKernels(), "go": goKernels}
	for c := 0; c < 3000; c++ {
		lanes := 1 + rng.IntN(MaxLanes)
		if c%4 == 0 {
			lanes = MaxLanes
		}
		tab := mustTable(t, lanes, n)
		L := rng.IntN(20)
		ps := make([]ckf.Probe, L)
		for j := range ps {
			ps[j] = ckf.Probe{FP: uint16(1 + rng.IntN(0xFFFF)), A: uint32(rng.IntN(n)), B: uint32(rng.IntN(n))}
			if rng.IntN(8) == 0 {
				ps[j].FP = 1 + uint16(rng.IntN(3)) // small fingerprints: more chance collisions with neighbours
			}
		}
		// Random words everywhere the batch reads, then plant each
		// probe's fingerprint in a random slot of random lanes of both
		// its rows (a later probe sharing a row may overwrite it).
		for j := range ps {
			for _, b := range []uint32{ps[j].A, ps[j].B} {
				r := int(b) * tab.stride
				for l := range lanes {
					w := rng.Uint64()
					if rng.IntN(3) == 0 {
						slot := uint(rng.IntN(ckf.SlotsPerBucket)) * 16
						w = w&^(0xFFFF<<slot) | uint64(ps[j].FP)<<slot
					}
					tab.rows[r+l] = w
				}
			}
		}
		var groups groupList
		ask := rng.Uint64() & tab.all
		if rng.IntN(4) == 0 {
			ask = tab.all
		}
		groups.set(ask)
		masks := make([]uint64, L)
		for j := range masks {
			masks[j] = ask & rng.Uint64()
			if rng.IntN(2) == 0 {
				masks[j] = ask
			}
		}
		for _, field := range []rowField{rowA, rowB} {
			want := make([]uint64, L)
			for j, p := range ps {
				b := bucketOf(&p, field)
				for l := range lanes {
					if masks[j]>>uint(l)&1 == 1 && ckf.Contains(tab.Word(l, uint64(b)), p.FP) {
						want[j] |= 1 << uint(l)
					}
				}
			}
			for name, k := range kernels {
				got := append([]uint64(nil), masks...)
				k.prefetch(tab.rows, ps, field, uint64(tab.stride), groups.list(), got)
				for j := range got {
					if got[j] != masks[j] {
						t.Fatalf("case %d: %s prefetch changed mask %d: %#x, was %#x", c, name, j, got[j], masks[j])
					}
				}
				k.test(tab.rows, ps, field, uint64(tab.stride), groups.list(), got)
				for j := range got {
					if got[j] != want[j] {
						t.Fatalf("case %d (seed %#x): %s test, lanes=%d field=%d probe %d %+v mask %#x: got %#x, want %#x",
							c, seed, name, lanes, field, j, ps[j], masks[j], got[j], want[j])
					}
				}
			}
		}
	}
}
