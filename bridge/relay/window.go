package relay

// windowSeqs is how many sequences below a publisher's highest one its
// window remembers (anti-replay style: the highest sequence plus a bitmap).
//
// Dynamo's subscriber in HA broker mode drops copies with an LRU of
// 100,000 (publisher id, sequence) pairs shared by all publishers, so its
// horizon per publisher is 100,000/P messages for P publishers at equal
// rates; 4096 is as deep for any pool of 25 or more publishers. The lag of
// one broker's copy behind another's is bounded the same way: what the
// slower broker's pipe queues, at most its HWM (SNDHWM and our RCVHWM,
// 100,000 messages each, shared by all publishers). A copy older than the
// window is lost only when the faster broker lost it too and the slower
// one lagged more than 4096 of that publisher's messages: two faults. The
// cost is 512 bytes per publisher, 2 MiB for a full table of
// maxPublishers.
const windowSeqs = 4096

const windowWords = windowSeqs / 64

// seqWindow is one sequenced stream's highest sequence taken and which of
// the windowSeqs sequences up to it were taken: sequence s, for
// top-windowSeqs < s ≤ top, has bit s mod windowSeqs. Sequences before the
// stream's first one count as taken (the relay did not follow the stream
// then; see take).
type seqWindow struct {
	top  uint64
	bits [windowWords]uint64
}

// seqVerdict is what take made of a sequence.
type seqVerdict uint8

const (
	seqNext      seqVerdict = iota // above the highest: taken; the ones skipped are outstanding
	seqLate                        // in the window, not taken before: taken, an outstanding one filled
	seqDuplicate                   // taken before, below the window or before the first: dropped
)

// newSeqWindow starts a window at a stream's first sequence.
func newSeqWindow(first uint64) seqWindow {
	w := seqWindow{top: first}
	for i := range w.bits {
		w.bits[i] = ^uint64(0)
	}
	return w
}

// take records seq and says what it was; for seqNext it also returns how
// many sequences it skipped (seq - top - 1, also beyond the window).
//
// A sequence below the window is refused, not taken: the relay cannot tell
// whether it saw it, and an old store applied after the removals that
// followed it would resurrect blocks the worker has dropped, while a lost
// one is only a counted gap. The same holds for sequences before the
// stream's first: a relay that joins a stream mid-way has no state of what
// came before it, so they are not outstanding and never count as Late.
func (w *seqWindow) take(seq uint64) (seqVerdict, uint64) {
	switch {
	case seq > w.top:
		d := seq - w.top
		w.clear(w.top+1, d-1)
		w.top = seq
		w.bits[seq%windowSeqs/64] |= 1 << (seq % 64)
		return seqNext, d - 1
	case w.top-seq >= windowSeqs:
		return seqDuplicate, 0
	}
	word, bit := &w.bits[seq%windowSeqs/64], uint64(1)<<(seq%64)
	if *word&bit != 0 {
		return seqDuplicate, 0
	}
	*word |= bit
	return seqLate, 0
}

// clear marks the n sequences from first on as not taken (all of the
// window when n ≥ windowSeqs), a word at a time.
func (w *seqWindow) clear(first, n uint64) {
	if n >= windowSeqs {
		w.bits = [windowWords]uint64{}
		return
	}
	for n > 0 {
		i := first % windowSeqs
		off := i % 64
		k := min(64-off, n)
		w.bits[i/64] &^= (^uint64(0) >> (64 - k)) << off
		first += k
		n -= k
	}
}
