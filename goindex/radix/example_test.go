package radix_test

import (
	"fmt"
	"sort"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

func Example() {
	x := radix.New(radix.Config{ClearScope: radix.ClearRank})

	// Worker 1 stores three blocks, worker 2 the first two. External hashes
	// here are the router chain of the local hashes, as Dynamo's tests use.
	locals := []uint64{11, 12, 13}
	chain := kv.AppendChain(nil, false, 0, locals)
	var blocks []kv.Block
	for i := range locals {
		blocks = append(blocks, kv.Block{External: chain[i], Local: locals[i]})
	}
	_ = x.Apply(&kv.Event{Member: kv.Member{Worker: 1}, Kind: kv.Stored, Blocks: blocks})
	_ = x.Apply(&kv.Event{Member: kv.Member{Worker: 2}, Kind: kv.Stored, Blocks: blocks[:2]})

	// Worker 1 evicts its middle block: the third becomes unreachable.
	_ = x.Apply(&kv.Event{Member: kv.Member{Worker: 1}, Kind: kv.Removed, Removed: chain[1:2]})

	scores := x.Match(make([]kv.Overlap, 0, 8), locals)
	sort.Slice(scores, func(i, j int) bool { return scores[i].Member.Less(scores[j].Member) })
	for _, o := range scores {
		fmt.Printf("worker %v: %d blocks\n", o.Member, o.Blocks)
	}
	st := x.Stats()
	fmt.Printf("nodes %d, held %d, orphaned %d\n", st.Nodes, st.Blocks, st.Orphaned)
	// Output:
	// worker 1/0: 1 blocks
	// worker 2/0: 2 blocks
	// nodes 3, held 4, orphaned 1
}
