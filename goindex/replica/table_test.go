package replica

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/internal/testseed"
)

func TestRegionWords_CountsHeaderAndPaddedRows(t *testing.T) {
	for _, c := range []struct {
		lanes int
		n     uint64
		want  int
	}{
		{1, 2, 8 + 2*8},
		{8, 1024, 8 + 1024*8},
		{9, 1024, 8 + 1024*16},
		{16, 1 << 19, 8 + (1<<19)*16},
		{64, 1 << 22, 8 + (1<<22)*64},
	} {
		got, err := RegionWords(Config{Lanes: c.lanes, Buckets: c.n})
		if err != nil || got != c.want {
			t.Errorf("RegionWords(lanes=%d, buckets=%d) = %d, %v; want %d", c.lanes, c.n, got, err, c.want)
		}
	}
	for _, cfg := range []Config{{0, 8}, {65, 8}, {4, 0}, {4, 1}, {4, 12}, {4, 1 << 25}} {
		if _, err := RegionWords(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("RegionWords(%+v) error = %v, want ErrBadConfig", cfg, err)
		}
		if _, err := New(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(%+v) error = %v, want ErrBadConfig", cfg, err)
		}
	}
}

func TestNew_IsAlignedEmptyAndNotReady(t *testing.T) {
	for _, lanes := range []int{1, 3, 8, 13, 64} {
		tab := mustTable(t, lanes, 16)
		if addr := uintptr(unsafe.Pointer(&tab.region[0])); addr%RegionAlignBytes != 0 {
			t.Errorf("New(lanes=%d) region at %#x, want %d-byte aligned", lanes, addr, RegionAlignBytes)
		}
		if tab.Ready() != 0 || tab.Lanes() != lanes || tab.Buckets() != 16 {
			t.Errorf("New(lanes=%d) = ready %#x, lanes %d, buckets %d; want 0, %d, 16", lanes, tab.Ready(), tab.Lanes(), tab.Buckets(), lanes)
		}
		for l := 0; l < lanes; l++ {
			if w := tab.AppendLane(nil, l); len(w) != 16 || slices.Max(w) != 0 {
				t.Errorf("New(lanes=%d) lane %d = %v, want 16 zero words", lanes, l, w)
			}
		}
	}
}

// alignedRegion returns words of a 64-byte-aligned region, shifted by
// shift words from the boundary.
func alignedRegion(words, shift int) []uint64 {
	buf := make([]uint64, words+16)
	skip := (RegionAlignBytes - int(uintptr(unsafe.Pointer(&buf[0]))%RegionAlignBytes)) % RegionAlignBytes / 8
	return buf[skip+shift : skip+shift+words]
}

func TestNewInRegion_RejectsShortOrMisalignedRegion(t *testing.T) {
	cfg := Config{Lanes: 12, Buckets: 32}
	need, _ := RegionWords(cfg)
	if _, err := NewInRegion(alignedRegion(need-1, 0), cfg); !errors.Is(err, ErrBadRegion) {
		t.Errorf("NewInRegion(%d words, need %d) error = %v, want ErrBadRegion", need-1, need, err)
	}
	if _, err := NewInRegion(alignedRegion(need, 1), cfg); !errors.Is(err, ErrBadRegion) {
		t.Errorf("NewInRegion(misaligned by 8 bytes) error = %v, want ErrBadRegion", err)
	}
	if _, err := NewInRegion(alignedRegion(need+5, 0), cfg); err != nil {
		t.Errorf("NewInRegion(%d words, need %d) error = %v, want nil", need+5, need, err)
	}
}

