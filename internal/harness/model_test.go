package harness

import (
	"maps"
	"os"
	"strconv"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// blocks builds a stored run whose external hashes are the given values
// (the self-checks' "hash = chain id" convention); locals mirror them.
func blocks(ext ...uint64) []kv.Block {
	out := make([]kv.Block, len(ext))
	for i, e := range ext {
		out[i] = kv.Block{External: e, Local: e}
	}
	return out
}

func wantBounds(t *testing.T, m *Model, mem kv.Member, chain []uint64, held, reach int) {
	t.Helper()
	if h, r := m.Bounds(mem, chain); h != held || r != reach {
		t.Errorf("Bounds(%s, %v) = (%d, %d), want (%d, %d)", mem, chain, h, r, held, reach)
	}
}

func wantExpect(t *testing.T, what string, got, want Expect) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

var m0 = kv.Member{Worker: 0, Rank: 0}

// TestModel_SelfChecks runs the self-checks of dynamo-compat §3.6.
func TestModel_SelfChecks(t *testing.T) {
	m := NewModel(ClearRank)
	wantExpect(t, "store [1 2 3 4]", m.Store(m0, false, 0, blocks(1, 2, 3, 4)), MustApply)
	wantExpect(t, "remove [2]", m.Remove(m0, []uint64{2}), MustApply)
	wantBounds(t, m, m0, []uint64{1, 2, 3, 4}, 1, 1)
	wantExpect(t, "store 1→[2]", m.Store(m0, true, 1, blocks(2)), MustApply)
	wantBounds(t, m, m0, []uint64{1, 2, 3, 4}, 4, 2)
	wantExpect(t, "store 4→[5]", m.Store(m0, true, 4, blocks(5)), MayReject)
	wantBounds(t, m, m0, []uint64{1, 2, 3, 4, 5}, 5, 2)
	wantExpect(t, "store 2→[3 4]", m.Store(m0, true, 2, blocks(3, 4)), MustApply)
	wantBounds(t, m, m0, []uint64{1, 2, 3, 4, 5}, 5, 4)

	m = NewModel(ClearRank)
	m.Store(m0, false, 0, blocks(1, 2, 3))
	m.Store(m0, true, 2, blocks(13))
	wantExpect(t, "remove [3]", m.Remove(m0, []uint64{3}), MustApply)
	wantBounds(t, m, m0, []uint64{1, 2, 13}, 3, 3)
	wantExpect(t, "remove [1]", m.Remove(m0, []uint64{1}), MustApply)
	wantBounds(t, m, m0, []uint64{1, 2, 13}, 0, 0)
	if !m.Held(m0, 13) || m.Reachable(m0, 13) {
		t.Errorf("after remove [1]: Held(13), Reachable(13) = %v, %v, want true, false", m.Held(m0, 13), m.Reachable(m0, 13))
	}
}

// TestModel_RemovalVerdicts pins when a removal must be accepted: only when
// it cuts a reachable block and names nothing else.
func TestModel_RemovalVerdicts(t *testing.T) {
	m := NewModel(ClearRank)
	m.Store(m0, false, 0, blocks(1, 2, 3))
	m.Remove(m0, []uint64{2}) // 3 is held but orphaned
	wantExpect(t, "remove orphan [3]", m.Remove(m0, []uint64{3}), MayReject)
	wantExpect(t, "remove unknown [9]", m.Remove(m0, []uint64{9}), MayReject)
	m.Store(m0, true, 1, blocks(2, 3))
	wantExpect(t, "remove reachable [3] and unknown [9]", m.Remove(m0, []uint64{3, 9}), MayReject)
	wantExpect(t, "remove reachable [2]", m.Remove(m0, []uint64{2}), MustApply)
	wantExpect(t, "remove [1 1]", m.Remove(m0, []uint64{1, 1}), MayReject)
	wantBounds(t, m, m0, []uint64{1}, 0, 0)
}

// TestModel_ClearScopeAndRemovals checks cleared (both scopes), remove member
// and remove worker, and what stays known.
func TestModel_ClearScopeAndRemovals(t *testing.T) {
	r1 := kv.Member{Worker: 0, Rank: 1}
	w1 := kv.Member{Worker: 1, Rank: 0}
	chain := []uint64{1, 2, 3}
	for _, scope := range []ClearScope{ClearRank, ClearWorker} {
		m := NewModel(scope)
		for _, mem := range []kv.Member{m0, r1, w1} {
			m.Store(mem, false, 0, blocks(chain...))
		}
		wantExpect(t, "clear", m.Clear(m0), MustApply)
		wantBounds(t, m, m0, chain, 0, 0)
		sibling := 3
		if scope == ClearWorker {
			sibling = 0
		}
		wantBounds(t, m, r1, chain, sibling, sibling)
		wantBounds(t, m, w1, chain, 3, 3)
		if !m.Known(m0) || !m.Known(r1) {
			t.Errorf("scope %s: after clear Known(%s), Known(%s) = %v, %v, want true, true", scope, m0, r1, m.Known(m0), m.Known(r1))
		}
	}
	m := NewModel(ClearRank)
	m.Store(m0, false, 0, blocks(chain...))
	m.Store(r1, false, 0, blocks(chain...))
	m.Store(w1, false, 0, blocks(chain...))
	wantExpect(t, "remove member", m.RemoveMember(r1), MustApply)
	wantExpect(t, "remove member again", m.RemoveMember(r1), MayReject)
	if got := m.Members(); len(got) != 2 || got[0] != m0 || got[1] != w1 {
		t.Errorf("Members() = %v, want [%s %s]", got, m0, w1)
	}
	wantExpect(t, "remove worker 0", m.RemoveWorker(0), MustApply)
	wantExpect(t, "remove worker 0 again", m.RemoveWorker(0), MayReject)
	if m.Known(m0) || !m.Known(w1) {
		t.Errorf("after remove worker 0: Known(%s), Known(%s) = %v, %v, want false, true", m0, w1, m.Known(m0), m.Known(w1))
	}
}

// TestModel_Scenarios replays the model-visible scenarios of §3.5: an exact
// index scores reach_len, and the model's bounds must contain it.
func TestModel_Scenarios(t *testing.T) {
	chain := kv.AppendChain(nil, false, 0, []uint64{1, 2, 3, 4, 5})
	store := func(m *Model, from, to int) {
		parent, has := uint64(0), from > 0
		if has {
			parent = chain[from-1]
		}
		var bl []kv.Block
		for i := from; i < to; i++ {
			bl = append(bl, kv.Block{External: chain[i], Local: uint64(i + 1)})
		}
		m.Store(m0, has, parent, bl)
	}
	m := NewModel(ClearRank)
	store(m, 0, 5)
	m.Remove(m0, chain[2:3])
	wantBounds(t, m, m0, chain, 2, 2) // [1..5] = 2
	store(m, 2, 3)                    // re-store [1,2]→[3]
	wantBounds(t, m, m0, chain, 5, 3) // radix 3 (4, 5 orphaned), dynkv 5
	store(m, 3, 5)                    // [1,2,3]→[4,5] restores 5
	wantBounds(t, m, m0, chain, 5, 5)

	// shrunk-5: store [1,2,3]; store [1]→[4]; remove [1]; store [1,2];
	// remove chain positions 2, 1 of [1,2,3] → query [1,2] scores 1.
	c4 := kv.AppendChain(nil, true, chain[0], []uint64{4})
	m = NewModel(ClearRank)
	store(m, 0, 3)
	m.Store(m0, true, chain[0], []kv.Block{{External: c4[0], Local: 4}})
	m.Remove(m0, chain[:1])
	store(m, 0, 2)
	m.Remove(m0, []uint64{chain[2], chain[1]})
	wantBounds(t, m, m0, chain[:2], 1, 1)
}

// refModel is the slow reference for Model: sets and parent pointers, and
// after every change each reachable block walks its parents to the root.
type refModel struct {
	scope   ClearScope
	members map[kv.Member]map[uint64]entry
}

func (r *refModel) apply(op *Op) {
	if r.members == nil {
		r.members = make(map[kv.Member]map[uint64]entry)
	}
	get := func(mem kv.Member) map[uint64]entry {
		if r.members[mem] == nil {
			r.members[mem] = make(map[uint64]entry)
		}
		return r.members[mem]
	}
	switch op.Kind {
	case OpEvent:
		ev := &op.Event
		switch ev.Kind {
		case kv.Stored:
			bs := get(ev.Member)
			reach := !ev.HasParent || bs[ev.Parent].reachable
			parent, has := ev.Parent, ev.HasParent
			for _, b := range ev.Blocks {
				bs[b.External] = entry{parent: parent, hasParent: has, reachable: reach}
				parent, has = b.External, true
			}
		case kv.Removed:
			for _, h := range ev.Removed {
				delete(r.members[ev.Member], h)
			}
		case kv.Cleared:
			get(ev.Member)
			for mem, bs := range r.members {
				if mem == ev.Member || (r.scope == ClearWorker && mem.Worker == ev.Member.Worker) {
					clear(bs)
				}
			}
		}
	case OpRemoveMember:
		delete(r.members, op.Member)
	case OpRemoveWorker:
		maps.DeleteFunc(r.members, func(mem kv.Member, _ map[uint64]entry) bool { return mem.Worker == op.Worker })
	}
	for _, bs := range r.members {
		rooted := make(map[uint64]bool)
		for h, e := range bs {
			if !e.reachable {
				continue
			}
			ok, cur := false, e
			for range len(bs) + 1 {
				if !cur.hasParent {
					ok = true
					break
				}
				p, held := bs[cur.parent]
				if !held || !p.reachable {
					break
				}
				cur = p
			}
			rooted[h] = ok
		}
		for h, ok := range rooted {
			if !ok {
				e := bs[h]
				e.reachable = false
				bs[h] = e
			}
		}
	}
}

// sameAsRef reports the first difference between m and r.
func sameAsRef(m *Model, r *refModel) (string, bool) {
	if len(m.members) != len(r.members) {
		return "member count " + strconv.Itoa(len(m.members)) + " vs " + strconv.Itoa(len(r.members)), false
	}
	for mem, bs := range m.members {
		rb, ok := r.members[mem]
		if !ok {
			return "member " + mem.String() + " unknown to the reference", false
		}
		if !maps.Equal(bs, rb) {
			return "member " + mem.String() + " blocks differ", false
		}
	}
	return "", true
}

// testSeed returns the seed of a randomized test: HARNESS_TEST_SEED when
// set, else def.
func testSeed(t *testing.T, def uint64) uint64 {
	t.Helper()
	if raw, ok := os.LookupEnv("HARNESS_TEST_SEED"); ok {
		s, err := strconv.ParseUint(raw, 0, 64)
		if err != nil {
			t.Fatalf("HARNESS_TEST_SEED=%q: %v", raw, err)
		}
		return s
	}
	return def
}

// TestModel_MatchesSlowReferenceOnGeneratedWorkloads cross-checks the
// model's memoized prune against the walk-every-block reference over
// generated workloads of both clear scopes.
func TestModel_MatchesSlowReferenceOnGeneratedWorkloads(t *testing.T) {
	base := testSeed(t, 1)
	seeds, steps := 6, 800
	if testing.Short() {
		seeds, steps = 3, 300
	}
	for k := range uint64(seeds) {
		seed := base + k
		scope := ClearScope(seed % 2)
		ops := Generate(seed, GenConfig{Steps: steps, ClearScope: scope})
		m, r := NewModel(scope), &refModel{scope: scope}
		for i := range ops {
			m.Apply(&ops[i])
			r.apply(&ops[i])
			if diff, ok := sameAsRef(m, r); !ok {
				t.Fatalf("seed %d (HARNESS_TEST_SEED=%d) op %d %s: model vs reference: %s", seed, seed, i, &ops[i], diff)
			}
		}
	}
}

// decodeFuzzOps turns bytes into ops over a tiny hash universe (1..6) and
// two members, with arbitrary parents, so that loops, re-parenting and
// orphan chains all occur.
func decodeFuzzOps(data []byte) []Op {
	var ops []Op
	for len(data) >= 3 {
		b0, b1, b2 := data[0], data[1], data[2]
		data = data[3:]
		mem := kv.Member{Worker: uint64(b0 >> 7), Rank: 0}
		switch b0 % 5 {
		case 0, 1:
			ev := kv.Event{Member: mem, Kind: kv.Stored, HasParent: b1%7 != 0, Parent: uint64(b1 % 7)}
			for k := range 1 + b2%3 {
				ev.Blocks = append(ev.Blocks, kv.Block{External: uint64((b2>>(2+2*k))%6 + 1)})
			}
			ops = append(ops, Op{Kind: OpEvent, Event: ev})
		case 2:
			ops = append(ops, Op{Kind: OpEvent, Event: kv.Event{Member: mem, Kind: kv.Removed, Removed: []uint64{uint64(b1%6 + 1), uint64(b2%6 + 1)}[:1+b2%2]}})
		case 3:
			ops = append(ops, Op{Kind: OpEvent, Event: kv.Event{Member: mem, Kind: kv.Cleared}})
		default:
			ops = append(ops, Op{Kind: OpRemoveMember, Member: mem})
		}
	}
	return ops
}

// FuzzModel_MatchesSlowReference drives the model and the slow reference
// with arbitrary ops (including hand-made loops) and requires the same held
// and reachable sets, a prefix-closed reachable set, and reach ≤ held.
func FuzzModel_MatchesSlowReference(f *testing.F) {
	f.Add([]byte{0, 0, 0x1b, 2, 1, 0, 0, 0, 0x1b})
	f.Add([]byte{0, 0, 0x06, 0, 1, 0x0a, 2, 0, 0, 1, 2, 0x05})
	f.Add([]byte{0x80, 0, 0x1b, 3, 0, 0, 0, 3, 0x11})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, r := NewModel(ClearRank), &refModel{}
		for i, op := range decodeFuzzOps(data) {
			m.Apply(&op)
			r.apply(&op)
			if diff, ok := sameAsRef(m, r); !ok {
				t.Fatalf("op %d %s: model vs reference: %s", i, &op, diff)
			}
			for mem, bs := range m.members {
				for h, e := range bs {
					if e.reachable && e.hasParent && !bs[e.parent].reachable {
						t.Fatalf("op %d: member %s block %d reachable below unreachable parent %d", i, mem, h, e.parent)
					}
				}
				for a := range uint64(7) {
					held, reach := m.Bounds(mem, []uint64{a, 1, 2, 3})
					if reach > held {
						t.Fatalf("op %d: Bounds(%s, [%d 1 2 3]) = (%d, %d): reach > held", i, mem, a, held, reach)
					}
				}
			}
		}
	})
}
