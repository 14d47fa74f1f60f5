package radix

import (
	"math/bits"
	"sort"
)

// inlineKids is how many children a node keeps inline before it spills the
// rest into a map: on a Mooncake-shaped tree almost every node has one child
// and branch points mostly two, so the common walk never leaves the node's
// own cache line (BenchmarkMatch).
const inlineKids = 2

// chunkShift sizes arena chunks: 2^14 nodes × 64 bytes = 1 MiB, small enough
// that growth never copies the tree and large enough that the chunk table
// stays in cache.
const chunkShift = 14

const (
	chunkNodes = 1 << chunkShift
	chunkMask  = chunkNodes - 1
)

// maxNodes bounds node ids to 32 bits; id 0 is the root.
const maxNodes = 1<<32 - 1

// rootID is the id of the root node; it is never a child, so 0 also means
// "no child" in node.kid.
const rootID = 0

// freedHolders marks a freed node, so that pruning it again (a member's
// lookup may name a node that an earlier prune already freed) stops at once.
const freedHolders = ^uint32(0)

// maskSlots is how many member slots live in node.mask; higher slots live in
// the node's wide set.
const maskSlots = 64

// node is one block position in the tree: the path of local hashes from the
// root to it. It is exactly one 64-byte cache line and holds no Go pointers,
// so the arena's chunks are never scanned by the garbage collector.
type node struct {
	// mask has bit s set when the member in slot s (< 64) reaches this node
	// through a chain it holds from the root.
	mask uint64
	// ext is the external hash of the first member that stored the node;
	// members whose hash differs keep theirs in member.alt.
	ext uint64
	// local is the local hash on the edge from the parent.
	local    uint64
	kidLocal [inlineKids]uint64
	kid      [inlineKids]uint32
	parent   uint32
	// holders counts the members holding the node, reachable or orphaned.
	holders uint32
	// more is 1 + the index of the node's overflow child map, 0 for none.
	more uint32
	// wide is 1 + the index of the node's sorted set of reachable slots
	// ≥ 64, 0 for none.
	wide uint32
}

// arena stores nodes in fixed-size chunks by id. New nodes take the next
// unused id, so a chain stored in one event lies in consecutive cache lines;
// freed ids are reused last-in first-out. Compact restores allocation order
// after churn.
type arena struct {
	chunks []*[chunkNodes]node
	next   uint32   // ids below next have been handed out
	free   []uint32 // freed ids, reused before next grows
	live   int      // nodes in the tree, root excluded

	kidMaps  []map[uint64]uint32 // overflow children, by node.more−1
	freeMaps []uint32
	wide     [][]uint32 // sorted slots ≥ 64, by node.wide−1
	freeWide []uint32
}

func newArena() arena {
	a := arena{chunks: []*[chunkNodes]node{new([chunkNodes]node)}, next: 1}
	return a
}

// at returns the node with id; the id must have been allocated.
func (a *arena) at(id uint32) *node {
	return &a.chunks[id>>chunkShift][id&chunkMask]
}

// room reports whether n more nodes can be allocated.
func (a *arena) room(n int) bool {
	return uint64(a.live)+uint64(n) < maxNodes
}

// child returns the id of parent's child on local hash h, or 0.
func (a *arena) child(p *node, h uint64) uint32 {
	if p.kid[0] != 0 && p.kidLocal[0] == h {
		return p.kid[0]
	}
	if p.kid[1] != 0 && p.kidLocal[1] == h {
		return p.kid[1]
	}
	if p.more != 0 {
		return a.kidMaps[p.more-1][h]
	}
	return 0
}

// hasKids reports whether n has any child.
func hasKids(n *node) bool {
	return n.kid[0]|n.kid[1]|n.more != 0
}

// appendKids appends the ids of n's children to dst.
func (a *arena) appendKids(dst []uint32, n *node) []uint32 {
	for i := range n.kid {
		if n.kid[i] != 0 {
			dst = append(dst, n.kid[i])
		}
	}
	if n.more != 0 {
		for _, id := range a.kidMaps[n.more-1] {
			dst = append(dst, id)
		}
	}
	return dst
}

