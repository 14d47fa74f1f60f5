package replica

import (
	"errors"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/internal/testseed"
)

// searchRig holds, per lane count, a real table and its Searchers, reused
// across the random cases.
type searchRig struct {
	f      *ckf.Format
	rng    *rand.Rand
	tables map[int]*rigTable
}

type rigTable struct {
	t      *Table
	q      *rowQuery
	linear *Searcher
	chunk  *Searcher
	touch  *Searcher    // Chunked on the portable Go kernels
	afirst [2]*Searcher // AFirst on the native and the portable kernels
	bisect [MaxWindow + 1]*Searcher
}

const rigBuckets = 1 << 12

func newSearchRig(t testing.TB, rng *rand.Rand) *searchRig {
	return &searchRig{f: mustFormat(t, rigBuckets), rng: rng, tables: map[int]*rigTable{}}
}

func (r *searchRig) table(t testing.TB, lanes int) *rigTable {
	if rt := r.tables[lanes]; rt != nil {
		return rt
	}
	tab := mustTable(t, lanes, rigBuckets)
	rt := &rigTable{t: tab, q: newRowQuery(tab, r.f, r.rng),
		linear: mustSearcher(t, tab, r.f, Linear, 0), chunk: mustSearcher(t, tab, r.f, Chunked, 0), touch: mustSearcher(t, tab, r.f, Chunked, 0)}
	rt.touch.kern = goKernels
	rt.afirst = [2]*Searcher{mustSearcher(t, tab, r.f, AFirst, 0), mustSearcher(t, tab, r.f, AFirst, 0)}
	rt.afirst[1].kern = goKernels
	for w := MinWindow; w <= MaxWindow; w++ {
		rt.bisect[w] = mustSearcher(t, tab, r.f, Bisect, w)
	}
	r.tables[lanes] = rt
	return rt
}

// randomCase draws a lane count (1–16, or 64 a quarter of the time), a
// length L ≤ 300 and, per lane, a prefix depth (0, L or uniform).
func randomCase(rng *rand.Rand) (lanes, L int, t []int) {
	lanes = 1 + rng.IntN(16)
	if rng.IntN(4) == 0 {
		lanes = 64
	}
	L = rng.IntN(301)
	t = make([]int, lanes)
	for l := range t {
		switch rng.IntN(5) {
		case 0:
			t[l] = 0
		case 1:
			t[l] = L
		default:
			t[l] = rng.IntN(L + 1)
		}
	}
	return lanes, L, t
}

// randomMasks sets a random ready mask on tab (each lane ready with
// probability 7/8) and returns it with a random lane mask to ask for.
func randomMasks(rng *rand.Rand, tab *Table) (ready, ask uint64) {
	for l := 0; l < tab.Lanes(); l++ {
		if rng.IntN(8) != 0 {
			tab.SetReady(l)
			ready |= 1 << uint(l)
		} else {
			tab.ClearReady(l)
		}
	}
	ask = ^uint64(0)
	if rng.IntN(2) == 0 {
		ask = rng.Uint64()
	}
	return ready, ask
}

// search runs s on the query given, at random, as its hashes, its local
// hashes or its probes.
func search(rng *rand.Rand, s *Searcher, dst []uint32, q *rowQuery, ask uint64) ([]uint32, uint64) {
	switch rng.IntN(3) {
	case 0:
		return s.SearchProbes(dst, q.probes, ask)
	case 1:
		return s.SearchLocals(dst, q.locals, ask)
	}
	return s.Search(dst, q.hashes, ask)
}

func TestSearch_PrefixClosedRandomCasesAllModesEqualDepth(t *testing.T) {
	seed := testseed.For(t, 0x5EA4C11)
	rng := rand.New(rand.NewPCG(seed, 1))
	rig := newSearchRig(t, rng)
	cases := 200_000
	if testing.Short() {
		cases = 4_000 // -race runs this about 10× slower
	}
	var lin, chk, tch, bis, af []uint32
	for c := 0; c < cases; c++ {
		lanes, L, depths := randomCase(rng)
		rt := rig.table(t, lanes)
		hits := prefixHitsFast(L, depths)
		rt.q.build(hits)
		ready, ask := randomMasks(rng, rt.t)
		w := MinWindow + rng.IntN(MaxWindow)
		wantM := ready & ask & rt.t.all

		var ml, mc, mt, mb uint64
		lin, ml = search(rng, rt.linear, lin, rt.q, ask)
		chk, mc = search(rng, rt.chunk, chk, rt.q, ask)
		tch, mt = search(rng, rt.touch, tch, rt.q, ask)
		bis, mb = search(rng, rt.bisect[w], bis, rt.q, ask)
		var ma uint64
		af, ma = search(rng, rt.afirst[c&1], af, rt.q, ask)
		if ml != wantM || mc != wantM || mt != wantM || mb != wantM || ma != wantM {
			t.Fatalf("case %d (seed %#x): masks linear %#x chunked %#x touch %#x bisect %#x afirst %#x, want %#x", c, seed, ml, mc, mt, mb, ma, wantM)
		}
		for l := 0; l < lanes; l++ {
			want := uint32(0)
			if wantM>>uint(l)&1 == 1 {
				want = uint32(depths[l])
			}
			if lin[l] != want || chk[l] != want || tch[l] != want || bis[l] != want || af[l] != want {
				t.Fatalf("case %d (seed %#x): lanes=%d L=%d W=%d lane %d t=%d: linear %d chunked %d touch %d bisect %d afirst %d, want %d",
					c, seed, lanes, L, w, l, depths[l], lin[l], chk[l], tch[l], bis[l], af[l], want)
			}
		}
	}
}

