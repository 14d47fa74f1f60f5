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
	// Chunked is the default: a linear scan in chunks of positions whose
	// rows are addressed and prefetched together, the next chunk while the
	// current one's last position is tested, sized to keep about 96 cache
	// lines in flight (prefetchBudgetLines); it stops as soon as no lane is
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
	offs   []uint32    // one chunk's line offsets, cap prefetchBudgetLines
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
	s := &Searcher{t: t, f: f, mode: cfg.Mode, window: cfg.Window, offs: make([]uint32, 0, prefetchBudgetLines), fetch: prefetchLines}
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
	s := tp.s
	s.fetch(s.t.rows, s.t.appendLines(s.offs[:0], tp.probes[pos], lanes))
}

// scan is the chunked linear scan over L = len(ps) positions. With hashes
// non-nil it fills ps[i] = ProbeFast(hashes[i]) as it reaches position i,
// so an early exit also saves the hashing; otherwise ps holds the probes.
// When the test cursor reaches the last prefetched position, the next
// chunk is addressed and prefetched for the lanes still active: as many
// positions as fit prefetchBudgetLines at 2 lines per active lane group.
func (s *Searcher) scan(depth []uint32, hashes []uint64, ps []ckf.Probe, active uint64) {
	L := len(ps)
	fetched := 0
	for i := 0; i < L && active != 0; i++ {
		if fetched-i <= 1 {
			end := min(L, i+max(2, prefetchBudgetLines/(2*groups(active))))
			offs := s.offs[:0]
			for ; fetched < end; fetched++ {
				if hashes != nil {
					ps[fetched] = s.f.ProbeFast(hashes[fetched])
				}
				offs = s.t.appendLines(offs, ps[fetched], active)
			}
			s.fetch(s.t.rows, offs)
		}
		s.stats.count(active)
		if next := active & s.t.probe(ps[i], active); next != active {
			setDepth(depth, active&^next, i)
			active = next
		}
	}
	setDepth(depth, active, L)
}
