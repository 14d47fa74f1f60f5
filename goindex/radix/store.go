package radix

import (
	"slices"

	"github.com/goindex/goindex/goindex/kv"
)

// smallSequence is the block count up to which store checks a chain for
// repeated hashes pairwise instead of sorting them.
const smallSequence = 16

// store applies a Stored event under the write lock. It validates the whole
// event first (sequence, parent, conflicts, capacity) and only then mutates,
// so a rejected store changes nothing.
func (x *Index) store(ev *kv.Event) error {
	reject := func(h uint64, err error) error {
		return &BlockError{Member: ev.Member, EventID: ev.EventID, Hash: h, Err: err}
	}
	if h, bad := x.badSequence(ev); bad {
		return reject(h, ErrInvalidBlockSequence)
	}
	s, known := x.members[ev.Member]
	var ms *member
	if known {
		ms = x.slots[s]
	}
	start, reach := uint32(rootID), true
	if ev.HasParent {
		if !known {
			return reject(ev.Parent, ErrParentNotFound)
		}
		id, ok := ms.lookup[ev.Parent]
		if !ok {
			return reject(ev.Parent, ErrParentNotFound)
		}
		start, reach = id, x.a.reaches(x.a.at(id), s)
	}
	if len(ev.Blocks) == 0 {
		return nil
	}

	// Pass 1: find each block's node until the path leaves the tree, and
	// refuse any second position for a hash or second hash for a position.
	fresh, at, inTree := 0, start, true
	for _, b := range ev.Blocks {
		if inTree {
			at = x.a.child(x.a.at(at), b.Local)
			inTree = at != 0
		}
		if !inTree {
			fresh++
		}
		if !known {
			continue
		}
		if id, ok := ms.lookup[b.External]; ok && (!inTree || id != at) {
			return reject(b.External, ErrConflictingBlock)
		}
		if inTree && x.holds(s, at) && x.extOf(s, at) != b.External {
			return reject(b.External, ErrConflictingBlock)
		}
	}
	if !x.a.room(fresh) {
		return reject(ev.Blocks[0].External, ErrCapacity)
	}

	// Pass 2: nothing below can fail.
	s = x.register(ev.Member)
	ms = x.slots[s]
	changed, parent := false, start
	for _, b := range ev.Blocks {
		id := x.a.child(x.a.at(parent), b.Local)
		if id == 0 {
			id = x.a.newChild(parent, b.Local)
		}
		n := x.a.at(id)
		if _, held := ms.lookup[b.External]; !held {
			if n.holders == 0 {
				n.ext = b.External
			} else if n.ext != b.External {
				ms.alt[id] = b.External
			}
			n.holders++
			ms.lookup[b.External] = id
			if reach {
				x.a.setReach(n, s)
			} else {
				ms.orphans[id] = struct{}{}
			}
			changed = true
		} else if reach && !x.a.reaches(n, s) {
			// Re-stored below a reachable parent: the orphan is back.
			x.a.setReach(n, s)
			delete(ms.orphans, id)
			changed = true
		}
		parent = id
	}
	if !changed {
		x.duplicates++
	}
	return nil
}

// badSequence reports the first block hash of a store that equals its
// parent or another block of the same event. Long chains are checked by
// sorting a copy in the writer's scratch (BenchmarkApply: a map per event
// was the only allocation on the store path).
func (x *Index) badSequence(ev *kv.Event) (uint64, bool) {
	blocks := ev.Blocks
	if ev.HasParent {
		for _, b := range blocks {
			if b.External == ev.Parent {
				return b.External, true
			}
		}
	}
	if len(blocks) <= smallSequence {
		for i := 1; i < len(blocks); i++ {
			for j := 0; j < i; j++ {
				if blocks[i].External == blocks[j].External {
					return blocks[i].External, true
				}
			}
		}
		return 0, false
	}
	hs := x.hashScratch[:0]
	for _, b := range blocks {
		hs = append(hs, b.External)
	}
	slices.Sort(hs)
	x.hashScratch = hs[:0]
	for i := 1; i < len(hs); i++ {
		if hs[i] == hs[i-1] {
			return hs[i], true
		}
	}
	return 0, false
}

// holds reports whether slot s holds node id, reachable or orphaned.
func (x *Index) holds(s, id uint32) bool {
	if x.a.reaches(x.a.at(id), s) {
		return true
	}
	_, ok := x.slots[s].orphans[id]
	return ok
}

// remove applies a Removed event under the write lock.
func (x *Index) remove(ev *kv.Event) error {
	s, known := x.members[ev.Member]
	var rerr *RemoveError
	removed := 0
	for _, h := range ev.Removed {
		var id uint32
		found := false
		if known {
			id, found = x.slots[s].lookup[h]
		}
		if !found {
			if rerr == nil {
				rerr = &RemoveError{Member: ev.Member, EventID: ev.EventID, First: h}
			}
			rerr.Missing++
			if x.cfg.StopAtUnknownRemoval {
				break
			}
			continue
		}
		x.release(s, id, h)
		removed++
	}
	if rerr != nil {
		rerr.Removed = removed
		return rerr
	}
	return nil
}

// release drops slot s's claim on node id (external hash h). If the member
// reached the node, every node below it that the member reached becomes an
// orphan: still held, never scored, revived only by being stored again
// below a reachable parent.
func (x *Index) release(s, id uint32, h uint64) {
	ms := x.slots[s]
	n := x.a.at(id)
	if x.a.reaches(n, s) {
		x.a.clearReach(n, s)
		x.orphanBelow(s, n)
	} else {
		delete(ms.orphans, id)
	}
	delete(ms.lookup, h)
	delete(ms.alt, id)
	n.holders--
	x.a.prune(id)
}

// orphanBelow turns every node below n that slot s reaches into an orphan of
// s. Reachability is prefix-closed, so the walk never descends below a node
// the member does not reach.
func (x *Index) orphanBelow(s uint32, n *node) {
	ms := x.slots[s]
	stack := x.a.appendKids(x.scratch[:0], n)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		c := x.a.at(id)
		if !x.a.reaches(c, s) {
			continue
		}
		x.a.clearReach(c, s)
		ms.orphans[id] = struct{}{}
		stack = x.a.appendKids(stack, c)
	}
	x.scratch = stack[:0]
}
