package dynkv

import (
	"reflect"
	"testing"
)

// The scenarios of the module's own test suites (upstream
// lib/kv-router/valkey-module/tests/dynkv: core_suite, fences,
// registration, limits, leases, fuzz), written anew against the Engine:
// every reply is the module's, byte for byte. tests/dynkv runs the same
// scenarios over the wire with Debian's python3-redis.

const root = RootParent

func wantMatch(t *testing.T, x *eng, key string, locals []uint64, want map[Rank][2]uint64) {
	t.Helper()
	if got := x.match(key, locals...); !reflect.DeepEqual(got, want) {
		t.Errorf("MATCH %s %v = %v, want %v", key, locals, got, want)
	}
}

// TestModule_CoreSuite is core_suite.py: malformed events, shared blocks,
// SELECT's ordering, missing parents, worker-wide clears with the duplicate
// barrier, retirement until reset, then the generation and worker-wide
// fences.
func TestModule_CoreSuite(t *testing.T) {
	x := newEng(t)
	x.want("-DYNKV_RESTORE_LOADING_ONLY", "DYNKV.RESTORE", "router-index", "not-an-aof-snapshot")
	full := AppendEvent(nil, ev(KindStore, 9, 0, 1, root, [2]uint64{201, 21}, [2]uint64{202, 22}))
	x.want("-DYNKV_INVALID_EVENT", "DYNKV.APPLY", "invalid-event-index", full[:len(full)-1])
	wantMatch(t, x, "invalid-event-index", []uint64{21}, map[Rank][2]uint64{})
	for _, bad := range [][]byte{
		append(AppendEvent(nil, ev(KindClear, 9, 0, 1, 0)), "trailing"...),
		append(AppendEvent(nil, ev(KindRemove, 9, 0, 1, 0, [2]uint64{201, 0})), "trailing"...),
		AppendEvent(nil, Event{Kind: 99, Rank: Rank{9, 0}, EventID: 1}),
	} {
		x.want("-DYNKV_INVALID_EVENT", "DYNKV.APPLY", "invalid-event-index", bad)
	}
	if x.e.Exists([]byte("invalid-event-index")) {
		t.Errorf("a rejected malformed event created its key")
	}
	rootBlocks := [][2]uint64{{101, 11}, {102, 12}}
	const k = "router-index"
	x.apply(k, ev(KindStore, 1, 0, 1, root, rootBlocks...), "+OK")
	x.apply(k, ev(KindStore, 2, 0, 1, root, rootBlocks...), "+OK")
	x.apply(k, ev(KindStore, 1, 1, 100, root, rootBlocks...), "+OK")
	x.apply(k, ev(KindStore, 1, 0, 1, root, rootBlocks...), "+NOOP")
	q := []uint64{11, 12}
	wantMatch(t, x, k, q, map[Rank][2]uint64{{1, 0}: {2, 102}, {1, 1}: {2, 102}, {2, 0}: {2, 102}})
	sel := func(cands ...SelectCandidate) string {
		return render(x.do("DYNKV.SELECT", k, AppendSelectRequest(nil, q, cands)))
	}
	if got, want := sel(SelectCandidate{Rank{1, 0}, 100}, SelectCandidate{Rank{1, 1}, 10}, SelectCandidate{Rank{2, 0}, 0}),
		render(bulk(AppendSelectReply(nil, &MatchEntry{Rank{2, 0}, 2, 102}))); got != want {
		t.Errorf("SELECT lowest load among equal prefixes = %s, want %s", got, want)
	}
	if got, want := sel(SelectCandidate{Rank{1, 1}, 10}, SelectCandidate{Rank{3, 0}, 0}),
		render(bulk(AppendSelectReply(nil, &MatchEntry{Rank{1, 1}, 2, 102}))); got != want {
		t.Errorf("SELECT longest prefix first = %s, want %s", got, want)
	}
	x.apply(k, ev(KindStore, 3, 0, 1, 101, [2]uint64{103, 13}), "-DYNKV_MISSING_PARENT")
	x.apply(k, ev(KindClear, 1, 0, 2, 0), "+OK")
	wantMatch(t, x, k, q, map[Rank][2]uint64{{2, 0}: {2, 102}})
	// A duplicate clear must not wipe a sibling rank recovered since.
	x.want("+OK", "DYNKV.RESET_WORKER", k, u64(1), u32(1))
	x.apply(k, ev(KindStore, 1, 1, 1, root, rootBlocks...), "+OK")
	wantMatch(t, x, k, q, map[Rank][2]uint64{{1, 1}: {2, 102}, {2, 0}: {2, 102}})
	x.apply(k, ev(KindClear, 1, 0, 2, 0), "+NOOP")
	wantMatch(t, x, k, q, map[Rank][2]uint64{{1, 1}: {2, 102}, {2, 0}: {2, 102}})
	x.apply(k, ev(KindClear, 1, 0, 3, 0), "+OK")
	wantMatch(t, x, k, q, map[Rank][2]uint64{{2, 0}: {2, 102}})
	x.apply(k, ev(KindRemove, 2, 0, 2, 0, [2]uint64{102, 0}), "+OK")
	wantMatch(t, x, k, q, map[Rank][2]uint64{{2, 0}: {1, 101}})
	// A retired rank ignores delayed events until a reset.
	x.want("+OK", "DYNKV.REMOVE_WORKER", k, u64(2), u32(0))
	wantMatch(t, x, k, q, map[Rank][2]uint64{})
	x.apply(k, ev(KindStore, 2, 0, 1, root, rootBlocks...), "+OK")
	wantMatch(t, x, k, q, map[Rank][2]uint64{})
	x.want("+OK", "DYNKV.RESET_WORKER", k, u64(2), u32(0))
	x.apply(k, ev(KindStore, 2, 0, 1, root, rootBlocks...), "+OK")
	wantMatch(t, x, k, q, map[Rank][2]uint64{{2, 0}: {2, 102}})
	exerciseGenerationFence(t, x)
	exerciseWorkerWideFences(t, x)
}

