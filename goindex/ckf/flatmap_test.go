package ckf

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// testSeed returns the seed of a randomized test: def, or CKF_SEED when set.
// The seed is printed if the test fails, so that a failure can be replayed.
func testSeed(t *testing.T, def uint64) uint64 {
	t.Helper()
	seed := def
	if v := os.Getenv("CKF_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			t.Fatalf("CKF_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (replay with CKF_SEED=%d)", seed, seed)
		}
	})
	return seed
}

func TestFlatMap_AgreesWithGoMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t, 11), 0))
	ops := 400_000
	if testing.Short() {
		ops = 60_000
	}
	// Small key spaces force long probe runs, wrap-around and back-shifts;
	// keys include 0 and clustered values as well as random ones.
	for _, space := range []uint64{8, 200, 5000} {
		m := newFlatMap[uint64](0)
		ref := map[uint64]uint64{}
		key := func() uint64 {
			switch rng.IntN(3) {
			case 0:
				return rng.Uint64N(space)
			case 1:
				return rng.Uint64N(space) << 40
			}
			return rng.Uint64N(space) * rngGamma
		}
		for i := range ops {
			k := key()
			switch op := rng.IntN(10); {
			case op < 5:
				v, found := m.upsert(k)
				_, want := ref[k]
				if found != want {
					t.Fatalf("space %d op %d: upsert(%#x) found = %v, want %v", space, i, k, found, want)
				}
				*v = uint64(i)
				ref[k] = uint64(i)
			case op < 8:
				if got, want := m.del(k), hasKey(ref, k); got != want {
					t.Fatalf("space %d op %d: del(%#x) = %v, want %v", space, i, k, got, want)
				}
				delete(ref, k)
			default:
				v := m.find(k)
				want, ok := ref[k]
				if (v != nil) != ok || (ok && *v != want) {
					t.Fatalf("space %d op %d: find(%#x) = %v, want %d (present %v)", space, i, k, v, want, ok)
				}
			}
			if m.len() != len(ref) {
				t.Fatalf("space %d op %d: len() = %d, want %d", space, i, m.len(), len(ref))
			}
		}
		seen := 0
		for k, v := range m.all() {
			if want, ok := ref[k]; !ok || *v != want {
				t.Errorf("space %d: all() yields %#x → %d, want %d (present %v)", space, k, *v, want, ok)
			}
			seen++
		}
		if seen != len(ref) {
			t.Errorf("space %d: all() yields %d keys, want %d", space, seen, len(ref))
		}
	}
}

func hasKey(m map[uint64]uint64, k uint64) bool { _, ok := m[k]; return ok }

func TestFlatMap_ResetEmptiesAndReusesSlots(t *testing.T) {
	var s flatMap[struct{}]
	s.reset(10)
	for k := range uint64(10) {
		if !s.insert(k) {
			t.Fatalf("insert(%d) into empty set = false, want true", k)
		}
		if s.insert(k) {
			t.Fatalf("second insert(%d) = true, want false", k)
		}
	}
	before := &s.slots[0]
	s.reset(5)
	if s.len() != 0 || &s.slots[0] != before {
		t.Errorf("reset(5) after 10 keys: len %d (want 0), slots reused %v (want true)", s.len(), &s.slots[0] == before)
	}
	if !s.insert(3) {
		t.Error("insert(3) after reset = false, want true")
	}
}
