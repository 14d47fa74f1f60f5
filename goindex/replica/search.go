package replica

import (
	"fmt"
	"math/bits"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
)

// Mode selects a Searcher's algorithm. All modes report, for each lane in
// the captured mask, a depth in blocks; on a table whose evidence is
// prefix-closed they agree exactly.
type Mode uint8

const (
	// Chunked is the default: a linear scan whose row loads are issued in
	// chunks ahead of the tests (both rows of a position prefetched a
	// chunk or more ahead, then tested at once), stopping as soon as no lane is
	// left. Its depths equal Linear's on any table state, and it measured
	// fastest on Mooncake-shaped requests (BenchmarkProbe, BENCHMARKS.md).
	Chunked Mode = iota
	// Bisect is upstream's shape (spec §7): galloping, grouped binary search,
	// a verification window and the terminal-branch fallback. It reads
	// fewer positions on very long requests and may over-report a lane past
	// an unobserved hole (search ≥ linear), never under-report.
	Bisect
	// Linear is the plain reference, one position after another; the
	// differential oracle of the others.
	Linear
	// AFirst is Chunked reading row B only where row A leaves a lane
	// unresolved, at the price of one more round of misses per chunk (or
	// more, for a lane with B hits at consecutive positions). Its depths
	// equal Linear's on any table state. It is measured against Chunked
	// in `goindex bench ckf`, not the default.
	AFirst
)

var modeNames = [...]string{Chunked: "chunked", Bisect: "bisect", Linear: "linear", AFirst: "afirst"}

// String returns the mode's name: chunked, bisect, linear or afirst.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Verification window bounds of Bisect mode (spec §2 limits).
const (
	MinWindow     = 1
	MaxWindow     = 8
	DefaultWindow = 8
)

// SearchConfig configures a Searcher.
type SearchConfig struct {
	// Mode selects the algorithm. // optional; default: Chunked
	Mode Mode
	// Window is Bisect's verification window W in [1, 8]; other modes
	// ignore it. // optional; default: 8
	Window int
}

// Searcher runs prefix searches over one Table with one addressing Format.
// It owns the scratch space a search needs, so after its first searches have
// grown that space to the longest query, Search, SearchLocals and
// SearchProbes do not allocate. A Searcher is not safe for concurrent use:
// give each goroutine its own; any number of Searchers may search one Table
// concurrently with its writers.
type Searcher struct {
	t      *Table
	f      *ckf.Format
	mode   Mode
	window int
	stats  Stats
	probes []ckf.Probe // the query's probes, computed as the search reaches them
	canon  []uint64    // SearchLocals: the query's canonical hashes, chained as reached
	hits   []uint64    // per position, the active lanes found in row A or B (AFirst: row A)
	groups groupList   // the lane groups the current search still reads
	// AFirst's scratch: per position the lanes found in row B, the lanes
	// whose row B is read, and the probes of row A and of row B alone.
	hitsB, needB []uint64
	rowA, rowB   []ckf.Probe
	groupsB      groupList
	bis          bisector
	tp           tableProbes // the reference modes' membership, kept here so it does not escape
	// The query of the search in progress (nil outside one): its
	// canonical hashes or its local hashes; the chunked scan hashes
	// them chunk by chunk.
	qHashes, qLocals []uint64
	// kern is nativeKernels(); the tests swap in goKernels to run the
	// portable path on amd64.
	kern rowKernels
}

