package ckf

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/goindex/goindex/goindex/kv"
)

// Config configures a Producer.
type Config struct {
	// Format addresses the filter; required.
	Format *Format
	// MaxKicks bounds the kick chain of one cuckoo insertion (1..4096).
	MaxKicks int // optional; default: 500
	// BatchEvents is N of the cadence: a boundary is due once N events are
	// pending (≥ 1).
	BatchEvents int // optional; default: 16
	// FlushAfter is the caller's timer for a window that has not reached N
	// events; the Producer only reports it (> 0).
	FlushAfter time.Duration // optional; default: 1ms
	// ClearWorker widens a Cleared event from its member to every rank of
	// its worker (Dynamo's older clear scope).
	ClearWorker bool // optional; default: false (the emitting member only)
	// Words is caller-provided memory for the filter (say, a mapped file):
	// exactly Format.Buckets() words, all zero. The Producer writes it in
	// place; nobody else may write it while the Producer lives.
	Words []uint64 // optional; default: allocated by New
	// ExpectedBlocks is how many distinct canonical hashes the pool is
	// expected to hold (say, its KV capacity in blocks). The owner table
	// is sized for that many up front, so ingest does not stop to rehash
	// it while the pool fills (BenchmarkIngest, impl=presized); it still
	// grows beyond. It costs its memory (about 32 bytes a block) at once.
	ExpectedBlocks int // optional; default: 0, the owner table starts small
	// ExpectedMemberBlocks is how many blocks one member (worker, dp rank)
	// is expected to hold (its KV cache capacity in blocks): a member's
	// lineage table is sized for that many at its first Stored event, for
	// the same reason. It costs about 32 bytes a block per member at once.
	ExpectedMemberBlocks int // optional; default: 0, lineages start at their first event's size
}

// owner is the DC-wide ownership of one canonical hash (spec §4.1): present
// in Producer.owners iff count > 0.
type owner struct {
	count    uint32 // (member, source block) mappings to the canonical
	resident bool   // its fingerprint is in the filter
	offered  bool   // listed for admission by the Stored event being applied; false between calls
}

// Producer is the exact state and cuckoo filter of one pool (spec §4): the
// lineage of every member (source block id → canonical hash), DC-wide owner
// counts, and n packed buckets of 4 × 16-bit fingerprints that project the
// resident canonicals, plus the dirty window that feeds publication.
//
// A Producer has a single writer: no method may run concurrently with any
// other. Its layout is deterministic given the Format and the order of
// calls.
type Producer struct {
	f   *Format
	tab table
	win window

	members  map[kv.Member]*lineage // a member is present iff it maps a block
	owners   flatMap[owner]         // present iff count > 0
	resident uint64                 // resident canonicals = non-zero slots
	tracked  uint64                 // mappings across all lineages

	batchEvents int
	flushAfter  time.Duration
	clearWorker bool
	memberHint  int // Config.ExpectedMemberBlocks

	fence error // non-nil once an invariant violation fenced the producer
	stats Counters

	scratch storeScratch
	batch   batchScratch
	sink    uint64 // consumes the loads of flatMap.warm
}

// Counters are a Producer's lifetime event counters.
type Counters struct {
	// UnknownRemovals counts removed source blocks the member did not map.
	UnknownRemovals uint64
	// MissingParents counts Stored events whose parent was unknown.
	MissingParents uint64
	// RemapRejections counts Stored events rejected because a source block
	// would have changed its canonical hash.
	RemapRejections uint64
	// InvalidSequences counts Stored events with a start position but no parent.
	InvalidSequences uint64
	// OwnershipOverflows counts Stored events rejected for owner-count overflow.
	OwnershipOverflows uint64
	// CapacityOmissions counts failed full insertions (blocks tracked but
	// not admitted; spec §4.7).
	CapacityOmissions uint64
	// Touches counts kept bucket writes: the distinct buckets of each
	// successful insertion plus one per physical removal.
	Touches uint64
	// EmittedImages counts images returned by Drain.
	EmittedImages uint64
	// NetReversions counts dirty buckets that Drain dropped because they
	// were back at their original word.
	NetReversions uint64
	// Batches counts Drain calls that returned at least one image.
	Batches uint64
	// InvariantViolations counts final-owner removals that found no
	// fingerprint (each fences the producer).
	InvariantViolations uint64
}

