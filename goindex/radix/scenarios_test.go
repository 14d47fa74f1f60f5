package radix_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

// The helpers follow dynamo-compat §3.5: tokens_hash = the listed value,
// block_hash = the router chain of the values.

func rank(w uint64, r uint32) kv.Member { return kv.Member{Worker: w, Rank: r} }

func w(worker uint64) kv.Member { return rank(worker, 0) }

func seq(from, to uint64) []uint64 {
	var s []uint64
	for v := from; v <= to; v++ {
		s = append(s, v)
	}
	return s
}

func cat(parts ...[]uint64) []uint64 {
	var s []uint64
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

func chainOf(vals []uint64) []uint64 { return kv.AppendChain(nil, false, 0, vals) }

// storeEvent is store(m, prefix → suffix): parent = chain hash of the
// prefix's last value (none for an empty prefix), blocks = suffix with the
// chain continued.
func storeEvent(m kv.Member, prefix, suffix []uint64) *kv.Event {
	full := chainOf(cat(prefix, suffix))
	ev := &kv.Event{Member: m, Kind: kv.Stored}
	if len(prefix) > 0 {
		ev.HasParent, ev.Parent = true, full[len(prefix)-1]
	}
	for i, v := range suffix {
		ev.Blocks = append(ev.Blocks, kv.Block{External: full[len(prefix)+i], Local: v})
	}
	return ev
}

// removeEvent removes the chain hashes of seqv at the given positions.
func removeEvent(m kv.Member, seqv []uint64, positions ...int) *kv.Event {
	c := chainOf(seqv)
	ev := &kv.Event{Member: m, Kind: kv.Removed}
	for _, p := range positions {
		ev.Removed = append(ev.Removed, c[p])
	}
	return ev
}

func positions(from, to int) []int {
	var p []int
	for i := from; i <= to; i++ {
		p = append(p, i)
	}
	return p
}

func mustApply(t *testing.T, x *radix.Index, evs ...*kv.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := x.Apply(ev); err != nil {
			t.Fatalf("Apply(%v %v) = %v, want nil", ev.Member, ev.Kind, err)
		}
	}
}

func scores(x *radix.Index, q []uint64) map[kv.Member]int {
	out := map[kv.Member]int{}
	for _, o := range x.Match(nil, q) {
		out[o.Member] = o.Blocks
	}
	return out
}

func wantScores(t *testing.T, x *radix.Index, q []uint64, want map[kv.Member]int) {
	t.Helper()
	got := scores(x, q)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Match(%v) = %v, want %v", q, got, want)
	}
}

func wantTreeSize(t *testing.T, x *radix.Index, m kv.Member, want int) {
	t.Helper()
	if got, _ := x.TreeSize(m); got != want {
		t.Errorf("TreeSize(%v) = %d, want %d", m, got, want)
	}
}

func none() map[kv.Member]int { return map[kv.Member]int{} }

func TestScenario_StoreAndQuery(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)))
	wantScores(t, x, seq(1, 3), map[kv.Member]int{w(0): 3})
	wantScores(t, x, []uint64{1, 2, 999}, map[kv.Member]int{w(0): 2})
}

func TestScenario_DuplicateStoreIsIdempotentAndCounted(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)))
	before, stats := x.Snapshot(), x.Stats()
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)))
	if diff := before.Diff(x.Snapshot()); diff != "" {
		t.Errorf("duplicate store changed the snapshot: %s", diff)
	}
	after := x.Stats()
	if after.Nodes != stats.Nodes || after.Blocks != stats.Blocks || after.Duplicates != 1 {
		t.Errorf("Stats after duplicate store = %+v, want nodes %d blocks %d duplicates 1", after, stats.Nodes, stats.Blocks)
	}
	wantScores(t, x, seq(1, 3), map[kv.Member]int{w(0): 3})
}