// NewSearcher returns a Searcher over t whose hashes are addressed with f;
// f's bucket count must be t's.
func NewSearcher(t *Table, f *ckf.Format, cfg SearchConfig) (*Searcher, error) {
	if f.Buckets() != t.Buckets() {
		return nil, fmt.Errorf("%w: format has %d buckets, table %d", ErrBadConfig, f.Buckets(), t.Buckets())
	}
	if cfg.Mode > AFirst {
		return nil, fmt.Errorf("%w: unknown mode %d", ErrBadConfig, cfg.Mode)
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window < MinWindow || cfg.Window > MaxWindow {
		return nil, fmt.Errorf("%w: window %d, want %d..%d", ErrBadConfig, cfg.Window, MinWindow, MaxWindow)
	}
	s := &Searcher{t: t, f: f, mode: cfg.Mode, window: cfg.Window, kern: nativeKernels()}
	s.tp.s = s
	return s, nil
}

// Mode returns the Searcher's algorithm.
func (s *Searcher) Mode() Mode { return s.mode }

// Stats returns the Searcher's counters since it was made.
func (s *Searcher) Stats() Stats { return s.stats }

// Search finds, for each lane in lanes that is ready, how many leading
// blocks of the query it holds. hashes are the query's canonical sequence
// hashes from the root (kv.AppendChain of its local hashes). It loads the
// ready mask once and searches M = ready ∧ lanes ∧ the table's lanes. It
// returns dst resized to Lanes() with depth[l] in blocks for every l in M
// and 0 elsewhere (growing dst only if its capacity is short), and M.
// Every depth is ≤ len(hashes).
func (s *Searcher) Search(dst []uint32, hashes []uint64, lanes uint64) ([]uint32, uint64) {
	s.qHashes = hashes
	depth, m := s.run(dst, len(hashes), lanes)
	s.qHashes = nil // do not keep the caller's query alive
	return depth, m
}

// SearchLocals is Search for a query given as its local block hashes from
// the root, as a router has them: it chains them (kv.ChainHash) itself.
// The chunked scan chains only the positions it reaches, a chunk at a time
// between its memory waits, so the chain costs little beyond the search.
func (s *Searcher) SearchLocals(dst []uint32, locals []uint64, lanes uint64) ([]uint32, uint64) {
	s.qLocals = locals
	if cap(s.canon) < len(locals) {
		s.canon = make([]uint64, len(locals))
	}
	depth, m := s.run(dst, len(locals), lanes)
	s.qLocals = nil
	return depth, m
}

// SearchProbes is Search for a query whose probes (Format.Probe of each
// canonical hash, in order) the caller computed in advance. It panics if a
// probe's bucket is not below the bucket count.
func (s *Searcher) SearchProbes(dst []uint32, probes []ckf.Probe, lanes uint64) ([]uint32, uint64) {
	n := uint32(s.t.buckets)
	for i, p := range probes {
		if p.A >= n || p.B >= n {
			panic(fmt.Sprintf("replica: probe %d has buckets %d, %d; table has %d", i, p.A, p.B, n))
		}
	}
	if cap(s.probes) < len(probes) {
		s.probes = make([]ckf.Probe, len(probes))
	}
	copy(s.probes, probes)
	return s.run(dst, len(probes), lanes)
}

// run counts the search, captures M and runs the Searcher's mode over the
// query of L positions.
func (s *Searcher) run(dst []uint32, L int, lanes uint64) ([]uint32, uint64) {
	s.stats.Searches++
	m := s.t.Ready() & lanes & s.t.all
	if cap(dst) < s.t.lanes {
		dst = make([]uint32, s.t.lanes)
	}
	dst = dst[:s.t.lanes]
	clear(dst)
	if cap(s.probes) < L {
		s.probes = make([]ckf.Probe, L)
	}
	switch s.mode {
	case Chunked:
		s.scan(dst, L, m)
		return dst, m
	case AFirst:
		s.scanAFirst(dst, L, m)
		return dst, m
	}
	s.fill(0, L)
	s.tp.probes = s.probes[:L]
	if s.mode == Bisect {
		s.bis.bisect(&s.tp, &s.stats, dst, L, m, s.window)
	} else {
		linear(&s.tp, &s.stats, dst, L, m)
	}
	return dst, m
}

// fill computes the probes of positions [from, to) of the query in
// progress: nothing for SearchProbes, ProbesFast of the hashes for Search,
// the chain continued from position from−1 and then ProbesFast for
// SearchLocals.
func (s *Searcher) fill(from, to int) {
	switch {
	case s.qHashes != nil:
		s.f.ProbesFast(s.probes[from:to], s.qHashes[from:to])
	case s.qLocals != nil:
		canon, locals := s.canon[:to], s.qLocals[:to]
		j := from
		if j == 0 && j < to {
			canon[0] = locals[0]
			j++
		}
		for ; j < to; j++ {
			canon[j] = kv.ChainHash(canon[j-1], locals[j])
		}
		s.f.ProbesFast(s.probes[from:to], canon[from:to])
	}
}

// tableProbes is the membership of a query over the real table.
type tableProbes struct {
	s      *Searcher
	probes []ckf.Probe
}

func (tp *tableProbes) probe(pos int, lanes uint64) uint64 {
	return tp.s.t.probe(tp.probes[pos], lanes)
}

func (tp *tableProbes) prefetch(pos int, lanes uint64) {
	s := tp.s
	s.groups.set(lanes)
	s.kern.prefetch(s.t.rows, tp.probes[pos:pos+1], uint64(s.t.stride), s.groups.list())
}

// Chunked scan pipeline distances, in positions (BenchmarkProbe tuned them
// on Mooncake-shaped requests).
const (
	// chunkPositions is the batch every stage works on: the query is
	// hashed, prefetched and tested this many positions at a time. 32
	// covers most Mooncake requests (26–31 blocks on average) in one
	// batch: against chunks of 8, p50 −7% and p99 −20% at 16 lanes, p50
	// −14% at 64 (one process, variants alternated query by query); the
	// kernel calls and loop turns a chunk costs outweigh starting the
	// first misses after hashing 8 positions instead of 32.
	chunkPositions = 32
	// fetchAhead caps how far beyond the chunk under test the query is
	// hashed and its rows prefetched.
	fetchAhead = 32
	// prefetchBudgetLines bounds the lines prefetched ahead of the chunk
	// under test (positions × lane groups × 2 rows), so that at 64 lanes
	// the lookahead stays within what the memory system keeps in flight.
	prefetchBudgetLines = 256
)

// scan is the chunked linear scan over the L positions of the query in
// progress. It hashes the query (fill) only as far as it reads, so an
// early exit also saves the hashing.
//
// It runs two cursors over the positions. fetched: the query is hashed
// and both rows' lines (for the lane groups still active) prefetched, up
// to fetchAhead positions or prefetchBudgetLines lines beyond the chunk
// under test, a chunk at a time. i: a chunk's rows A and B are tested for
// the active lanes at once, and the running mask updated position by
// position; the scan stops when no lane is left. Every address is computed
// and every load issued before the lines are tested, so a query waits for
// about one round of misses, not one per position. Testing both rows in
// one pass reads 1.6 more lines a position at 16 lanes than fetching row B
// only for the lanes row A lacks (96% of hits are in A), but A-first
// variants, with B's test deferred by one or two chunks and B fetched
// eagerly for the first and last chunks, all measured 20–30% slower: the
// misses of a query overlap, so the extra lines cost less than the round
// trips and kernel calls they save. The result is exactly the linear
// scan's: each lane's hit at a position is A ∨ B, tested for every lane
// still active.
func (s *Searcher) scan(depth []uint32, L int, active uint64) {
	if cap(s.hits) < L {
		s.hits = make([]uint64, L)
	}
	ps, hits := s.probes[:L], s.hits[:L]
	rows, stride := s.t.rows, uint64(s.t.stride)
	gs := &s.groups
	gs.set(active)
	fetched := 0
	for i := 0; i < L && active != 0; {
		for ahead := min(L, i+chunkPositions+min(fetchAhead, prefetchBudgetLines/(2*gs.n))); fetched < ahead; {
			end := min(ahead, fetched+chunkPositions)
			s.fill(fetched, end)
			s.kern.prefetch(rows, ps[fetched:end], stride, gs.list())
			s.stats.FetchedPositions += uint64(end - fetched)
			s.stats.FetchedLines += uint64(2 * (end - fetched) * gs.n)
			if i == 0 {
				s.stats.LeadLines += uint64(2 * (end - fetched) * gs.n)
			}
			fetched = end
		}
		end := min(L, i+chunkPositions)
		s.kern.test(rows, ps[i:end], stride, gs.list(), active, hits[i:end])
		s.stats.TestedLines += uint64(2 * (end - i) * gs.n)
		for ; i < end; i++ {
			s.stats.count(active)
			if next := active & hits[i]; next != active {
				setDepth(depth, active&^next, i)
				if active = next; active == 0 {
					return
				}
				gs.set(active)
			}
		}
	}
	setDepth(depth, active, L)
}

// groupList lists the word offsets within a row (8g) of the lane groups g
// that hold a lane of a mask, in ascending order: the lines a search reads.
type groupList struct {
	off [MaxLanes / GroupLanes]uint32
	n   int
}

// set lists the groups of lanes.
func (gl *groupList) set(lanes uint64) {
	gl.n = 0
	for gm := lanes; gm != 0; {
		g := bits.TrailingZeros64(gm) &^ (GroupLanes - 1)
		gm &^= 0xFF << uint(g)
		gl.off[gl.n] = uint32(g)
		gl.n++
	}
}

// list returns the listed offsets.
func (gl *groupList) list() []uint32 { return gl.off[:gl.n] }
