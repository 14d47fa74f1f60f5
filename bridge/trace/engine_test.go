package trace

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

func mustEngine(t *testing.T, capacity int) *Engine {
	t.Helper()
	e, err := NewEngine(EngineConfig{Member: kv.Member{Worker: 3, Rank: 1}, CapacityBlocks: capacity})
	if err != nil {
		t.Fatalf("NewEngine(capacity=%d): %v", capacity, err)
	}
	return e
}

func chain(locals ...uint64) []uint64 { return kv.AppendChain(nil, false, 0, locals) }

// storedBlocks builds the Blocks of a Stored event for locals[from:] of a
// prompt.
func storedBlocks(locals []uint64, from int) []kv.Block {
	seq := chain(locals...)
	var out []kv.Block
	for j := from; j < len(locals); j++ {
		out = append(out, kv.Block{External: seq[j], Local: locals[j]})
	}
	return out
}

func TestEngine_StoresOnlyTheUncachedSuffixBelowTheHit(t *testing.T) {
	e := mustEngine(t, 100)
	m := e.Member()
	evs, res := e.Serve(nil, []uint64{1, 2, 3})
	want := []kv.Event{{Member: m, EventID: 0, Kind: kv.Stored, Blocks: storedBlocks([]uint64{1, 2, 3}, 0)}}
	if !slices.EqualFunc(evs, want, eventEqual) || res != (Result{PromptBlocks: 3, StoredBlocks: 3}) {
		t.Errorf("Serve([1 2 3]) on an empty cache = %+v, %+v; want %+v, 3 stored", evs, res, want)
	}
	evs, res = e.Serve(nil, []uint64{1, 2, 4, 5})
	want = []kv.Event{{Member: m, EventID: 1, Kind: kv.Stored, HasParent: true, Parent: chain(1, 2)[1], Blocks: storedBlocks([]uint64{1, 2, 4, 5}, 2)}}
	if !slices.EqualFunc(evs, want, eventEqual) || res != (Result{PromptBlocks: 4, CachedBlocks: 2, StoredBlocks: 2}) {
		t.Errorf("Serve([1 2 4 5]) after [1 2 3] = %+v, %+v; want %+v, 2 cached, 2 stored", evs, res, want)
	}
	evs, res = e.Serve(nil, []uint64{1, 2, 3})
	if len(evs) != 0 || res != (Result{PromptBlocks: 3, CachedBlocks: 3}) {
		t.Errorf("Serve([1 2 3]) when cached = %+v, %+v; want no events, 3 cached", evs, res)
	}
	if e.Blocks() != 5 || e.Lookup([]uint64{1, 2, 4, 9}) != 3 || e.Lookup([]uint64{2}) != 0 || e.Lookup(nil) != 0 {
		t.Errorf("Blocks() = %d, Lookup([1 2 4 9]) = %d, Lookup([2]) = %d; want 5, 3, 0", e.Blocks(), e.Lookup([]uint64{1, 2, 4, 9}), e.Lookup([]uint64{2}))
	}
	if evs, res := e.Serve(nil, nil); len(evs) != 0 || res != (Result{}) {
		t.Errorf("Serve(empty prompt) = %+v, %+v; want nothing", evs, res)
	}
}

func TestEngine_EvictsLeastRecentlyUsedLeavesFirst(t *testing.T) {
	e := mustEngine(t, 4)
	a, b := chain(1, 2), chain(3, 4)
	e.Serve(nil, []uint64{1, 2})
	e.Serve(nil, []uint64{3, 4})
	e.Serve(nil, []uint64{1, 2}) // A is now more recent than B
	evs, res := e.Serve(nil, []uint64{5})
	if len(evs) != 2 || !slices.Equal(evs[0].Removed, []uint64{b[1]}) || evs[0].Kind != kv.Removed || res.EvictedBlocks != 1 {
		t.Fatalf("Serve([5]) on a full cache = %+v, %+v; want Removed [B's leaf %d] then Stored", evs, res, b[1])
	}
	// Oldest first: B's root, then A leaf-first; [5] was used last.
	evs, res = e.Serve(nil, []uint64{6, 7})
	if len(evs) != 2 || !slices.Equal(evs[0].Removed, []uint64{b[0], a[1]}) || res.EvictedBlocks != 2 {
		t.Errorf("Serve([6 7]) = %+v, %+v; want Removed [%d %d] (B's root, then A's leaf)", evs, res, b[0], a[1])
	}
	if got := e.Lookup([]uint64{1, 2}); got != 1 {
		t.Errorf("Lookup(A) after evicting its leaf = %d, want 1", got)
	}
}

