package dynkv

import (
	"os"
	"slices"
	"testing"
	"time"
)

// Ports of upstream's gc_bounded.py, gc_persistence.py and gc_oversized.py
// (lib/kv-router/valkey-module/tests/dynkv), written anew: the clock moves
// where they sleep, and restarts replay goindex's log where they restart
// Valkey on its RDB or AOF.

func (x *eng) integers(vs ...any) []int64 {
	x.t.Helper()
	r := x.do(vs...)
	if r.kind != replyArray {
		x.t.Fatalf("%s = %s, want an integer array", vs[0], render(r))
	}
	out := make([]int64, len(r.array))
	for i, v := range r.array {
		out[i] = v.integer
	}
	return out
}

// gc is upstream's _gc and _gc_current: one DYNKV.GC call (watermark nil:
// CURRENT) whose counters stay within the budget.
func (x *eng) gc(key string, watermark *uint64, budget uint32) []int64 {
	x.t.Helper()
	mark := []byte("CURRENT")
	if watermark != nil {
		mark = u64(*watermark)
	}
	res := x.integers("DYNKV.GC", key, mark, u32(budget))
	if len(res) != 8 || res[0] > int64(budget) || res[1] > res[0] {
		x.t.Fatalf("GC(budget %d) = %v: counters beyond the budget", budget, res)
	}
	return res
}

func (x *eng) stats2(key string) [2]int64 {
	x.t.Helper()
	s := x.integers("DYNKV.STATS", key)
	return [2]int64{s[0], s[1]}
}

// owned sends APPLY_OWNED and returns the rendered reply.
func (x *eng) owned(key string, owner uint64, e Event) string {
	return render(x.do("DYNKV.APPLY_OWNED", key, u64(owner), AppendEvent(nil, e)))
}

// register sends a version 3 registration quoting token.
func (x *eng) register(key string, worker, owner, leaseMs, token uint64, ranks ...uint32) string {
	reg := Registration{Version: 3, OwnerNonce: owner, LeaseMs: leaseMs, ExpectedGeneration: token, Ranks: ranks}
	return render(x.do("DYNKV.REGISTER_WORKER_RANKS", key, u64(worker), AppendRegistration(nil, reg)))
}

// partialCleanup is upstream's _advance_to_partial_lease_cleanup: GC calls
// of budget 1 until a lease cleanup has begun and cleaned one owner.
func (x *eng) partialCleanup(key string) {
	x.t.Helper()
	begun := false
	for range 256 {
		res := x.gc(key, nil, 1)
		if res[6] != 0 {
			begun = true
		}
		if begun && res[2] != 0 {
			return
		}
	}
	x.t.Fatalf("lease cleanup did not reach an owner chunk: GC_STATS %v", x.integers("DYNKV.GC_STATS", key))
}