// TestNewInRegion_SecondViewSeesWriterState models a reader process that
// attaches to a region another table writes: it sees the words and the
// ready mask, and attaching writes nothing.
func TestNewInRegion_SecondViewSeesWriterState(t *testing.T) {
	cfg := Config{Lanes: 20, Buckets: 64}
	need, _ := RegionWords(cfg)
	region := alignedRegion(need, 0)
	w, err := NewInRegion(region, cfg)
	if err != nil {
		t.Fatalf("NewInRegion(writer): %v", err)
	}
	snap := make([]uint64, 64)
	for i := range snap {
		snap[i] = uint64(i)*0x0001000100010001 + 1
	}
	if err := w.Install(17, snap); err != nil {
		t.Fatalf("Install(17): %v", err)
	}
	before := slices.Clone(region)
	r, err := NewInRegion(region, cfg)
	if err != nil {
		t.Fatalf("NewInRegion(reader): %v", err)
	}
	if !slices.Equal(region, before) {
		t.Errorf("NewInRegion(reader) changed the region")
	}
	if r.Ready() != 1<<17 || !slices.Equal(r.AppendLane(nil, 17), snap) {
		t.Errorf("reader view: ready %#x, lane 17 %v; want %#x, the snapshot", r.Ready(), r.AppendLane(nil, 17)[:4], 1<<17)
	}
	if region[readyWord] != 1<<17 {
		t.Errorf("region word 0 = %#x, want the ready mask %#x", region[readyWord], 1<<17)
	}
	if got := region[headerWords+5*24+17]; got != snap[5] {
		t.Errorf("region word of bucket 5 lane 17 = %#x, want %#x (row stride 24)", got, snap[5])
	}
}

// laneWords returns every lane's words.
func laneWords(tab *Table) [][]uint64 {
	out := make([][]uint64, tab.Lanes())
	for l := range out {
		out[l] = tab.AppendLane(nil, l)
	}
	return out
}

// TestTable_LaneOpsTouchOnlyTheirLane checks Install, Apply, StoreWords,
// StoreWord and Clear against a plain per-lane model, including that no
// other lane's words or ready bit change.
func TestTable_LaneOpsTouchOnlyTheirLane(t *testing.T) {
	seed := testseed.For(t, 0x1A9E)
	rng := rand.New(rand.NewPCG(seed, 6))
	const n = 128
	for _, lanes := range []int{1, 7, 8, 9, 16, 33, 64} {
		tab := mustTable(t, lanes, n)
		model := make([][]uint64, lanes)
		for l := range model {
			model[l] = make([]uint64, n)
		}
		var ready uint64
		for op := 0; op < 400; op++ {
			l := rng.IntN(lanes)
			switch rng.IntN(5) {
			case 0:
				snap := make([]uint64, n)
				for i := range snap {
					snap[i] = rng.Uint64()
				}
				if err := tab.Install(l, snap); err != nil {
					t.Fatalf("Install(lane %d): %v", l, err)
				}
				copy(model[l], snap)
				ready |= 1 << uint(l)
			case 1:
				ims := make([]ckf.Image, rng.IntN(10))
				for i := range ims {
					ims[i] = ckf.Image{Bucket: uint32(rng.IntN(n)), Word: rng.Uint64()}
					model[l][ims[i].Bucket] = ims[i].Word
				}
				if err := tab.Apply(l, ims); err != nil {
					t.Fatalf("Apply(lane %d): %v", l, err)
				}
			case 2:
				off := rng.IntN(n)
				ws := make([]uint64, rng.IntN(n-off+1))
				for i := range ws {
					ws[i] = rng.Uint64()
				}
				tab.StoreWords(l, uint64(off), ws)
				copy(model[l][off:], ws)
				b := rng.IntN(n)
				w := rng.Uint64()
				tab.StoreWord(l, uint64(b), w)
				model[l][b] = w
			case 3:
				if err := tab.Clear(l); err != nil {
					t.Fatalf("Clear(lane %d): %v", l, err)
				}
				clear(model[l])
				ready &^= 1 << uint(l)
			case 4:
				if rng.IntN(2) == 0 {
					tab.SetReady(l)
					ready |= 1 << uint(l)
				} else {
					tab.ClearReady(l)
					ready &^= 1 << uint(l)
				}
			}
			if tab.Ready() != ready {
				t.Fatalf("lanes=%d op %d (seed %#x): Ready() = %#x, want %#x", lanes, op, seed, tab.Ready(), ready)
			}
		}
		got := laneWords(tab)
		for l := range model {
			if !slices.Equal(got[l], model[l]) {
				t.Errorf("lanes=%d (seed %#x): lane %d words differ from the model", lanes, seed, l)
			}
			for b := range model[l] {
				if w := tab.Word(l, uint64(b)); w != model[l][b] {
					t.Fatalf("Word(lane %d, bucket %d) = %#x, want %#x", l, b, w, model[l][b])
				}
			}
		}
	}
}