func TestEngine_LookupDoesNotRefreshRecency(t *testing.T) {
	e := mustEngine(t, 2)
	e.Serve(nil, []uint64{1})
	e.Serve(nil, []uint64{2})
	if e.Lookup([]uint64{1}) != 1 {
		t.Fatalf("Lookup([1]) = 0, want 1")
	}
	evs, _ := e.Serve(nil, []uint64{3})
	if len(evs) == 0 || !slices.Equal(evs[0].Removed, []uint64{1}) {
		t.Errorf("Serve([3]) after Lookup([1]) = %+v, want [1] evicted (Lookup must not count as use)", evs)
	}
}

func TestEngine_CachesALongPromptOnlyUpToCapacity(t *testing.T) {
	e := mustEngine(t, 3)
	p := []uint64{1, 2, 3, 4, 5}
	evs, res := e.Serve(nil, p)
	if len(evs) != 1 || !slices.EqualFunc(evs[0].Blocks, storedBlocks(p[:3], 0), func(x, y kv.Block) bool { return x == y }) || res != (Result{PromptBlocks: 5, StoredBlocks: 3}) {
		t.Errorf("Serve(5 blocks, capacity 3) = %+v, %+v; want the first 3 stored", evs, res)
	}
	if evs, res := e.Serve(nil, p); len(evs) != 0 || res.CachedBlocks != 3 {
		t.Errorf("Serve(same prompt) = %+v, %+v; want no events, 3 cached", evs, res)
	}
	seq := chain(p...)
	evs, _ = e.Serve(nil, []uint64{9, 9})
	if len(evs) != 2 || !slices.Equal(evs[0].Removed, []uint64{seq[2], seq[1]}) {
		t.Errorf("Serve([9 9]) = %+v, want Removed [%d %d] (leaf first)", evs, seq[2], seq[1])
	}
	if e.Blocks() != 3 {
		t.Errorf("Blocks() = %d, want 3", e.Blocks())
	}
}

func TestNewEngine_RejectsBadCapacity(t *testing.T) {
	for _, c := range []int{-1, MaxCapacityBlocks + 1} {
		if _, err := NewEngine(EngineConfig{CapacityBlocks: c}); !errors.Is(err, ErrConfig) {
			t.Errorf("NewEngine(capacity=%d) = %v, want ErrConfig", c, err)
		}
	}
	if e, err := NewEngine(EngineConfig{}); err != nil || e.Capacity() != DefaultCapacityBlocks {
		t.Errorf("NewEngine(default) = %v; want capacity %d", err, DefaultCapacityBlocks)
	}
}

// refEngine is the slow reference LRU: every block remembers the request
// that last used it and its depth; an eviction scans for the leaf with the
// oldest use, deeper first within one request.
type refEngine struct {
	capacity int
	clock    int
	blocks   map[uint64]*refBlock
}

type refBlock struct {
	parent    uint64
	hasParent bool
	depth     int
	used      int
}

func (r *refEngine) serve(locals []uint64) ([]uint64, Result) {
	seq := chain(locals...)
	hit := 0
	for hit < len(seq) && r.blocks[seq[hit]] != nil {
		hit++
	}
	r.clock++
	for _, h := range seq[:hit] {
		r.blocks[h].used = r.clock
	}
	res := Result{PromptBlocks: len(locals), CachedBlocks: hit}
	keep := min(len(locals), r.capacity)
	if keep <= hit {
		return nil, res
	}
	var removed []uint64
	for len(r.blocks)+keep-hit > r.capacity {
		var victim uint64
		var vb *refBlock
		for h, b := range r.blocks {
			if r.hasChild(h) {
				continue
			}
			if vb == nil || b.used < vb.used || b.used == vb.used && b.depth > vb.depth {
				victim, vb = h, b
			}
		}
		delete(r.blocks, victim)
		removed = append(removed, victim)
	}
	for j := hit; j < keep; j++ {
		b := &refBlock{depth: j, used: r.clock}
		if j > 0 {
			b.parent, b.hasParent = seq[j-1], true
		}
		r.blocks[seq[j]] = b
	}
	res.StoredBlocks, res.EvictedBlocks = keep-hit, len(removed)
	return removed, res
}

