package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

// TestKVPool_EventsTrackTheCacheAndEvictLeavesFirst drives one pool with
// random admissions, prefills, decode growth and releases of prompts drawn
// from a small tree of shared prefixes, and after every step checks it
// against slow references: an exact radix index fed only the pool's
// events must give every prompt the depth the pool matches (no event lost,
// none stranding a block under a removed parent, which the index refuses);
// every registered block's parent is registered; each block's pins equal
// the running requests that hold it; and held plus cached memory never
// exceeds the capacity.
func TestKVPool_EventsTrackTheCacheAndEvictLeavesFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 11))
	const capacity = 24
	// Prompts: paths of a tree with 3 children per node, 2–8 blocks deep.
	var prompts [][]uint64
	for range 60 {
		n := 2 + rng.IntN(7)
		locals := make([]uint64, n)
		for j := range locals {
			locals[j] = uint64(j*10 + rng.IntN(3) + 1)
		}
		prompts = append(prompts, locals)
	}
	type running struct {
		seqs, locals    []uint64
		pinned, private int
		registered      bool
	}
	parent := map[uint64]uint64{}
	seqsOf := make([][]uint64, len(prompts))
	for k, locals := range prompts {
		seqsOf[k] = kv.AppendChain(nil, false, 0, locals)
		for j := 1; j < len(locals); j++ {
			parent[seqsOf[k][j]] = seqsOf[k][j-1]
		}
	}
	p := newKVPool(kv.Member{}, capacity)
	x := radix.New(radix.Config{})
	var runs []*running
	var events []kv.Event
	removals := 0
	apply := func(step int) {
		t.Helper()
		for k := range events {
			if events[k].Kind == kv.Removed {
				removals++
			}
			if err := x.Apply(&events[k]); err != nil {
				t.Fatalf("step %d: index refused the pool's %v event: %v", step, events[k].Kind, err)
			}
		}
		events = events[:0]
	}
	for step := range 4000 {
		switch op := rng.IntN(4); {
		case op == 0 || len(runs) == 0: // admit
			k := rng.IntN(len(prompts))
			seqs := seqsOf[k]
			hit := p.match(seqs)
			need := len(seqs) + rng.IntN(2)
			if len(runs) > 0 && p.admitCost(seqs, hit, need) > p.allocatable() {
				continue
			}
			if need > capacity {
				continue
			}
			events = p.admit(events, seqs, hit, need)
			runs = append(runs, &running{seqs: seqs, locals: prompts[k], pinned: hit, private: need - hit})
		case op == 1: // prefill ends: register the prompt
			r := runs[rng.IntN(len(runs))]
			if r.registered {
				continue
			}
			events = p.register(events, r.seqs, r.locals, r.pinned, len(r.seqs))
			r.private -= len(r.seqs) - r.pinned
			r.pinned, r.registered = len(r.seqs), true
		case op == 2: // decode needs a block
			r := runs[rng.IntN(len(runs))]
			if !r.registered || p.allocatable() < 1 {
				continue
			}
			events = p.grow(events, 1)
			r.private++
		default: // release
			k := rng.IntN(len(runs))
			r := runs[k]
			p.release(r.seqs, r.pinned, r.private)
			runs = append(runs[:k], runs[k+1:]...)
		}
		apply(step)
		if used := p.private + p.cached(); used > capacity {
			t.Fatalf("step %d: %d private + %d cached blocks exceed the capacity %d", step, p.private, p.cached(), capacity)
		}
		pins := map[uint64]int32{}
		held := 0
		for _, r := range runs {
			for _, h := range r.seqs[:r.pinned] {
				pins[h]++
			}
			held += r.private
		}
		if held != p.private {
			t.Fatalf("step %d: pool counts %d private blocks, the requests hold %d", step, p.private, held)
		}
		for h, i := range p.byHash {
			if got := p.slots[i].refs; got != pins[h] {
				t.Fatalf("step %d: block %x pinned %d times, held by %d requests", step, h, got, pins[h])
			}
			if ph, ok := parent[h]; ok {
				if _, ok := p.byHash[ph]; !ok {
					t.Fatalf("step %d: block %x is cached under a removed parent", step, h)
				}
			}
		}
		for k, seqs := range seqsOf {
			depth := 0
			for _, o := range x.Match(nil, prompts[k]) {
				depth = max(depth, o.Blocks)
			}
			if got := p.match(seqs); got != depth {
				t.Fatalf("step %d: prompt %d: pool matches %d blocks, the index fed its events %d", step, k, got, depth)
			}
		}
	}
	if removals == 0 {
		t.Errorf("no eviction in 4,000 steps on a %d-block pool: the test exercised nothing", capacity)
	}
}
