package replica

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/internal/testseed"
)

// vector is one of spec §7's verified cases.
type vector struct {
	name   string
	L      int
	lanes  int
	m      uint64
	w      int
	hits   []uint64
	search []uint32
	linear []uint32
	// stats checks the counters the spec pins; nil when it pins none.
	stats func(st Stats) error
	order []int // the bisection's probe positions, in order, when pinned
}

// hitsExcept returns L positions where one lane hits everywhere except at
// the given positions.
func hitsExcept(L int, except ...int) []uint64 {
	hits := make([]uint64, L)
	for p := range hits {
		if !slices.Contains(except, p) {
			hits[p] = 1
		}
	}
	return hits
}

// hitsAt returns L positions where every lane of mask hits at pos for
// which in(pos) holds.
func hitsAt(L int, mask uint64, in func(pos int) bool) []uint64 {
	hits := make([]uint64, L)
	for p := range hits {
		if in(p) {
			hits[p] = mask
		}
	}
	return hits
}

func span(lo, hi int) []int {
	var s []int
	for p := lo; p <= hi; p++ {
		s = append(s, p)
	}
	return s
}

func specVectors() []vector {
	var vs []vector
	for k := 2; k <= 8; k++ {
		vs = append(vs,
			vector{name: fmt.Sprintf("L33_W1_miss%d", 33-k), L: 33, lanes: 1, m: 1, w: 1, hits: hitsExcept(33, 33-k),
				search: []uint32{33}, linear: []uint32{uint32(33 - k)}},
			vector{name: fmt.Sprintf("L33_W8_miss%d", 33-k), L: 33, lanes: 1, m: 1, w: 8, hits: hitsExcept(33, 33-k),
				search: []uint32{uint32(33 - k)}, linear: []uint32{uint32(33 - k)}})
	}
	vs = append(vs,
		vector{name: "L33_W8_holeBeyondWindow", L: 33, lanes: 1, m: 1, w: 8, hits: hitsExcept(33, 24),
			search: []uint32{33}, linear: []uint32{24}},
		vector{name: "L65_2lanes_W2_fallback", L: 65, lanes: 2, m: 0b11, w: 2,
			hits:   hitsAt(65, 0b11, func(p int) bool { return p < 40 || p == 48 }),
			search: []uint32{40, 40}, linear: []uint32{40, 40},
			stats: func(st Stats) error {
				return wantStats(st, Stats{LeftEdgeLanes: 2, ActivatedLanes: 2, FallbackProbes: 8, FallbackLaneProbes: 16}, false)
			}},
		vector{name: "L65_W8_provenanceSkip", L: 65, lanes: 1, m: 1, w: 8,
			hits:   hitsAt(65, 1, func(p int) bool { return p < 41 || p >= 48 && p <= 51 }),
			search: []uint32{44}, linear: []uint32{41},
			stats: func(st Stats) error {
				return wantStats(st, Stats{LeftEdgeLanes: 1, ActivatedLanes: 0, ProvenanceSkips: 1}, true)
			}},
		vector{name: "L65_W8_falsePredecessor", L: 65, lanes: 1, m: 1, w: 8,
			hits:   hitsAt(65, 1, func(p int) bool { return p < 20 || p == 32 || p == 48 }),
			search: []uint32{33}, linear: []uint32{20},
			stats: func(st Stats) error {
				return wantStats(st, Stats{LeftEdgeLanes: 1, ActivatedLanes: 1, FallbackProbes: 1}, false)
			}},
		vector{name: "L64_4lanes_W8_order", L: 64, lanes: 4, m: 0xF, w: 8,
			hits:   prefixHits(64, []int{0, 5, 17, 64}),
			search: []uint32{0, 5, 17, 64}, linear: []uint32{0, 5, 17, 64},
			order: slices.Concat([]int{0, 1, 2, 4, 8, 16, 32, 6, 24, 48, 5, 20, 56, 18, 60, 17, 62, 63},
				span(0, 4), span(9, 16), span(56, 63))},
	)
	return vs
}

