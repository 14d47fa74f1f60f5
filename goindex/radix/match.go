package radix

import (
	"math/bits"
	"sort"

	"github.com/goindex/goindex/goindex/kv"
)

// Match appends to dst, in no particular order, every member whose matched
// depth for the query is positive, and returns dst. A member's depth is the
// number of leading query blocks (local hashes from the root) it reaches
// through a chain it holds: Dynamo's find_matches with early_exit false.
// Match does not allocate when dst has room for the result; it may run
// concurrently with other readers.
func (x *Index) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	x.mu.RLock()
	dst = x.match(dst, locals)
	x.mu.RUnlock()
	return dst
}

// match walks the query from the root. A member reaching a node reaches
// every node above it (reachability is prefix-closed), so a member's depth
// is where it drops out of the running set: bits leaving the running mask,
// or slots ≥ 64 in the parent's wide set but not the child's. The walk stops
// early only once nobody is left, which cannot change any score.
func (x *Index) match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	a := &x.a
	cur := a.at(rootID)
	active := ^uint64(0)
	var wide uint32
	depth := 0
	for _, h := range locals {
		id := a.child(cur, h)
		if id == 0 {
			break
		}
		n := a.at(id)
		next := active & n.mask
		if depth > 0 {
			if gone := active &^ next; gone != 0 {
				dst = x.appendMask(dst, gone, depth)
			}
			if wide|n.wide != 0 {
				dst = x.appendWideGone(dst, wide, n.wide, depth)
			}
		}
		if next == 0 && n.wide == 0 {
			return dst
		}
		active, wide, cur = next, n.wide, n
		depth++
	}
	if depth > 0 {
		dst = x.appendMask(dst, active, depth)
		dst = x.appendWideGone(dst, wide, 0, depth)
	}
	return dst
}

// appendMask appends the members of the slots in mask with the given depth.
func (x *Index) appendMask(dst []kv.Overlap, mask uint64, depth int) []kv.Overlap {
	for ; mask != 0; mask &= mask - 1 {
		dst = append(dst, kv.Overlap{Member: x.bySlot[bits.TrailingZeros64(mask)], Blocks: depth})
	}
	return dst
}

// appendWideGone appends, with the given depth, the members of the wide set
// from that are not in the wide set to (0 names the empty set).
func (x *Index) appendWideGone(dst []kv.Overlap, from, to uint32, depth int) []kv.Overlap {
	if from == 0 {
		return dst
	}
	prev := x.a.wide[from-1]
	var next []uint32
	if to != 0 {
		next = x.a.wide[to-1]
		if len(next) == len(prev) {
			// next ⊆ prev (prefix closure), so equal sizes mean nobody
			// left: the common case on a shared prefix, skipped in O(1)
			// as Dynamo's tree does.
			return dst
		}
	}
	j := 0
	for _, s := range prev {
		for j < len(next) && next[j] < s {
			j++
		}
		if j < len(next) && next[j] == s {
			continue
		}
		dst = append(dst, kv.Overlap{Member: x.bySlot[s], Blocks: depth})
	}
	return dst
}

// Detail is one member's match with Dynamo's last_matched_hashes entry: the
// member's own external hash of the deepest block it matched (with external
// hashes from the router chain, the query's chain hash at Blocks−1).
type Detail struct {
	Member kv.Member
	Blocks int
	Last   uint64
}

// MatchDetailed appends to dst what Match reports, ordered by depth, each
// with the member's external hash of its last matched block, and returns
// dst. Unlike Match it allocates; it may run concurrently with other
// readers.
func (x *Index) MatchDetailed(dst []Detail, locals []uint64) []Detail {
	x.mu.RLock()
	defer x.mu.RUnlock()
	scores := x.match(nil, locals)
	sort.Slice(scores, func(i, j int) bool {
		if scores[i].Blocks != scores[j].Blocks {
			return scores[i].Blocks < scores[j].Blocks
		}
		return scores[i].Member.Less(scores[j].Member)
	})
	id, depth := uint32(rootID), 0
	for _, o := range scores {
		for depth < o.Blocks {
			id = x.a.child(x.a.at(id), locals[depth])
			depth++
		}
		dst = append(dst, Detail{Member: o.Member, Blocks: o.Blocks, Last: x.extOf(x.members[o.Member], id)})
	}
	return dst
}