func TestScenario_ContinueBelowParentThenRemoveTailThenAll(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)), storeEvent(w(0), seq(1, 3), seq(4, 5)))
	wantScores(t, x, seq(1, 5), map[kv.Member]int{w(0): 5})
	wantScores(t, x, seq(1, 3), map[kv.Member]int{w(0): 3})

	mustApply(t, x, removeEvent(w(0), seq(1, 5), 3, 4))
	wantScores(t, x, seq(1, 5), map[kv.Member]int{w(0): 3})
	wantTreeSize(t, x, w(0), 3)
	// Replaying the dump onto the index itself is a no-op (all duplicates).
	before, dups := x.Snapshot(), x.Stats().Duplicates
	dump := x.Dump()
	for i := range dump {
		mustApply(t, x, &dump[i])
	}
	if diff := before.Diff(x.Snapshot()); diff != "" {
		t.Errorf("replaying Dump onto itself changed the snapshot: %s", diff)
	}
	if got := x.Stats().Duplicates - dups; got != uint64(len(dump)) {
		t.Errorf("replaying %d dump events counted %d duplicates, want %d", len(dump), got, len(dump))
	}

	mustApply(t, x, removeEvent(w(0), seq(1, 3), 0, 1, 2))
	wantScores(t, x, seq(1, 5), none())
	wantTreeSize(t, x, w(0), 0)
	if d := x.Dump(); len(d) != 0 {
		t.Errorf("Dump() after removing everything = %d events, want 0", len(d))
	}
	if st := x.Stats(); st.Nodes != 0 || st.Blocks != 0 {
		t.Errorf("Stats() after removing everything = %+v, want no nodes or blocks", st)
	}
}

func TestScenario_MidChainRemovalCutsAndReStoreDoesNotRevive(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 5)), removeEvent(w(0), seq(1, 5), 2))
	wantScores(t, x, seq(1, 5), map[kv.Member]int{w(0): 2})
	wantScores(t, x, seq(1, 2), map[kv.Member]int{w(0): 2})

	mustApply(t, x, storeEvent(w(0), seq(1, 2), []uint64{3}))
	wantScores(t, x, seq(1, 5), map[kv.Member]int{w(0): 3})
	if st := x.Stats(); st.Orphaned != 2 {
		t.Errorf("Stats().Orphaned = %d, want 2 (blocks 4 and 5)", st.Orphaned)
	}
	mustApply(t, x, storeEvent(w(0), seq(1, 3), seq(4, 5)))
	wantScores(t, x, seq(1, 5), map[kv.Member]int{w(0): 5})
}

func TestScenario_TwoWorkersBranchAndRejectUnheldParent(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x,
		storeEvent(w(1), nil, seq(1, 3)),
		storeEvent(w(2), nil, seq(1, 3)),
		storeEvent(w(1), seq(1, 3), seq(4, 6)))
	wantScores(t, x, seq(1, 6), map[kv.Member]int{w(1): 6, w(2): 3})

	mustApply(t, x, storeEvent(w(2), seq(1, 3), []uint64{7, 8}))
	wantScores(t, x, []uint64{1, 2, 3, 7, 8}, map[kv.Member]int{w(1): 3, w(2): 5})
	wantScores(t, x, seq(1, 6), map[kv.Member]int{w(1): 6, w(2): 3})

	err := x.Apply(storeEvent(w(2), seq(1, 6), []uint64{9, 10}))
	var be *radix.BlockError
	if !errors.Is(err, radix.ErrParentNotFound) || !errors.As(err, &be) || be.Hash != chainOf(seq(1, 6))[5] {
		t.Errorf("Apply(store w2 [1..6]→[9 10]) = %v, want ErrParentNotFound on chain[5]", err)
	}
	wantScores(t, x, cat(seq(1, 6), []uint64{9, 10}), map[kv.Member]int{w(1): 6, w(2): 3})
}

func TestScenario_SecondWorkerCatchesUpAndPassesFirst(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x,
		storeEvent(w(1), nil, seq(1, 6)),
		storeEvent(w(2), nil, seq(1, 3)),
		storeEvent(w(2), seq(1, 3), seq(4, 6)),
		storeEvent(w(2), seq(1, 6), seq(7, 9)))
	wantScores(t, x, seq(1, 9), map[kv.Member]int{w(1): 6, w(2): 9})
}

