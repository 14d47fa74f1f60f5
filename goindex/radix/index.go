package radix

import (
	"fmt"
	"sort"
	"sync"

	"github.com/goindex/goindex/goindex/kv"
)

// ClearScope says what a Cleared event removes.
type ClearScope uint8

const (
	// ClearRank removes every block of the emitting (worker, dp rank): CUR
	// Dynamo.
	ClearRank ClearScope = iota
	// ClearWorker removes every block of every rank of the emitting worker:
	// G2025/G26a Dynamo and the dynkv module. The ranks stay known.
	ClearWorker
)

// String names the scope as the C ABI's config does ("rank", "worker").
func (s ClearScope) String() string {
	switch s {
	case ClearRank:
		return "rank"
	case ClearWorker:
		return "worker"
	}
	return fmt.Sprintf("clearscope(%d)", uint8(s))
}

// Config selects the version-dependent behaviours of an Index. The zero
// Config is CUR Dynamo.
type Config struct {
	// ClearScope says what a Cleared event removes.
	ClearScope ClearScope // optional; default: ClearRank
	// StopAtUnknownRemoval makes a removal stop at the first hash the member
	// does not hold, as G2025 did; CUR skips it and carries on.
	StopAtUnknownRemoval bool // optional; default: false
}

// Index is Dynamo's exact KV-block index: a tree navigated by local hashes
// from the root, shared by all members, plus each member's lookup from its
// external hashes to tree nodes. It implements kv.Index.
//
// Match (and MatchDetailed, TreeSize, TreeSizes, Stats, Dump, Snapshot) may
// run concurrently with each other from any number of goroutines; Apply,
// RemoveMember, RemoveWorker and Compact are serialized among themselves and
// exclude readers while they change the index (Compact only for its final
// swap). Nodes are 64-byte cache lines in a pointer-free arena.
type Index struct {
	wmu sync.Mutex   // serializes writers; Compact holds it throughout
	mu  sync.RWMutex // readers against the writer holding wmu
	cfg Config
	a   arena

	slots   []*member            // by slot; nil when free
	bySlot  []kv.Member          // member of each slot, read by Match
	members map[kv.Member]uint32 // slot of each known member

	duplicates  uint64
	scratch     []uint32 // writer-only work stack
	hashScratch []uint64 // writer-only copy of a store's hashes
}

// member is one known member's own view: which node each of its external
// hashes names, and what it holds but cannot reach.
type member struct {
	id kv.Member
	// lookup maps the member's external hashes to their nodes.
	lookup map[uint64]uint32
	// alt holds the member's external hash of a node where it differs from
	// node.ext.
	alt map[uint32]uint64
	// orphans are held nodes the member no longer reaches from the root: a
	// block above them was removed. They never score.
	orphans map[uint32]struct{}
}

var _ kv.Index = (*Index)(nil)

// New returns an empty index.
func New(cfg Config) *Index {
	return &Index{cfg: cfg, a: newArena(), members: make(map[kv.Member]uint32)}
}

// Apply applies one KV event of one member. A rejected store (ErrParentNotFound,
// ErrInvalidBlockSequence, ErrConflictingBlock, ErrCapacity, as a *BlockError)
// and an invalid event (ErrInvalidEvent) change nothing. A removal that names
// unknown hashes returns a *RemoveError after removing every known hash (or,
// with StopAtUnknownRemoval, the known hashes before the first unknown one).
// A store whose every block the member already held, and reached, is a
// duplicate: it changes nothing, returns nil and is counted in
// Stats.Duplicates.
func (x *Index) Apply(ev *kv.Event) error {
	if ev == nil {
		return fmt.Errorf("%w: nil event", ErrInvalidEvent)
	}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	switch ev.Kind {
	case kv.Stored:
		return x.store(ev)
	case kv.Removed:
		return x.remove(ev)
	default: // kv.Cleared; Validate admits nothing else
		if x.cfg.ClearScope == ClearWorker {
			for _, s := range x.workerSlots(ev.Member.Worker) {
				x.clearSlot(s)
			}
		} else if s, ok := x.members[ev.Member]; ok {
			x.clearSlot(s)
		}
		return nil
	}
}

// RemoveMember drops every block of m and forgets m. Removing an unknown
// member is a no-op.
func (x *Index) RemoveMember(m kv.Member) error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.members[m]; ok {
		x.dropSlot(s)
	}
	return nil
}

