package dynkv

import (
	"reflect"
	"testing"
	"time"
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

func regRanks(ranks ...uint32) []byte {
	return AppendRegistration(nil, Registration{Version: 1, Ranks: ranks})
}

// TestModule_Registration is registration.py: batch validation before the
// key exists, one mutation per batch, compatibility with single-rank
// registration, fences that reject a whole batch and create nothing.
func TestModule_Registration(t *testing.T) {
	x := newEng(t)
	const k, w = "multi-rank-registration-index", 930
	for i, bad := range [][]byte{
		{}, append([]byte{2, 0, 0, 0, 1}, u32(0)...), {1, 0, 0, 0, 0}, append([]byte{1, 0, 0, 0, 2}, u32(0)...),
		append(regRanks(0), "trailing"...), {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1}, append([]byte{1}, u32(MaxRegisterRanks+1)...),
	} {
		x.want("-DYNKV_INVALID_REGISTRATION", "DYNKV.REGISTER_WORKER_RANKS", k, u64(w), bad)
		if x.e.Exists([]byte(k)) {
			t.Fatalf("malformed registration %d created the key", i)
		}
	}
	stats := func(want string) {
		t.Helper()
		x.want(want, "DYNKV.STATS", k)
	}
	x.want("+OK", "DYNKV.REGISTER_WORKER_RANKS", k, u64(w), regRanks(9, 1, 5))
	stats("*[:0 :3 :1]")
	x.want("+NOOP", "DYNKV.REGISTER_WORKER", k, u64(w), u32(1))
	x.want("+OK", "DYNKV.REGISTER_WORKER", k, u64(w), u32(7))
	stats("*[:0 :4 :2]")
	x.want("+NOOP", "DYNKV.REGISTER_WORKER_RANKS", k, u64(w), regRanks(9, 7, 1, 5))
	x.want("+OK", "DYNKV.REGISTER_WORKER_RANKS", k, u64(w), regRanks(5, 6, 7))
	stats("*[:0 :5 :3]")
	x.want("+OK", "DYNKV.REGISTER_WORKER", k, u64(w), u32(20))
	x.want("+OK", "DYNKV.REMOVE_WORKER", k, u64(w), u32(20))
	stats("*[:0 :6 :5]")
	x.want("-DYNKV_WORKER_RETIRED", "DYNKV.REGISTER_WORKER_RANKS", k, u64(w), regRanks(10, 5, 20))
	stats("*[:0 :6 :5]")
	x.want("+NOOP", "DYNKV.REGISTER_WORKER", k, u64(w), u32(5))
	x.want("+OK", "DYNKV.RESET_WORKER", k, u64(w), u32(20))
	x.want("+OK", "DYNKV.REGISTER_WORKER_RANKS", k, u64(w), regRanks(10, 5, 20))
	stats("*[:0 :7 :7]")
	for _, r := range []uint32{5, 10, 20} {
		x.want("+NOOP", "DYNKV.REGISTER_WORKER", k, u64(w), u32(r))
	}
	x.want("+OK", "DYNKV.REGISTER_WORKER", k, u64(931), u32(0))
	x.want("+OK", "DYNKV.REMOVE_WORKER_ALL", k, u64(931))
	stats("*[:0 :8 :9]")
	x.want("-DYNKV_WORKER_RETIRED", "DYNKV.REGISTER_WORKER_RANKS", k, u64(931), regRanks(1, 2))
	stats("*[:0 :8 :9]")
}

// leased registers worker's ranks for owner with the live registration
// token, as the frontend's workers do.
func (x *eng) leased(key string, worker, owner, leaseMs uint64, ranks ...uint32) string {
	tok := x.ticketOf("DYNKV.REGISTRATION_GENERATION", key, u64(worker))
	reg := Registration{Version: 3, OwnerNonce: owner, LeaseMs: leaseMs, ExpectedGeneration: tok, Ranks: ranks}
	return render(x.do("DYNKV.REGISTER_WORKER_RANKS", key, u64(worker), AppendRegistration(nil, reg)))
}

func lease(worker, owner, leaseMs uint64) []byte {
	return AppendLease(nil, LeasePayload{Worker: worker, OwnerNonce: owner, LeaseMs: leaseMs}, leaseMs != 0)
}

// TestModule_OwnerLeases is leases.py without authoritative admission:
// owner fences, exact rank-set reconciliation, legacy registration under an
// owner, rival owners, unregister into a cleanup that GC drains before a
// successor registers, and a crashed owner whose lapsed lease MATCH skips
// at once (the clock moves instead of the test sleeping).
func TestModule_OwnerLeases(t *testing.T) {
	x := newEng(t)
	const ik = "invalid-worker-owner-lease-index"
	for _, reg := range []Registration{
		{Version: 3, OwnerNonce: 0, LeaseMs: 1000, Ranks: []uint32{0}}, {Version: 3, OwnerNonce: 1, LeaseMs: 0, Ranks: []uint32{0}},
		{Version: 3, OwnerNonce: 1, LeaseMs: 1000, Ranks: []uint32{0, 0}}, {Version: 3, OwnerNonce: 1, LeaseMs: 1000},
	} {
		x.want("-DYNKV_INVALID_REGISTRATION", "DYNKV.REGISTER_WORKER_RANKS", ik, u64(939), AppendRegistration(nil, reg))
	}
	if x.e.Exists([]byte(ik)) {
		t.Errorf("invalid leased registrations created their key")
	}
	const k, w, owner, rival = "worker-owner-lease-index", 940, 10001, 10002
	if got := x.leased(k, w, owner, 5000, 0, 1); got != "+OK" {
		t.Fatalf("leased registration = %s", got)
	}
	x.want("*[:1 :0 :0]", "DYNKV.LIFECYCLE_STATS", k)
	owned := func(want string, nonce uint64, e Event) {
		t.Helper()
		x.want(want, "DYNKV.APPLY_OWNED", k, u64(nonce), AppendEvent(nil, e))
	}
	owned("-DYNKV_UNREGISTERED_WORKER_RANK", owner, ev(KindStore, w, 2, 1, root, [2]uint64{9400, 40}))
	owned("+OK", owner, ev(KindStore, w, 0, 1, root, [2]uint64{9401, 41}))
	owned("+OK", owner, ev(KindStore, w, 1, 1, root, [2]uint64{9401, 41}))
	wantMatch(t, x, k, []uint64{41}, map[Rank][2]uint64{{w, 0}: {1, 9401}, {w, 1}: {1, 9401}})
	if got := x.leased(k, w, owner, 5000, 0); got != "+OK" {
		t.Fatalf("reconcile to [0] = %s", got)
	}
	wantMatch(t, x, k, []uint64{41}, map[Rank][2]uint64{{w, 0}: {1, 9401}})
	x.want("*[:1 :1 :0]", "DYNKV.LIFECYCLE_STATS", k)
	owned("-DYNKV_UNREGISTERED_WORKER_RANK", owner, ev(KindStore, w, 1, 2, root, [2]uint64{9402, 42}))
	if got := x.leased(k, w, owner, 5000, 0, 1); got != "+OK" {
		t.Fatalf("re-add rank 1 = %s", got)
	}
	owned("+OK", owner, ev(KindStore, w, 1, 1, root, [2]uint64{9401, 41}))
	x.want("*[:1 :0 :0]", "DYNKV.LIFECYCLE_STATS", k)
	x.want("+NOOP", "DYNKV.REGISTER_WORKER", k, u64(w), u32(0))
	x.want("-DYNKV_WORKER_OWNED", "DYNKV.REGISTER_WORKER", k, u64(w), u32(2))
	if got := x.leased(k, w, rival, 5000, 0, 1); got != "-DYNKV_WORKER_OWNED" {
		t.Errorf("rival registration = %s, want -DYNKV_WORKER_OWNED", got)
	}
	x.want("-DYNKV_STALE_WORKER_OWNER", "DYNKV.RENEW_WORKER_LEASE", k, lease(w, rival, 5000))
	x.want("-DYNKV_STALE_WORKER_OWNER", "DYNKV.UNREGISTER_WORKER", k, lease(w, rival, 0))
	owned("-DYNKV_STALE_WORKER_OWNER", rival, ev(KindStore, w, 0, 2, root, [2]uint64{9402, 42}))
	x.want("+OK", "DYNKV.RENEW_WORKER_LEASE", k, lease(w, owner, 5000))
	owned("+OK", owner, ev(KindClear, w, 0, 100, 0))
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", k, lease(w, owner, 0))
	wantMatch(t, x, k, []uint64{41}, map[Rank][2]uint64{})
	x.want("*[:0 :0 :1]", "DYNKV.LIFECYCLE_STATS", k)
	const successor = 10003
	if got := x.leased(k, w, successor, 10000, 0, 1); got != "-DYNKV_WORKER_CLEANUP_PENDING" {
		t.Fatalf("successor before GC = %s, want -DYNKV_WORKER_CLEANUP_PENDING", got)
	}
	// The module's cleanup, chunk by chunk from the end of the epoch's
	// ranks [0, 1]. The owned CLEAR's compaction deleted rank 1's inactive
	// owner but kept rank 0's: the legacy REGISTER_WORKER above tainted
	// rank 0 and the epoch. Call 1 (budget 2): rank 1 has no owner left, so
	// it becomes a tombstone; the second unit visits rank 0. Call 2: rank
	// 0's owner is reset (tainted: kept, inactive), then the cursor visits
	// both ranks and the node and comes back to the epoch. Call 3: rank 0
	// becomes a tombstone. Call 4: the lease is released. Nothing is
	// reclaimed: the epoch is tainted.
	for _, want := range []string{"*[:2 :1 :0 :0 :0 :1 :0 :3]", "*[:4 :1 :1 :0 :0 :0 :0 :3]",
		"*[:4 :1 :0 :0 :0 :1 :0 :3]", "*[:4 :1 :0 :0 :0 :0 :1 :3]"} {
		if got := x.leased(k, w, successor, 10000, 0, 1); got != "-DYNKV_WORKER_CLEANUP_PENDING" {
			t.Fatalf("successor during the cleanup = %s, want -DYNKV_WORKER_CLEANUP_PENDING", got)
		}
		budget := uint32(64)
		if want == "*[:2 :1 :0 :0 :0 :1 :0 :3]" {
			budget = 2
		}
		x.want(want, "DYNKV.GC", k, "CURRENT", u32(budget))
	}
	x.want("*[:4 :0 :0 :0 :0 :0 :0 :3]", "DYNKV.GC", k, "CURRENT", u32(64)) // back at the epoch: nothing to do
	if got := x.leased(k, w, successor, 10000, 0, 1); got != "+OK" {
		t.Fatalf("successor after GC = %s", got)
	}
	x.want("*[:1 :0 :0]", "DYNKV.LIFECYCLE_STATS", k)
	owned("+OK", successor, ev(KindStore, w, 0, 1, root, [2]uint64{9401, 41}))
	owned("+OK", successor, ev(KindClear, w, 0, 2, 0))
	wantMatch(t, x, k, []uint64{41}, map[Rank][2]uint64{})
	owned("-DYNKV_STALE_WORKER_OWNER", owner, ev(KindStore, w, 0, 2, root, [2]uint64{9402, 42}))

	const cw, co = 941, 20001
	if got := x.leased(k, cw, co, 80, 3); got != "+OK" {
		t.Fatalf("short lease = %s", got)
	}
	owned("+OK", co, ev(KindStore, cw, 3, 50, root, [2]uint64{9411, 51}))
	wantMatch(t, x, k, []uint64{51}, map[Rank][2]uint64{{cw, 3}: {1, 9411}})
	x.now = x.now.Add(120 * time.Millisecond)
	wantMatch(t, x, k, []uint64{51}, map[Rank][2]uint64{})
	x.want("*[:1 :0 :1]", "DYNKV.LIFECYCLE_STATS", k)
	x.want("-DYNKV_STALE_WORKER_OWNER", "DYNKV.RENEW_WORKER_LEASE", k, lease(cw, co, 5000))
	owned("-DYNKV_STALE_WORKER_OWNER", co, ev(KindStore, cw, 3, 51, root, [2]uint64{9412, 52}))
	tok := x.ticketOf("DYNKV.REGISTRATION_GENERATION", k, u64(cw))
	if got := x.leased(k, cw, 20002, 10000, 3); got != "-DYNKV_WORKER_CLEANUP_PENDING" {
		t.Fatalf("crash successor before GC = %s", got)
	}
	// The cursor was left at worker 940's epoch: 941's is next, and its
	// expired lease begins its cleanup, which ends the call. Then each call
	// walks both epochs, the three ranks and the nodes: the owner (owner-
	// fenced: removed), the rank and the leaf it left, the release.
	for _, want := range []string{"*[:1 :1 :0 :0 :0 :0 :1 :3]", "*[:7 :1 :1 :0 :0 :0 :0 :3]",
		"*[:7 :2 :0 :0 :1 :1 :0 :3]", "*[:6 :1 :0 :0 :0 :0 :1 :3]"} {
		x.want(want, "DYNKV.GC", k, "CURRENT", u32(64))
	}
	if after := x.ticketOf("DYNKV.REGISTRATION_GENERATION", k, u64(cw)); after != tok {
		t.Errorf("registration token after the lapsed lease's cleanup = %d, want %d (announced while it lapsed)", after, tok)
	}
	if got := x.leased(k, cw, 20002, 10000, 3); got != "+OK" {
		t.Fatalf("crash successor after GC = %s", got)
	}
	owned("+OK", 20002, ev(KindStore, cw, 3, 1, root, [2]uint64{9411, 51}))
	wantMatch(t, x, k, []uint64{51}, map[Rank][2]uint64{{cw, 3}: {1, 9411}})
}

// TestStore_ManyOwnersKeepTheirPositions: nodes with more owners than
// ownerScanMax find owners through each rank's position map; a GC that
// removes half of them (swap-remove) must leave every position right and
// MATCH the other half at full depth.
func TestStore_ManyOwnersKeepTheirPositions(t *testing.T) {
	x := newEng(t)
	const k, leasedWorker, legacyWorker, owner = "many-owners", 1, 2, 77
	ranks := make([]uint32, 40)
	for i := range ranks {
		ranks[i] = uint32(i)
	}
	if got := x.leased(k, leasedWorker, owner, 60_000, ranks...); got != "+OK" {
		t.Fatalf("leased registration = %s", got)
	}
	chain := [][2]uint64{{101, 1}, {102, 2}, {103, 3}}
	for _, r := range ranks {
		x.want("+OK", "DYNKV.APPLY_OWNED", k, u64(owner), AppendEvent(nil, ev(KindStore, leasedWorker, r, 1, root, chain...)))
		x.apply(k, ev(KindStore, legacyWorker, r, 1, root, chain...), "+OK")
	}
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", k, lease(leasedWorker, owner, 0))
	x.drainGC(k, 16)
	s := x.e.lookup([]byte(k))
	for r, st := range s.ranks {
		for n, p := range st.nodes {
			if m := st.members[p]; m.n != n || m.owner >= len(n.owners) || n.owners[m.owner].rank != st {
				t.Fatalf("rank %d/%d's member %d (node %#x) is wrong", r.Worker, r.DPRank, p, n.hash)
			}
		}
		if r.Worker == leasedWorker && len(st.nodes) != 0 {
			t.Errorf("rank %d/%d still owns %d nodes after GC", r.Worker, r.DPRank, len(st.nodes))
		}
	}
	got := x.match(k, 1, 2, 3)
	if len(got) != len(ranks) {
		t.Fatalf("MATCH after GC = %d ranks, want %d", len(got), len(ranks))
	}
	for r, m := range got {
		if r.Worker != legacyWorker || m != [2]uint64{3, 103} {
			t.Errorf("MATCH rank %d/%d = %v, want worker %d at depth 3", r.Worker, r.DPRank, m, legacyWorker)
		}
	}
}

// TestModule_Limits is limits.py's MATCH and SELECT part at max and max + 1,
// with a SELECT of a bad version byte (accepted before, the field report
// found).
func TestModule_Limits(t *testing.T) {
	x := newEng(t)
	const k = "wire-limit-index"
	x.want("$0100000000", "DYNKV.MATCH", k, AppendMatchRequest(nil, make([]uint64, MaxMatchHashes)))
	x.want("-DYNKV_INVALID_MATCH", "DYNKV.MATCH", k, append([]byte{1}, u32(MaxMatchHashes+1)...))
	x.want("-DYNKV_INVALID_MATCH", "DYNKV.MATCH", k, AppendMatchRequest(nil, make([]uint64, MaxMatchHashes+1)))
	cands := make([]SelectCandidate, MaxSelectCandidates)
	for i := range cands {
		cands[i] = SelectCandidate{Rank{uint64(i + 1), 0}, 1}
	}
	x.want(render(bulk(AppendSelectReply(nil, &MatchEntry{Rank{1, 0}, 0, RootParent}))), "DYNKV.SELECT", k, AppendSelectRequest(nil, nil, cands))
	x.want("-DYNKV_INVALID_SELECT", "DYNKV.SELECT", k, append([]byte{1, 0, 0, 0, 0}, u32(MaxSelectCandidates+1)...))
	bad := AppendSelectRequest(nil, []uint64{1}, cands[:1])
	bad[0] = 2
	x.want("-DYNKV_INVALID_SELECT", "DYNKV.SELECT", k, bad)
	x.want("-DYNKV_INVALID_SELECT", "DYNKV.SELECT", k, []byte{1, 0, 0, 0})
	if x.e.Exists([]byte(k)) {
		t.Errorf("reads created the key")
	}
}

// TestModule_GCReclaimsWhatAnOwnerLeft: after an owner-fenced worker
// unregisters, GC calls with a small budget drain its cleanup and then
// reclaim its tombstones, the nodes only it held and its epoch, so a
// worker-events deployment does not grow with worker churn; a registration
// token issued before the epoch went is stale afterwards.
func TestModule_GCReclaimsWhatAnOwnerLeft(t *testing.T) {
	x := newEng(t)
	const k, w, owner = "gc-reclaim", 5, 55
	if got := x.leased(k, w, owner, 60_000, 0, 1); got != "+OK" {
		t.Fatalf("leased registration = %s", got)
	}
	for _, r := range []uint32{0, 1} {
		x.want("+OK", "DYNKV.APPLY_OWNED", k, u64(owner), AppendEvent(nil, ev(KindStore, w, r, 1, root, [2]uint64{501, 1}, [2]uint64{502, 2}, [2]uint64{503, 3})))
	}
	x.apply(k, ev(KindStore, 6, 0, 1, root, [2]uint64{501, 1}), "+OK") // a legacy worker keeps the first block
	x.want("*[:3 :3 :4]", "DYNKV.STATS", k)
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", k, lease(w, owner, 0))
	stale := x.ticketOf("DYNKV.REGISTRATION_GENERATION", k, u64(w))
	// The module's walk with a budget of 3 (gc.go), call by call: rank 1's
	// three owners (from the end of the epoch's ranks [0, 1]); rank 1 made
	// a tombstone, then the cursor visits both ranks; rank 0's owners; rank
	// 0; the release; both tombstones deleted (phase 0 left at rank 5/1);
	// rank 6/0 and nodes 501 and 502 visited (502 still has a child);
	// leaf 503 and the empty epoch, which ends the call; leaf 502; then
	// nothing, the cursor going round from wherever the last call left it.
	for i, want := range []string{
		"*[:3 :3 :3 :0 :0 :0 :0 :3]", "*[:3 :1 :0 :0 :0 :1 :0 :3]", "*[:3 :3 :3 :0 :0 :0 :0 :3]",
		"*[:3 :1 :0 :0 :0 :1 :0 :3]", "*[:3 :1 :0 :0 :0 :0 :1 :3]", "*[:3 :2 :0 :0 :0 :2 :0 :0]",
		"*[:3 :0 :0 :0 :0 :0 :0 :2]", "*[:2 :2 :0 :0 :1 :0 :1 :3]", "*[:3 :1 :0 :0 :1 :0 :0 :2]",
		"*[:2 :0 :0 :0 :0 :0 :0 :0]", "*[:2 :0 :0 :0 :0 :0 :0 :2]",
	} {
		if got := render(x.do("DYNKV.GC", k, "CURRENT", u32(3))); got != want {
			t.Fatalf("GC call %d = %s, want %s", i+1, got, want)
		}
	}
	x.want("*[:1 :1 :13]", "DYNKV.STATS", k) // node 501 and rank 6/0 stay; 8 GC calls reclaimed
	x.want("*[:0 :0 :0]", "DYNKV.LIFECYCLE_STATS", k)
	wantMatch(t, x, k, []uint64{1, 2, 3}, map[Rank][2]uint64{{6, 0}: {1, 501}})
	reg := Registration{Version: 3, OwnerNonce: 56, LeaseMs: 60_000, ExpectedGeneration: stale - 1, Ranks: []uint32{0}}
	x.want("-DYNKV_STALE_REGISTRATION_GENERATION", "DYNKV.REGISTER_WORKER_RANKS", k, u64(w), AppendRegistration(nil, reg))
	if got := x.leased(k, w, 56, 60_000, 0); got != "+OK" {
		t.Errorf("registration with the live token after reclamation = %s", got)
	}
}