func TestScenario_SiblingsUnderSharedRoot(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, []uint64{1, 2}), storeEvent(w(1), nil, []uint64{1, 3}))
	wantScores(t, x, []uint64{1}, map[kv.Member]int{w(0): 1, w(1): 1})
	wantScores(t, x, []uint64{1, 2}, map[kv.Member]int{w(0): 2, w(1): 1})
}

func TestScenario_RemoveWorker(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)), storeEvent(w(1), nil, seq(1, 3)))
	if err := x.RemoveWorker(0); err != nil {
		t.Fatalf("RemoveWorker(0) = %v", err)
	}
	wantScores(t, x, seq(1, 3), map[kv.Member]int{w(1): 3})
	if _, known := x.TreeSize(w(0)); known {
		t.Errorf("TreeSize(%v) known after RemoveWorker, want forgotten", w(0))
	}
}

func TestScenario_StoreThenRemoveAll(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)), removeEvent(w(0), seq(1, 3), 0, 1, 2))
	wantScores(t, x, seq(1, 3), none())
}

func TestScenario_ClearedOneWorkerThenReStore(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)), storeEvent(w(1), nil, seq(1, 3)))
	mustApply(t, x, &kv.Event{Member: w(0), Kind: kv.Cleared})
	wantScores(t, x, seq(1, 3), map[kv.Member]int{w(1): 3})
	if size, known := x.TreeSize(w(0)); !known || size != 0 {
		t.Errorf("TreeSize(%v) after clear = %d, %v; want 0, known", w(0), size, known)
	}
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)))
	wantScores(t, x, seq(1, 3), map[kv.Member]int{w(0): 3, w(1): 3})
}

func TestScenario_DPRanksScoreSeparately(t *testing.T) {
	x := radix.New(radix.Config{})
	for r := range uint32(3) {
		mustApply(t, x, storeEvent(rank(0, r), nil, seq(1, 3)))
	}
	wantScores(t, x, seq(1, 3), map[kv.Member]int{rank(0, 0): 3, rank(0, 1): 3, rank(0, 2): 3})
}

func TestScenario_RemoveOneDPRank(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(rank(7, 0), nil, seq(1, 3)), storeEvent(rank(7, 1), nil, seq(1, 3)))
	if err := x.RemoveMember(rank(7, 0)); err != nil {
		t.Fatalf("RemoveMember(7/0) = %v", err)
	}
	wantScores(t, x, seq(1, 3), map[kv.Member]int{rank(7, 1): 3})
}

func TestScenario_ClearedScope(t *testing.T) {
	cases := []struct {
		scope radix.ClearScope
		want  map[kv.Member]int
	}{
		{radix.ClearRank, map[kv.Member]int{rank(0, 1): 3}},
		{radix.ClearWorker, none()},
	}
	for _, c := range cases {
		x := radix.New(radix.Config{ClearScope: c.scope})
		mustApply(t, x, storeEvent(rank(0, 0), nil, seq(1, 3)), storeEvent(rank(0, 1), nil, seq(1, 3)),
			storeEvent(w(1), nil, seq(1, 3)))
		mustApply(t, x, &kv.Event{Member: rank(0, 0), Kind: kv.Cleared})
		c.want[w(1)] = 3
		got := scores(x, seq(1, 3))
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("ClearScope %v: Match([1 2 3]) after cleared 0/0 = %v, want %v", c.scope, got, c.want)
		}
	}
}

func TestScenario_NonExistentTargetsAndEmptyQueries(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)))
	if err := x.RemoveWorker(999); err != nil {
		t.Errorf("RemoveWorker(999) = %v, want nil", err)
	}
	err := x.Apply(&kv.Event{Member: w(0), Kind: kv.Removed, Removed: []uint64{999, 998}})
	var re *radix.RemoveError
	if !errors.As(err, &re) || re.First != 999 || re.Missing != 2 || re.Removed != 0 {
		t.Errorf("Apply(remove w0 [999 998]) = %v, want RemoveError{First 999, Missing 2, Removed 0}", err)
	}
	wantScores(t, x, seq(1, 3), map[kv.Member]int{w(0): 3})
	wantScores(t, x, nil, none())
	wantScores(t, x, []uint64{999, 998}, none())
}

