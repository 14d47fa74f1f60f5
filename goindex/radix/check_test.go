package radix

import (
	"fmt"
	"sort"
)

// check verifies the index's internal invariants (doc.go) by brute force
// and returns the first violation.
func (x *Index) check() error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	a := &x.a
	free := make(map[uint32]bool, len(a.free))
	for _, id := range a.free {
		if free[id] || id == rootID || id >= a.next {
			return fmt.Errorf("free list: bad or repeated id %d", id)
		}
		free[id] = true
		if a.at(id).holders != freedHolders {
			return fmt.Errorf("free node %d not marked freed", id)
		}
	}
	if live := int(a.next) - 1 - len(free); live != a.live {
		return fmt.Errorf("arena.live = %d, want %d", a.live, live)
	}
	holders := make(map[uint32]uint32)
	for s, ms := range x.slots {
		if ms == nil {
			continue
		}
		if got, ok := x.members[ms.id]; !ok || got != uint32(s) || x.bySlot[s] != ms.id {
			return fmt.Errorf("slot %d: member %v not registered consistently", s, ms.id)
		}
		seen := make(map[uint32]uint64, len(ms.lookup))
		for h, id := range ms.lookup {
			if id == rootID || free[id] || id >= a.next {
				return fmt.Errorf("member %v: hash %d names dead node %d", ms.id, h, id)
			}
			if other, dup := seen[id]; dup {
				return fmt.Errorf("member %v: hashes %d and %d both name node %d", ms.id, h, other, id)
			}
			seen[id] = h
			holders[id]++
			if x.extOf(uint32(s), id) != h {
				return fmt.Errorf("member %v: node %d external %d, want %d", ms.id, id, x.extOf(uint32(s), id), h)
			}
			n := a.at(id)
			_, orphan := ms.orphans[id]
			if reach := a.reaches(n, uint32(s)); reach == orphan {
				return fmt.Errorf("member %v: node %d reach=%v orphan=%v", ms.id, id, reach, orphan)
			}
			if a.reaches(n, uint32(s)) && n.parent != rootID && !a.reaches(a.at(n.parent), uint32(s)) {
				return fmt.Errorf("member %v: reaches node %d but not its parent %d", ms.id, id, n.parent)
			}
		}
		for id := range ms.alt {
			if _, ok := seen[id]; !ok {
				return fmt.Errorf("member %v: alt entry for unheld node %d", ms.id, id)
			}
			if ms.alt[id] == a.at(id).ext {
				return fmt.Errorf("member %v: alt entry for node %d equals node ext", ms.id, id)
			}
		}
		for id := range ms.orphans {
			if _, ok := seen[id]; !ok {
				return fmt.Errorf("member %v: orphan %d not held", ms.id, id)
			}
		}
	}
	if len(x.members) != countLive(x.slots) {
		return fmt.Errorf("%d members registered, %d live slots", len(x.members), countLive(x.slots))
	}
	if len(x.slots) > 0 && x.slots[len(x.slots)-1] == nil {
		return fmt.Errorf("trailing free slot")
	}
	for id := uint32(1); id < a.next; id++ {
		if free[id] {
			continue
		}
		n := a.at(id)
		if n.holders != holders[id] {
			return fmt.Errorf("node %d: holders = %d, want %d", id, n.holders, holders[id])
		}
		if n.holders == 0 && !hasKids(n) {
			return fmt.Errorf("node %d: dead leaf kept", id)
		}
		if free[n.parent] || a.child(a.at(n.parent), n.local) != id {
			return fmt.Errorf("node %d: parent %d does not link it", id, n.parent)
		}
		for s := uint32(0); s < uint32(len(x.slots)); s++ {
			if a.reaches(n, s) && (x.slots[s] == nil || x.slots[s].lookup[x.extOf(s, id)] != id) {
				return fmt.Errorf("node %d: slot %d reaches it without holding it", id, s)
			}
		}
		if n.wide != 0 {
			set := a.wide[n.wide-1]
			if len(set) == 0 || !sort.SliceIsSorted(set, func(i, j int) bool { return set[i] < set[j] }) {
				return fmt.Errorf("node %d: wide set %v empty or unsorted", id, set)
			}
			for i := 1; i < len(set); i++ {
				if set[i] == set[i-1] || set[i] < maskSlots {
					return fmt.Errorf("node %d: wide set %v repeats or holds a mask slot", id, set)
				}
			}
		}
		var kids []uint32
		for _, k := range a.appendKids(kids, n) {
			if free[k] || a.at(k).parent != id {
				return fmt.Errorf("node %d: child %d dead or parented elsewhere", id, k)
			}
		}
		if n.more != 0 && len(a.kidMaps[n.more-1]) == 0 {
			return fmt.Errorf("node %d: empty overflow map kept", id)
		}
	}
	return nil
}

func countLive(slots []*member) int {
	n := 0
	for _, ms := range slots {
		if ms != nil {
			n++
		}
	}
	return n
}
