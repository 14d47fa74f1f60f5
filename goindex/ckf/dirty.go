package ckf

import (
	"math/bits"
	"slices"
	"unsafe"
)

// Image is one published bucket: its index and its absolute word sampled at
// drain time (spec §4.8, §5.1). A final removal publishes a 0 word.
type Image struct {
	Bucket uint32
	Word   uint64
}

// window is the dirty state since the last publication boundary (spec §4.8).
//
// The dirty buckets are a three-level bitmap: a bit per bucket (bits), a
// bit per non-zero word of bits (mid) and a bit per non-zero word of mid
// (top, at most 64 words for 2^24 buckets). Drain walks it from the top
// and meets the dirty buckets in ascending order without sorting them
// (BenchmarkDrain); at gives each dirty bucket's entry, whose word is the
// bucket's original.
type window struct {
	bits, mid, top []uint64
	at             []uint32 // at[b]: bucket b's index in entries, valid while b is dirty
	// entries lists each bucket physically written in this window once,
	// with its word at the first write (its original).
	entries []touch
	// pending counts the events applied since the last boundary.
	pending int
}

func newWindow(buckets uint64) window {
	words := (buckets + 63) / 64
	mids := (words + 63) / 64
	w := window{
		bits: make([]uint64, words),
		mid:  make([]uint64, mids),
		top:  make([]uint64, (mids+63)/64),
		at:   make([]uint32, buckets),
	}
	adviseHuge(w.at)
	return w
}

// mark records t's bucket as dirty unless it already is in this window, so
// the earliest original wins.
func (w *window) mark(t touch) {
	b := t.bucket
	i, bit := b>>6, uint64(1)<<(b&63)
	if w.bits[i]&bit != 0 {
		return
	}
	w.bits[i] |= bit
	w.mid[b>>12] |= 1 << (i & 63)
	w.top[b>>18] |= 1 << (b >> 12 & 63)
	w.at[b] = uint32(len(w.entries))
	w.entries = append(w.entries, t)
}

// reserve makes room for touches more marks without growing later; entries
// never exceed one per bucket, so the room is capped at that.
func (w *window) reserve(touches int, buckets uint64) {
	need := uint64(len(w.entries)) + uint64(touches)
	need = min(need, buckets)
	if need > uint64(cap(w.entries)) {
		w.entries = slices.Grow(w.entries, int(need)-len(w.entries))
	}
}

// drain appends to dst, in ascending bucket order, each dirty bucket whose
// current word differs from its original, and returns dst with the number
// of dirty buckets that were back at their original (net reversions). It
// clears the window.
func (w *window) drain(dst []Image, words []uint64) ([]Image, int) {
	reverted := 0
	for t, tw := range w.top {
		for ; tw != 0; tw &= tw - 1 {
			j := t<<6 | bits.TrailingZeros64(tw)
			mw := w.mid[j]
			for ; mw != 0; mw &= mw - 1 {
				i := j<<6 | bits.TrailingZeros64(mw)
				bw := w.bits[i]
				for ; bw != 0; bw &= bw - 1 {
					b := uint32(i<<6 | bits.TrailingZeros64(bw))
					if cur := words[b]; cur != w.entries[w.at[b]].word {
						dst = append(dst, Image{Bucket: b, Word: cur})
					} else {
						reverted++
					}
				}
				w.bits[i] = 0
			}
			w.mid[j] = 0
		}
		w.top[t] = 0
	}
	w.entries = w.entries[:0]
	w.pending = 0
	return dst, reverted
}

// reset empties the window without looking at the words.
func (w *window) reset() {
	for _, e := range w.entries { // every set bit has an entry, so this clears exactly the window
		w.bits[e.bucket>>6] = 0
		w.mid[e.bucket>>12] = 0
		w.top[e.bucket>>18] = 0
	}
	w.entries = w.entries[:0]
	w.pending = 0
}

// bytes returns the window's memory.
func (w *window) bytes() uint64 {
	return uint64(cap(w.bits)+cap(w.mid)+cap(w.top))*8 + uint64(cap(w.at))*4 +
		uint64(cap(w.entries))*uint64(unsafe.Sizeof(touch{}))
}
