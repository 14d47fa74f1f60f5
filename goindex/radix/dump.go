package radix

import (
	"fmt"
	"sort"

	"github.com/goindex/goindex/goindex/kv"
)

// Dump returns the index as Dynamo dumps a classic radix tree (dynamo-compat
// §3.4): breadth first from the root, one single-block Stored event per
// (node, member that reaches it), event ids from 0, and the parent given as
// that member's external hash of the parent node. Nodes are visited in
// local-hash order and members in member order, so the dump is
// deterministic. Replaying it into an empty index yields an equal Snapshot
// and equal scores for every query. Orphaned blocks (held but unreachable,
// never scored) are not dumped: their parent chain names a block the member
// no longer holds, so no store could recreate them.
func (x *Index) Dump() []kv.Event {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var (
		out    []kv.Event
		blocks []kv.Block
		slots  []uint32
	)
	queue := x.sortedKids(nil, x.a.at(rootID))
	for i := 0; i < len(queue); i++ {
		id := queue[i]
		n := x.a.at(id)
		slots = x.sortedReach(slots[:0], n)
		for _, s := range slots {
			blocks = append(blocks, kv.Block{External: x.extOf(s, id), Local: n.local})
			ev := kv.Event{
				Member:  x.bySlot[s],
				EventID: uint64(len(out)),
				Kind:    kv.Stored,
				Blocks:  blocks[len(blocks)-1 : len(blocks) : len(blocks)],
			}
			if n.parent != rootID {
				ev.HasParent, ev.Parent = true, x.extOf(s, n.parent)
			}
			out = append(out, ev)
		}
		queue = x.sortedKids(queue, n)
	}
	return out
}

// sortedKids appends n's children to dst in local-hash order.
func (x *Index) sortedKids(dst []uint32, n *node) []uint32 {
	start := len(dst)
	dst = x.a.appendKids(dst, n)
	tail := dst[start:]
	sort.Slice(tail, func(i, j int) bool { return x.a.at(tail[i]).local < x.a.at(tail[j]).local })
	return dst
}

// sortedReach appends the slots reaching n to dst in member order.
func (x *Index) sortedReach(dst []uint32, n *node) []uint32 {
	dst = x.a.appendReach(dst, n)
	sort.Slice(dst, func(i, j int) bool { return x.bySlot[dst[i]].Less(x.bySlot[dst[j]]) })
	return dst
}

// Entry is one (member, block) pair of a Snapshot: the member reaches the
// block at Depth (1 for a child of the root) below its parent block.
type Entry struct {
	Member    kv.Member
	Depth     int
	Block     kv.Block
	HasParent bool
	Parent    uint64 // the member's external hash of the parent; valid when HasParent
}

// Snapshot is the scoring state of an index: every (member, block) pair a
// member reaches, sorted by member, depth and external hash. Two indexes
// with equal snapshots give equal scores to every query. Orphaned pairs and
// cleared-but-known members are not part of it (see Dump).
type Snapshot struct {
	Entries []Entry
}

// Snapshot returns the index's scoring state, walking the tree depth first
// (independently of Dump's breadth-first order).
func (x *Index) Snapshot() Snapshot {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var (
		snap  Snapshot
		slots []uint32
	)
	type item struct {
		id    uint32
		depth int
	}
	stack := []item{{rootID, 0}}
	var kids []uint32
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := x.a.at(it.id)
		if it.id != rootID {
			slots = x.a.appendReach(slots[:0], n)
			for _, s := range slots {
				e := Entry{Member: x.bySlot[s], Depth: it.depth, Block: kv.Block{External: x.extOf(s, it.id), Local: n.local}}
				if n.parent != rootID {
					e.HasParent, e.Parent = true, x.extOf(s, n.parent)
				}
				snap.Entries = append(snap.Entries, e)
			}
		}
		kids = x.a.appendKids(kids[:0], n)
		for _, k := range kids {
			stack = append(stack, item{k, it.depth + 1})
		}
	}
	sort.Slice(snap.Entries, func(i, j int) bool { return snap.Entries[i].less(snap.Entries[j]) })
	return snap
}

func (e Entry) less(o Entry) bool {
	if e.Member != o.Member {
		return e.Member.Less(o.Member)
	}
	if e.Depth != o.Depth {
		return e.Depth < o.Depth
	}
	return e.Block.External < o.Block.External
}

// Diff describes the first difference between two snapshots, or returns ""
// when they are equal.
func (s Snapshot) Diff(o Snapshot) string {
	for i := 0; i < len(s.Entries) && i < len(o.Entries); i++ {
		if s.Entries[i] != o.Entries[i] {
			return fmt.Sprintf("entry %d: %+v vs %+v", i, s.Entries[i], o.Entries[i])
		}
	}
	if len(s.Entries) != len(o.Entries) {
		return fmt.Sprintf("%d entries vs %d", len(s.Entries), len(o.Entries))
	}
	return ""
}

// Equal reports whether two snapshots hold the same pairs.
func (s Snapshot) Equal(o Snapshot) bool { return s.Diff(o) == "" }
