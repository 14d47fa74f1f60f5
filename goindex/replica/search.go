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
	// row loads are issued together (addresses first, then one touch pass
	// over every cache line the chunk will test, then the tests), stopping
	// as soon as no lane is left. Its depths equal Linear's on any table
	// state, and it measured fastest on Mooncake-shaped requests
	// (BenchmarkProbe, BENCHMARKS.md).
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

// chunkPositions is how many positions the chunked scan addresses and
// touches before testing any of them: 8 positions × 2 rows keep 16 lines
// per lane group in flight at once, and a chunk is small enough that an
// early exit wastes little (BenchmarkProbe picked it).
const chunkPositions = 8

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
	probes []ckf.Probe // all positions' probes, for Bisect and Linear
	chunk  [chunkPositions]ckf.Probe
	bis    bisector
	tp     tableProbes // the reference modes' membership, kept here so it does not escape per search
	sink   uint64      // keeps the touch pass's loads live
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
	return &Searcher{t: t, f: f, mode: cfg.Mode, window: cfg.Window}, nil
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
	if s.mode == Chunked {
		s.scanHashes(depth, hashes, m)
		return depth, m
	}
	s.probes = s.probes[:0]
	for _, h := range hashes {
		s.probes = append(s.probes, s.f.ProbeFast(h))
	}
	s.reference(depth, s.probes, m)
	return depth, m
}

// SearchProbes is Search for a query whose probes (Format.Probe of each
// canonical hash, in order) the caller computed in advance.
func (s *Searcher) SearchProbes(dst []uint32, probes []ckf.Probe, lanes uint64) ([]uint32, uint64) {
	depth, m := s.begin(dst, lanes)
	if s.mode == Chunked {
		s.scanProbes(depth, probes, m)
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
	s.tp = tableProbes{t: s.t, probes: probes}
	if s.mode == Bisect {
		s.bis.bisect(&s.tp, &s.stats, depth, len(probes), m, s.window)
	} else {
		linear(&s.tp, &s.stats, depth, len(probes), m)
	}
	s.sink ^= s.tp.sink
	s.tp.probes = nil // do not keep the caller's probes alive
}

// tableProbes is the membership of a query over the real table.
type tableProbes struct {
	t      *Table
	probes []ckf.Probe
	sink   uint64
}

func (tp *tableProbes) probe(pos int, lanes uint64) uint64 { return tp.t.probe(tp.probes[pos], lanes) }

func (tp *tableProbes) prefetch(pos int, lanes uint64) {
	tp.sink ^= tp.t.touch(tp.probes[pos:pos+1], lanes)
}

// scanHashes is the chunked scan over canonical hashes: each chunk's probes
// are computed only once the scan reaches it, so an early exit also saves
// the hashing.
func (s *Searcher) scanHashes(depth []uint32, hashes []uint64, active uint64) {
	for base := 0; base < len(hashes) && active != 0; base += chunkPositions {
		ps := s.chunk[:min(chunkPositions, len(hashes)-base)]
		for i := range ps {
			ps[i] = s.f.ProbeFast(hashes[base+i])
		}
		active = s.scanChunk(depth, ps, base, active)
	}
	setDepth(depth, active, len(hashes))
}

// scanProbes is the chunked scan over precomputed probes.
func (s *Searcher) scanProbes(depth []uint32, probes []ckf.Probe, active uint64) {
	for base := 0; base < len(probes) && active != 0; base += chunkPositions {
		active = s.scanChunk(depth, probes[base:min(base+chunkPositions, len(probes))], base, active)
	}
	setDepth(depth, active, len(probes))
}

// scanChunk tests positions base… of ps in order against the lanes still
// active, after one touch pass over every line they will read, and returns
// the lanes that hit at all of them. A lane that misses at base+i gets depth
// base+i.
func (s *Searcher) scanChunk(depth []uint32, ps []ckf.Probe, base int, active uint64) uint64 {
	s.sink ^= s.t.touch(ps, active)
	for i, p := range ps {
		s.stats.count(active)
		next := active & s.t.probe(p, active)
		if next != active {
			setDepth(depth, active&^next, base+i)
			active = next
			if active == 0 {
				return 0
			}
		}
	}
	return active
}
