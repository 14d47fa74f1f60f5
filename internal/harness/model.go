package harness

import (
	"slices"

	"github.com/goindex/goindex/goindex/kv"
)

// ClearScope says what a Cleared event empties in the model. It must match
// the clear scope of the index under test.
type ClearScope uint8

const (
	// ClearRank empties only the emitting (worker, dp rank): Dynamo CUR.
	ClearRank ClearScope = iota
	// ClearWorker empties every rank of the emitting worker: Dynamo
	// G2025/G26a and the dynkv module.
	ClearWorker
)

// String names the scope.
func (s ClearScope) String() string {
	if s == ClearWorker {
		return "worker"
	}
	return "rank"
}

// Expect is the model's verdict on one operation: whether an exact index
// must accept it or may reject it.
type Expect uint8

const (
	// MustApply marks an operation every exact index accepts; a backend
	// error on it is a failure in strict mode.
	MustApply Expect = iota + 1
	// MayReject marks an operation an exact index may refuse (a store below
	// a parent that is held but orphaned, a removal naming a block the index
	// may never have accepted); a backend error on it is allowed.
	MayReject
)

// String names the verdict.
func (e Expect) String() string {
	if e == MustApply {
		return "apply"
	}
	return "may-reject"
}

// entry is one held block of one member: its chain parent and whether its
// whole chain to the root is covered (reachable).
type entry struct {
	parent    uint64
	hasParent bool
	reachable bool
}

// memberBlocks maps a member's held external hashes to their entries; the
// reachable ones form the reachable set, which is prefix-closed.
type memberBlocks map[uint64]entry

// Model is the differential reference of dynamo-compat §3.6. Per member it
// keeps held (external hash → chain parent) and reachable (the held blocks
// whose whole chain to the root is covered), and bounds what any correct
// index may score for a query: reach_len ≤ score ≤ held_len.
//
// Rules: a store holds every block under its chain parent and makes them
// reachable iff its parent is the root or reachable; a removal deletes the
// named blocks and, if one was reachable, prunes reachable to the blocks
// whose chain to the root is still reachable; cleared, remove member and
// remove worker empty the member(s). Re-storing a removed block does not
// revive its descendants, as in Dynamo CUR.
//
// A Model is not safe for concurrent mutation; its read methods (Bounds,
// Held, Reachable, Known, Members) may run concurrently with each other
// while nothing mutates it.
type Model struct {
	scope   ClearScope
	members map[kv.Member]memberBlocks
	order   []kv.Member // the keys of members, sorted by kv.Member.Less
}

// NewModel returns an empty model whose Cleared events use scope.
func NewModel(scope ClearScope) *Model {
	return &Model{scope: scope, members: make(map[kv.Member]memberBlocks)}
}

// Apply applies one operation and returns whether an exact index must
// accept it.
func (m *Model) Apply(op *Op) Expect {
	switch op.Kind {
	case OpEvent:
		ev := &op.Event
		switch ev.Kind {
		case kv.Stored:
			return m.Store(ev.Member, ev.HasParent, ev.Parent, ev.Blocks)
		case kv.Removed:
			return m.Remove(ev.Member, ev.Removed)
		case kv.Cleared:
			return m.Clear(ev.Member)
		}
	case OpRemoveMember:
		return m.RemoveMember(op.Member)
	case OpRemoveWorker:
		return m.RemoveWorker(op.Worker)
	}
	return MayReject
}

// Store holds blocks for mem as a chain below parent (the root when
// hasParent is false). It returns MustApply when the parent is the root or
// reachable, MayReject otherwise (the index may not know the parent).
func (m *Model) Store(mem kv.Member, hasParent bool, parent uint64, blocks []kv.Block) Expect {
	bs := m.blocksOf(mem)
	reachable := !hasParent || bs[parent].reachable
	moved := false
	for _, b := range blocks {
		old, had := bs[b.External]
		if had && old.reachable && (old.parent != parent || old.hasParent != hasParent) {
			// A hand-made store moved a reachable block under another
			// parent (router-chain hashes never do): it may have lost its
			// root or closed a loop, so prune below.
			moved = true
		}
		bs[b.External] = entry{parent: parent, hasParent: hasParent, reachable: reachable}
		parent, hasParent = b.External, true
	}
	if moved {
		bs.prune()
	}
	if reachable {
		return MustApply
	}
	return MayReject
}

// Remove deletes hashes from mem's held blocks. It returns MustApply when
// it cut at least one reachable block and every named hash was reachable
// when it was reached; otherwise MayReject.
//
// §3.6 returns Apply whenever a reachable block was cut. This model also
// allows an error when the removal names a block that is not reachable: a
// CUR engine skips such a hash, removes the rest and reports the first
// unknown hash, and an index may never have accepted a held but orphaned
// block. The held and reachable sets evolve exactly as in §3.6.
func (m *Model) Remove(mem kv.Member, hashes []uint64) Expect {
	bs := m.members[mem]
	cut, unsure := false, false
	for _, h := range hashes {
		e, ok := bs[h]
		switch {
		case !ok:
			unsure = true
		case e.reachable:
			cut = true
		default:
			unsure = true
		}
		delete(bs, h)
	}
	if cut {
		bs.prune()
	}
	if cut && !unsure {
		return MustApply
	}
	return MayReject
}

