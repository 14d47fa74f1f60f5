package ckf

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func mustFormat(t testing.TB, n uint64) *Format {
	t.Helper()
	f, err := NewFormat(DefaultSeed, n)
	if err != nil {
		t.Fatalf("NewFormat(n=%d): %v", n, err)
	}
	return f
}

// probeWhere searches h = from, from+1, … for the first hash whose probe
// satisfies ok.
func probeWhere(f *Format, from uint64, ok func(Probe) bool) (uint64, Probe) {
	for h := from; ; h++ {
		if p := f.Probe(h); ok(p) {
			return h, p
		}
	}
}

func TestTable_PlaceFillsFirstEmptySlotOfAThenB(t *testing.T) {
	f := mustFormat(t, 8)
	_, p := probeWhere(f, 0, func(Probe) bool { return true })
	tab := newTable(make([]uint64, 8), f, DefaultMaxKicks)
	tab.words[p.A] = uint64(Bucket(0).WithSlot(0, 7).WithSlot(1, 9).WithSlot(3, 5)) // slot 2 free
	touched, ok := tab.place(p)
	if !ok || len(touched) != 1 || touched[0].bucket != p.A || Bucket(tab.words[p.A]).Slot(2) != p.FP {
		t.Fatalf("place(%+v) with A slot 2 free = %v, %v; want A slot 2 written", p, touched, ok)
	}
	touched, ok = tab.place(p) // A is full now
	if !ok || touched[0].bucket != p.B || touched[0].word != 0 || Bucket(tab.words[p.B]).Slot(0) != p.FP {
		t.Fatalf("place(%+v) with A full = %v, %v; want B slot 0 written", p, touched, ok)
	}
	tab.words[p.B] = ^uint64(0)
	before := slices.Clone(tab.words)
	if touched, ok = tab.place(p); ok || !slices.Equal(before, tab.words) {
		t.Fatalf("place(%+v) with A and B full = %v, %v; want false and no change", p, touched, ok)
	}
}

// TestTable_InsertFollowsSpecDrawOrder checks one kick against spec §4.6
// worked by hand: the first draw's low bit picks A or B, the second draw's
// low two bits pick the slot, and the evicted fingerprint moves to its
// alternate bucket.
func TestTable_InsertFollowsSpecDrawOrder(t *testing.T) {
	f := mustFormat(t, 1024)
	_, p := probeWhere(f, 0, func(Probe) bool { return true })
	words := make([]uint64, 1024)
	// Fill A and B with fingerprints of other hashes that really live in
	// A or B, so every evicted fingerprint has a real alternate bucket.
	fill := func(b uint32) {
		for s := range SlotsPerBucket {
			_, q := probeWhere(f, 1<<32+uint64(b)<<8+uint64(s)<<4, func(q Probe) bool { return q.A == b || q.B == b })
			words[b] = uint64(Bucket(words[b]).WithSlot(s, q.FP))
		}
	}
	fill(p.A)
	fill(p.B)
	before := slices.Clone(words)
	tab := newTable(words, f, DefaultMaxKicks)
	r := splitmix{state: laneRngSeed(DefaultSeed, 0)}
	cur := p.A
	if r.next()&1 != 0 {
		cur = p.B
	}
	s := int(r.next() & 3)
	evicted := Bucket(before[cur]).Slot(s)
	alt := f.Alt(cur, evicted)
	if Bucket(before[alt]).FirstEmpty() < 0 {
		t.Fatalf("test setup: alternate bucket %d of the evicted fingerprint is full", alt)
	}
	touched, ok := tab.insert(p)
	if !ok {
		t.Fatalf("insert(%+v) = false, want success after one kick", p)
	}
	if got, want := Bucket(words[cur]).Slot(s), p.FP; got != want {
		t.Errorf("insert: bucket %d slot %d = %#x, want the new fingerprint %#x", cur, s, got, want)
	}
	if got := Bucket(words[alt]).Slot(Bucket(before[alt]).FirstEmpty()); got != evicted {
		t.Errorf("insert: evicted %#x not in the first empty slot of its alternate bucket %d (got %#x)", evicted, alt, got)
	}
	want := []touch{{cur, before[cur]}, {alt, before[alt]}}
	slices.SortFunc(want, byBucket)
	if !slices.Equal(touched, want) {
		t.Errorf("insert touched = %v, want %v", touched, want)
	}
	if tab.rng != r {
		t.Errorf("insert drew RNG to state %#x, want %#x (two draws)", tab.rng.state, r.state)
	}
}