// prefixHitsFast is prefixHits in O(L + lanes): lane l leaves the running
// mask at position t[l].
func prefixHitsFast(L int, t []int) []uint64 {
	leave := make([]uint64, L+1)
	var all uint64
	for l, tl := range t {
		all |= 1 << uint(l)
		leave[tl] |= 1 << uint(l)
	}
	hits := make([]uint64, L)
	running := all &^ leave[0]
	for p := range hits {
		hits[p] = running
		running &^= leave[p+1]
	}
	return hits
}

func TestPrefixHitsFast_MatchesPrefixHits(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.For(t, 3), 3))
	for i := 0; i < 2000; i++ {
		_, L, depths := randomCase(rng)
		got, want := prefixHitsFast(L, depths), prefixHits(L, depths)
		for p := range want {
			if got[p] != want[p] {
				t.Fatalf("prefixHitsFast(L=%d, %v)[%d] = %#x, want %#x", L, depths, p, got[p], want[p])
			}
		}
	}
}

// noisyHits returns a static pattern with holes and false hits: lane l hits
// below t[l] except for holes, and misses from t[l] on except for false
// hits, each with probability 1/rate.
func noisyHits(rng *rand.Rand, L int, t []int, rate int) []uint64 {
	hits := prefixHitsFast(L, t)
	for p := range hits {
		for l := range t {
			if rng.IntN(rate) == 0 {
				hits[p] ^= 1 << uint(l)
			}
		}
	}
	return hits
}

// longestRun returns lane l's run of hits from position 0.
func longestRun(hits []uint64, l int) uint32 {
	for p, h := range hits {
		if h>>uint(l)&1 == 0 {
			return uint32(p)
		}
	}
	return uint32(len(hits))
}

func TestSearch_StaticNoisyMembershipChunkedEqualsLinearBisectNeverUnder(t *testing.T) {
	seed := testseed.For(t, 0xB0B)
	rng := rand.New(rand.NewPCG(seed, 2))
	rig := newSearchRig(t, rng)
	cases := 30_000
	if testing.Short() {
		cases = 1_500
	}
	var lin, chk, tch, bis, af []uint32
	var lanesSeen, inflated uint64
	for c := 0; c < cases; c++ {
		lanes, L, depths := randomCase(rng)
		rt := rig.table(t, lanes)
		hits := noisyHits(rng, L, depths, 2+rng.IntN(60))
		rt.q.build(hits)
		_, ask := randomMasks(rng, rt.t)
		w := MinWindow + rng.IntN(MaxWindow)
		var m uint64
		lin, m = search(rng, rt.linear, lin, rt.q, ask)
		chk, _ = search(rng, rt.chunk, chk, rt.q, ask)
		tch, _ = search(rng, rt.touch, tch, rt.q, ask)
		bis, _ = search(rng, rt.bisect[w], bis, rt.q, ask)
		af, _ = search(rng, rt.afirst[c&1], af, rt.q, ask)
		for l := 0; l < lanes; l++ {
			in := m>>uint(l)&1 == 1
			var want uint32
			if in {
				want = longestRun(hits, l)
				lanesSeen++
			}
			if lin[l] != want || chk[l] != want || tch[l] != want || af[l] != want {
				t.Fatalf("case %d (seed %#x): lanes=%d L=%d lane %d: linear %d chunked %d touch %d afirst %d, want run %d", c, seed, lanes, L, l, lin[l], chk[l], tch[l], af[l], want)
			}
			if bis[l] < lin[l] || int(bis[l]) > L || !in && bis[l] != 0 {
				t.Fatalf("case %d (seed %#x): lanes=%d L=%d W=%d lane %d (in M %v): bisect %d, linear %d: want linear ≤ bisect ≤ L", c, seed, lanes, L, w, l, in, bis[l], lin[l])
			}
			if bis[l] > lin[l] {
				inflated++
			}
		}
	}
	t.Logf("bisect inflated %d of %d lane results (%.2f%%) on noisy static membership", inflated, lanesSeen, 100*float64(inflated)/float64(max(lanesSeen, 1)))
}