// wantStats compares the fallback counters of got with want; with
// skipsPinned false, ProvenanceSkips is not compared.
func wantStats(got, want Stats, skipsPinned bool) error {
	g := Stats{LeftEdgeLanes: got.LeftEdgeLanes, ActivatedLanes: got.ActivatedLanes,
		FallbackProbes: got.FallbackProbes, FallbackLaneProbes: got.FallbackLaneProbes, ProvenanceSkips: got.ProvenanceSkips}
	if !skipsPinned {
		g.ProvenanceSkips = 0
	}
	if want.FallbackLaneProbes == 0 {
		g.FallbackLaneProbes = 0
	}
	if g != want {
		return fmt.Errorf("fallback stats %+v, want %+v", g, want)
	}
	return nil
}

func TestBisect_SpecVectorsOnBitmapMembership(t *testing.T) {
	for _, v := range specVectors() {
		t.Run(v.name, func(t *testing.T) {
			var bs bisector
			var st Stats
			b := &bitmapMembership{hits: v.hits}
			got := make([]uint32, v.lanes)
			bs.bisect(b, &st, got, v.L, v.m, v.w)
			if !slices.Equal(got, v.search) {
				t.Errorf("bisect(L=%d, M=%#x, W=%d) = %v, want %v", v.L, v.m, v.w, got, v.search)
			}
			if v.stats != nil {
				if err := v.stats(st); err != nil {
					t.Errorf("bisect(L=%d, M=%#x, W=%d): %v", v.L, v.m, v.w, err)
				}
			}
			if v.order != nil && !slices.Equal(b.order, v.order) {
				t.Errorf("bisect(L=%d, M=%#x, W=%d) probed %d positions %v, want %d %v", v.L, v.m, v.w, len(b.order), b.order, len(v.order), v.order)
			}
			if st.Probes != uint64(len(b.order)) {
				t.Errorf("bisect(L=%d) counted %d probes, made %d", v.L, st.Probes, len(b.order))
			}
			if v.name == "L65_2lanes_W2_fallback" {
				counts := map[int]int{}
				for _, p := range b.order {
					counts[p]++
				}
				if counts[17] != 0 {
					t.Errorf("bisect probed position 17 %d times, want never", counts[17])
				}
				for p := 33; p <= 40; p++ {
					if counts[p] != 1 {
						t.Errorf("bisect probed position %d %d times, want once", p, counts[p])
					}
				}
			}

			b.order = nil
			lin := make([]uint32, v.lanes)
			linear(b, &st, lin, v.L, v.m)
			if !slices.Equal(lin, v.linear) {
				t.Errorf("linear(L=%d, M=%#x) = %v, want %v", v.L, v.m, lin, v.linear)
			}
		})
	}
}

// TestSearch_SpecVectorsOnRealTable runs the same vectors through a real
// Table whose rows hold exactly the vector's hit pattern, in every mode.
func TestSearch_SpecVectorsOnRealTable(t *testing.T) {
	const n = 1 << 12
	f := mustFormat(t, n)
	rng := rand.New(rand.NewPCG(testseed.For(t, 7), 0))
	for _, v := range specVectors() {
		t.Run(v.name, func(t *testing.T) {
			tab := mustTable(t, v.lanes, n)
			for l := 0; l < v.lanes; l++ {
				tab.SetReady(l)
			}
			hashes := newRowQuery(tab, f, rng).build(v.hits)
			for _, c := range []struct {
				mode Mode
				want []uint32
			}{{Bisect, v.search}, {Linear, v.linear}, {Chunked, v.linear}, {AFirst, v.linear}} {
				s := mustSearcher(t, tab, f, c.mode, v.w)
				got, m := s.Search(nil, hashes, ^uint64(0))
				if m != v.m {
					t.Errorf("Search(%v) mask = %#x, want %#x", c.mode, m, v.m)
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("Search(%v, L=%d, W=%d) = %v, want %v", c.mode, v.L, v.w, got, c.want)
				}
				if c.mode == Bisect {
					if v.stats != nil {
						if err := v.stats(s.Stats()); err != nil {
							t.Errorf("Search(%v, L=%d, W=%d): %v", c.mode, v.L, v.w, err)
						}
					}
					if v.order != nil && s.Stats().Probes != uint64(len(v.order)) {
						t.Errorf("Search(%v, L=%d) made %d probes, want %d", c.mode, v.L, s.Stats().Probes, len(v.order))
					}
				}
			}
		})
	}
}