func (r *refEngine) hasChild(h uint64) bool {
	for _, b := range r.blocks {
		if b.hasParent && b.parent == h {
			return true
		}
	}
	return false
}

// randomPrompts yields prompts that share prefixes: each extends a random
// prefix of an earlier prompt with locals from a small alphabet.
func randomPrompts(rng *rand.Rand, n int) [][]uint64 {
	out := make([][]uint64, 0, n)
	for range n {
		var p []uint64
		if len(out) > 0 && rng.IntN(4) > 0 {
			base := out[rng.IntN(len(out))]
			p = slices.Clone(base[:rng.IntN(len(base)+1)])
		}
		for range rng.IntN(8) {
			p = append(p, uint64(1+rng.IntN(5)))
		}
		out = append(out, p)
	}
	return out
}

// TestEngine_AgreesWithReferenceLRUAndEmitsConsistentEvents drives the
// engine and the reference with the same random requests, and replays the
// engine's events into a model of one member's blocks that checks every
// parent is present and every removed block is a leaf.
func TestEngine_AgreesWithReferenceLRUAndEmitsConsistentEvents(t *testing.T) {
	seed := testSeed(t, 29)
	rng := rand.New(rand.NewPCG(seed, 1))
	rounds, requests := 60, 300
	if testing.Short() {
		rounds = 15
	}
	for round := range rounds {
		capacity := 1 + rng.IntN(30)
		e := mustEngine(t, capacity)
		ref := &refEngine{capacity: capacity, blocks: map[uint64]*refBlock{}}
		model := map[uint64]uint64{} // external → parent external (0 = root)
		children := map[uint64]int{}
		var nextID uint64
		for i, p := range randomPrompts(rng, requests) {
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d round %d (capacity %d) request %d %v: "+format, append([]any{seed, round, capacity, i, p}, args...)...)
			}
			evs, res := e.Serve(nil, p)
			wantRemoved, wantRes := ref.serve(p)
			if res != wantRes {
				fail("Result = %+v, reference %+v", res, wantRes)
			}
			var removed []uint64
			seq := chain(p...)
			for _, ev := range evs {
				if ev.Member != e.Member() || ev.EventID != nextID {
					fail("event %+v: want member %v, event id %d", ev, e.Member(), nextID)
				}
				nextID++
				switch ev.Kind {
				case kv.Removed:
					for _, h := range ev.Removed {
						if _, ok := model[h]; !ok || children[h] > 0 {
							fail("removes %d: present %v, %d children; want a present leaf", h, ok, children[h])
						}
						children[model[h]]--
						delete(model, h)
					}
					removed = append(removed, ev.Removed...)
				case kv.Stored:
					parent := uint64(0)
					if ev.HasParent {
						if _, ok := model[ev.Parent]; !ok {
							fail("stores below %d, which the member does not hold", ev.Parent)
						}
						parent = ev.Parent
					}
					if ev.HasParent != (res.CachedBlocks > 0) {
						fail("HasParent = %v with %d cached blocks", ev.HasParent, res.CachedBlocks)
					}
					for k, b := range ev.Blocks {
						j := res.CachedBlocks + k
						if b.External != seq[j] || b.Local != p[j] {
							fail("block %d = %+v, want {%d %d}", j, b, seq[j], p[j])
						}
						if _, ok := model[b.External]; ok {
							fail("stores %d twice", b.External)
						}
						model[b.External] = parent
						children[parent]++
						parent = b.External
					}
				default:
					fail("unexpected event kind %v", ev.Kind)
				}
			}
			if !slices.Equal(removed, wantRemoved) {
				fail("evicted %v, reference %v", removed, wantRemoved)
			}
			if e.Blocks() != len(model) || e.Blocks() > capacity {
				fail("Blocks() = %d, events imply %d, capacity %d", e.Blocks(), len(model), capacity)
			}
			if got, want := e.Lookup(p), min(len(p), capacity); got != want {
				fail("Lookup after serving = %d, want %d", got, want)
			}
		}
	}
}

func eventEqual(a, b kv.Event) bool {
	return a.Member == b.Member && a.EventID == b.EventID && a.Kind == b.Kind && a.HasParent == b.HasParent &&
		a.Parent == b.Parent && slices.Equal(a.Blocks, b.Blocks) && slices.Equal(a.Removed, b.Removed)
}
