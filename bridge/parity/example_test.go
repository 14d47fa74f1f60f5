package parity_test

import (
	"fmt"

	"github.com/goindex/goindex/bridge/parity"
	"github.com/goindex/goindex/goindex/kv"
)

// Example shows a study's call sequence: events into both indexes, a fill
// to a target load, then one measurement over a query set.
func Example() {
	s, err := parity.New(parity.Config{Lanes: 2, BlocksPerLane: 1024})
	if err != nil {
		panic(err)
	}
	// Worker 0 caches the prompt [1 2 3], worker 1 only its first block.
	prompt := []uint64{1, 2, 3}
	chain := kv.AppendChain(nil, false, 0, prompt)
	for w, n := range []int{3, 1} {
		ev := kv.Event{Member: kv.Member{Worker: uint64(w)}, Kind: kv.Stored}
		for i := range n {
			ev.Blocks = append(ev.Blocks, kv.Block{External: chain[i], Local: prompt[i]})
		}
		if err := s.Apply(&ev); err != nil {
			panic(err)
		}
	}
	fill, err := s.Fill(0.8)
	if err != nil {
		panic(err)
	}
	r, err := s.Measure(parity.Queries{Base: [][]uint64{prompt}}.All)
	if err != nil {
		panic(err)
	}
	fmt.Printf("lanes at %.0f%%: %d queries, %d underestimates, best agrees %d\n", 100*fill.MeanLoad, r.Queries, r.Underestimates, r.Best.Agree)
	// Output: lanes at 80%: 1 queries, 0 underestimates, best agrees 1
}
