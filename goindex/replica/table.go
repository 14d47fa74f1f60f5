package replica

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/internal/hugepage"
)

// Layout constants of a region.
const (
	// MaxLanes is the most lanes a table holds: lane masks are uint64.
	MaxLanes = 64
	// RegionAlignBytes is the alignment a region must have: one cache line,
	// so that every lane group of every row is exactly one line.
	RegionAlignBytes = 64
	// GroupLanes is the number of lanes per cache line of a row: 8 × 8-byte
	// bucket words = 64 bytes. A row holds ⌈D/8⌉ groups; a probe reads only
	// the groups that hold a lane it asks about.
	GroupLanes = 8
	// headerWords is the region's first cache line: word 0 is the ready
	// mask, words 1–7 are reserved (zero). Keeping the ready mask on its own
	// line keeps the one word every query loads away from the rows writers
	// store into.
	headerWords = RegionAlignBytes / 8
	readyWord   = 0
)

// Config sizes a Table.
type Config struct {
	// Lanes is D, the number of lanes (DCs or members), in [1, 64].
	Lanes int
	// Buckets is n, the bucket count of every lane (the consumer format's
	// bucket count), a power of two in [2, 2^24].
	Buckets uint64
}

// RegionWords returns the number of uint64 words a region for cfg needs:
// one header line (the ready mask) plus n rows of ⌈D/8⌉·8 words. The region
// must start on a RegionAlignBytes boundary.
func RegionWords(cfg Config) (int, error) {
	if err := cfg.validate(); err != nil {
		return 0, err
	}
	return headerWords + int(cfg.Buckets)*stride(cfg.Lanes), nil
}

func (c Config) validate() error {
	if c.Lanes < 1 || c.Lanes > MaxLanes {
		return fmt.Errorf("%w: %d lanes, want 1..%d", ErrBadConfig, c.Lanes, MaxLanes)
	}
	if c.Buckets < ckf.MinBuckets || c.Buckets > ckf.MaxBuckets || c.Buckets&(c.Buckets-1) != 0 {
		return fmt.Errorf("%w: bucket count %d is not a power of two in [%d, %d]", ErrBadConfig, c.Buckets, ckf.MinBuckets, ckf.MaxBuckets)
	}
	return nil
}

// stride returns the words per row for lanes: lanes rounded up to a whole
// number of cache lines.
func stride(lanes int) int { return (lanes + GroupLanes - 1) / GroupLanes * GroupLanes }

// Table is the transposed consumer table (spec §6): n rows, bucket-major and
// lane-minor, word(b, l) = rows[b·D' + l] with D' = ⌈D/8⌉·8, so one row holds
// bucket b of every lane and lane group g (lanes 8g…8g+7) is cache line g of
// the row. 16 lanes make a 128-byte row; 64 lanes a 512-byte row, of which a
// probe reads only the lines of groups with a ready lane it still tracks.
// The storage is one flat array of atomic u64 words with no pointers inside,
// on the Go heap (New) or in caller memory such as a shared-memory mapping
// (NewInRegion), preceded by one header line whose first word is the
// ready-lane mask.
//
// Concurrency: each lane has one writer (Install, Apply, StoreWords,
// StoreWord, Clear, SetReady, ClearReady for that lane); different lanes may
// be written concurrently; any number of Probe and Searcher calls may run
// concurrently with all of them. Every access is a single sync/atomic u64
// operation; reads are weak (spec §5.4, see the package doc).
type Table struct {
	region  []uint64 // header line + rows
	rows    []uint64 // region[headerWords:], n·stride words
	lanes   int
	stride  int
	buckets uint64
	all     uint64 // mask of the configured lanes
}