// exerciseGenerationFence is fences.py's generation fence: a dump captured
// before a live APPLY cannot erase it; a fresh dump replaces the rank and
// is itself a new ticket; an invalid dump changes neither rank nor ticket.
func exerciseGenerationFence(t *testing.T, x *eng) {
	const k = "generation-fence-index"
	rootEv := ev(KindStore, 77, 3, 1, root, [2]uint64{701, 71})
	child := ev(KindStore, 77, 3, 2, 701, [2]uint64{702, 72})
	gen := func() uint64 { return x.ticketOf("DYNKV.RANK_GENERATION", k, u64(77), u32(3)) }
	x.apply(k, rootEv, "+OK")
	if g := gen(); g != 1 {
		t.Errorf("ticket after the first store = %d, want 1", g)
	}
	x.apply(k, child, "+OK")
	if g := gen(); g != 2 {
		t.Errorf("ticket after the child store = %d, want 2", g)
	}
	x.want("-DYNKV_STALE_GENERATION", "DYNKV.REPLACE_RANK_IF_GENERATION", k, u64(77), u32(3), u64(1), snapshot(rootEv))
	q := []uint64{71, 72}
	wantMatch(t, x, k, q, map[Rank][2]uint64{{77, 3}: {2, 702}})
	x.want(render(ticket(3)), "DYNKV.REPLACE_RANK_IF_GENERATION", k, u64(77), u32(3), u64(2), snapshot(rootEv))
	wantMatch(t, x, k, q, map[Rank][2]uint64{{77, 3}: {1, 701}})
	for _, bad := range []Event{ev(KindStore, 77, 4, 3, root, [2]uint64{703, 73}), ev(KindClear, 77, 3, 3, 0)} {
		x.want("-DYNKV_INVALID_REPLACE", "DYNKV.REPLACE_RANK_IF_GENERATION", k, u64(77), u32(3), u64(3), snapshot(bad))
		if g := gen(); g != 3 {
			t.Errorf("ticket after an invalid dump = %d, want 3", g)
		}
		wantMatch(t, x, k, q, map[Rank][2]uint64{{77, 3}: {1, 701}})
	}
}

// exerciseWorkerWideFences is fences.py's worker-wide part: a CLEAR and a
// remove of blocks never stored also fence dumps (even for a rank the index
// has not seen); the clear barrier survives a replacement; an empty remove
// is a NOOP that takes no ticket.
func exerciseWorkerWideFences(t *testing.T, x *eng) {
	const w = 88
	rankGen := func(k string, r uint32) uint64 { return x.ticketOf("DYNKV.RANK_GENERATION", k, u64(w), u32(r)) }
	if g := rankGen("clear-fence-index", 1); g != 0 {
		t.Errorf("ticket on an absent key = %d, want 0", g)
	}
	x.apply("clear-fence-index", ev(KindClear, w, 0, 0, 0), "+OK")
	if g := rankGen("clear-fence-index", 1); g != 1 {
		t.Errorf("unseen sibling's ticket after a worker-wide clear = %d, want 1", g)
	}
	x.want("-DYNKV_STALE_GENERATION", "DYNKV.REPLACE_RANK_IF_GENERATION", "clear-fence-index", u64(w), u32(1), u64(0),
		snapshot(ev(KindStore, w, 1, 1, root, [2]uint64{881, 81})))

	const dup = "duplicate-clear-fence-index"
	dupRoot := ev(KindStore, w, 0, 1, root, [2]uint64{882, 82})
	clearEv := ev(KindClear, w, 0, 2, 0)
	x.apply(dup, dupRoot, "+OK")
	x.apply(dup, clearEv, "+OK")
	x.want(render(ticket(3)), "DYNKV.REPLACE_RANK_IF_GENERATION", dup, u64(w), u32(0), u64(2), snapshot(dupRoot))
	x.apply(dup, clearEv, "+NOOP")
	wantMatch(t, x, dup, []uint64{82}, map[Rank][2]uint64{{w, 0}: {1, 882}})

	const rm = "remove-fence-index"
	if g := rankGen(rm, 2); g != 0 {
		t.Errorf("ticket on an absent key = %d, want 0", g)
	}
	x.apply(rm, ev(KindRemove, w, 2, 1, 0, [2]uint64{883, 0}), "+OK")
	if g := rankGen(rm, 2); g != 1 {
		t.Errorf("ticket after a remove of an unseen block = %d, want 1", g)
	}
	x.want("-DYNKV_STALE_GENERATION", "DYNKV.REPLACE_RANK_IF_GENERATION", rm, u64(w), u32(2), u64(0),
		snapshot(ev(KindStore, w, 2, 1, root, [2]uint64{883, 83})))

	x.apply("zero-remove-fence-index", ev(KindRemove, w, 3, 0, 0), "+NOOP")
	if g := rankGen("zero-remove-fence-index", 3); g != 0 {
		t.Errorf("ticket after an empty remove = %d, want 0", g)
	}
}