// newChild allocates a node below parent on local hash h and links it.
// The caller has checked room and that no such child exists.
func (a *arena) newChild(parent uint32, h uint64) uint32 {
	var id uint32
	if k := len(a.free); k > 0 {
		id, a.free = a.free[k-1], a.free[:k-1]
	} else {
		id = a.next
		a.next++
		if int(id>>chunkShift) == len(a.chunks) {
			a.chunks = append(a.chunks, new([chunkNodes]node))
		}
	}
	a.live++
	*a.at(id) = node{local: h, parent: parent}
	a.link(a.at(parent), h, id)
	return id
}

// link records id as p's child on local hash h.
func (a *arena) link(p *node, h uint64, id uint32) {
	for i := range p.kid {
		if p.kid[i] == 0 {
			p.kid[i], p.kidLocal[i] = id, h
			return
		}
	}
	if p.more == 0 {
		if k := len(a.freeMaps); k > 0 {
			p.more, a.freeMaps = a.freeMaps[k-1]+1, a.freeMaps[:k-1]
		} else {
			a.kidMaps = append(a.kidMaps, make(map[uint64]uint32))
			p.more = uint32(len(a.kidMaps))
		}
	}
	a.kidMaps[p.more-1][h] = id
}

// unlink removes p's child on local hash h.
func (a *arena) unlink(p *node, h uint64) {
	for i := range p.kid {
		if p.kid[i] != 0 && p.kidLocal[i] == h {
			p.kid[i], p.kidLocal[i] = 0, 0
			return
		}
	}
	m := a.kidMaps[p.more-1]
	delete(m, h)
	if len(m) == 0 {
		a.freeMaps = append(a.freeMaps, p.more-1)
		p.more = 0
	}
}

// prune frees id and then each ancestor in turn while the node has neither
// holders nor children. The root is never freed.
func (a *arena) prune(id uint32) {
	for id != rootID {
		n := a.at(id)
		if n.holders != 0 || hasKids(n) {
			return
		}
		parent := n.parent
		a.unlink(a.at(parent), n.local)
		if n.wide != 0 {
			a.dropWide(n)
		}
		*n = node{holders: freedHolders}
		a.free = append(a.free, id)
		a.live--
		id = parent
	}
}

// reaches reports whether slot is in n's reachable set.
func (a *arena) reaches(n *node, slot uint32) bool {
	if slot < maskSlots {
		return n.mask&(1<<slot) != 0
	}
	if n.wide == 0 {
		return false
	}
	set := a.wide[n.wide-1]
	i := sort.Search(len(set), func(i int) bool { return set[i] >= slot })
	return i < len(set) && set[i] == slot
}

// setReach adds slot to n's reachable set.
func (a *arena) setReach(n *node, slot uint32) {
	if slot < maskSlots {
		n.mask |= 1 << slot
		return
	}
	if n.wide == 0 {
		if k := len(a.freeWide); k > 0 {
			n.wide, a.freeWide = a.freeWide[k-1]+1, a.freeWide[:k-1]
		} else {
			a.wide = append(a.wide, nil)
			n.wide = uint32(len(a.wide))
		}
	}
	set := a.wide[n.wide-1]
	i := sort.Search(len(set), func(i int) bool { return set[i] >= slot })
	if i < len(set) && set[i] == slot {
		return
	}
	set = append(set, 0)
	copy(set[i+1:], set[i:])
	set[i] = slot
	a.wide[n.wide-1] = set
}

// clearReach removes slot from n's reachable set.
func (a *arena) clearReach(n *node, slot uint32) {
	if slot < maskSlots {
		n.mask &^= 1 << slot
		return
	}
	if n.wide == 0 {
		return
	}
	set := a.wide[n.wide-1]
	i := sort.Search(len(set), func(i int) bool { return set[i] >= slot })
	if i == len(set) || set[i] != slot {
		return
	}
	set = append(set[:i], set[i+1:]...)
	if len(set) == 0 {
		a.dropWide(n)
		return
	}
	a.wide[n.wide-1] = set
}

// dropWide releases n's wide set, keeping its storage for reuse.
func (a *arena) dropWide(n *node) {
	a.wide[n.wide-1] = a.wide[n.wide-1][:0]
	a.freeWide = append(a.freeWide, n.wide-1)
	n.wide = 0
}

// appendReach appends every slot in n's reachable set to dst, ascending.
func (a *arena) appendReach(dst []uint32, n *node) []uint32 {
	for m := n.mask; m != 0; m &= m - 1 {
		dst = append(dst, uint32(bits.TrailingZeros64(m)))
	}
	if n.wide != 0 {
		dst = append(dst, a.wide[n.wide-1]...)
	}
	return dst
}
