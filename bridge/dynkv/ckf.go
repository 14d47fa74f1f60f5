package dynkv

import (
	"fmt"
	"slices"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/ckfindex"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
)

// Index names the index that answers MATCH, MATCH_PRIMARY and SELECT.
type Index string

// The backing indexes.
const (
	// IndexExact answers from the Store's own nodes (the module's answers).
	IndexExact Index = "exact"
	// IndexCKF answers from a CKF projection of the Store's active (node,
	// rank) states: never below the exact depth of a block the filter
	// holds, above it only through 16-bit fingerprint collisions.
	IndexCKF Index = "ckf"
)

// CKF projection sizing.
const (
	// DefaultCKFExpectedBlocks is the blocks one rank is expected to hold:
	// 65,536 at ≤ 80% load give 32,768 buckets (ckf.BucketCount), 256 KiB
	// a lane, so a key's 64-lane table is 16 MiB and each rank holding
	// blocks adds its producer (another 256 KiB filter, ~32 B a block).
	DefaultCKFExpectedBlocks = 1 << 16
	// CKFLanes bounds the ranks of one key that hold blocks at once in ckf
	// mode: one lane each in a replica table, whose lane masks are 64 bits
	// (replica.MaxLanes). A rank's lane is freed when it holds no block.
	CKFLanes = replica.MaxLanes
)

// Backing selects and sizes the index behind MATCH, MATCH_PRIMARY and
// SELECT. The module's bookkeeping (conflicts, event-id fences, clear
// watermarks, retirement, generations, replacement) is exact in both modes,
// so every mutation replies the same bytes in both, STATS's triple included,
// except that ckf mode refuses a store that would make a 65th rank of one key
// hold blocks (see Store).
type Backing struct {
	Index Index // optional; default: IndexExact
	// CKFExpectedBlocks sizes every lane's filter for the blocks one rank
	// is expected to hold (ignored in exact mode); optional; default:
	// DefaultCKFExpectedBlocks.
	CKFExpectedBlocks uint64
}

// normalized fills the defaults and checks b.
func (b Backing) normalized() (Backing, error) {
	if b.Index == "" {
		b.Index = IndexExact
	}
	switch b.Index {
	case IndexExact:
		return b, nil
	case IndexCKF:
	default:
		return b, fmt.Errorf("%w: index %q, want %s or %s", ErrBadBacking, b.Index, IndexExact, IndexCKF)
	}
	if b.CKFExpectedBlocks == 0 {
		b.CKFExpectedBlocks = DefaultCKFExpectedBlocks
	}
	if _, err := ckf.BucketCount(b.CKFExpectedBlocks); err != nil {
		return b, fmt.Errorf("%w: ckf expected blocks: %v", ErrBadBacking, err)
	}
	return b, nil
}

// NewStoreWith returns an empty index with backing b; NewStore is
// NewStoreWith(Backing{}). In ckf mode it allocates the key's 64-lane table
// at once (CKFLanes × buckets × 8 bytes).
func NewStoreWith(b Backing) (*Store, error) {
	b, err := b.normalized()
	if err != nil {
		return nil, err
	}
	s := NewStore()
	if b.Index != IndexCKF {
		return s, nil
	}
	x, err := ckfindex.New(ckfindex.Config{
		Lanes:                 CKFLanes,
		ExpectedBlocksPerLane: b.CKFExpectedBlocks,
		// A linear-equivalent scan: the module's holes (a mid-chain
		// remove) are ordinary here, and Bisect would skip an
		// unobserved one and over-report past it.
		Search: replica.Chunked,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBacking, err)
	}
	s.proj = &projection{x: x, expected: b.CKFExpectedBlocks}
	s.laneLimit = CKFLanes
	return s, nil
}

// projection is the CKF image of a Store's active (node, rank) states: rank
// r's lane holds the canonical hash (the chain of local hashes from the root,
// spec §1) of every node r actively owns, mapped under the node's external
// hash. It is fed only the changes the Store accepted, under the Store's
// write lock, so a rank's lane is taken and freed exactly when its count of
// active states leaves and returns to zero.
type projection struct {
	x        *ckfindex.Index
	expected uint64
	ev       kv.Event  // scratch
	gone     [1]uint64 // scratch
	// errors counts mirror calls ckfindex refused for a reason other than
	// capacity: none is reachable (the Store checks lanes first and feeds
	// only consistent changes), so a non-zero count is a bug.
	errors uint64
}

func member(r Rank) kv.Member { return kv.Member{Worker: r.Worker, Rank: r.DPRank} }

// activated mirrors a block that became active for r. It goes in as a
// one-block chain from the root carrying the node's canonical hash as its
// local hash (seq[0] = local[0]), so the lane holds the node's canonical
// hash whether or not r holds its parent: the module lets a block be active
// below a block the rank no longer holds.
func (p *projection) activated(r Rank, n *node) {
	p.ev = kv.Event{Member: member(r), Kind: kv.Stored, Blocks: append(p.ev.Blocks[:0], kv.Block{External: n.hash, Local: n.canon})}
	p.check(p.x.Apply(&p.ev))
}

