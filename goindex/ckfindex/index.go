package ckfindex

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
)

// ClearScope says what a Cleared event drops.
type ClearScope uint8

const (
	// ClearRank drops the emitting member's blocks (Dynamo CUR).
	ClearRank ClearScope = iota
	// ClearWorker drops every rank of the emitting worker (G2025/G26a).
	ClearWorker
)

// Config configures an Index.
type Config struct {
	// Lanes is the number of concurrent members, 1..64; optional; default: 64.
	Lanes int
	// ExpectedBlocksPerLane sizes each member's filter at ≤ 80% load
	// (ckf.BucketCount); optional; default: 1<<20.
	ExpectedBlocksPerLane uint64
	// Seed is the addressing seed; optional; default: ckf.DefaultSeed.
	Seed uint64
	// MaxKicks bounds one cuckoo insertion (1..4096); optional; default: 500.
	MaxKicks int
	// ClearScope; optional; default: ClearRank.
	ClearScope ClearScope
	// Search selects the prefix-search algorithm; optional; default:
	// replica's default (chunked linear scan with overlapped loads).
	Search replica.Mode
}

// lanes is the immutable lane → member snapshot readers load.
type laneMap struct {
	member [replica.MaxLanes]kv.Member
	used   uint64 // lanes assigned to a member
}

// Index is the CKF index described in the package doc.
type Index struct {
	cfg    Config
	format *ckf.Format
	table  *replica.Table

	mu        sync.Mutex // serializes mutations
	producers [replica.MaxLanes]*ckf.Producer
	byMember  map[kv.Member]int
	images    []ckf.Image
	omissions uint64 // capacity omissions of producers whose lane was freed
	lanes     atomic.Pointer[laneMap]

	scratch sync.Pool // *matchScratch
}

// New returns an empty index. It allocates the table up front:
// Lanes rounded up to 8 × buckets × 8 bytes (64 MiB for 64 lanes of 1M
// expected blocks); producers are allocated as members arrive.
func New(cfg Config) (*Index, error) {
	if cfg.Lanes == 0 {
		cfg.Lanes = replica.MaxLanes
	}
	if cfg.ExpectedBlocksPerLane == 0 {
		cfg.ExpectedBlocksPerLane = 1 << 20
	}
	if cfg.Seed == 0 {
		cfg.Seed = ckf.DefaultSeed
	}
	if cfg.Lanes < 1 || cfg.Lanes > replica.MaxLanes {
		return nil, fmt.Errorf("%w: %d lanes, want 1..%d", ErrBadConfig, cfg.Lanes, replica.MaxLanes)
	}
	if cfg.ClearScope > ClearWorker {
		return nil, fmt.Errorf("%w: clear scope %d", ErrBadConfig, cfg.ClearScope)
	}
	n, err := ckf.BucketCount(cfg.ExpectedBlocksPerLane)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	f, err := ckf.NewFormat(cfg.Seed, n)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	t, err := replica.New(replica.Config{Lanes: cfg.Lanes, Buckets: n})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if _, err := replica.NewSearcher(t, f, replica.SearchConfig{Mode: cfg.Search}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if cfg.MaxKicks != 0 && (cfg.MaxKicks < 1 || cfg.MaxKicks > 4096) {
		return nil, fmt.Errorf("%w: max kicks %d, want 1..4096", ErrBadConfig, cfg.MaxKicks)
	}
	x := &Index{cfg: cfg, format: f, table: t, byMember: map[kv.Member]int{}}
	x.lanes.Store(&laneMap{})
	x.scratch.New = func() any { return x.newScratch() }
	return x, nil
}

// Format returns the addressing format shared by every lane.
func (x *Index) Format() *ckf.Format { return x.format }

// Apply applies one event of one member. A Cleared event with ClearWorker
// scope drops every rank of the worker. A removal that names blocks the
// member does not hold removes the known ones and returns a *RemoveError
// (ErrBlockNotFound), as the radix tree does.
func (x *Index) Apply(ev *kv.Event) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if ev.Kind == kv.Cleared && x.cfg.ClearScope == ClearWorker {
		for _, m := range x.workerMembers(ev.Member.Worker) {
			c := *ev
			c.Member = m
			if err := x.applyLocked(&c); err != nil {
				return err
			}
		}
		return nil
	}
	return x.applyLocked(ev)
}

func (x *Index) applyLocked(ev *kv.Event) error {
	lane, ok := x.byMember[ev.Member]
	if !ok {
		if ev.Kind != kv.Stored {
			// Nothing held: a removal or clear changes nothing, and a
			// removal's blocks are all unknown.
			if err := ev.Validate(); err != nil || ev.Kind != kv.Removed || len(ev.Removed) == 0 {
				return err
			}
			return &RemoveError{Member: ev.Member, EventID: ev.EventID, Missing: len(ev.Removed)}
		}
		var err error
		if lane, err = x.assign(ev.Member); err != nil {
			return err
		}
	}
	p := x.producers[lane]
	unknown := p.Stats().UnknownRemovals
	_, err := p.Apply(ev)
	x.publish(lane)
	if n := int(p.Stats().UnknownRemovals - unknown); err == nil && n > 0 {
		err = &RemoveError{Member: ev.Member, EventID: ev.EventID, Missing: n, Removed: len(ev.Removed) - n}
	}
	return err
}

