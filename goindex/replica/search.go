package replica

import (
	"fmt"

	"github.com/goindex/goindex/goindex/ckf"
)

// Mode selects a Searcher's algorithm. All modes report, for each lane in
// the captured mask, a depth in blocks; on a table whose evidence is
// prefix-closed they agree exactly.
type Mode uint8

const (
	// Chunked is the default: a linear scan whose row loads are issued in
	// chunks ahead of the tests (row A prefetched a chunk ahead, row B only
	// for the lanes row A did not hold), stopping as soon as no lane is
	// left. Its depths equal Linear's on any table state, and it measured
	// fastest on Mooncake-shaped requests (BenchmarkProbe, BENCHMARKS.md).
	Chunked Mode = iota
	// Bisect is upstream's shape (spec §7): galloping, grouped binary search,
	// a verification window and the terminal-branch fallback. It reads
	// fewer positions on very long requests and may over-report a lane past
	// an unobserved hole (search ≥ linear), never under-report.
	Bisect
	// Linear is the plain reference, one position after another; the
	// differential oracle of the other two.
	Linear
)

var modeNames = [...]string{Chunked: "chunked", Bisect: "bisect", Linear: "linear"}

// String returns the mode's name: chunked, bisect or linear.
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
// grown that space to the longest query, Search and SearchProbes do not
// allocate. A Searcher is not safe for concurrent use: give each goroutine
// its own; any number of Searchers may search one Table concurrently with
// its writers.
type Searcher struct {
	t      *Table
	f      *ckf.Format
	mode   Mode
	window int
	stats  Stats
	probes []ckf.Probe // the query's probes, computed as the search reaches them
	hitA   []uint64    // per position, the lanes found in row A
	needB  []uint64    // per position, the lanes whose row B must be tested
	offs   []uint32    // one chunk's line offsets (keeps its grown capacity)
	bis    bisector
	tp     tableProbes // the reference modes' membership, kept here so it does not escape
	// fetch is prefetchLines; the tests swap in touchLines to run the
	// portable path on amd64.
	fetch func(rows []uint64, offsets []uint32)
}