// New returns an empty table on the Go heap (every word 0, no lane ready),
// 64-byte aligned. It allocates RegionWords(cfg) words (n·⌈D/8⌉·64 bytes:
// 512 MiB for 16 lanes of 2^22 buckets).
func New(cfg Config) (*Table, error) {
	words, err := RegionWords(cfg)
	if err != nil {
		return nil, err
	}
	// Large allocations are page-aligned in practice, but only 8-byte
	// alignment is promised: over-allocate one line and slice to a boundary.
	buf := make([]uint64, words+headerWords)
	hugepage.Advise(buf)
	skip := (RegionAlignBytes - int(uintptr(unsafe.Pointer(&buf[0]))%RegionAlignBytes)) % RegionAlignBytes / 8
	return NewInRegion(buf[skip:skip+words], cfg)
}

// NewInRegion returns a table whose storage is words, which must hold at
// least RegionWords(cfg) words and start on a RegionAlignBytes boundary. It
// adopts the words as they are and writes nothing, so a read-only mapping of
// a table another process writes may be attached: a fresh zeroed region is
// an empty table with no lane ready. Words beyond RegionWords are unused.
// The caller keeps the memory alive and unchanged in size while the table is
// in use.
func NewInRegion(words []uint64, cfg Config) (*Table, error) {
	need, err := RegionWords(cfg)
	if err != nil {
		return nil, err
	}
	if len(words) < need {
		return nil, fmt.Errorf("%w: %d words, %d lanes × %d buckets need %d", ErrBadRegion, len(words), cfg.Lanes, cfg.Buckets, need)
	}
	if addr := uintptr(unsafe.Pointer(&words[0])); addr%RegionAlignBytes != 0 {
		return nil, fmt.Errorf("%w: address %#x is not %d-byte aligned", ErrBadRegion, addr, RegionAlignBytes)
	}
	t := &Table{
		region:  words[:need:need],
		lanes:   cfg.Lanes,
		stride:  stride(cfg.Lanes),
		buckets: cfg.Buckets,
		all:     ^uint64(0) >> (MaxLanes - cfg.Lanes),
	}
	t.rows = t.region[headerWords:]
	return t, nil
}

// Lanes returns D, the number of lanes.
func (t *Table) Lanes() int { return t.lanes }

// Buckets returns n, the bucket count (words per lane).
func (t *Table) Buckets() uint64 { return t.buckets }

// Ready returns the ready-lane mask (one atomic load). A query loads it once
// and never re-checks it.
func (t *Table) Ready() uint64 { return atomic.LoadUint64(&t.region[readyWord]) }

// SetReady sets lane's ready bit, after its words are stored (sync/atomic is
// sequentially consistent, which gives the release order spec §5.4 asks
// for). It panics if lane is not in [0, Lanes()).
func (t *Table) SetReady(lane int) { atomic.OrUint64(&t.region[readyWord], t.bit(lane)) }

// ClearReady clears lane's ready bit: before the lane is reassigned,
// cleared or retired. It panics if lane is not in [0, Lanes()).
func (t *Table) ClearReady(lane int) { atomic.AndUint64(&t.region[readyWord], ^t.bit(lane)) }

func (t *Table) bit(lane int) uint64 {
	if uint(lane) >= uint(t.lanes) {
		panic(fmt.Sprintf("replica: lane %d out of range [0, %d)", lane, t.lanes))
	}
	return 1 << uint(lane)
}

func (t *Table) checkLane(lane int) error {
	if uint(lane) >= uint(t.lanes) {
		return fmt.Errorf("%w: lane %d, table has %d", ErrBadLane, lane, t.lanes)
	}
	return nil
}

// Word returns bucket b of lane (one atomic load). It panics if either is
// out of range.
func (t *Table) Word(lane int, b uint64) uint64 {
	t.bit(lane)
	return atomic.LoadUint64(&t.rows[b*uint64(t.stride)+uint64(lane)])
}

