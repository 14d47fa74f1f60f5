package ckf

import (
	"cmp"
	"slices"
)

// Limits of Config.MaxKicks (spec §2).
const (
	DefaultMaxKicks = 500
	MaxMaxKicks     = 4096
)

// touch is one bucket and its word before a physical write.
type touch struct {
	bucket uint32
	word   uint64
}

// table is a pool's physical cuckoo table (spec §4.6): n packed buckets, the
// format that addresses them, the kick RNG and the kick chain's scratch list.
// Every method leaves the words either changed as reported or untouched.
type table struct {
	words    []uint64
	f        *Format
	rng      splitmix
	maxKicks int
	// kicks holds, in order, every bucket the current insertion wrote and
	// the word it had just before that write; capacity maxKicks+1, so an
	// insertion never allocates.
	kicks []touch
}

func newTable(words []uint64, f *Format, maxKicks int) table {
	return table{
		words:    words,
		f:        f,
		rng:      splitmix{state: laneRngSeed(f.Seed(), 0)},
		maxKicks: maxKicks,
		kicks:    make([]touch, 0, maxKicks+1),
	}
}

// The table's operations read p.FP and p.A only: they derive B from them
// (Format.Alt) when A does not settle the operation, so the producer's
// probes skip the delta lookup (Format.primary) for most blocks.

// place is the relocation-free insertion: fp goes into the first empty slot
// of A, else of B. It returns the one bucket written and its previous word,
// or false when both buckets are full (and nothing changed).
func (t *table) place(p Probe) ([]touch, bool) {
	b := p.A
	w := t.words[b]
	i := firstSlot(w, 0)
	if i < 0 {
		b = t.f.Alt(b, p.FP)
		if w = t.words[b]; firstSlot(w, 0) < 0 {
			return nil, false
		}
		i = firstSlot(w, 0)
	}
	t.kicks = append(t.kicks[:0], touch{b, w})
	t.words[b] = uint64(Bucket(w).WithSlot(i, p.FP))
	return t.kicks, true
}

// insert is the full cuckoo insertion of spec §4.6. On success it returns
// every bucket it wrote, once each in ascending order, with the bucket's
// word before this insertion (the current word is the final one). After
// maxKicks kicks without an empty slot it restores the written words in
// reverse order, so each bucket gets back its earliest original and the
// filter bytes are unchanged, and returns false (capacity exhausted). The
// returned slice is scratch, valid until the next call.
func (t *table) insert(p Probe) ([]touch, bool) {
	if touched, ok := t.place(p); ok {
		return touched, true
	}
	cur := p.A
	if t.rng.next()&1 != 0 {
		cur = t.f.Alt(p.A, p.FP)
	}
	carry := p.FP
	t.kicks = t.kicks[:0]
	for range t.maxKicks {
		s := int(t.rng.next() & 3)
		w := Bucket(t.words[cur])
		t.kicks = append(t.kicks, touch{cur, uint64(w)})
		carry, t.words[cur] = w.Slot(s), uint64(w.WithSlot(s, carry))
		cur = t.f.Alt(cur, carry)
		if w = Bucket(t.words[cur]); firstSlot(uint64(w), 0) >= 0 {
			t.kicks = append(t.kicks, touch{cur, uint64(w)})
			t.words[cur] = uint64(w.WithSlot(firstSlot(uint64(w), 0), carry))
			return t.settle(), true
		}
	}
	for i := len(t.kicks) - 1; i >= 0; i-- {
		t.words[t.kicks[i].bucket] = t.kicks[i].word
	}
	return nil, false
}

// settle turns the kick list into its distinct buckets in ascending order,
// each keeping its earliest recorded word (its word before the insertion).
func (t *table) settle() []touch {
	slices.SortStableFunc(t.kicks, byBucket)
	t.kicks = slices.CompactFunc(t.kicks, func(x, y touch) bool { return x.bucket == y.bucket })
	return t.kicks
}

func byBucket(x, y touch) int { return cmp.Compare(x.bucket, y.bucket) }

// remove clears the first slot equal to p.FP in A, else in B, and returns
// that bucket with its previous word; false means neither bucket holds the
// fingerprint (nothing changed).
func (t *table) remove(p Probe) (touch, bool) {
	b := p.A
	w := t.words[b]
	i := firstSlot(w, p.FP)
	if i < 0 {
		b = t.f.Alt(b, p.FP)
		if w = t.words[b]; firstSlot(w, p.FP) < 0 {
			return touch{}, false
		}
		i = firstSlot(w, p.FP)
	}
	t.words[b] = uint64(Bucket(w).WithSlot(i, 0))
	return touch{b, w}, true
}
