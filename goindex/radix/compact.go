package radix

// Compact relays the tree out in depth-first order, so that every chain's
// nodes lie in consecutive cache lines again, and drops the arena's free
// list. After long churn a chain's nodes sit at scattered ids and Match
// slows down several times (BenchmarkMatch impl=radix-churned vs
// impl=radix-compacted: 7–8× at p50); Compact undoes that. Scores,
// dumps and snapshots are unchanged by it.
//
// Compact builds the new layout under the read lock, so Match and the other
// readers keep running; it excludes writers for its whole duration (about
// 0.3–0.7 µs per node here, BenchmarkMatch's compact-ns/node) and readers only
// for the final swap. It needs memory for a second copy of the nodes and of
// the members' lookups while it runs. Callers schedule it, for instance when
// the tree has turned over since the last call.
func (x *Index) Compact() {
	x.wmu.Lock()
	defer x.wmu.Unlock()

	x.mu.RLock()
	fresh, remap := x.a.compacted()
	type views struct {
		lookup  map[uint64]uint32
		alt     map[uint32]uint64
		orphans map[uint32]struct{}
	}
	moved := make([]views, len(x.slots))
	for s, ms := range x.slots {
		if ms == nil {
			continue
		}
		v := views{
			lookup:  make(map[uint64]uint32, len(ms.lookup)),
			alt:     make(map[uint32]uint64, len(ms.alt)),
			orphans: make(map[uint32]struct{}, len(ms.orphans)),
		}
		for h, id := range ms.lookup {
			v.lookup[h] = remap[id]
		}
		for id, h := range ms.alt {
			v.alt[remap[id]] = h
		}
		for id := range ms.orphans {
			v.orphans[remap[id]] = struct{}{}
		}
		moved[s] = v
	}
	x.mu.RUnlock()

	// wmu has kept every writer out since the copy began, so the copy is
	// still exact.
	x.mu.Lock()
	x.a = fresh
	for s, ms := range x.slots {
		if ms != nil {
			ms.lookup, ms.alt, ms.orphans = moved[s].lookup, moved[s].alt, moved[s].orphans
		}
	}
	x.mu.Unlock()
}

// compacted returns a copy of the arena with the live nodes renumbered in
// depth-first order (the first inline child first: usually the chain stored
// first, and the longest), and the map from old ids to new ones. It only
// reads a, so readers may run alongside.
func (a *arena) compacted() (arena, []uint32) {
	order := make([]uint32, 0, a.live+1)
	stack := []uint32{rootID}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		order = append(order, id)
		k := len(stack)
		stack = a.appendKids(stack, a.at(id))
		for i, j := k, len(stack)-1; i < j; i, j = i+1, j-1 {
			stack[i], stack[j] = stack[j], stack[i]
		}
	}
	remap := make([]uint32, a.next)
	for newID, oldID := range order {
		remap[oldID] = uint32(newID)
	}
	// Wide sets are shared, not copied: their indexes do not change and
	// nothing writes them until the copy replaces a.
	fresh := arena{next: uint32(len(order)), live: a.live, wide: a.wide, freeWide: a.freeWide}
	for range (len(order) + chunkNodes - 1) / chunkNodes {
		fresh.chunks = append(fresh.chunks, new([chunkNodes]node))
	}
	for newID, oldID := range order {
		n := fresh.at(uint32(newID))
		*n = *a.at(oldID)
		n.parent = remap[n.parent]
		for i := range n.kid {
			if n.kid[i] != 0 {
				n.kid[i] = remap[n.kid[i]]
			}
		}
		if n.more != 0 {
			old := a.kidMaps[n.more-1]
			m := make(map[uint64]uint32, len(old))
			for h, id := range old {
				m[h] = remap[id]
			}
			fresh.kidMaps = append(fresh.kidMaps, m)
			n.more = uint32(len(fresh.kidMaps))
		}
	}
	return fresh, remap
}