// AppendLane appends lane's n words to dst, in bucket order, and returns it
// (the lane's filter as a producer would publish it). It panics if lane is
// out of range.
func (t *Table) AppendLane(dst []uint64, lane int) []uint64 {
	t.bit(lane)
	for i := lane; i < len(t.rows); i += t.stride {
		dst = append(dst, atomic.LoadUint64(&t.rows[i]))
	}
	return dst
}

// StoreWord stores word into bucket b of lane: one image, one atomic store.
// It panics if lane or b is out of range.
func (t *Table) StoreWord(lane int, b uint64, word uint64) {
	t.bit(lane)
	atomic.StoreUint64(&t.rows[b*uint64(t.stride)+uint64(lane)], word)
}

// StoreWords stores words[i] into bucket offset+i of lane, one
// single-copy-atomic store each (a snapshot chunk; on amd64 plain aligned
// 8-byte stores, which keep the chunk's line fills in flight together). It
// does not touch the ready bit. It panics if lane is out of range or
// offset+len(words) > n.
func (t *Table) StoreWords(lane int, offset uint64, words []uint64) {
	t.bit(lane)
	if offset > t.buckets || uint64(len(words)) > t.buckets-offset {
		panic(fmt.Sprintf("replica: %d words at bucket %d overrun %d buckets", len(words), offset, t.buckets))
	}
	storeColumn(t.rows, int(offset)*t.stride+lane, t.stride, words)
}

// Install installs a full snapshot of lane: it clears the ready bit, stores
// the n words, then sets the ready bit. On error nothing is written.
func (t *Table) Install(lane int, snapshot []uint64) error {
	if err := t.checkLane(lane); err != nil {
		return err
	}
	if uint64(len(snapshot)) != t.buckets {
		return fmt.Errorf("%w: lane %d snapshot has %d words, want %d", ErrSnapshotSize, lane, len(snapshot), t.buckets)
	}
	t.ClearReady(lane)
	t.StoreWords(lane, 0, snapshot)
	t.SetReady(lane)
	return nil
}

// Apply stores each image's word into its bucket of lane, one atomic store
// per image, in order (a later image of the same bucket wins). It leaves the
// ready bit alone. Every index is checked before the first store, so on
// error nothing is written.
func (t *Table) Apply(lane int, images []ckf.Image) error {
	if err := t.checkLane(lane); err != nil {
		return err
	}
	for i, im := range images {
		if uint64(im.Bucket) >= t.buckets {
			return fmt.Errorf("%w: lane %d image %d: bucket %d, n = %d", ErrBadImage, lane, i, im.Bucket, t.buckets)
		}
	}
	for _, im := range images {
		atomic.StoreUint64(&t.rows[uint64(im.Bucket)*uint64(t.stride)+uint64(lane)], im.Word)
	}
	return nil
}

// Clear empties lane: it clears the ready bit first, then stores 0 into its
// n words. Queries that captured the bit before may still read the lane
// while it empties (spec §5.4); their depths stay ≤ L.
func (t *Table) Clear(lane int) error {
	if err := t.checkLane(lane); err != nil {
		return err
	}
	t.ClearReady(lane)
	for i := lane; i < len(t.rows); i += t.stride {
		atomic.StoreUint64(&t.rows[i], 0)
	}
	return nil
}

// Probe returns the lanes among lanes whose bucket A or B holds fp (spec §6
// probe): bit l is set iff lane l is in lanes and contains(word(A, l), fp)
// || contains(word(B, l), fp). It reads only the cache lines of rows A and
// B that hold a lane in lanes, and does not consult the ready mask: pass
// the captured mask. It panics if A or B is not below n.
func (t *Table) Probe(p ckf.Probe, lanes uint64) uint64 {
	lanes &= t.all
	return t.probe(p, lanes) & lanes
}

// sparseLanes is the most asked lanes of a group that probe tests one
// by one instead of testing all 8: with 2 or fewer, per-lane tests cost
// less than the whole line (10% off p50 at 16 lanes, BenchmarkProbe).
const sparseLanes = 2

