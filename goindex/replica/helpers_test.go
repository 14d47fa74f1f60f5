package replica

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
)

func mustFormat(t testing.TB, n uint64) *ckf.Format {
	t.Helper()
	f, err := ckf.NewFormat(ckf.DefaultSeed, n)
	if err != nil {
		t.Fatalf("NewFormat(n=%d): %v", n, err)
	}
	return f
}

func mustTable(t testing.TB, lanes int, n uint64) *Table {
	t.Helper()
	tab, err := New(Config{Lanes: lanes, Buckets: n})
	if err != nil {
		t.Fatalf("New(lanes=%d, buckets=%d): %v", lanes, n, err)
	}
	return tab
}

func mustSearcher(t testing.TB, tab *Table, f *ckf.Format, mode Mode, w int) *Searcher {
	t.Helper()
	s, err := NewSearcher(tab, f, SearchConfig{Mode: mode, Window: w})
	if err != nil {
		t.Fatalf("NewSearcher(%v, W=%d): %v", mode, w, err)
	}
	return s
}

// slowProbe is the obvious reference of Table.Probe: every lane in lanes,
// one ckf.Contains per word.
func slowProbe(t *Table, p ckf.Probe, lanes uint64) uint64 {
	var hits uint64
	for l := 0; l < t.Lanes(); l++ {
		if lanes>>uint(l)&1 == 1 && (ckf.Contains(t.Word(l, uint64(p.A)), p.FP) || ckf.Contains(t.Word(l, uint64(p.B)), p.FP)) {
			hits |= 1 << uint(l)
		}
	}
	return hits
}

// filler puts canonical hashes into one lane's words by the producer's
// placement (spec §4.6: A's first empty slot, else B's, else kicks from a
// random one of the two) without ownership tracking. It is test and
// benchmark set-up only: the Producer's exact state costs tens of bytes
// per block, too much for 16 lanes × 10M blocks, and these tests need only
// realistic words.
type filler struct {
	f     *ckf.Format
	words []uint64
	rng   *rand.Rand
}

// add inserts h unless its fingerprint is already in one of its buckets
// (so shared prefixes are stored once; fresh reports whether it was not).
// ok is false if 500 kicks did not find room (a fingerprint is then lost).
func (fl *filler) add(h uint64) (fresh, ok bool) {
	p := fl.f.ProbeFast(h)
	if ckf.Contains(fl.words[p.A], p.FP) || ckf.Contains(fl.words[p.B], p.FP) {
		return false, true
	}
	if fl.place(p.A, p.FP) || fl.place(p.B, p.FP) {
		return true, true
	}
	fp, b := p.FP, p.A
	if fl.rng.IntN(2) == 1 {
		b = p.B
	}
	for kick := 0; kick < 500; kick++ {
		i := fl.rng.IntN(ckf.SlotsPerBucket)
		w := ckf.Bucket(fl.words[b])
		fl.words[b], fp = uint64(w.WithSlot(i, fp)), w.Slot(i)
		b = fl.f.Alt(b, fp)
		if fl.place(b, fp) {
			return true, true
		}
	}
	return true, false
}

// place writes fp into bucket b's first empty slot, if it has one.
func (fl *filler) place(b uint32, fp uint16) bool {
	w := ckf.Bucket(fl.words[b])
	i := w.FirstEmpty()
	if i < 0 {
		return false
	}
	fl.words[b] = uint64(w.WithSlot(i, fp))
	return true
}

// rowQuery builds a query whose membership on a real table is exactly a
// given hit pattern: every position gets a hash whose rows A and B are used
// by no other position of the query, row A or B (one in four) of lane l
// holds the position's fingerprint iff l hits there, and every other word
// of both rows is 0.
type rowQuery struct {
	t      *Table
	f      *ckf.Format
	rng    *rand.Rand
	stamp  []uint32 // stamp[b] == gen: bucket b is taken in this query
	gen    uint32
	hashes []uint64
	locals []uint64 // hashes[i] is the chain of locals[:i+1] (kv.AppendChain)
	probes []ckf.Probe
}

func newRowQuery(t *Table, f *ckf.Format, rng *rand.Rand) *rowQuery {
	return &rowQuery{t: t, f: f, rng: rng, stamp: make([]uint32, t.Buckets())}
}

// build writes the rows of a query of length L where lane l hits at
// position p iff hits[p] has bit l, and returns its hashes. The hashes are
// the chain of random local hashes, so the query may also be searched by
// its locals (SearchLocals).
func (q *rowQuery) build(hits []uint64) []uint64 {
	q.gen++
	q.hashes, q.locals, q.probes = q.hashes[:0], q.locals[:0], q.probes[:0]
	for i, hit := range hits {
		var h, local uint64
		var p ckf.Probe
		for {
			local = q.rng.Uint64()
			if h = local; i > 0 {
				h = kv.ChainHash(q.hashes[i-1], local)
			}
			p = q.f.Probe(h)
			if q.stamp[p.A] != q.gen && q.stamp[p.B] != q.gen {
				break
			}
		}
		q.stamp[p.A], q.stamp[p.B] = q.gen, q.gen
		// Plain stores: set-up runs before any search, and atomic stores
		// (XCHG on amd64) would dominate the 200,000-case test.
		ra, rb := int(p.A)*q.t.stride, int(p.B)*q.t.stride
		clear(q.t.rows[ra : ra+q.t.stride])
		clear(q.t.rows[rb : rb+q.t.stride])
		for h := hit; h != 0; h &= h - 1 {
			r := ra // mostly A, as the producer places
			if q.rng.IntN(4) == 0 {
				r = rb
			}
			q.t.rows[r+bits.TrailingZeros64(h)] = uint64(p.FP)
		}
		q.hashes = append(q.hashes, h)
		q.locals = append(q.locals, local)
		q.probes = append(q.probes, p)
	}
	return q.hashes
}

// bitmapMembership is the fake of the vector tests: hits[pos] is the lane
// mask at pos, and every probe's position and participants are logged.
type bitmapMembership struct {
	hits  []uint64
	order []int
	asked []uint64
}

func (b *bitmapMembership) probe(pos int, lanes uint64) uint64 {
	b.order = append(b.order, pos)
	b.asked = append(b.asked, lanes)
	return b.hits[pos] & lanes
}

func (b *bitmapMembership) prefetch(int, uint64) {}

// prefixHits returns the hit pattern where lane l hits exactly at positions
// below t[l], for L positions.
func prefixHits(L int, t []int) []uint64 {
	hits := make([]uint64, L)
	for p := range hits {
		for l, tl := range t {
			if p < tl {
				hits[p] |= 1 << uint(l)
			}
		}
	}
	return hits
}
