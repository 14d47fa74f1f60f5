package parity

import (
	"github.com/goindex/goindex/goindex/kv"
)

// heldBlock is one lineage mapping of a member: the canonical hash the
// producer derived for the external block, plus what rebuilds the query path
// that reaches it (its local hash and parent).
type heldBlock struct {
	canon, local uint64
	parent       uint64 // external hash; valid when hasParent
	hasParent    bool
}

// holding is the exact ownership of one member as the CKF producer keeps it
// (spec §4.1, one producer per member as in ckfindex): external → canonical,
// the mappings per canonical, and the canonicals the filter did not admit.
type holding struct {
	member  kv.Member
	blocks  map[uint64]heldBlock
	refs    map[uint64]int32    // canonical → mappings; present iff > 0
	omitted map[uint64]struct{} // canonicals in refs whose fingerprint is not resident
	filler  int                 // resident synthetic blocks (not in blocks or refs)
}

func newHolding(m kv.Member) *holding {
	return &holding{member: m, blocks: map[uint64]heldBlock{}, refs: map[uint64]int32{}, omitted: map[uint64]struct{}{}}
}

// resident is the number of fingerprints the member's lane holds.
func (h *holding) resident() int { return len(h.refs) - len(h.omitted) + h.filler }

// empty reports whether the member holds nothing, so its CKF lane is free.
func (h *holding) empty() bool { return len(h.refs) == 0 && h.filler == 0 }

// owns reports whether the member maps some block to canonical c.
func (h *holding) owns(c uint64) bool { _, ok := h.refs[c]; return ok }

// store applies a Stored event with the producer's rules (spec §4.3): a
// missing parent, a non-zero start without a parent, or a block that would
// change its canonical rejects the whole event. It appends the canonicals
// that gained their first mapping (the filter's insertion candidates) to
// fresh and reports whether the event was accepted.
func (h *holding) store(ev *kv.Event, fresh []uint64) ([]uint64, bool) {
	var prev uint64
	switch {
	case ev.HasParent:
		p, ok := h.blocks[ev.Parent]
		if !ok {
			return fresh, false
		}
		prev = p.canon
	case ev.HasStart && ev.StartPosition != 0:
		return fresh, false
	}
	// Classify first, commit after: a remap anywhere rejects everything.
	started := ev.HasParent
	canon := make([]uint64, len(ev.Blocks))
	for i, b := range ev.Blocks {
		if started {
			prev = kv.ChainHash(prev, b.Local)
		} else {
			prev, started = b.Local, true
		}
		canon[i] = prev
		if old, ok := h.blocks[b.External]; ok && old.canon != prev {
			return fresh, false
		}
		for j := range i {
			if ev.Blocks[j].External == b.External && canon[j] != prev {
				return fresh, false
			}
		}
	}
	parent, hasParent := ev.Parent, ev.HasParent
	for i, b := range ev.Blocks {
		if _, ok := h.blocks[b.External]; !ok {
			h.blocks[b.External] = heldBlock{canon: canon[i], local: b.Local, parent: parent, hasParent: hasParent}
			if h.refs[canon[i]]++; h.refs[canon[i]] == 1 {
				fresh = append(fresh, canon[i])
			}
		}
		parent, hasParent = b.External, true
	}
	return fresh, true
}

// remove drops the named external blocks (unknown ones are skipped, as the
// producer counts and skips them).
func (h *holding) remove(exts []uint64) {
	for _, e := range exts {
		b, ok := h.blocks[e]
		if !ok {
			continue
		}
		delete(h.blocks, e)
		if h.refs[b.canon]--; h.refs[b.canon] == 0 {
			delete(h.refs, b.canon)
			delete(h.omitted, b.canon)
		}
	}
}

// clear drops every block of the member, synthetic ones included (the
// producer clears its whole lineage).
func (h *holding) clear() {
	clear(h.blocks)
	clear(h.refs)
	clear(h.omitted)
	h.filler = 0
}

// appendPath appends to dst the local hashes from the root down to the
// block with external hash ext, and reports whether every ancestor is still
// held (a path through a removed ancestor cannot be queried).
func (h *holding) appendPath(dst []uint64, ext uint64) ([]uint64, bool) {
	start := len(dst)
	for {
		b, ok := h.blocks[ext]
		if !ok {
			return dst[:start], false
		}
		dst = append(dst, b.local)
		if !b.hasParent {
			break
		}
		ext = b.parent
		if len(dst)-start > len(h.blocks) {
			return dst[:start], false // a parent cycle; the chain is not a path
		}
	}
	path := dst[start:]
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return dst, true
}