// NewSearcher returns a Searcher over t whose hashes are addressed with f;
// f's bucket count must be t's.
func NewSearcher(t *Table, f *ckf.Format, cfg SearchConfig) (*Searcher, error) {
	if f.Buckets() != t.Buckets() {
		return nil, fmt.Errorf("%w: format has %d buckets, table %d", ErrBadConfig, f.Buckets(), t.Buckets())
	}
	if cfg.Mode > Linear {
		return nil, fmt.Errorf("%w: unknown mode %d", ErrBadConfig, cfg.Mode)
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window < MinWindow || cfg.Window > MaxWindow {
		return nil, fmt.Errorf("%w: window %d, want %d..%d", ErrBadConfig, cfg.Window, MinWindow, MaxWindow)
	}
	s := &Searcher{t: t, f: f, mode: cfg.Mode, window: cfg.Window, offs: make([]uint32, 0, 2*prefetchBudgetLines), fetch: prefetchLines}
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
	depth, m := s.begin(dst, lanes)
	if cap(s.probes) < len(hashes) {
		s.probes = make([]ckf.Probe, len(hashes))
	}
	ps := s.probes[:len(hashes)]
	if s.mode == Chunked {
		s.scan(depth, hashes, ps, m)
		return depth, m
	}
	for i, h := range hashes {
		ps[i] = s.f.ProbeFast(h)
	}
	s.reference(depth, ps, m)
	return depth, m
}

// SearchProbes is Search for a query whose probes (Format.Probe of each
// canonical hash, in order) the caller computed in advance.
func (s *Searcher) SearchProbes(dst []uint32, probes []ckf.Probe, lanes uint64) ([]uint32, uint64) {
	depth, m := s.begin(dst, lanes)
	if s.mode == Chunked {
		s.scan(depth, nil, probes, m)
		return depth, m
	}
	s.reference(depth, probes, m)
	return depth, m
}

// begin counts the search, captures M and returns the zeroed depth slice.
func (s *Searcher) begin(dst []uint32, lanes uint64) ([]uint32, uint64) {
	s.stats.Searches++
	m := s.t.Ready() & lanes & s.t.all
	if cap(dst) < s.t.lanes {
		dst = make([]uint32, s.t.lanes)
	}
	dst = dst[:s.t.lanes]
	clear(dst)
	return dst, m
}

// reference runs Bisect or Linear over probes.
func (s *Searcher) reference(depth []uint32, probes []ckf.Probe, m uint64) {
	s.tp.probes = probes
	if s.mode == Bisect {
		s.bis.bisect(&s.tp, &s.stats, depth, len(probes), m, s.window)
	} else {
		linear(&s.tp, &s.stats, depth, len(probes), m)
	}
	s.tp.probes = nil // do not keep the caller's probes alive
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
	s, p := tp.s, tp.probes[pos]
	s.fetch(s.t.rows, s.t.appendRow(s.t.appendRow(s.offs[:0], p.A, lanes), p.B, lanes))
}

// Chunked scan pipeline distances, in positions (BenchmarkProbe tuned them
// on Mooncake-shaped requests).
const (
	// testAhead is how far ahead of the final test row A is tested and the
	// B rows still needed are prefetched: about one memory latency of
	// final tests at ~25 ns each.
	testAhead = 8
	// eagerPositions is how many leading positions prefetch row B together
	// with row A, so that a short query waits for one round of misses, not
	// two.
	eagerPositions = 8
	// fetchAhead caps how far beyond testAhead row A is hashed and
	// prefetched; a farther lookahead mostly hashes positions past the
	// early exit.
	fetchAhead = 24
)

// scan is the chunked linear scan over L = len(ps) positions. With hashes
// non-nil it fills ps[i] = ProbeFast(hashes[i]) as it reaches position i,
// so an early exit also saves the hashing; otherwise ps holds the probes.
//
// It runs three cursors over the positions. fetched: the query is hashed
// and row A's lines (for the lanes still active) prefetched in chunks of
// up to fetchAhead positions or prefetchBudgetLines lines. tested, about
// testAhead positions ahead of i: row A is tested, and row B is prefetched
// only for the lanes A did not hold. i: row B is tested for those lanes and
// the running mask updated. The producer puts a fingerprint in A whenever A
// has room, so at 50–60% load ~96% of hits are in A and most positions never
// read row B: 2.1 instead of 3.7 lines a position at 16 lanes, 8.3 instead
// of 14.7 at 64 (p99 −20% at 16 lanes, p50 −18% at 64, BenchmarkProbe).
// The result is exactly the linear scan's: each lane's hit at a position is
// A ∨ B, and B is consulted whenever A missed.
func (s *Searcher) scan(depth []uint32, hashes []uint64, ps []ckf.Probe, active uint64) {
	L := len(ps)
	if cap(s.hitA) < L {
		s.hitA = make([]uint64, L)
		s.needB = make([]uint64, L)
	}
	hitA, needB := s.hitA[:L], s.needB[:L]
	fetched, tested := 0, 0
	for i := 0; i < L && active != 0; i++ {
		if fetched-i <= testAhead {
			end := min(L, i+testAhead+min(fetchAhead, prefetchBudgetLines/groups(active)))
			offs := s.offs[:0]
			for ; fetched < end; fetched++ {
				if hashes != nil {
					ps[fetched] = s.f.ProbeFast(hashes[fetched])
				}
				offs = s.t.appendRow(offs, ps[fetched].A, active)
				if fetched < eagerPositions {
					offs = s.t.appendRow(offs, ps[fetched].B, active)
				}
			}
			s.fetch(s.t.rows, offs)
			s.offs = offs[:0]
		}
		if tested-i <= testAhead/2 {
			end := min(fetched, i+testAhead)
			offs := s.offs[:0]
			for ; tested < end; tested++ {
				p := ps[tested]
				h := active & s.t.rowHits(p.A, uint64(p.FP)*swarOnes, active)
				hitA[tested], needB[tested] = h, active&^h
				if tested >= eagerPositions {
					offs = s.t.appendRow(offs, p.B, active&^h)
				}
			}
			s.fetch(s.t.rows, offs)
			s.offs = offs[:0]
		}
		s.stats.count(active)
		hit := hitA[i]
		if nb := needB[i] & active; nb != 0 {
			hit |= s.t.rowHits(ps[i].B, uint64(ps[i].FP)*swarOnes, nb)
		}
		if next := active & hit; next != active {
			setDepth(depth, active&^next, i)
			active = next
		}
	}
	setDepth(depth, active, L)
}
