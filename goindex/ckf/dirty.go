package ckf

import "slices"

// Image is one published bucket: its index and its absolute word sampled at
// drain time (spec §4.8, §5.1). A final removal publishes a 0 word.
type Image struct {
	Bucket uint32
	Word   uint64
}

// window is the dirty state since the last publication boundary (spec §4.8).
type window struct {
	bits []uint64 // bit b set: bucket b is in entries
	// entries lists each bucket physically written in this window once,
	// with its word at the first write (its original).
	entries []touch
	order   []uint64 // drain's scratch: entries sorted by bucket
	// pending counts the events applied since the last boundary.
	pending int
}

func newWindow(buckets uint64) window {
	return window{bits: make([]uint64, (buckets+63)/64)}
}

// mark records t's bucket as dirty unless it already is in this window, so
// the earliest original wins.
func (w *window) mark(t touch) {
	i, bit := t.bucket>>6, uint64(1)<<(t.bucket&63)
	if w.bits[i]&bit != 0 {
		return
	}
	w.bits[i] |= bit
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
	// Sorting packed (bucket, entry index) keys with the ordered sort is
	// about 2× faster than sorting the entries with a comparison function
	// (BenchmarkDrain, BENCHMARKS.md); buckets and indices are < 2^24.
	order := w.order[:0]
	for i, e := range w.entries {
		order = append(order, uint64(e.bucket)<<32|uint64(i))
	}
	slices.Sort(order)
	reverted := 0
	for _, k := range order {
		e := w.entries[uint32(k)]
		if cur := words[e.bucket]; cur != e.word {
			dst = append(dst, Image{Bucket: e.bucket, Word: cur})
		} else {
			reverted++
		}
	}
	w.order = order
	w.reset()
	return dst, reverted
}

// reset empties the window without looking at the words.
func (w *window) reset() {
	for _, e := range w.entries {
		w.bits[e.bucket>>6] = 0 // every set bit has an entry, so this clears exactly the window
	}
	w.entries = w.entries[:0]
	w.pending = 0
}