// TestModule_GCBounded is gc_bounded.py: registration tokens as a
// compare-and-swap across GC, direct-owner churn that prunes as it goes,
// many workers sharing one token, crashed owners drained by bounded GC,
// legacy registrations retained and counted, a one-unit budget bounding
// both visits and transitions, an inclusive watermark, a successor that an
// old watermark cannot touch, admission state reclaimed after release, a
// plateau under owner churn, and a restart from the log after
// BGREWRITEAOF.
func TestModule_GCBounded(t *testing.T) {
	x := newLoggedEng(t)
	const key = "bounded-gc-index"

	// Registration v3 is an owner/rank-set CAS that epoch GC must not let
	// an old token or rank generation resurrect.
	const casKey, casWorker, casOwner = "bounded-gc-registration-cas", 1190, 119_001
	staleRankGen := x.ticketOf("DYNKV.RANK_GENERATION", casKey, u64(casWorker), u32(0))
	initialTok := x.ticketOf("DYNKV.REGISTRATION_GENERATION", casKey, u64(casWorker))
	x.wantStr("+OK", x.register(casKey, casWorker, casOwner, 120_000, initialTok, 0), "initial registration")
	x.wantStr("+OK", x.register(casKey, casWorker, casOwner, 120_000, initialTok, 0), "its exact retry")
	updateTok := x.ticketOf("DYNKV.REGISTRATION_GENERATION", casKey, u64(casWorker))
	x.wantStr("+OK", x.register(casKey, casWorker, casOwner, 120_000, updateTok, 0, 1), "expanded registration")
	x.wantStr("+OK", x.register(casKey, casWorker, casOwner, 120_000, updateTok, 0, 1), "its exact retry")
	x.wantStr("-DYNKV_STALE_REGISTRATION_GENERATION", x.register(casKey, casWorker, casOwner, 120_000, initialTok, 0), "an old rank set rolls back")
	x.wantStr("+OK", x.owned(casKey, casOwner, ev(KindStore, casWorker, 0, 1, root, [2]uint64{11901, 119})), "owned store")
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", casKey, lease(casWorker, casOwner, 0))
	postEndRankGen := x.ticketOf("DYNKV.RANK_GENERATION", casKey, u64(casWorker), u32(0))
	x.drainGC(casKey, 64)
	x.wantStats2(casKey, [2]int64{0, 0})
	x.wantStr("-DYNKV_STALE_REGISTRATION_GENERATION", x.register(casKey, casWorker, casOwner, 120_000, updateTok, 0, 1), "a pre-GC token resurrects")
	replace := func(gen uint64) string {
		return render(x.do("DYNKV.REPLACE_RANK_IF_GENERATION", casKey, u64(casWorker), u32(0), u64(gen),
			snapshot(ev(KindStore, casWorker, 0, 1, root, [2]uint64{11901, 119}))))
	}
	x.wantStr("-DYNKV_STALE_GENERATION", replace(staleRankGen), "epoch GC makes recovery CAS ABA")
	x.wantStr("-DYNKV_STALE_GENERATION", replace(postEndRankGen), "a post-unregister recovery ticket after GC")
	const successor = 119_002
	x.wantStr("+OK", x.leased(casKey, casWorker, successor, 120_000, 0), "successor")
	x.wantStr("-DYNKV_STALE_REGISTRATION_GENERATION", x.register(casKey, casWorker, casOwner, 120_000, updateTok, 0, 1), "an old registration replaces the successor")

	// Another worker's high-rate tickets leave an absent worker's token
	// alone; direct STORE/REMOVE churn prunes at once.
	const pendingWorker = 1191
	pendingTok := x.ticketOf("DYNKV.REGISTRATION_GENERATION", casKey, u64(pendingWorker))
	for off := range uint64(64) {
		x.wantStr("+OK", x.owned(casKey, successor, ev(KindStore, casWorker, 0, 2*off+1, root, [2]uint64{11910 + off, 500 + off})), "churn store")
		x.wantStr("+OK", x.owned(casKey, successor, ev(KindRemove, casWorker, 0, 2*off+2, 0, [2]uint64{11910 + off, 0})), "churn remove")
		if n := x.integers("DYNKV.STATS", casKey)[0]; n != 0 {
			t.Fatalf("churn %d: %d nodes left, want 0", off, n)
		}
	}
	x.wantStr("+OK", x.register(casKey, pendingWorker, 119_003, 120_000, pendingTok, 0), "the absent worker's token after churn")

	// Compacting a multi-block chain swap-moves the last member into each
	// removed slot; every other owner must stay found.
	const mbKey, mbWorker, mbOwner = "bounded-gc-active-multiblock-compaction", 1196, 119_008
	x.wantStr("+OK", x.leased(mbKey, mbWorker, mbOwner, 120_000, 0), "multiblock registration")
	id := uint64(1)
	for _, count := range []uint64{2, 16} {
		var blocks [][2]uint64
		var locals []uint64
		for off := range count {
			blocks = append(blocks, [2]uint64{11960 + count*100 + off, 900 + off})
			locals = append(locals, 900+off)
		}
		x.wantStr("+OK", x.owned(mbKey, mbOwner, ev(KindStore, mbWorker, 0, id, root, blocks...)), "multiblock store")
		x.wantStr("+OK", x.owned(mbKey, mbOwner, ev(KindRemove, mbWorker, 0, id+1, 0, blocks...)), "multiblock remove")
		id += 2
		if n := x.integers("DYNKV.STATS", mbKey)[0]; n != 0 {
			t.Fatalf("%d-block chain: %d nodes left", count, n)
		}
		if g := x.integers("DYNKV.GC_STATS", mbKey); g[5] != 0 || g[6] != 0 {
			t.Fatalf("%d-block chain: GC_STATS %v, want no inactive owner or ownerless node", count, g)
		}
		wantMatch(t, x, mbKey, locals, map[Rank][2]uint64{})
	}

	// 128 workers share one absent-worker token; each registration takes a
	// token of its own.
	const scaleKey = "bounded-gc-registration-scale"
	var shared []uint64
	for w := uint64(1800); w < 1928; w++ {
		shared = append(shared, x.ticketOf("DYNKV.REGISTRATION_GENERATION", scaleKey, u64(w)))
	}
	if distinct := slices.Compact(slices.Clone(shared)); len(distinct) != 1 {
		t.Fatalf("absent workers' tokens %v, want one shared", shared)
	}
	installed := map[uint64]bool{}
	for i, w := range shared {
		worker := 1800 + uint64(i)
		x.wantStr("+OK", x.register(scaleKey, worker, 180_000+uint64(i), 120_000, w, 0), "scale registration")
		installed[x.ticketOf("DYNKV.REGISTRATION_GENERATION", scaleKey, u64(worker))] = true
	}
	if len(installed) != 128 {
		t.Fatalf("%d distinct tokens installed for 128 workers", len(installed))
	}
	for i := range uint64(128) {
		x.want("+OK", "DYNKV.UNREGISTER_WORKER", scaleKey, lease(1800+i, 180_000+i, 0))
	}
	x.drainGC(scaleKey, 1024)
	x.wantStats2(scaleKey, [2]int64{0, 0})

	// Expired crash owners are ended and compacted by bounded GC alone.
	const crashKey = "bounded-gc-crash-expiry"
	x.wantStr("+OK", x.leased(crashKey, 1192, 119_004, 60, 0), "crash registration")
	x.wantStr("+OK", x.owned(crashKey, 119_004, ev(KindStore, 1192, 0, 1, root, [2]uint64{11921, 600})), "crash store")
	x.now = x.now.Add(90 * time.Millisecond)
	x.drainGC(crashKey, 16)
	x.wantStats2(crashKey, [2]int64{0, 0})
	const churnKey = "bounded-gc-crash-churn"
	for off := range uint64(32) {
		x.wantStr("+OK", x.leased(churnKey, 1700+off, 170_000+off, 60, 0), "churn registration")
		x.wantStr("+OK", x.owned(churnKey, 170_000+off, ev(KindStore, 1700+off, 0, 1, root, [2]uint64{17000 + off, 700 + off})), "churn store")
	}
	x.now = x.now.Add(90 * time.Millisecond)
	x.drainGC(churnKey, 256)
	x.wantStats2(churnKey, [2]int64{0, 0})

	// Version-2 registrations and accepted legacy NOOPs are retained and
	// counted.
	const v2Key = "bounded-gc-legacy-v2"
	x.want("+OK", "DYNKV.REGISTER_WORKER_RANKS", v2Key, u64(1193), AppendRegistration(nil, Registration{Version: 2, OwnerNonce: 119_005, LeaseMs: 120_000, Ranks: []uint32{0}}))
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", v2Key, lease(1193, 119_005, 0))
	const noopKey = "bounded-gc-legacy-noop"
	x.wantStr("+OK", x.leased(noopKey, 1194, 119_006, 120_000, 0), "registration")
	x.want("+NOOP", "DYNKV.REGISTER_WORKER", noopKey, u64(1194), u32(0))
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", noopKey, lease(1194, 119_006, 0))
	for _, k := range []string{v2Key, noopKey} {
		for range 8 {
			x.gc(k, nil, 32)
		}
		if x.integers("DYNKV.STATS", k)[1] != 1 || !slices.Equal(x.integers("DYNKV.GC_STATS", k)[2:5], []int64{1, 0, 1}) {
			t.Fatalf("%s: STATS %v GC_STATS %v, want the legacy rank and epoch retained", k, x.integers("DYNKV.STATS", k), x.integers("DYNKV.GC_STATS", k))
		}
	}

	// Two owner-fenced ranks share a topology: GC removes one's records,
	// one unit of budget at a time, and keeps the shared nodes.
	const first, second, firstOwner, secondOwner = 1200, 1201, 120_001, 120_002
	for _, wo := range [][2]uint64{{first, firstOwner}, {second, secondOwner}} {
		x.wantStr("+OK", x.leased(key, wo[0], wo[1], 120_000, 0), "shared registration")
		x.wantStr("+OK", x.owned(key, wo[1], ev(KindStore, wo[0], 0, 1, root, [2]uint64{12001, 120}, [2]uint64{12002, 121})), "shared store")
	}
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", key, lease(first, firstOwner, 0))
	watermark := uint64(x.integers("DYNKV.GC_STATS", key)[0])
	for range 64 {
		if x.gc(key, &watermark, 1); x.integers("DYNKV.STATS", key)[1] == 1 {
			break
		}
	}
	x.wantStats2(key, [2]int64{2, 1})
	wantMatch(t, x, key, []uint64{120, 121}, map[Rank][2]uint64{{second, 0}: {2, 12002}})
	x.wantStr("-DYNKV_STALE_WORKER_OWNER", x.owned(key, firstOwner, ev(KindStore, first, 0, 2, root, [2]uint64{12003, 122})), "GC weakens the expired owner fence")

	// The watermark is inclusive: one below the tombstone's keeps it.
	const retained, retainedOwner = 1205, 120_007
	x.wantStr("+OK", x.leased(key, retained, retainedOwner, 120_000, 0), "retained registration")
	x.wantStr("+OK", x.owned(key, retainedOwner, ev(KindStore, retained, 0, 1, root, [2]uint64{12051, 128})), "retained store")
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", key, lease(retained, retainedOwner, 0))
	retainedGen := uint64(x.integers("DYNKV.GC_STATS", key)[0])
	x.want("-DYNKV_GC_FUTURE_WATERMARK", "DYNKV.GC", key, u64(retainedGen+1), u32(1))
	below := retainedGen - 1
	for range 12 {
		x.gc(key, &below, 32)
	}
	if n := x.integers("DYNKV.STATS", key)[1]; n != 2 {
		t.Fatalf("a watermark below the tombstone left %d ranks, want 2", n)
	}
	for range 32 {
		if x.gc(key, &retainedGen, 32); x.integers("DYNKV.STATS", key)[1] == 1 {
			break
		}
	}
	if n := x.integers("DYNKV.STATS", key)[1]; n != 1 {
		t.Fatalf("the watermark at the tombstone left %d ranks, want 1", n)
	}

	// A successor claimed after bounded unregister cleanup: an old
	// watermark reclaims neither its rank nor its ownership.
	const succWorker, predOwner, succOwner = 1202, 120_003, 120_004
	x.wantStr("+OK", x.leased(key, succWorker, predOwner, 120_000, 0), "predecessor registration")
	x.wantStr("+OK", x.owned(key, predOwner, ev(KindStore, succWorker, 0, 1, root, [2]uint64{12021, 123})), "predecessor store")
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", key, lease(succWorker, predOwner, 0))
	oldMark := uint64(x.integers("DYNKV.GC_STATS", key)[0])
	for i := 0; ; i++ {
		got := x.leased(key, succWorker, succOwner, 120_000, 0)
		if got == "+OK" {
			break
		}
		if got != "-DYNKV_WORKER_CLEANUP_PENDING" || i == 64 {
			t.Fatalf("successor registration = %s after %d GC calls", got, i)
		}
		x.gc(key, nil, 64)
	}
	for range 16 {
		x.gc(key, &oldMark, 16)
	}
	x.wantStr("+OK", x.owned(key, succOwner, ev(KindStore, succWorker, 0, 1, root, [2]uint64{12022, 124})), "successor store")
	x.wantStr("-DYNKV_STALE_WORKER_OWNER", x.owned(key, predOwner, ev(KindStore, succWorker, 0, 2, root, [2]uint64{12023, 125})), "predecessor after the successor")

	// Admission state goes only after its reservation is released and the
	// lease ends.
	const admWorker, admOwner = 1203, 120_005
	x.wantStr("+OK", x.leased(key, admWorker, admOwner, 120_000, 0), "admission registration")
	x.wantStr("+OK", x.owned(key, admOwner, ev(KindStore, admWorker, 0, 1, root, [2]uint64{12031, 126})), "admission store")
	_, g := x.reserve(key, reserveRequest("gc", 120_100, 120_101, 60_000, []uint64{126}, [3]uint64{admWorker, 0, 1}))
	if g == nil {
		t.Fatal("no reservation granted")
	}
	x.want("$0101", "DYNKV.RELEASE", key, identity("gc", 120_100, 120_101, g.expires))
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", key, lease(admWorker, admOwner, 0))

	// One legacy event taints the incarnation for good.
	const legacyWorker, legacyOwner = 1204, 120_006
	x.wantStr("+OK", x.leased(key, legacyWorker, legacyOwner, 120_000, 0), "legacy registration")
	x.apply(key, ev(KindStore, legacyWorker, 0, 1, root, [2]uint64{12041, 127}), "+OK")
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", key, lease(legacyWorker, legacyOwner, 0))

	x.want("+OK", "DYNKV.UNREGISTER_WORKER", key, lease(second, secondOwner, 0))
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", key, lease(succWorker, succOwner, 0))
	x.drainGC(key, 64)
	if st := x.integers("DYNKV.GC_STATS", key); st[1] != 0 || st[3] != 0 || st[2] != 1 || st[4] != 1 {
		t.Fatalf("GC_STATS %v, want only the legacy rank and epoch", st)
	}
	x.wantStats2(key, [2]int64{1, 1})

	// Clean owner churn reaches a plateau.
	var samples []int64
	for off := range uint64(64) {
		x.wantStr("+OK", x.leased(key, 1300+off, 130_000+off, 120_000, 0), "plateau registration")
		x.wantStr("+OK", x.owned(key, 130_000+off, ev(KindStore, 1300+off, 0, 1, root, [2]uint64{13000 + off, 200 + off})), "plateau store")
		x.want("+OK", "DYNKV.UNREGISTER_WORKER", key, lease(1300+off, 130_000+off, 0))
		x.drainGC(key, 64)
		x.wantStats2(key, [2]int64{1, 1})
		if off == 31 || off == 63 {
			samples = append(samples, x.do("MEMORY", "USAGE", key).integer)
		}
	}
	if samples[1] > samples[0]+1024 {
		t.Fatalf("MEMORY USAGE after 32 and 64 owner cycles: %v, want a plateau", samples)
	}

	// A restart after BGREWRITEAOF keeps provenance, fences and the
	// compacted topology; so does one for a key written after the rewrite.
	x.want("+Background append only file rewriting started", "BGREWRITEAOF")
	for x.srv.rw.running.Load() {
		time.Sleep(time.Millisecond)
	}
	const incKey = "bounded-gc-incremental-aof"
	x.wantStr("+OK", x.leased(incKey, 1500, 150_000, 120_000, 0), "incremental registration")
	x.wantStr("+OK", x.owned(incKey, 150_000, ev(KindStore, 1500, 0, 1, root, [2]uint64{15001, 401})), "incremental store")
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", incKey, lease(1500, 150_000, 0))
	x.drainGC(incKey, 2)
	x.wantStats2(incKey, [2]int64{0, 0})
	x.restart()
	x.wantStats2(key, [2]int64{1, 1})
	x.wantStats2(incKey, [2]int64{0, 0})
	if st := x.integers("DYNKV.GC_STATS", key)[2:5]; !slices.Equal(st, []int64{1, 0, 1}) {
		t.Fatalf("GC_STATS after restart %v, want the legacy rank and epoch", st)
	}
	wantMatch(t, x, key, []uint64{127}, map[Rank][2]uint64{})
	x.want("-DYNKV_GC_APPLY_INTERNAL_ONLY", "DYNKV.GC_APPLY", key, "invalid")
}