// RemoveWorker drops every block of every rank of worker and forgets those
// ranks. Removing an unknown worker is a no-op.
func (x *Index) RemoveWorker(worker uint64) error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, s := range x.workerSlots(worker) {
		x.dropSlot(s)
	}
	return nil
}

// workerSlots returns the slots of every known rank of worker.
func (x *Index) workerSlots(worker uint64) []uint32 {
	var out []uint32
	for m, s := range x.members {
		if m.Worker == worker {
			out = append(out, s)
		}
	}
	return out
}

// register returns m's slot, giving it the lowest free one if m is new, so
// that an index with at most 64 members keeps every member in node.mask.
func (x *Index) register(m kv.Member) uint32 {
	if s, ok := x.members[m]; ok {
		return s
	}
	s := uint32(len(x.slots))
	for i, ms := range x.slots {
		if ms == nil {
			s = uint32(i)
			break
		}
	}
	ms := &member{id: m, lookup: make(map[uint64]uint32), alt: make(map[uint32]uint64), orphans: make(map[uint32]struct{})}
	if int(s) == len(x.slots) {
		x.slots = append(x.slots, ms)
		x.bySlot = append(x.bySlot, m)
	} else {
		x.slots[s], x.bySlot[s] = ms, m
	}
	x.members[m] = s
	return s
}

// clearSlot drops every block of the member in slot s; the member stays known.
func (x *Index) clearSlot(s uint32) {
	ms := x.slots[s]
	for _, id := range ms.lookup {
		n := x.a.at(id)
		x.a.clearReach(n, s)
		n.holders--
	}
	for _, id := range ms.lookup {
		x.a.prune(id)
	}
	clear(ms.lookup)
	clear(ms.alt)
	clear(ms.orphans)
}

// dropSlot clears slot s and frees it.
func (x *Index) dropSlot(s uint32) {
	x.clearSlot(s)
	delete(x.members, x.slots[s].id)
	x.slots[s], x.bySlot[s] = nil, kv.Member{}
	for len(x.slots) > 0 && x.slots[len(x.slots)-1] == nil {
		x.slots, x.bySlot = x.slots[:len(x.slots)-1], x.bySlot[:len(x.bySlot)-1]
	}
}

// extOf returns the external hash by which slot s holds node id.
func (x *Index) extOf(s, id uint32) uint64 {
	if e, ok := x.slots[s].alt[id]; ok {
		return e
	}
	return x.a.at(id).ext
}

// Stats is a point-in-time summary of an Index.
type Stats struct {
	// Nodes is the number of tree nodes, root excluded.
	Nodes int
	// Members is the number of known members, including cleared ones.
	Members int
	// Blocks is the number of (member, block) pairs held, orphans included:
	// the sum of the tree sizes.
	Blocks int
	// Orphaned is the number of held pairs the member cannot reach from the
	// root; they never score.
	Orphaned int
	// Duplicates counts store events that changed nothing because the
	// member already held and reached every block (Dynamo's
	// duplicate_store warnings).
	Duplicates uint64
}

// Stats returns the index's current counts.
func (x *Index) Stats() Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	st := Stats{Nodes: x.a.live, Members: len(x.members), Duplicates: x.duplicates}
	for _, ms := range x.slots {
		if ms != nil {
			st.Blocks += len(ms.lookup)
			st.Orphaned += len(ms.orphans)
		}
	}
	return st
}

// TreeSize returns how many blocks m holds (Dynamo's tree_sizes entry,
// orphaned blocks included) and whether m is known.
func (x *Index) TreeSize(m kv.Member) (int, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s, ok := x.members[m]
	if !ok {
		return 0, false
	}
	return len(x.slots[s].lookup), true
}

// TreeSizes appends one entry per known member, ordered by member, with the
// number of blocks it holds (zero for a cleared member), and returns dst.
func (x *Index) TreeSizes(dst []kv.Overlap) []kv.Overlap {
	x.mu.RLock()
	start := len(dst)
	for _, ms := range x.slots {
		if ms != nil {
			dst = append(dst, kv.Overlap{Member: ms.id, Blocks: len(ms.lookup)})
		}
	}
	x.mu.RUnlock()
	tail := dst[start:]
	sort.Slice(tail, func(i, j int) bool { return tail[i].Member.Less(tail[j].Member) })
	return dst
}