// New returns an empty producer for cfg.
func New(cfg Config) (*Producer, error) {
	if cfg.Format == nil {
		return nil, fmt.Errorf("%w: no format", ErrBadConfig)
	}
	n := cfg.Format.Buckets()
	if cfg.MaxKicks == 0 {
		cfg.MaxKicks = DefaultMaxKicks
	}
	if cfg.MaxKicks < 1 || cfg.MaxKicks > MaxMaxKicks {
		return nil, fmt.Errorf("%w: max kicks %d outside 1..%d", ErrBadConfig, cfg.MaxKicks, MaxMaxKicks)
	}
	if cfg.BatchEvents == 0 {
		cfg.BatchEvents = DefaultBatchEvents
	}
	if cfg.BatchEvents < 1 {
		return nil, fmt.Errorf("%w: batch events %d < 1", ErrBadConfig, cfg.BatchEvents)
	}
	if cfg.FlushAfter == 0 {
		cfg.FlushAfter = DefaultFlushAfter
	}
	if cfg.ExpectedBlocks < 0 || uint64(cfg.ExpectedBlocks) > 4*MaxBuckets {
		return nil, fmt.Errorf("%w: expected blocks %d outside 0..%d", ErrBadConfig, cfg.ExpectedBlocks, 4*MaxBuckets)
	}
	if cfg.ExpectedMemberBlocks < 0 || uint64(cfg.ExpectedMemberBlocks) > 4*MaxBuckets {
		return nil, fmt.Errorf("%w: expected member blocks %d outside 0..%d", ErrBadConfig, cfg.ExpectedMemberBlocks, 4*MaxBuckets)
	}
	if cfg.FlushAfter < 0 {
		return nil, fmt.Errorf("%w: flush after %v < 0", ErrBadConfig, cfg.FlushAfter)
	}
	words := cfg.Words
	if words == nil {
		words = make([]uint64, n)
		adviseHuge(words)
	} else {
		if uint64(len(words)) != n {
			return nil, fmt.Errorf("%w: filter memory holds %d words, want %d", ErrBadConfig, len(words), n)
		}
		for i, w := range words {
			if w != 0 {
				return nil, fmt.Errorf("%w: filter memory word %d is %#x, want 0", ErrBadConfig, i, w)
			}
		}
	}
	return &Producer{
		f:           cfg.Format,
		tab:         newTable(words, cfg.Format, cfg.MaxKicks),
		win:         newWindow(n),
		members:     make(map[kv.Member]*lineage),
		owners:      newFlatMap[owner](cfg.ExpectedBlocks),
		batchEvents: cfg.BatchEvents,
		flushAfter:  cfg.FlushAfter,
		clearWorker: cfg.ClearWorker,
		memberHint:  cfg.ExpectedMemberBlocks,
	}, nil
}

// Format returns the producer's addressing format.
func (p *Producer) Format() *Format { return p.f }

// MaxKicks returns the kick limit of a full insertion.
func (p *Producer) MaxKicks() int { return p.tab.maxKicks }

// Fenced returns nil, or the error that fenced the producer. A fenced
// producer rejects mutations and publishes nothing; its exact state is
// suspect and the relay must rebuild a new layout generation.
func (p *Producer) Fenced() error { return p.fence }

// AppendWords appends a copy of all n filter words to dst and returns it
// (the payload of a barrier snapshot).
func (p *Producer) AppendWords(dst []uint64) []uint64 { return append(dst, p.tab.words...) }

// Mapping is one block of a member's exact state: its source block id (the
// engine's external hash) and the canonical hash it maps to.
type Mapping struct {
	Source, Canonical uint64
}

// AppendMembers appends every member that maps at least one block to dst,
// ordered by worker, then rank.
func (p *Producer) AppendMembers(dst []kv.Member) []kv.Member {
	start := len(dst)
	for m := range p.members {
		dst = append(dst, m)
	}
	slices.SortFunc(dst[start:], func(a, b kv.Member) int {
		return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Rank, b.Rank))
	})
	return dst
}

// AppendLineage appends member m's mappings to dst, in no set order
// (nothing for a member that maps no block). A Stored event of one block,
// without a parent, whose local hash is a mapping's canonical hash maps it
// again: that is how a saved lineage is applied to a new producer.
func (p *Producer) AppendLineage(dst []Mapping, m kv.Member) []Mapping {
	lin := p.members[m]
	if lin == nil {
		return dst
	}
	for src, c := range lin.all() {
		dst = append(dst, Mapping{Source: src, Canonical: *c})
	}
	return dst
}

// Word returns bucket b's current word; b must be below Format().Buckets().
func (p *Producer) Word(b uint32) uint64 { return p.tab.words[b] }

// Stats is a point-in-time view of a Producer.
type Stats struct {
	Counters
	// Members counts members that map at least one block.
	Members int
	// TrackedBlocks counts (member, source block) mappings.
	TrackedBlocks uint64
	// Canonicals counts distinct canonical hashes with an owner.
	Canonicals uint64
	// Resident counts canonicals whose fingerprint is in the filter.
	Resident uint64
	// Buckets is n.
	Buckets uint64
	// LoadFactor is Resident / (4·n), the slot occupancy.
	LoadFactor float64
	// MemoryBytes estimates the producer's memory: filter, dirty window
	// and the hash maps of the exact state.
	MemoryBytes uint64
	// PendingEvents and DirtyBuckets describe the open window.
	PendingEvents, DirtyBuckets int
	// Fenced reports an invariant violation.
	Fenced bool
}

// Stats returns the producer's current statistics.
func (p *Producer) Stats() Stats {
	n := p.f.Buckets()
	return Stats{
		Counters:      p.stats,
		Members:       len(p.members),
		TrackedBlocks: p.tracked,
		Canonicals:    uint64(p.owners.len()),
		Resident:      p.resident,
		Buckets:       n,
		LoadFactor:    float64(p.resident) / float64(n*SlotsPerBucket),
		MemoryBytes:   p.memoryBytes(),
		PendingEvents: p.win.pending,
		DirtyBuckets:  len(p.win.entries),
		Fenced:        p.fence != nil,
	}
}

// memoryBytes adds up the producer's large allocations: the filter, the
// dirty window, the owner table, every lineage and the insertion scratch.
// Go map headers and the member index add a few hundred bytes per member.
func (p *Producer) memoryBytes() uint64 {
	b := uint64(cap(p.tab.words))*8 + uint64(cap(p.tab.kicks))*uint64(unsafe.Sizeof(touch{}))
	b += p.win.bytes()
	b += p.owners.bytes()
	for _, lin := range p.members {
		b += lin.bytes()
	}
	return b
}