func TestTable_FailedInsertRestoresBytesAndDrawsOncePerKick(t *testing.T) {
	f := mustFormat(t, 2)
	for _, kicks := range []int{1, 7, DefaultMaxKicks} {
		tab := newTable(make([]uint64, 2), f, kicks)
		for h := uint64(0); h < 8; h++ {
			if _, ok := tab.insert(f.Probe(h)); !ok {
				t.Fatalf("kicks %d: insert #%d into a 2-bucket table = false, want true", kicks, h)
			}
		}
		before := slices.Clone(tab.words)
		r := tab.rng
		touched, ok := tab.insert(f.Probe(8))
		if ok || touched != nil {
			t.Fatalf("kicks %d: 9th insert = %v, %v; want capacity failure", kicks, touched, ok)
		}
		if !slices.Equal(before, tab.words) {
			t.Errorf("kicks %d: failed insert changed words %#x → %#x", kicks, before, tab.words)
		}
		for range kicks + 1 {
			r.next()
		}
		if tab.rng != r {
			t.Errorf("kicks %d: failed insert left RNG at %#x, want %#x (1 + %d draws)", kicks, tab.rng.state, r.state, kicks)
		}
	}
}

// TestTable_InsertAndRemoveKeepEveryFingerprintInItsPair fills random
// tables past their design load and checks each insertion's report and the
// placement invariant against a plain list of the inserted probes.
func TestTable_InsertAndRemoveKeepEveryFingerprintInItsPair(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t, 21), 0))
	rounds := 40
	if testing.Short() {
		rounds = 8
	}
	for round := range rounds {
		n := uint64(2) << rng.IntN(8)
		f := mustFormat(t, n)
		tab := newTable(make([]uint64, n), f, 1+rng.IntN(64))
		var held []Probe
		for range int(n) * 6 {
			if len(held) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(held))
				before := slices.Clone(tab.words)
				tt, ok := tab.remove(held[i])
				if !ok || (tt.bucket != held[i].A && tt.bucket != held[i].B) || tt.word != before[tt.bucket] {
					t.Fatalf("round %d: remove(%+v) = %+v, %v; want a clear in A or B", round, held[i], tt, ok)
				}
				held = slices.Delete(held, i, i+1)
				continue
			}
			p := f.Probe(rng.Uint64())
			before := slices.Clone(tab.words)
			touched, ok := tab.insert(p)
			if !ok {
				if !slices.Equal(before, tab.words) {
					t.Fatalf("round %d: failed insert(%+v) changed the words", round, p)
				}
				continue
			}
			held = append(held, p)
			checkTouched(t, before, tab.words, touched)
		}
		checkPlacement(t, f, tab.words, held)
	}
}

// checkTouched verifies an insertion report: distinct ascending buckets,
// each with its word before the insertion, covering every changed bucket.
func checkTouched(t *testing.T, before, after []uint64, touched []touch) {
	t.Helper()
	listed := map[uint32]bool{}
	for i, tt := range touched {
		if i > 0 && touched[i-1].bucket >= tt.bucket {
			t.Fatalf("touched %v is not strictly ascending", touched)
		}
		if tt.word != before[tt.bucket] {
			t.Fatalf("touched bucket %d reports original %#x, want %#x", tt.bucket, tt.word, before[tt.bucket])
		}
		listed[tt.bucket] = true
	}
	for b := range before {
		if before[b] != after[b] && !listed[uint32(b)] {
			t.Fatalf("bucket %d changed %#x → %#x but is not in touched %v", b, before[b], after[b], touched)
		}
	}
}

// checkPlacement verifies I2/I3/I4 physically: the non-zero slots are
// exactly the held fingerprints, each copy inside its own pair.
func checkPlacement(t *testing.T, f *Format, words []uint64, held []Probe) {
	t.Helper()
	type group struct {
		fp   uint16
		low  uint32
		high uint32
	}
	key := func(fp uint16, a, b uint32) group { return group{fp, min(a, b), max(a, b)} }
	want := map[group]int{}
	for _, p := range held {
		want[key(p.FP, p.A, p.B)]++
	}
	got := map[group]int{}
	for b, w := range words {
		for s := range SlotsPerBucket {
			if fp := Bucket(w).Slot(s); fp != 0 {
				got[key(fp, uint32(b), f.Alt(uint32(b), fp))]++
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("filter holds %d (fp, pair) groups, want %d", len(got), len(want))
	}
	for g, n := range want {
		if got[g] != n {
			t.Fatalf("filter holds %d copies of fp %#x in pair {%d, %d}, want %d", got[g], g.fp, g.low, g.high, n)
		}
	}
}