// Clear empties mem, or every known rank of mem's worker under ClearWorker.
// mem stays known. It always returns MustApply.
func (m *Model) Clear(mem kv.Member) Expect {
	m.blocksOf(mem)
	for _, o := range m.order {
		if o == mem || (m.scope == ClearWorker && o.Worker == mem.Worker) {
			clear(m.members[o])
		}
	}
	return MustApply
}

// RemoveMember forgets mem. It returns MustApply when mem was known, else
// MayReject (an index may report an unknown member).
func (m *Model) RemoveMember(mem kv.Member) Expect {
	if _, ok := m.members[mem]; !ok {
		return MayReject
	}
	m.forget(func(o kv.Member) bool { return o == mem })
	return MustApply
}

// RemoveWorker forgets every rank of worker. It returns MustApply when one
// was known, else MayReject.
func (m *Model) RemoveWorker(worker uint64) Expect {
	if !m.forget(func(o kv.Member) bool { return o.Worker == worker }) {
		return MayReject
	}
	return MustApply
}

// Bounds returns, for a query given by its chain hashes, the longest prefix
// mem holds (heldLen) and the longest prefix reachable for mem (reachLen).
// An unknown member gets (0, 0).
func (m *Model) Bounds(mem kv.Member, chain []uint64) (heldLen, reachLen int) {
	bs := m.members[mem]
	reachOpen := true
	for _, h := range chain {
		e, ok := bs[h]
		if !ok {
			break
		}
		heldLen++
		if reachOpen && e.reachable {
			reachLen++
		} else {
			reachOpen = false
		}
	}
	return heldLen, reachLen
}

// Held reports whether mem holds the block with external hash ext.
func (m *Model) Held(mem kv.Member, ext uint64) bool {
	_, ok := m.members[mem][ext]
	return ok
}

// Reachable reports whether ext is in mem's reachable set.
func (m *Model) Reachable(mem kv.Member, ext uint64) bool {
	return m.members[mem][ext].reachable
}

// HeldBlocks returns how many blocks mem holds.
func (m *Model) HeldBlocks(mem kv.Member) int { return len(m.members[mem]) }

// Known reports whether mem has had an event since it was last removed.
func (m *Model) Known(mem kv.Member) bool {
	_, ok := m.members[mem]
	return ok
}

// Members returns the known members in kv.Member.Less order. The slice is
// the model's own; callers must not modify it, and it is valid until the
// next mutation.
func (m *Model) Members() []kv.Member { return m.order }

// blocksOf returns mem's blocks, making mem known.
func (m *Model) blocksOf(mem kv.Member) memberBlocks {
	bs, ok := m.members[mem]
	if !ok {
		bs = make(memberBlocks)
		m.members[mem] = bs
		i, _ := slices.BinarySearchFunc(m.order, mem, compareMembers)
		m.order = slices.Insert(m.order, i, mem)
	}
	return bs
}

// forget drops the members drop selects and reports whether it dropped any.
func (m *Model) forget(drop func(kv.Member) bool) bool {
	n := len(m.order)
	m.order = slices.DeleteFunc(m.order, func(o kv.Member) bool {
		if drop(o) {
			delete(m.members, o)
			return true
		}
		return false
	})
	return len(m.order) != n
}

func compareMembers(a, b kv.Member) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}

// Walk states of prune's memo.
const (
	walkVisiting uint8 = iota + 1
	walkRooted
	walkCut
)

// prune keeps a block reachable only if every block on its chain to the
// root is still reachable. It walks each chain once (memoized), so it costs
// O(held blocks); a chain that loops back on itself (only a hand-made store
// whose parent is one of its own blocks can build one) counts as cut.
func (bs memberBlocks) prune() {
	memo := make(map[uint64]uint8, len(bs))
	var path []uint64
	for h, e := range bs {
		if !e.reachable || memo[h] != 0 {
			continue
		}
		path = path[:0]
		state := walkCut
		for cur := h; ; {
			if s := memo[cur]; s != 0 {
				if s != walkVisiting {
					state = s
				}
				break
			}
			ce, ok := bs[cur]
			if !ok || !ce.reachable {
				break
			}
			memo[cur] = walkVisiting
			path = append(path, cur)
			if !ce.hasParent {
				state = walkRooted
				break
			}
			cur = ce.parent
		}
		for _, p := range path {
			memo[p] = state
		}
	}
	for h, s := range memo {
		if s == walkCut {
			e := bs[h]
			e.reachable = false
			bs[h] = e
		}
	}
}