func TestScenario_DisjointChainsOnOneWorker(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)), storeEvent(w(0), nil, seq(100, 102)))
	wantScores(t, x, seq(1, 3), map[kv.Member]int{w(0): 3})
	wantScores(t, x, seq(100, 102), map[kv.Member]int{w(0): 3})
	wantScores(t, x, []uint64{1, 100}, map[kv.Member]int{w(0): 1})
}

func TestScenario_LongSequences(t *testing.T) {
	t.Run("remove-tail", func(t *testing.T) {
		x := radix.New(radix.Config{})
		mustApply(t, x, storeEvent(w(0), nil, seq(1, 100)), removeEvent(w(0), seq(1, 100), positions(79, 99)...))
		wantScores(t, x, seq(1, 100), map[kv.Member]int{w(0): 79})
	})
	t.Run("replaced-position", func(t *testing.T) {
		x := radix.New(radix.Config{})
		mustApply(t, x, storeEvent(w(0), nil, seq(1, 128)))
		for _, p := range []int{31, 32, 33, 63, 64, 65, 95, 96, 97} {
			q := seq(1, 128)
			q[p] = 999_999
			wantScores(t, x, q, map[kv.Member]int{w(0): p})
		}
	})
	t.Run("chained-events", func(t *testing.T) {
		x := radix.New(radix.Config{})
		for e := range uint64(20) {
			mustApply(t, x, storeEvent(w(0), seq(1, 10*e), seq(10*e+1, 10*e+10)))
		}
		wantScores(t, x, seq(1, 200), map[kv.Member]int{w(0): 200})
		wantScores(t, x, seq(1, 75), map[kv.Member]int{w(0): 75})
	})
}

func TestScenario_SharedPrefixThenDivergence(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x,
		storeEvent(w(0), nil, seq(1, 30)), storeEvent(w(1), nil, seq(1, 30)),
		storeEvent(w(0), seq(1, 30), seq(31, 60)), storeEvent(w(1), seq(1, 30), seq(131, 160)))
	wantScores(t, x, seq(1, 30), map[kv.Member]int{w(0): 30, w(1): 30})
	wantScores(t, x, seq(1, 60), map[kv.Member]int{w(0): 60, w(1): 30})
}

// localHashes is dynamo-compat §1.1: complete windows of bs tokens, each as
// LE u32, XXH3-64 with the given seed.
func localHashes(tokens []uint32, bs int, seed uint64) []uint64 {
	var out []uint64
	buf := make([]byte, 4*bs)
	for i := 0; i+bs <= len(tokens); i += bs {
		for j, tok := range tokens[i : i+bs] {
			binary.LittleEndian.PutUint32(buf[4*j:], tok)
		}
		out = append(out, xxh3.HashSeed(buf, seed))
	}
	return out
}

func tokens(from, to uint32) []uint32 {
	var t []uint32
	for v := from; v <= to; v++ {
		t = append(t, v)
	}
	return t
}

func TestLocalHashes_MatchSpecVectors(t *testing.T) {
	// V11: 0..31, bs 32; V16: LoRA "my-adapter" salt seed.
	if got := localHashes(tokens(0, 31), 32, 1337); len(got) != 1 || got[0] != 5756925433886871916 {
		t.Errorf("localHashes(0..31, 32, 1337) = %v, want [5756925433886871916]", got)
	}
	if got := 1337 + xxh3.HashSeed([]byte("my-adapter"), 0); got != 2360313164392603308 {
		t.Errorf("LoRA salt seed(my-adapter) = %d, want 2360313164392603308", got)
	}
}

func TestScenario_RouterHashedTokens(t *testing.T) {
	x := radix.New(radix.Config{})
	locals := localHashes(tokens(1, 96), 32, 1337)
	wantScores(t, x, locals, none())
	mustApply(t, x, storeEvent(w(0), nil, locals))
	wantScores(t, x, locals, map[kv.Member]int{w(0): 3})
}

