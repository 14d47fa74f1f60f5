package radix

// Compact relays the tree out in depth-first order, so that every chain's
// nodes lie in consecutive cache lines again, and drops the arena's free
// list. Match slows down about threefold on a tree whose nodes were
// allocated in random order by long churn (probe-performance.md; measured
// here by BenchmarkMatch impl=radix-churned vs impl=radix-compacted); Compact
// undoes that. It takes the write lock and runs in time linear in nodes plus
// held blocks, so callers schedule it (for instance when Stats shows the
// tree has turned over since the last call). Scores, dumps and snapshots are
// unchanged by it.
func (x *Index) Compact() {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := &x.a
	order := make([]uint32, 0, old.live+1)
	stack := []uint32{rootID}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		order = append(order, id)
		k := len(stack)
		stack = old.appendKids(stack, old.at(id))
		// Visit the first inline child first: it is usually the chain that
		// was stored first and is longest.
		for i, j := k, len(stack)-1; i < j; i, j = i+1, j-1 {
			stack[i], stack[j] = stack[j], stack[i]
		}
	}
	remap := make([]uint32, old.next)
	for newID, oldID := range order {
		remap[oldID] = uint32(newID)
	}
	fresh := arena{
		next:     uint32(len(order)),
		live:     old.live,
		kidMaps:  old.kidMaps,
		freeMaps: old.freeMaps,
		wide:     old.wide,
		freeWide: old.freeWide,
	}
	for range (len(order) + chunkNodes - 1) / chunkNodes {
		fresh.chunks = append(fresh.chunks, new([chunkNodes]node))
	}
	for newID, oldID := range order {
		n := fresh.at(uint32(newID))
		*n = *old.at(oldID)
		n.parent = remap[n.parent]
		for i := range n.kid {
			if n.kid[i] != 0 {
				n.kid[i] = remap[n.kid[i]]
			}
		}
		if n.more != 0 {
			m := fresh.kidMaps[n.more-1]
			for h, id := range m {
				m[h] = remap[id]
			}
		}
	}
	for _, ms := range x.slots {
		if ms == nil {
			continue
		}
		for h, id := range ms.lookup {
			ms.lookup[h] = remap[id]
		}
		alt := make(map[uint32]uint64, len(ms.alt))
		for id, h := range ms.alt {
			alt[remap[id]] = h
		}
		orphans := make(map[uint32]struct{}, len(ms.orphans))
		for id := range ms.orphans {
			orphans[remap[id]] = struct{}{}
		}
		ms.alt, ms.orphans = alt, orphans
	}
	x.a = fresh
}