func TestTable_RejectedCallsWriteNothing(t *testing.T) {
	tab := mustTable(t, 4, 16)
	snap := make([]uint64, 16)
	for i := range snap {
		snap[i] = uint64(i + 1)
	}
	if err := tab.Install(2, snap); err != nil {
		t.Fatalf("Install(2): %v", err)
	}
	before := laneWords(tab)
	ready := tab.Ready()
	if err := tab.Install(2, snap[:15]); !errors.Is(err, ErrSnapshotSize) {
		t.Errorf("Install(15 of 16 words) error = %v, want ErrSnapshotSize", err)
	}
	if err := tab.Apply(2, []ckf.Image{{Bucket: 3, Word: 99}, {Bucket: 16, Word: 7}}); !errors.Is(err, ErrBadImage) {
		t.Errorf("Apply(bucket 16 of 16) error = %v, want ErrBadImage", err)
	}
	for _, l := range []int{-1, 4} {
		if err := tab.Install(l, snap); !errors.Is(err, ErrBadLane) {
			t.Errorf("Install(lane %d) error = %v, want ErrBadLane", l, err)
		}
		if err := tab.Apply(l, nil); !errors.Is(err, ErrBadLane) {
			t.Errorf("Apply(lane %d) error = %v, want ErrBadLane", l, err)
		}
		if err := tab.Clear(l); !errors.Is(err, ErrBadLane) {
			t.Errorf("Clear(lane %d) error = %v, want ErrBadLane", l, err)
		}
	}
	if after := laneWords(tab); !slices.EqualFunc(after, before, slices.Equal) || tab.Ready() != ready {
		t.Errorf("rejected calls changed the table: ready %#x (was %#x)", tab.Ready(), ready)
	}
}

