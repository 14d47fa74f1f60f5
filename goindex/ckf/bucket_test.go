package ckf

import (
	"math/rand/v2"
	"testing"
)

func scalarContains(w uint64, fp uint16) bool { return Bucket(w).First(fp) >= 0 }

func TestContains_SWARAgreesWithScalarScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2_000_000; i++ {
		w, fp := rng.Uint64(), uint16(rng.Uint32()|1)
		if i%3 == 0 { // plant fp in a random slot
			w = uint64(Bucket(w).WithSlot(rng.IntN(4), fp))
		}
		if got, want := Contains(w, fp), scalarContains(w, fp); got != want {
			t.Fatalf("Contains(%#016x, %#04x) = %v, want %v", w, fp, got, want)
		}
	}
	alphabet := []uint16{0, 1, 2, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF}
	fps := []uint16{1, 2, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF, 0x1234}
	for _, fp := range fps {
		for a := range alphabet {
			for b := range alphabet {
				for c := range alphabet {
					for d := range alphabet {
						w := uint64(alphabet[a]) | uint64(alphabet[b])<<16 | uint64(alphabet[c])<<32 | uint64(alphabet[d])<<48
						for _, word := range []uint64{w, w ^ uint64(fp)*swarOnes} {
							if got, want := Contains(word, fp), scalarContains(word, fp); got != want {
								t.Fatalf("Contains(%#016x, %#04x) = %v, want %v", word, fp, got, want)
							}
						}
					}
				}
			}
		}
	}
}

func TestContains_SpecCounterexampleIsBooleanOnly(t *testing.T) {
	w := uint64(0x0000000012351234)
	if !Contains(w, 0x1234) || Bucket(w).First(0x1234) != 0 {
		t.Errorf("Contains(%#x, 0x1234) / First = %v / %d, want true / 0", w, Contains(w, 0x1234), Bucket(w).First(0x1234))
	}
	if Contains(w, 0x1235) != true || Contains(w, 0x1236) {
		t.Errorf("Contains(%#x, 0x1235/0x1236) wrong", w)
	}
}

func TestBucket_SlotOps(t *testing.T) {
	var w Bucket
	for i := 0; i < 4; i++ {
		if w.FirstEmpty() != i {
			t.Fatalf("FirstEmpty(%#x) = %d, want %d", uint64(w), w.FirstEmpty(), i)
		}
		w = w.WithSlot(i, uint16(i+10))
	}
	if w.FirstEmpty() != -1 || w.Occupied() != 4 || w.Slot(2) != 12 {
		t.Errorf("full bucket %#x: FirstEmpty=%d Occupied=%d Slot(2)=%d", uint64(w), w.FirstEmpty(), w.Occupied(), w.Slot(2))
	}
	w = w.WithSlot(1, 0)
	if w.FirstEmpty() != 1 || w.Slot(0) != 10 || w.Slot(3) != 13 {
		t.Errorf("after clearing slot 1: %#x", uint64(w))
	}
}

// TestFirstSlot_AgreesWithScalarScan holds the producer's SWAR slot search
// to Bucket.First (the lowest equal slot, or -1) on words built from
// values near every borrow boundary, with 0 (an empty slot) among them.
func TestFirstSlot_AgreesWithScalarScan(t *testing.T) {
	alphabet := []uint16{0, 1, 2, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF, 0x1234}
	for _, v := range alphabet {
		for a := range alphabet {
			for b := range alphabet {
				for c := range alphabet {
					for d := range alphabet {
						w := uint64(alphabet[a]) | uint64(alphabet[b])<<16 | uint64(alphabet[c])<<32 | uint64(alphabet[d])<<48
						if got, want := firstSlot(w, v), Bucket(w).First(v); got != want {
							t.Fatalf("firstSlot(%#016x, %#04x) = %d, want %d", w, v, got, want)
						}
					}
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200_000 {
		w, v := rng.Uint64(), uint16(rng.Uint32())
		w = uint64(Bucket(w).WithSlot(rng.IntN(4), v))
		if rng.IntN(2) == 0 {
			w = uint64(Bucket(w).WithSlot(rng.IntN(4), 0))
		}
		if got, want := firstSlot(w, v), Bucket(w).First(v); got != want {
			t.Fatalf("firstSlot(%#016x, %#04x) = %d, want %d", w, v, got, want)
		}
	}
}
