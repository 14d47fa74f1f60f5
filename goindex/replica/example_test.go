package replica_test

import (
	"fmt"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
)

// Example shows a consumer's sequence: size a table for the domain's
// format, install each lane's snapshot, apply a delta's images, and search
// a request's canonical hashes across the ready lanes.
func Example() {
	n, _ := ckf.BucketCount(1024)
	f, _ := ckf.NewFormat(ckf.DefaultSeed, n)
	tab, _ := replica.New(replica.Config{Lanes: 3, Buckets: n})

	// Two DCs' producers: DC 0 caches blocks a, b, c of a request; DC 1
	// only a.
	seq := kv.AppendChain(nil, false, 0, []uint64{0xA, 0xB, 0xC, 0xD})
	var producers [2]*ckf.Producer
	for dc := range producers {
		producers[dc], _ = ckf.New(ckf.Config{Format: f})
		_ = tab.Install(dc, producers[dc].AppendWords(nil)) // snapshot, then ready
	}
	store := func(dc int, locals ...uint64) {
		ev := kv.Event{Member: kv.Member{Worker: uint64(dc)}, Kind: kv.Stored}
		for i, l := range locals {
			ev.Blocks = append(ev.Blocks, kv.Block{External: uint64(100*dc + i), Local: l})
		}
		_, _ = producers[dc].Apply(&ev)
		_ = tab.Apply(dc, producers[dc].Drain(nil)) // a delta's images
	}
	store(0, 0xA, 0xB, 0xC)
	store(1, 0xA)

	s, _ := replica.NewSearcher(tab, f, replica.SearchConfig{}) // Chunked
	depth, mask := s.Search(nil, seq, ^uint64(0))
	fmt.Printf("ready lanes %03b, depth in blocks %v\n", mask, depth)

	_ = tab.Clear(1) // DC 1 retired: not ready, words zeroed
	depth, mask = s.Search(depth, seq, ^uint64(0))
	fmt.Printf("ready lanes %03b, depth in blocks %v\n", mask, depth)
	// Output:
	// ready lanes 011, depth in blocks [3 1 0]
	// ready lanes 001, depth in blocks [3 0 0]
}