func TestTable_PreconditionViolationsPanic(t *testing.T) {
	tab := mustTable(t, 4, 16)
	for name, f := range map[string]func(){
		"SetReady(4)":             func() { tab.SetReady(4) },
		"ClearReady(-1)":          func() { tab.ClearReady(-1) },
		"StoreWord(lane 9)":       func() { tab.StoreWord(9, 0, 1) },
		"StoreWords(past n)":      func() { tab.StoreWords(0, 10, make([]uint64, 7)) },
		"StoreWords(offset n+1)":  func() { tab.StoreWords(0, 17, nil) },
		"AppendLane(lane 4)":      func() { tab.AppendLane(nil, 4) },
		"Word(lane 0, bucket 16)": func() { tab.Word(0, 16) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

// slotAlphabet is spec §9 item 3's adversarial slot values.
var slotAlphabet = []uint16{0, 1, 2, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF}

// TestPairHits_MatchesContains holds pairHits (and wordHit) to
// ckf.Contains on lane i of line a or line b: every word over the spec's
// adversarial alphabet, absolute and XORed with the fingerprint, in every
// lane of either line beside random words, then random lines with the
// fingerprint planted in random slots of either.
func TestPairHits_MatchesContains(t *testing.T) {
	seed := testseed.For(t, 0x11AE)
	rng := rand.New(rand.NewPCG(seed, 7))
	check := func(a, b *[GroupLanes]uint64, fp uint16) {
		f := uint64(fp) * swarOnes
		got := pairHits(a, b, f)
		var want uint64
		for i := range a {
			ca, cb := ckf.Contains(a[i], fp), ckf.Contains(b[i], fp)
			if ca || cb {
				want |= 1 << uint(i)
			}
			if wordHit(a[i], f) != b2u(ca) || wordHit(b[i], f) != b2u(cb) {
				t.Fatalf("wordHit(%#x / %#x, fp %#x) = %d / %d, want %v / %v (seed %#x)", a[i], b[i], fp, wordHit(a[i], f), wordHit(b[i], f), ca, cb, seed)
			}
		}
		if got != want {
			t.Fatalf("pairHits(%#x, %#x, fp %#x) = %#x, want %#x (seed %#x)", *a, *b, fp, got, want, seed)
		}
	}
	var a, b [GroupLanes]uint64
	random := func(line *[GroupLanes]uint64) {
		for i := range line {
			line[i] = rng.Uint64()
		}
	}
	// Every word over the alphabet in every lane position of either line,
	// absolute and XORed with the fingerprint, beside random words.
	for code := 0; code < 1<<13; code++ {
		var w uint64
		for s := 0; s < 4; s++ {
			w |= uint64(slotAlphabet[code>>(3*s)&7]) << (16 * s)
		}
		fp := uint16(1 + rng.IntN(0xFFFF))
		random(&a)
		random(&b)
		line := &a
		if code>>12&1 == 1 {
			line = &b
		}
		line[code%GroupLanes] = w
		check(&a, &b, fp)
		line[code%GroupLanes] = w ^ uint64(fp)*swarOnes
		check(&a, &b, fp)
	}
	for i := 0; i < 200_000; i++ {
		fp := uint16(1 + rng.IntN(0xFFFF))
		for _, line := range []*[GroupLanes]uint64{&a, &b} {
			for j := range line {
				line[j] = rng.Uint64()
				// Plant the fingerprint in a random slot a sixth of the time.
				if rng.IntN(6) == 0 {
					line[j] = uint64(ckf.Bucket(line[j]).WithSlot(rng.IntN(4), fp))
				}
			}
		}
		check(&a, &b, fp)
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestTable_ProbeMatchesSlowReference holds the grouped Probe (reading only
// the lines of asked lanes) against one ckf.Contains per lane, on random
// tables with planted fingerprints and random lane masks.
func TestTable_ProbeMatchesSlowReference(t *testing.T) {
	seed := testseed.For(t, 0x9B0BE)
	rng := rand.New(rand.NewPCG(seed, 8))
	const n = 256
	f := mustFormat(t, n)
	for _, lanes := range []int{1, 5, 8, 12, 16, 24, 40, 63, 64} {
		tab := mustTable(t, lanes, n)
		snap := make([]uint64, n)
		probes := make([]ckf.Probe, 64)
		for i := range probes {
			probes[i] = f.Probe(rng.Uint64())
		}
		for l := 0; l < lanes; l++ {
			for i := range snap {
				snap[i] = rng.Uint64() & rng.Uint64() // some empty slots
			}
			for _, p := range probes {
				if rng.IntN(3) == 0 {
					b := p.A
					if rng.IntN(2) == 0 {
						b = p.B
					}
					snap[b] = uint64(ckf.Bucket(snap[b]).WithSlot(rng.IntN(4), p.FP))
				}
			}
			if err := tab.Install(l, snap); err != nil {
				t.Fatalf("Install(lane %d): %v", l, err)
			}
		}
		for i := 0; i < 5000; i++ {
			p := probes[rng.IntN(len(probes))]
			ask := rng.Uint64()
			if rng.IntN(4) == 0 {
				ask &= rng.Uint64() & rng.Uint64() // sparse masks skip groups
			}
			if got, want := tab.Probe(p, ask), slowProbe(tab, p, ask); got != want {
				t.Fatalf("Probe(lanes=%d, %+v, mask %#x) = %#x, want %#x (seed %#x)", lanes, p, ask, got, want, seed)
			}
		}
	}
}