// deactivated mirrors a block that became inactive for r; when r holds no
// block any more its lane is freed.
func (p *projection) deactivated(r Rank, n *node, holdsNone bool) {
	if holdsNone {
		p.check(p.x.RemoveMember(member(r)))
		return
	}
	p.gone[0] = n.hash
	p.ev = kv.Event{Member: member(r), Kind: kv.Removed, Removed: p.gone[:]}
	p.check(p.x.Apply(&p.ev))
	p.ev.Removed = nil
}

// check counts a refused mirror call. A capacity omission is not one: the
// block is tracked exactly, absent from the filter (a stable false negative,
// ckf spec §4.7) and counted by ckfindex.
func (p *projection) check(err error) {
	if err != nil && !ckfindex.IsCapacity(err) {
		p.errors++
	}
}

// matchCKF answers a query from the filters. Each rank's depth is its
// lane's run of consecutive hits from the root (a linear-equivalent scan),
// capped where the query leaves the node tree: no rank holds a block no node
// represents, so the cap removes only collisions. Last is the external hash
// of the node at the reported depth. Ranks come sorted by worker and rank
// (the module lists them in owner order), and workers whose owner lease
// lapsed are skipped as in exact mode.
func (s *Store) matchCKF(locals []uint64, nowMs uint64) []MatchEntry {
	overlaps := s.proj.x.Match(nil, locals)
	if len(overlaps) == 0 {
		return nil
	}
	deepest := 0
	for _, o := range overlaps {
		deepest = max(deepest, o.Blocks)
	}
	path := make([]*node, 0, deepest)
	for parent := RootParent; len(path) < deepest; {
		n := s.child(parent, locals[len(path)])
		if n == nil {
			break
		}
		path = append(path, n)
		parent = n.hash
	}
	out := make([]MatchEntry, 0, len(overlaps))
	for _, o := range overlaps {
		if d := min(o.Blocks, len(path)); d > 0 && s.live(o.Member.Worker, nowMs) {
			out = append(out, MatchEntry{Rank: Rank{o.Member.Worker, o.Member.Rank}, Matched: uint32(d), Last: path[d-1].hash})
		}
	}
	slices.SortFunc(out, func(a, b MatchEntry) int { return compareRank(a.Rank, b.Rank) })
	return out
}

// activates reports whether a validated store event would activate at least
// one block for its rank, that is, whether a rank holding none needs a
// lane: some block is new, has no owner of the rank, or an inactive one no
// newer than the event and not behind the rank's clear barrier.
func (s *Store) activates(ev *Event, st *rankState) bool {
	for _, b := range ev.Blocks {
		n := s.nodes[b.External]
		if n == nil || st == nil {
			return true
		}
		if ev.EventID < st.lastClear {
			return false
		}
		o := n.owner(st)
		if o == nil || (ev.EventID >= o.eventID && !o.active) {
			return true
		}
	}
	return false
}

// Detail is a Store's full counters, the reply of DYNKV.STATS key DETAIL.
type Detail struct {
	Index                        Index
	Nodes, RankStates, Mutations uint64 // the module's STATS triple
	RanksWithBlocks              int    // ranks with an active state (ckf: lanes taken)
	// CKF mode only.
	CKF               ckfindex.Stats
	CKFExpectedBlocks uint64 // per lane
	CKFBuckets        uint64 // per lane
	CKFMirrorErrors   uint64 // refused mirror calls: always 0 unless there is a bug
}

// Detail returns the Store's counters.
func (s *Store) Detail() Detail {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := Detail{Index: IndexExact, Nodes: uint64(len(s.nodes)), RankStates: uint64(len(s.ranks)), Mutations: s.mutations, RanksWithBlocks: s.holding}
	if s.proj != nil {
		d.Index = IndexCKF
		d.CKF = s.proj.x.Stats()
		d.CKFExpectedBlocks = s.proj.expected
		d.CKFBuckets = s.proj.x.Format().Buckets()
		d.CKFMirrorErrors = s.proj.errors
	}
	return d
}

// detailReply is the flat name/value array of DYNKV.STATS key DETAIL.
func detailReply(d Detail) reply {
	arr := []reply{bulk([]byte("index")), bulk([]byte(d.Index))}
	add := func(name string, v uint64) { arr = append(arr, bulk([]byte(name)), integer(int64(v))) }
	add("nodes", d.Nodes)
	add("rank_states", d.RankStates)
	add("mutations", d.Mutations)
	add("ranks_with_blocks", uint64(d.RanksWithBlocks))
	if d.Index == IndexCKF {
		add("ckf_lanes", CKFLanes)
		add("ckf_expected_blocks", d.CKFExpectedBlocks)
		add("ckf_buckets", d.CKFBuckets)
		add("ckf_members", uint64(d.CKF.Members))
		add("ckf_tracked_blocks", d.CKF.TrackedBlocks)
		add("ckf_resident", d.CKF.Resident)
		add("ckf_capacity_omissions", d.CKF.CapacityOmissions)
		arr = append(arr, bulk([]byte("ckf_load_factor")), bulk(fmt.Appendf(nil, "%.4f", d.CKF.LoadFactor)))
		add("ckf_memory_bytes", d.CKF.MemoryBytes)
		add("ckf_mirror_errors", d.CKFMirrorErrors)
	}
	return reply{kind: replyArray, array: arr}
}
