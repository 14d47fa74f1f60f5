package sim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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
	prompts, seqsOf, parent := poolPrompts(rng)
	dr := &poolDriver{p: newKVPool(kv.Member{}, capacity), prompts: prompts, seqsOf: seqsOf}
	p := dr.p
	x := radix.New(radix.Config{})
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
		events = dr.step(rng, events)
		apply(step)
		if used := p.private + p.cached(); used > capacity {
			t.Fatalf("step %d: %d private + %d cached blocks exceed the capacity %d", step, p.private, p.cached(), capacity)
		}
		pins := map[uint64]int32{}
		held := 0
		for _, r := range dr.runs {
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

// poolPrompts draws 60 prompts, paths of a tree with 3 children per node
// 2–8 blocks deep, and returns their local hashes, sequence hashes and
// each block's parent.
func poolPrompts(rng *rand.Rand) (prompts, seqsOf [][]uint64, parent map[uint64]uint64) {
	parent = map[uint64]uint64{}
	for range 60 {
		n := 2 + rng.IntN(7)
		locals := make([]uint64, n)
		for j := range locals {
			locals[j] = uint64(j*10 + rng.IntN(3) + 1)
		}
		prompts = append(prompts, locals)
	}
	seqsOf = make([][]uint64, len(prompts))
	for k, locals := range prompts {
		seqsOf[k] = kv.AppendChain(nil, false, 0, locals)
		for j := 1; j < len(locals); j++ {
			parent[seqsOf[k][j]] = seqsOf[k][j-1]
		}
	}
	return prompts, seqsOf, parent
}

// poolDriver drives one pool as running requests would: random
// admissions (when they fit), prefill ends registering the prompt, decode
// growth and releases.
type poolDriver struct {
	p               *kvPool
	prompts, seqsOf [][]uint64
	runs            []poolRun
}

// poolRun is one request running on a driven pool.
type poolRun struct {
	seqs, locals    []uint64
	pinned, private int
	registered      bool
}

// clone returns a driver of a clone of d's pool with the same requests.
func (d *poolDriver) clone() *poolDriver {
	return &poolDriver{p: d.p.clone(), prompts: d.prompts, seqsOf: d.seqsOf, runs: slices.Clone(d.runs)}
}

// step runs one random operation, appending the pool's events to events.
func (d *poolDriver) step(rng *rand.Rand, events []kv.Event) []kv.Event {
	p := d.p
	switch op := rng.IntN(4); {
	case op == 0 || len(d.runs) == 0: // admit
		k := rng.IntN(len(d.prompts))
		seqs := d.seqsOf[k]
		hit := p.match(seqs)
		need := len(seqs) + rng.IntN(2)
		if len(d.runs) > 0 && p.admitCost(seqs, hit, need) > p.allocatable() || need > p.capacity {
			return events
		}
		events = p.admit(events, seqs, hit, need)
		d.runs = append(d.runs, poolRun{seqs: seqs, locals: d.prompts[k], pinned: hit, private: need - hit})
	case op == 1: // prefill ends: register the prompt
		r := &d.runs[rng.IntN(len(d.runs))]
		if r.registered {
			return events
		}
		events = p.register(events, r.seqs, r.locals, r.pinned, len(r.seqs))
		r.private -= len(r.seqs) - r.pinned
		r.pinned, r.registered = len(r.seqs), true
	case op == 2: // decode needs a block
		r := &d.runs[rng.IntN(len(d.runs))]
		if !r.registered || p.allocatable() < 1 {
			return events
		}
		events = p.grow(events, 1)
		r.private++
	default: // release
		k := rng.IntN(len(d.runs))
		r := d.runs[k]
		p.release(r.seqs, r.pinned, r.private)
		d.runs = slices.Delete(d.runs, k, k+1)
	}
	return events
}

// poolState is everything observable of a pool, comparable with ==
// through fmt: its blocks by hash with their slot contents, the LRU order,
// the free slots and the counters.
func poolState(p *kvPool) string {
	var lru []int32
	for e := p.lru.Front(); e != nil; e = e.Next() {
		lru = append(lru, e.Value.(int32))
	}
	type slot struct {
		hash, local uint64
		refs        int32
		evictable   bool
	}
	slots := make([]slot, len(p.slots))
	for i, s := range p.slots {
		slots[i] = slot{s.hash, s.local, s.refs, s.evictable != nil}
		if s.evictable != nil && s.evictable.Value.(int32) != int32(i) {
			return fmt.Sprintf("slot %d's LRU element holds %d", i, s.evictable.Value)
		}
	}
	keys := slices.Sorted(maps.Keys(p.byHash))
	byHash := make([]int32, len(keys))
	for k, h := range keys {
		byHash[k] = p.byHash[h]
	}
	return fmt.Sprintf("cap %d private %d pinned %d next %d\nkeys %v\nslots %v\nbyHash %v\nlru %v\nfree %v",
		p.capacity, p.private, p.pinned, p.nextID, keys, slots, byHash, lru, p.free)
}

// TestKVPool_CloneEvolvesIdenticallyAndIndependently clones a pool in the
// middle of a random history: the clone starts equal; driving the clone
// leaves the original as it was; driving the original the same way makes
// it equal to the clone again, with the same events, step by step.
func TestKVPool_CloneEvolvesIdenticallyAndIndependently(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 12))
	prompts, seqsOf, _ := poolPrompts(rng)
	orig := &poolDriver{p: newKVPool(kv.Member{Worker: 3}, 24), prompts: prompts, seqsOf: seqsOf}
	evictions := 0
	for round := range 20 {
		for range 200 {
			orig.step(rng, nil)
		}
		cl := orig.clone()
		before := poolState(orig.p)
		if got := poolState(cl.p); got != before {
			t.Fatalf("round %d: the clone differs from its original:\n%s\nwant\n%s", round, got, before)
		}
		opRNG := func(k int) *rand.Rand { return rand.New(rand.NewPCG(seed, uint64(1000*round+k))) }
		var cloneEvents []string
		for k := range 300 {
			ev := cl.step(opRNG(k), nil)
			for _, e := range ev {
				evictions += boolInt(e.Kind == kv.Removed)
			}
			cloneEvents = append(cloneEvents, fmt.Sprint(ev))
		}
		if got := poolState(orig.p); got != before {
			t.Fatalf("round %d: driving the clone changed the original:\n%s\nwas\n%s", round, got, before)
		}
		for k := range 300 {
			if ev := fmt.Sprint(orig.step(opRNG(k), nil)); ev != cloneEvents[k] {
				t.Fatalf("round %d step %d: the original emitted %s, its clone %s", round, k, ev, cloneEvents[k])
			}
		}
		if a, b := poolState(orig.p), poolState(cl.p); a != b {
			t.Fatalf("round %d: after the same 300 operations the original and its clone differ:\n%s\nvs\n%s", round, a, b)
		}
	}
	if evictions == 0 {
		t.Errorf("no eviction in the clones' 6,000 steps: the test exercised no LRU order")
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