func (x *eng) wantStr(want, got, what string) {
	x.t.Helper()
	if got != want {
		x.t.Fatalf("%s = %s, want %s", what, got, want)
	}
}

func (x *eng) wantStats2(key string, want [2]int64) {
	x.t.Helper()
	if got := x.stats2(key); got != want {
		x.t.Fatalf("STATS %s = %v, want %v", key, got, want)
	}
}

// TestModule_GCPersistence is gc_persistence.py: a lease cleanup stopped
// half way fences every write of its worker, survives a restart (SAVE, or a
// log rewritten in the middle of it) and resumes there; and a reservation
// replayed after its owner's lease lapsed (too large to end inline) is not
// granted again.
func TestModule_GCPersistence(t *testing.T) {
	pending := func(x *eng, what, got string) {
		t.Helper()
		x.wantStr("-DYNKV_WORKER_CLEANUP_PENDING", got, what+" during a partial cleanup")
	}
	t.Run("save", func(t *testing.T) {
		x := newLoggedEng(t)
		const key, worker, owner = "chunked-gc-rdb", 2100, 210_001
		x.wantStr("+OK", x.leased(key, worker, owner, 60, 0, 1), "registration")
		for _, r := range []uint64{0, 1} {
			x.wantStr("+OK", x.owned(key, owner, ev(KindStore, worker, uint32(r), 1, root, [2]uint64{21000 + r*10, 800 + r*10}, [2]uint64{21001 + r*10, 801 + r*10})), "store")
		}
		x.now = x.now.Add(90 * time.Millisecond)
		x.partialCleanup(key)
		pending(x, "successor", x.leased(key, worker, 210_002, 10_000, 0, 1))
		pending(x, "APPLY", render(x.do("DYNKV.APPLY", key, AppendEvent(nil, ev(KindStore, worker, 0, 2, root, [2]uint64{21099, 899})))))
		pending(x, "RESET_WORKER", render(x.do("DYNKV.RESET_WORKER", key, u64(worker), u32(0))))
		pending(x, "REMOVE_WORKER", render(x.do("DYNKV.REMOVE_WORKER", key, u64(worker), u32(0))))
		pending(x, "REMOVE_WORKER_ALL", render(x.do("DYNKV.REMOVE_WORKER_ALL", key, u64(worker))))
		pending(x, "REGISTER_WORKER", render(x.do("DYNKV.REGISTER_WORKER", key, u64(worker), u32(0))))
		pending(x, "REGISTER_WORKER_RANKS", render(x.do("DYNKV.REGISTER_WORKER_RANKS", key, u64(worker), regRanks(0, 1))))
		gen := x.ticketOf("DYNKV.RANK_GENERATION", key, u64(worker), u32(0))
		pending(x, "REPLACE_RANK_IF_GENERATION", render(x.do("DYNKV.REPLACE_RANK_IF_GENERATION", key, u64(worker), u32(0), u64(gen),
			snapshot(ev(KindStore, worker, 0, 1, root, [2]uint64{21000, 800})))))
		x.want("-DYNKV_STALE_WORKER_OWNER", "DYNKV.RENEW_WORKER_LEASE", key, lease(worker, owner, 10_000))
		x.want("-DYNKV_STALE_WORKER_OWNER", "DYNKV.UNREGISTER_WORKER", key, lease(worker, owner, 0))
		x.want("+OK", "SAVE")
		x.restart()
		pending(x, "successor after the restart", x.leased(key, worker, 210_002, 10_000, 0, 1))
		x.drainGC(key, 1)
		x.wantStr("+OK", x.leased(key, worker, 210_002, 10_000, 0, 1), "successor after the cleanup")

		const staleKey, staleWorker, staleOwner = "chunked-gc-stale-reservation", 2101, 210_003
		x.wantStr("+OK", x.leased(staleKey, staleWorker, staleOwner, 60, 0), "registration")
		var blocks [][2]uint64
		for i := range uint64(300) {
			blocks = append(blocks, [2]uint64{21100 + i, 1000 + i})
		}
		x.wantStr("+OK", x.owned(staleKey, staleOwner, ev(KindStore, staleWorker, 0, 1, root, blocks...)), "300-block store")
		payload := reserveRequest("stale-owner", 210_100, 210_101, 60_000, nil, [3]uint64{staleWorker, 0, 1})
		if _, g := x.reserve(staleKey, payload); g == nil {
			t.Fatal("no reservation granted")
		}
		x.now = x.now.Add(90 * time.Millisecond)
		if raw, g := x.reserve(staleKey, payload); raw != noCapacity || g != nil {
			t.Fatalf("replayed reservation after the lease lapsed = %s, want no capacity", raw)
		}
		x.want(":0", "DYNKV.ADMISSION_STATS", staleKey)
	})
	t.Run("rewrite", func(t *testing.T) {
		x := newLoggedEng(t)
		const key, worker, owner = "chunked-gc-aof", 2102, 210_004
		x.wantStr("+OK", x.leased(key, worker, owner, 60, 0, 1), "registration")
		for _, r := range []uint64{0, 1} {
			var blocks [][2]uint64
			for off := range uint64(3) {
				blocks = append(blocks, [2]uint64{21200 + r*10 + off, 1200 + r*10 + off})
			}
			x.wantStr("+OK", x.owned(key, owner, ev(KindStore, worker, uint32(r), 1, root, blocks...)), "store")
		}
		x.now = x.now.Add(90 * time.Millisecond)
		x.partialCleanup(key)
		x.want("+Background append only file rewriting started", "BGREWRITEAOF")
		for x.srv.rw.running.Load() {
			time.Sleep(time.Millisecond)
		}
		for i := 0; x.gc(key, nil, 1)[2] == 0; i++ {
			if i == 128 {
				t.Fatal("no owner chunk committed after the rewrite")
			}
		}
		x.restart()
		pending(x, "successor after the restart", x.leased(key, worker, 210_005, 10_000, 0, 1))
		x.drainGC(key, 1)
		x.wantStr("+OK", x.leased(key, worker, 210_005, 10_000, 0, 1), "successor after the cleanup")
	})
}

