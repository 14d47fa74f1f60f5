package radix

import (
	"sort"

	"github.com/goindex/goindex/goindex/kv"
)

// model is dynamo-compat §3.6's differential reference, ported as written:
// per rank, held (external hash → parent external hash or root) and a
// prefix-closed reachable set.
type model struct {
	scope ClearScope
	ranks map[kv.Member]*modelRank
}

type modelRank struct {
	held      map[uint64]modelParent
	reachable map[uint64]bool
}

type modelParent struct {
	has bool
	h   uint64
}

// verdict is the model's expectation for one op: the backend must apply it,
// or may reject it.
type verdict uint8

const (
	mustApply verdict = iota
	mayReject
)

func newModel(scope ClearScope) *model {
	return &model{scope: scope, ranks: make(map[kv.Member]*modelRank)}
}

func (md *model) rank(m kv.Member) *modelRank {
	r := md.ranks[m]
	if r == nil {
		r = &modelRank{held: make(map[uint64]modelParent), reachable: make(map[uint64]bool)}
		md.ranks[m] = r
	}
	return r
}

func (md *model) store(m kv.Member, parent modelParent, blocks []uint64) verdict {
	r := md.rank(m)
	reach := !parent.has || r.reachable[parent.h]
	prev := parent
	for _, b := range blocks {
		r.held[b] = prev
		if reach {
			r.reachable[b] = true
		}
		prev = modelParent{true, b}
	}
	if reach {
		return mustApply
	}
	return mayReject
}

func (md *model) remove(m kv.Member, hashes []uint64) verdict {
	r := md.rank(m)
	cut := false
	for _, h := range hashes {
		delete(r.held, h)
		if r.reachable[h] {
			cut = true
			delete(r.reachable, h)
		}
	}
	if !cut {
		return mayReject
	}
	// Keep only blocks whose whole chain to the root is still reachable.
	ok := make(map[uint64]bool, len(r.reachable))
	var chainOK func(h uint64, depth int) bool
	chainOK = func(h uint64, depth int) bool {
		if v, seen := ok[h]; seen {
			return v
		}
		if !r.reachable[h] || depth > len(r.held)+1 {
			return false
		}
		p, held := r.held[h]
		v := held && (!p.has || chainOK(p.h, depth+1))
		ok[h] = v
		return v
	}
	for _, h := range sortedKeys(r.reachable) {
		if !chainOK(h, 0) {
			delete(r.reachable, h)
		}
	}
	return mustApply
}

func (md *model) clear(m kv.Member) {
	for k := range md.ranks {
		if k == m || md.scope == ClearWorker && k.Worker == m.Worker {
			delete(md.ranks, k)
		}
	}
}

func (md *model) removeMember(m kv.Member) { delete(md.ranks, m) }

func (md *model) removeWorker(w uint64) {
	for k := range md.ranks {
		if k.Worker == w {
			delete(md.ranks, k)
		}
	}
}

// lens returns held_len and reach_len of rank m for a query's chain hashes.
func (md *model) lens(m kv.Member, chain []uint64) (held, reach int) {
	r := md.ranks[m]
	if r == nil {
		return 0, 0
	}
	for held < len(chain) {
		if _, ok := r.held[chain[held]]; !ok {
			break
		}
		held++
	}
	for reach < len(chain) && r.reachable[chain[reach]] {
		reach++
	}
	return held, reach
}

// expected returns the exact scores the index must give: every rank with a
// positive reach_len, ordered by member.
func (md *model) expected(chain []uint64) []kv.Overlap {
	var out []kv.Overlap
	for m := range md.ranks {
		if _, reach := md.lens(m, chain); reach > 0 {
			out = append(out, kv.Overlap{Member: m, Blocks: reach})
		}
	}
	sortOverlaps(out)
	return out
}

func sortOverlaps(o []kv.Overlap) {
	sort.Slice(o, func(i, j int) bool { return o[i].Member.Less(o[j].Member) })
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
