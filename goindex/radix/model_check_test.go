package radix

import (
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// The reference model's own self-checks (dynamo-compat §3.6), with
// hash = chain id, run against the model and, with local = external = id,
// against the index.
func TestModel_SelfChecks(t *testing.T) {
	m := kv.Member{}
	root := modelParent{}
	p := func(h uint64) modelParent { return modelParent{true, h} }
	type lensCase struct {
		chain       []uint64
		held, reach int
	}
	x := New(Config{})
	apply := func(ev kv.Event) error { return x.Apply(&ev) }
	storeIndex := func(parent modelParent, blocks ...uint64) error {
		ev := kv.Event{Member: m, Kind: kv.Stored, HasParent: parent.has, Parent: parent.h}
		for _, b := range blocks {
			ev.Blocks = append(ev.Blocks, kv.Block{External: b, Local: b})
		}
		return apply(ev)
	}
	md := newModel(ClearRank)
	check := func(step string, cs ...lensCase) {
		t.Helper()
		for _, c := range cs {
			h, r := md.lens(m, c.chain)
			if h != c.held || r != c.reach {
				t.Errorf("%s: model lens(%v) = (%d,%d), want (%d,%d)", step, c.chain, h, r, c.held, c.reach)
			}
			got := 0
			for _, o := range x.Match(nil, c.chain) {
				got = o.Blocks
			}
			if got != c.reach {
				t.Errorf("%s: index Match(%v) = %d, want reach_len %d", step, c.chain, got, c.reach)
			}
		}
	}
	store := func(parent modelParent, want verdict, blocks ...uint64) {
		t.Helper()
		if v := md.store(m, parent, blocks); v != want {
			t.Errorf("model store(%+v, %v) = %v, want %v", parent, blocks, v, want)
		}
		if err := storeIndex(parent, blocks...); err != nil && want == mustApply {
			t.Errorf("index store(%+v, %v) = %v, want nil", parent, blocks, err)
		}
	}
	remove := func(hs ...uint64) {
		t.Helper()
		md.remove(m, hs)
		if err := apply(kv.Event{Member: m, Kind: kv.Removed, Removed: hs}); err != nil {
			t.Errorf("index remove(%v) = %v", hs, err)
		}
	}

	store(root, mustApply, 1, 2, 3, 4)
	remove(2)
	check("remove 2", lensCase{[]uint64{1, 2, 3, 4}, 1, 1})
	store(p(1), mustApply, 2)
	check("store 1→[2]", lensCase{[]uint64{1, 2, 3, 4}, 4, 2})
	store(p(4), mayReject, 5)
	check("store 4→[5]", lensCase{[]uint64{1, 2, 3, 4, 5}, 5, 2})
	store(p(2), mustApply, 3, 4)
	check("store 2→[3 4]", lensCase{[]uint64{1, 2, 3, 4, 5}, 5, 4})

	x, md = New(Config{}), newModel(ClearRank)
	store(root, mustApply, 1, 2, 3)
	store(p(2), mustApply, 13)
	remove(3)
	check("remove 3", lensCase{[]uint64{1, 2, 13}, 3, 3})
	remove(1)
	check("remove 1", lensCase{[]uint64{1, 2, 13}, 0, 0})
	if _, held := md.ranks[m].held[13]; !held || md.ranks[m].reachable[13] {
		t.Errorf("model after remove 1: block 13 held=%v reachable=%v, want held and unreachable", held, md.ranks[m].reachable[13])
	}
	if s := x.Stats(); s.Orphaned != 2 || s.Blocks != 2 {
		t.Errorf("index Stats after remove 1 = %+v, want 2 blocks held, both orphaned (2 and 13)", s)
	}
}