// RemoveMember drops every block of m and frees its lane.
func (x *Index) RemoveMember(m kv.Member) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.removeMemberLocked(m)
}

func (x *Index) removeMemberLocked(m kv.Member) error {
	lane, ok := x.byMember[m]
	if !ok {
		return nil
	}
	_, err := x.producers[lane].RemoveMember(m)
	x.publish(lane)
	return err
}

// RemoveWorker drops every rank of worker.
func (x *Index) RemoveWorker(worker uint64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var first error
	for _, m := range x.workerMembers(worker) {
		if err := x.removeMemberLocked(m); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (x *Index) workerMembers(worker uint64) []kv.Member {
	var ms []kv.Member
	for m := range x.byMember {
		if m.Worker == worker {
			ms = append(ms, m)
		}
	}
	return ms
}

// assign gives m a free lane with a fresh producer and marks it ready (an
// all-zero lane is a valid, empty filter).
func (x *Index) assign(m kv.Member) (int, error) {
	cur := x.lanes.Load()
	free := ^cur.used & (^uint64(0) >> (replica.MaxLanes - x.cfg.Lanes))
	if free == 0 {
		return 0, fmt.Errorf("%w: all %d lanes hold members (new member %v)", ErrNoFreeLane, x.cfg.Lanes, m)
	}
	lane := bits.TrailingZeros64(free)
	p, err := ckf.New(ckf.Config{Format: x.format, MaxKicks: x.cfg.MaxKicks, BatchEvents: 1})
	if err != nil {
		return 0, fmt.Errorf("ckfindex: producer for %v: %w", m, err)
	}
	x.producers[lane] = p
	x.byMember[m] = lane
	next := *cur
	next.member[lane] = m
	next.used |= 1 << lane
	x.lanes.Store(&next)
	x.table.SetReady(lane)
	return lane, nil
}

// publish drains the lane's producer into its table lane and frees the lane
// once its member holds nothing.
func (x *Index) publish(lane int) {
	p := x.producers[lane]
	x.images = p.Drain(x.images[:0])
	if len(x.images) > 0 {
		if err := x.table.Apply(lane, x.images); err != nil {
			// The producer only emits indices below its bucket count,
			// which is the table's.
			panic(fmt.Sprintf("ckfindex: lane %d: producer image rejected: %v", lane, err))
		}
	}
	st := p.Stats()
	if st.TrackedBlocks != 0 {
		return
	}
	// Empty: every word is back to 0 (no resident canonicals), so the
	// lane is already a clean empty filter for its next member.
	x.table.ClearReady(lane)
	x.omissions += st.CapacityOmissions
	cur := x.lanes.Load()
	next := *cur
	delete(x.byMember, next.member[lane])
	next.member[lane] = kv.Member{}
	next.used &^= 1 << lane
	x.lanes.Store(&next)
	x.producers[lane] = nil
}

// Stats is a point-in-time view of an Index.
type Stats struct {
	Members           int     // members holding blocks (lanes in use)
	TrackedBlocks     uint64  // (member, block) mappings, exact
	Resident          uint64  // fingerprints in the filters
	CapacityOmissions uint64  // blocks tracked but not admitted, lifetime
	LoadFactor        float64 // highest slot occupancy of any lane
	MemoryBytes       uint64  // table plus producers
	ReadyLanes        int
}

// Stats returns the index's counters. It takes the mutation lock briefly.
func (x *Index) Stats() Stats {
	x.mu.Lock()
	defer x.mu.Unlock()
	words, _ := replica.RegionWords(replica.Config{Lanes: x.cfg.Lanes, Buckets: x.format.Buckets()})
	s := Stats{Members: len(x.byMember), CapacityOmissions: x.omissions, MemoryBytes: uint64(words) * 8,
		ReadyLanes: bits.OnesCount64(x.table.Ready())}
	for _, lane := range x.byMember {
		st := x.producers[lane].Stats()
		s.TrackedBlocks += st.TrackedBlocks
		s.Resident += st.Resident
		s.CapacityOmissions += st.CapacityOmissions
		s.LoadFactor = max(s.LoadFactor, st.LoadFactor)
		s.MemoryBytes += st.MemoryBytes
	}
	return s
}

// IsCapacity reports whether err is a capacity omission (the blocks are
// tracked exactly but some are not in the filter).
func IsCapacity(err error) bool { return errors.Is(err, ckf.ErrCapacityExhausted) }