func TestScenario_SaltedHashesMatchOnlyTheirWorker(t *testing.T) {
	salts := []struct {
		name string
		seed uint64
	}{
		{"base", 1337},
		{"lora my-adapter", 1337 + xxh3.HashSeed([]byte("my-adapter"), 0)},
		{"ns tenant-a", 1337 + xxh3.HashSeed([]byte("tenant-a"), 1)},
		{"ns tenant-b", 1337 + xxh3.HashSeed([]byte("tenant-b"), 1)},
	}
	x := radix.New(radix.Config{})
	for i, s := range salts {
		mustApply(t, x, storeEvent(w(uint64(i)), nil, localHashes(tokens(1, 96), 32, s.seed)))
	}
	for i, s := range salts {
		q := localHashes(tokens(1, 96), 32, s.seed)
		got := scores(x, q)
		if fmt.Sprint(got) != fmt.Sprint(map[kv.Member]int{w(uint64(i)): 3}) {
			t.Errorf("%s: Match = %v, want only %v with 3", s.name, got, w(uint64(i)))
		}
	}
}

func TestScenario_DumpReplayGivesIdenticalSnapshot(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)), storeEvent(w(1), nil, []uint64{1, 2, 4}))
	dump := x.Dump()
	if len(dump) != 6 {
		t.Errorf("Dump() = %d events, want 6 (one per node and member)", len(dump))
	}
	y := radix.New(radix.Config{})
	for i := range dump {
		if dump[i].EventID != uint64(i) || len(dump[i].Blocks) != 1 {
			t.Errorf("Dump()[%d] = %+v, want event id %d with one block", i, dump[i], i)
		}
		mustApply(t, y, &dump[i])
	}
	if diff := x.Snapshot().Diff(y.Snapshot()); diff != "" {
		t.Errorf("Snapshot after replay differs: %s", diff)
	}
	for _, q := range [][]uint64{seq(1, 3), {1, 2, 4}, {1}} {
		if a, b := fmt.Sprint(scores(x, q)), fmt.Sprint(scores(y, q)); a != b {
			t.Errorf("Match(%v) = %s, after replay %s", q, a, b)
		}
	}
}

// Regression shrunk-5 (dynamo-compat §3.5): the buggy CRTC scored 2.
func TestRegression_Shrunk5(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x,
		storeEvent(w(0), nil, seq(1, 3)),
		storeEvent(w(0), []uint64{1}, []uint64{4}),
		removeEvent(w(0), []uint64{1}, 0),
		storeEvent(w(0), nil, []uint64{1, 2}),
		removeEvent(w(0), seq(1, 3), 2, 1))
	wantScores(t, x, []uint64{1, 2}, map[kv.Member]int{w(0): 1})
}

// Regression six-event (dynamo-compat §3.5): the buggy tree scored 3; the
// model's reach_len is 2.
func TestRegression_SixEvent(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x,
		storeEvent(w(0), nil, []uint64{1, 30}),
		storeEvent(w(0), []uint64{1}, []uint64{2, 20, 21}),
		removeEvent(w(0), []uint64{1}, 0),
		storeEvent(w(0), nil, []uint64{1}),
		storeEvent(w(0), []uint64{1}, []uint64{2, 20}),
		removeEvent(w(0), []uint64{1, 2, 20, 21}, 3),
		removeEvent(w(0), []uint64{1, 2, 20}, 2))
	wantScores(t, x, []uint64{1, 2, 20}, map[kv.Member]int{w(0): 2})
}

func TestMatchDetailed_LastIsChainHashAtScoreMinusOne(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 5)), storeEvent(w(1), nil, seq(1, 2)))
	c := chainOf(seq(1, 5))
	got := x.MatchDetailed(nil, seq(1, 5))
	want := []radix.Detail{{Member: w(1), Blocks: 2, Last: c[1]}, {Member: w(0), Blocks: 5, Last: c[4]}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("MatchDetailed([1..5]) = %v, want %v", got, want)
	}
}

func TestTreeSizes_ListsKnownMembersInOrder(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(2), nil, seq(1, 4)), storeEvent(w(1), nil, seq(1, 2)),
		storeEvent(w(3), nil, seq(1, 1)), &kv.Event{Member: w(3), Kind: kv.Cleared})
	got := x.TreeSizes(nil)
	want := []kv.Overlap{{Member: w(1), Blocks: 2}, {Member: w(2), Blocks: 4}, {Member: w(3), Blocks: 0}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("TreeSizes() = %v, want %v", got, want)
	}
}
