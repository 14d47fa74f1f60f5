package ckf

import "math/bits"

// Bucket is one packed bucket: 4 × 16-bit fingerprint slots in a u64, slot i
// at bits 16i…16i+15; 0 means empty (fingerprints are never 0).
type Bucket uint64

const (
	swarOnes = 0x0001000100010001
	swarHigh = 0x8000800080008000
)

// Slot returns slot i (0..3).
func (w Bucket) Slot(i int) uint16 { return uint16(w >> (16 * uint(i))) }

// WithSlot returns w with slot i set to v.
func (w Bucket) WithSlot(i int, v uint16) Bucket {
	shift := 16 * uint(i)
	return w&^(0xFFFF<<shift) | Bucket(v)<<shift
}

// First returns the lowest slot equal to v, or -1 (a scalar scan).
func (w Bucket) First(v uint16) int {
	for i := 0; i < SlotsPerBucket; i++ {
		if w.Slot(i) == v {
			return i
		}
	}
	return -1
}

// FirstEmpty returns the lowest empty slot, or -1.
func (w Bucket) FirstEmpty() int { return w.First(0) }

// firstSlot is First without a branch per slot, for the producer's table:
// the SWAR zero-lane test of w XOR v's lanes. Its lowest set bit is exact
// (a borrow only runs upward from a zero lane, so the lanes below the
// first zero lane test clean); only higher bits may be false positives.
func firstSlot(w uint64, v uint16) int {
	x := w ^ uint64(v)*swarOnes
	m := (x - swarOnes) &^ x & swarHigh
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m) >> 4
}

// Contains reports whether some slot holds fp (fp ≠ 0). It is the exact SWAR
// zero-lane test of spec §3; use it only as a boolean, never to locate the slot.
func Contains(w uint64, fp uint16) bool {
	x := w ^ uint64(fp)*swarOnes
	return (x-swarOnes)&^x&swarHigh != 0
}

// Occupied returns the number of non-empty slots.
func (w Bucket) Occupied() int {
	n := 0
	for i := 0; i < SlotsPerBucket; i++ {
		if w.Slot(i) != 0 {
			n++
		}
	}
	return n
}