// TestBisect_DepthIsSmallestObservedMiss checks spec §7's exact meaning on
// random static patterns: depth[l] is the smallest position at which l took
// part in a probe and missed, or L if it never missed.
func TestBisect_DepthIsSmallestObservedMiss(t *testing.T) {
	seed := testseed.For(t, 0xD1CE)
	rng := rand.New(rand.NewPCG(seed, 4))
	var bs bisector
	var st Stats
	cases := 50_000
	if testing.Short() {
		cases = 5_000
	}
	for c := 0; c < cases; c++ {
		lanes, L, depths := randomCase(rng)
		b := &bitmapMembership{hits: noisyHits(rng, L, depths, 2+rng.IntN(40))}
		m := rng.Uint64() >> uint(64-lanes)
		w := MinWindow + rng.IntN(MaxWindow)
		got := make([]uint32, lanes)
		bs.bisect(b, &st, got, L, m, w)
		want := make([]uint32, lanes)
		for l := range want {
			if m>>uint(l)&1 == 1 {
				want[l] = uint32(L)
			}
		}
		for i, pos := range b.order {
			if b.asked[i]&^m != 0 {
				t.Fatalf("case %d (seed %#x): probe %d at %d asked lanes %#x outside M %#x", c, seed, i, pos, b.asked[i], m)
			}
			for miss := b.asked[i] &^ b.hits[pos]; miss != 0; miss &= miss - 1 {
				l := bits.TrailingZeros64(miss)
				want[l] = min(want[l], uint32(pos))
			}
		}
		for l := range want {
			if got[l] != want[l] {
				t.Fatalf("case %d (seed %#x): bisect(lanes=%d, L=%d, W=%d) lane %d = %d, want smallest observed miss %d", c, seed, lanes, L, w, l, got[l], want[l])
			}
		}
	}
}

func TestSearch_ZeroLengthQueryAndNoReadyLanes(t *testing.T) {
	f := mustFormat(t, 64)
	tab := mustTable(t, 3, 64)
	for _, mode := range []Mode{Chunked, Bisect, Linear, AFirst} {
		s := mustSearcher(t, tab, f, mode, 0)
		got, m := s.Search([]uint32{9, 9, 9, 9, 9}, []uint64{1, 2, 3}, ^uint64(0))
		if m != 0 || len(got) != 3 || got[0]|got[1]|got[2] != 0 {
			t.Errorf("Search(%v) on a table with no ready lane = %v, mask %#x; want [0 0 0], 0", mode, got, m)
		}
		tab.SetReady(1)
		got, m = s.Search(got, nil, ^uint64(0))
		if m != 2 || got[1] != 0 {
			t.Errorf("Search(%v, L=0) = %v, mask %#x; want depth 0, mask 0x2", mode, got, m)
		}
		tab.ClearReady(1)
	}
}

func TestNewSearcher_RejectsBadConfig(t *testing.T) {
	tab := mustTable(t, 4, 1024)
	for _, c := range []struct {
		name string
		n    uint64
		cfg  SearchConfig
	}{
		{"format bucket count", 2048, SearchConfig{}},
		{"unknown mode", 1024, SearchConfig{Mode: AFirst + 1}},
		{"window 9", 1024, SearchConfig{Mode: Bisect, Window: 9}},
		{"window -1", 1024, SearchConfig{Mode: Bisect, Window: -1}},
	} {
		if _, err := NewSearcher(tab, mustFormat(t, c.n), c.cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("NewSearcher(%s) error = %v, want ErrBadConfig", c.name, err)
		}
	}
	s := mustSearcher(t, tab, mustFormat(t, 1024), Bisect, 0)
	if s.window != DefaultWindow || s.Mode() != Bisect {
		t.Errorf("NewSearcher(Bisect, Window 0) = mode %v window %d, want bisect, %d", s.Mode(), s.window, DefaultWindow)
	}
	for m, want := range map[Mode]string{Chunked: "chunked", Bisect: "bisect", Linear: "linear", AFirst: "afirst", 7: "Mode(7)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", uint8(m), got, want)
		}
	}
}

