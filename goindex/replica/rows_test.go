package replica

import (
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/internal/testseed"
)

// TestRowKernels_TestMatchesContains holds both row-test kernels (the
// native one, AVX-512 where the CPU has it, and the portable SWAR one) to
// ckf.Contains per needed lane in bucket A or B, on rows of random words in
// which the probe's fingerprint sits in a random slot (any of the four) of
// some lanes of either row, for random lane counts, needed lanes, group
// lists and batch lengths. The prefetch kernels run over the same batches
// (they must not fault).
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
			if rng.IntN(16) == 0 {
				ps[j].B = ps[j].A // both rows one line: a lane found twice is still one bit
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
					if rng.IntN(5) == 0 {
						slot := uint(rng.IntN(ckf.SlotsPerBucket)) * 16
						w = w&^(0xFFFF<<slot) | uint64(ps[j].FP)<<slot
					}
					tab.rows[r+l] = w
				}
			}
		}
		need := rng.Uint64() & tab.all
		if rng.IntN(4) == 0 {
			need = tab.all
		}
		var groups groupList
		groups.set(need)
		want := make([]uint64, L)
		for j, p := range ps {
			for l := range lanes {
				if need>>uint(l)&1 == 1 && (ckf.Contains(tab.Word(l, uint64(p.A)), p.FP) || ckf.Contains(tab.Word(l, uint64(p.B)), p.FP)) {
					want[j] |= 1 << uint(l)
				}
			}
		}
		for name, k := range kernels {
			k.prefetch(tab.rows, ps, uint64(tab.stride), groups.list())
			got := make([]uint64, L)
			for j := range got {
				got[j] = rng.Uint64() // overwritten whole
			}
			k.test(tab.rows, ps, uint64(tab.stride), groups.list(), need, got)
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("case %d (seed %#x): %s test, lanes=%d probe %d %+v need %#x: got %#x, want %#x",
						c, seed, name, lanes, j, ps[j], need, got[j], want[j])
				}
			}
		}
	}
}

// TestStoreColumn_MatchesAtomic holds the native column store (plain MOVs
// on amd64) to the atomic loop: random starts, strides and lengths over a
// buffer of random words, every word of the buffer compared, so a store
// out of its column or past its run fails.
func TestStoreColumn_MatchesAtomic(t *testing.T) {
	seed := testseed.For(t, 0x5C01)
	rng := rand.New(rand.NewPCG(seed, 4))
	const size = 4096
	got, want := make([]uint64, size), make([]uint64, size)
	for c := 0; c < 2000; c++ {
		for i := range got {
			got[i] = rng.Uint64()
		}
		copy(want, got)
		stride := 1 + rng.IntN(MaxLanes)
		start := rng.IntN(size)
		n := rng.IntN((size-start-1)/stride + 2) // up to the last index that fits
		words := make([]uint64, n)
		for i := range words {
			words[i] = rng.Uint64()
		}
		storeColumn(got, start, stride, words)
		storeColumnGo(want, start, stride, words)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("case %d (seed %#x): storeColumn(start %d, stride %d, %d words): word %d = %#x, want %#x", c, seed, start, stride, n, i, got[i], want[i])
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Errorf("storeColumn past the end did not panic")
		}
	}()
	storeColumn(got, size-1, 8, make([]uint64, 2))
}