// oversizedBlocksEnv runs TestModule_GCOversized with upstream's legal
// maximum store (1,048,576 blocks: about 360 MB and 5 s here) instead of 65,536.
const oversizedBlocksEnv = "GOINDEX_DYNKV_GC_OVERSIZED"

// TestModule_GCOversized is gc_oversized.py: after one huge owned store,
// UNREGISTER only fences and begins the cleanup, and the next GC call of
// budget 17 cleans exactly 17 owners while a successor still waits.
// Upstream's 1,048,576 blocks with GOINDEX_DYNKV_GC_OVERSIZED=1.
func TestModule_GCOversized(t *testing.T) {
	blocks := uint64(1 << 16)
	if os.Getenv(oversizedBlocksEnv) != "" {
		blocks = MaxEventBlocks
	}
	x := newEng(t)
	const key, worker, owner = "oversized-chunked-gc", 2200, 220_001
	x.wantStr("+OK", x.leased(key, worker, owner, 120_000, 0), "registration")
	e := Event{Kind: KindStore, Rank: Rank{worker, 0}, EventID: 1, Parent: RootParent, Blocks: make([]Block, blocks)}
	for i := range e.Blocks {
		e.Blocks[i] = Block{External: uint64(i) + 1, Local: uint64(i) + 1}
	}
	x.wantStr("+OK", x.owned(key, owner, e), "the huge store")
	x.want("+OK", "DYNKV.UNREGISTER_WORKER", key, lease(worker, owner, 0))
	if got := x.integers("DYNKV.GC_STATS", key)[5]; got != 0 {
		t.Fatalf("UNREGISTER reset %d owners itself, want none (it only begins the cleanup)", got)
	}
	x.want("*[:17 :17 :17 :0 :0 :0 :0 :3]", "DYNKV.GC", key, "CURRENT", u32(17))
	x.wantStr("-DYNKV_WORKER_CLEANUP_PENDING", x.leased(key, worker, 220_002, 10_000, 0), "successor during the cleanup")
}