func TestSearch_DoesNotAllocate(t *testing.T) {
	const n = 1 << 10
	f := mustFormat(t, n)
	tab := mustTable(t, 16, n)
	rng := rand.New(rand.NewPCG(testseed.For(t, 11), 5))
	depths := make([]int, 16)
	for l := range depths {
		depths[l] = rng.IntN(100)
		tab.SetReady(l)
	}
	q := newRowQuery(tab, f, rng)
	q.build(noisyHits(rng, 100, depths, 30))
	for _, mode := range []Mode{Chunked, Bisect, Linear, AFirst} {
		s := mustSearcher(t, tab, f, mode, 0)
		dst := make([]uint32, 16)
		s.Search(dst, q.hashes, ^uint64(0)) // grows the scratch to L = 100
		if a := testing.AllocsPerRun(100, func() { dst, _ = s.Search(dst, q.hashes, ^uint64(0)) }); a != 0 {
			t.Errorf("Search(%v, L=100) allocates %.1f times per call, want 0", mode, a)
		}
		if a := testing.AllocsPerRun(100, func() { dst, _ = s.SearchProbes(dst, q.probes, ^uint64(0)) }); a != 0 {
			t.Errorf("SearchProbes(%v, L=100) allocates %.1f times per call, want 0", mode, a)
		}
		s.SearchLocals(dst, q.locals, ^uint64(0)) // grows the chain scratch
		if a := testing.AllocsPerRun(100, func() { dst, _ = s.SearchLocals(dst, q.locals, ^uint64(0)) }); a != 0 {
			t.Errorf("SearchLocals(%v, L=100) allocates %.1f times per call, want 0", mode, a)
		}
	}
}

// TestChunked_CountsFetchedAndTestedLines pins the chunked scan's traffic
// counters to its schedule: the first chunk and its lookahead are fetched
// before the first test (LeadLines), every fetched or tested position
// names 2 lines per lane group read, and a search that loses its last lane
// early has still fetched that first round.
func TestChunked_CountsFetchedAndTestedLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.For(t, 18), 18))
	rig := newSearchRig(t, rng)
	first := chunkPositions + fetchAhead // positions fetched before the first test
	for _, tc := range []struct {
		lanes, L, depth int // lane 0 holds depth leading blocks, the others none
		tested, fetched int
		fetchedLines    int
		testedLines     int
		leadLines       int
	}{
		{lanes: 8, L: 20, depth: 20, tested: 20, fetched: 20, fetchedLines: 40, testedLines: 40, leadLines: 40},
		// Both groups of 16 lanes are read until a chunk boundary after
		// position 0 has dropped lanes 8–15.
		{lanes: 16, L: 20, depth: 20, tested: 20, fetched: 20, fetchedLines: 80, testedLines: 80, leadLines: 80},
		{lanes: 16, L: 40, depth: 40, tested: 40, fetched: 40, fetchedLines: 160, testedLines: 4*chunkPositions + 2*(40-chunkPositions), leadLines: 160},
		{lanes: 8, L: 100, depth: 100, tested: 100, fetched: 100, fetchedLines: 200, testedLines: 200, leadLines: 2 * first},
		{lanes: 8, L: 100, depth: 3, tested: 4, fetched: first, fetchedLines: 2 * first, testedLines: 2 * chunkPositions, leadLines: 2 * first},
		{lanes: 8, L: 100, depth: 0, tested: 1, fetched: first, fetchedLines: 2 * first, testedLines: 2 * chunkPositions, leadLines: 2 * first},
	} {
		rt := rig.table(t, tc.lanes)
		hits := prefixHits(tc.L, append([]int{tc.depth}, make([]int, tc.lanes-1)...))
		q := rt.q.build(hits)
		for l := range tc.lanes {
			rt.t.SetReady(l)
		}
		before := rt.chunk.Stats()
		depth, _ := rt.chunk.Search(nil, q, ^uint64(0))
		st := rt.chunk.Stats()
		if int(depth[0]) != tc.depth {
			t.Fatalf("%+v: depth %d, want %d", tc, depth[0], tc.depth)
		}
		got := [...]uint64{st.Probes - before.Probes, st.FetchedPositions - before.FetchedPositions,
			st.FetchedLines - before.FetchedLines, st.TestedLines - before.TestedLines, st.LeadLines - before.LeadLines}
		want := [...]uint64{uint64(tc.tested), uint64(tc.fetched), uint64(tc.fetchedLines), uint64(tc.testedLines), uint64(tc.leadLines)}
		if got != want {
			t.Errorf("lanes=%d L=%d depth=%d: tested, fetched positions, fetched, tested, lead lines = %v, want %v", tc.lanes, tc.L, tc.depth, got, want)
		}
	}
}