// probe tests fp against rows A and B of the lanes of each group holding a
// lane in lanes. Bits of groups with no lane in lanes are 0; other bits
// outside lanes are undefined (callers mask).
func (t *Table) probe(p ckf.Probe, lanes uint64) uint64 {
	f := uint64(p.FP) * swarOnes
	ra, rb := int(p.A)*t.stride, int(p.B)*t.stride
	var hits uint64
	for gm := lanes; gm != 0; {
		g := bits.TrailingZeros64(gm) &^ (GroupLanes - 1)
		gm &^= 0xFF << uint(g)
		a := (*[GroupLanes]uint64)(t.rows[ra+g : ra+g+GroupLanes])
		b := (*[GroupLanes]uint64)(t.rows[rb+g : rb+g+GroupLanes])
		in := uint8(lanes >> uint(g))
		if bits.OnesCount8(in) > sparseLanes {
			hits |= pairHits(a, b, f) << uint(g)
			continue
		}
		for ; in != 0; in &= in - 1 {
			i := bits.TrailingZeros8(in) & (GroupLanes - 1)
			hits |= (wordHit(atomic.LoadUint64(&a[i]), f) | wordHit(atomic.LoadUint64(&b[i]), f)) << uint(g+i)
		}
	}
	return hits
}

// SWAR constants of spec §3 (ckf.Contains).
const (
	swarOnes = 0x0001000100010001
	swarHigh = 0x8000800080008000
)

// zeroSlots marks each zero 16-bit slot of x in its top bit: spec §3's
// test, exact only as "is it non-zero" (bits above the lowest zero slot
// may be wrong).
func zeroSlots(x uint64) uint64 { return (x - swarOnes) &^ x & swarHigh }

// wordHit returns 1 if w holds the fingerprint broadcast f, else 0
// (ckf.Contains without a branch).
func wordHit(w, f uint64) uint64 {
	m := zeroSlots(w ^ f)
	return (m | -m) >> 63
}

// pairHits returns bit i set iff a[i] or b[i] holds the fingerprint
// broadcast f: ckf.Contains for the 8 lanes of a group in rows A and B at
// once. A word's marks (bits 15, 31, 47, 63 of zeroSlots) are exact only as
// "is any set", so a lane's A and B marks are ORed first; each lane's
// marks are then shifted down by 15−i so they land on bits i, 16+i, 32+i,
// 48+i, and two folds gather them on bit i. That is 8 operations per lane
// plus 5 per group. TestPairHits_MatchesContains holds it equal to
// ckf.Contains.
func pairHits(a, b *[GroupLanes]uint64, f uint64) uint64 {
	y := (zeroSlots(atomic.LoadUint64(&a[0])^f)|zeroSlots(atomic.LoadUint64(&b[0])^f))>>15 |
		(zeroSlots(atomic.LoadUint64(&a[1])^f)|zeroSlots(atomic.LoadUint64(&b[1])^f))>>14 |
		(zeroSlots(atomic.LoadUint64(&a[2])^f)|zeroSlots(atomic.LoadUint64(&b[2])^f))>>13 |
		(zeroSlots(atomic.LoadUint64(&a[3])^f)|zeroSlots(atomic.LoadUint64(&b[3])^f))>>12 |
		(zeroSlots(atomic.LoadUint64(&a[4])^f)|zeroSlots(atomic.LoadUint64(&b[4])^f))>>11 |
		(zeroSlots(atomic.LoadUint64(&a[5])^f)|zeroSlots(atomic.LoadUint64(&b[5])^f))>>10 |
		(zeroSlots(atomic.LoadUint64(&a[6])^f)|zeroSlots(atomic.LoadUint64(&b[6])^f))>>9 |
		(zeroSlots(atomic.LoadUint64(&a[7])^f)|zeroSlots(atomic.LoadUint64(&b[7])^f))>>8
	y |= y >> 32
	y |= y >> 16
	return y & 0xFF
}
