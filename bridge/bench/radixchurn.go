package bench

import (
	"math"
	"math/rand/v2"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

// churnMember is the member whose blocks churnRadix stores and removes:
// no lane uses its worker id.
var churnMember = kv.Member{Worker: math.MaxUint64}

// churnBatch is how many blocks each of churnRadix's removal events names.
const churnBatch = 4096

// churnRadix leaves idx as hours of evictions leave a long-running tree:
// nodes ids handed out and freed again in random order, so the nodes
// stored next take ids scattered over the whole arena (the arena reuses
// freed ids last in, first out) instead of consecutive cache lines along
// each chain. It stores nodes one-block root chains of a member no lane
// uses, removes them in a seeded random order and forgets the member,
// through the index's public API only. With nodes at least the tree's
// final node count, every node stored afterwards lands at a random id.
func churnRadix(idx *radix.Index, nodes int, seed uint64) error {
	ev := kv.Event{Member: churnMember, Kind: kv.Stored, Blocks: make([]kv.Block, 1)}
	for i := range nodes {
		// Distinct root hashes; all are gone before any lane stores.
		h := uint64(i) | 1<<63
		ev.Blocks[0] = kv.Block{External: h, Local: h}
		if err := idx.Apply(&ev); err != nil {
			return err
		}
	}
	order := rand.New(rand.NewPCG(seed, 0xC4A2)).Perm(nodes)
	rm := kv.Event{Member: churnMember, Kind: kv.Removed}
	for start := 0; start < nodes; start += churnBatch {
		rm.Removed = rm.Removed[:0]
		for _, i := range order[start:min(nodes, start+churnBatch)] {
			rm.Removed = append(rm.Removed, uint64(i)|1<<63)
		}
		if err := idx.Apply(&rm); err != nil {
			return err
		}
	}
	return idx.RemoveMember(churnMember)
}
