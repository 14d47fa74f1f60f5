package dynkv

import (
	"reflect"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/kv"
)

// chainStore builds a store event of rank r whose blocks carry the local
// values locals (continuing below the chain of prefix) with external hashes
// equal to the router chain, the convention of dynamo-compat §3.5.
func chainStore(r Rank, eventID uint64, prefix, locals []uint64) Event {
	full := kv.AppendChain(nil, false, 0, append(append([]uint64{}, prefix...), locals...))
	ev := Event{Kind: KindStore, Rank: r, EventID: eventID, Parent: RootParent}
	if len(prefix) > 0 {
		ev.Parent = full[len(prefix)-1]
	}
	for i, l := range locals {
		ev.Blocks = append(ev.Blocks, Block{External: full[len(prefix)+i], Local: l})
	}
	return ev
}

func chainHash(locals ...uint64) uint64 {
	c := kv.AppendChain(nil, false, 0, locals)
	return c[len(c)-1]
}

func matched(s *Store, r Rank, locals ...uint64) uint32 {
	for _, e := range s.Match(locals) {
		if e.Rank == r {
			return e.Matched
		}
	}
	return 0
}

func mustApply(t *testing.T, s *Store, ev Event, want Changed) {
	t.Helper()
	got, err := s.Apply(ev)
	if err != nil || got != want {
		t.Fatalf("Apply(%+v) = %v, %v; want %v, nil", ev, got, err, want)
	}
}

var r10, r11, r20 = Rank{1, 0}, Rank{1, 1}, Rank{2, 0}

// testBackings are the backings every semantic test runs with. The CKF
// filters are sized for 1024 blocks a rank: the cases hold a few blocks, so
// the slot occupancy α is below 1% and a fingerprint collision (≈ 8α/65535
// per position, ckf spec §7) is out of reach.
func testBackings() []Backing {
	return []Backing{{Index: IndexExact}, {Index: IndexCKF, CKFExpectedBlocks: 1024}}
}

// activeStates counts the (node, rank) states with the active flag, which
// in ckf mode are exactly the CKF's tracked blocks.
func activeStates(s *Store) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, nd := range s.byHash {
		for _, o := range nd.owners {
			if o.active {
				n++
			}
		}
	}
	return n
}

// eachBacking runs f once per backing: the module's semantics, and on
// these small cases the answers, must not depend on it.
func eachBacking(t *testing.T, f func(t *testing.T, newStore func() *Store)) {
	for _, b := range testBackings() {
		t.Run("index="+string(b.Index), func(t *testing.T) {
			var made []*Store
			f(t, func() *Store {
				s, err := NewStoreWith(b)
				if err != nil {
					t.Fatalf("NewStoreWith(%+v): %v", b, err)
				}
				made = append(made, s)
				return s
			})
			for _, s := range made {
				if d := s.Detail(); d.Index == IndexCKF && (d.CKFMirrorErrors != 0 || d.CKF.CapacityOmissions != 0 || d.CKF.TrackedBlocks != uint64(activeStates(s))) {
					t.Errorf("%s store: mirror errors %d, capacity omissions %d, CKF tracks %d blocks; want 0, 0, the %d active states",
						b.Index, d.CKFMirrorErrors, d.CKF.CapacityOmissions, d.CKF.TrackedBlocks, activeStates(s))
				}
			}
		})
	}
}

func TestStore_MidChainRemoveThenRestoreRevivesDescendants(t *testing.T) {
	// dynamo-compat §3.5: the module scores 5 here where the radix tree scores 3.
	eachBacking(t, func(t *testing.T, newStore func() *Store) {
		s := newStore()
		mustApply(t, s, chainStore(r10, 1, nil, []uint64{1, 2, 3, 4, 5}), true)
		mustApply(t, s, Event{Kind: KindRemove, Rank: r10, EventID: 2, Hashes: []uint64{chainHash(1, 2, 3)}}, true)
		if got := matched(s, r10, 1, 2, 3, 4, 5); got != 2 {
			t.Errorf("after removing block 3: Match([1..5]) = %d, want 2", got)
		}
		mustApply(t, s, chainStore(r10, 3, []uint64{1, 2}, []uint64{3}), true)
		if got := matched(s, r10, 1, 2, 3, 4, 5); got != 5 {
			t.Errorf("after re-storing block 3: Match([1..5]) = %d, want 5", got)
		}
		e := s.Match([]uint64{1, 2, 3, 4, 5})[0]
		if e.Last != chainHash(1, 2, 3, 4, 5) {
			t.Errorf("Match last hash = %#x, want chain hash of [1..5] %#x", e.Last, chainHash(1, 2, 3, 4, 5))
		}
	})
}

func TestStore_ConflictingBlocksFailWhole(t *testing.T) {
	eachBacking(t, func(t *testing.T, newStore func() *Store) {
		s := newStore()
		mustApply(t, s, Event{Kind: KindStore, Rank: r10, EventID: 1, Parent: RootParent, Blocks: []Block{{101, 11}, {102, 12}}}, true)
		before := snapshotStats(s)
		conflicts := []Event{
			// node 101 exists with tokens hash 11
			{Kind: KindStore, Rank: r20, EventID: 1, Parent: RootParent, Blocks: []Block{{103, 13}, {101, 99}}},
			// edge (root, 11) already leads to 101
			{Kind: KindStore, Rank: r20, EventID: 1, Parent: RootParent, Blocks: []Block{{555, 11}}},
			// 102 exists under 101, not under root
			{Kind: KindStore, Rank: r20, EventID: 1, Parent: RootParent, Blocks: []Block{{102, 12}}},
			// a hash repeated within one event
			{Kind: KindStore, Rank: r20, EventID: 1, Parent: RootParent, Blocks: []Block{{700, 1}, {700, 2}}},
		}
		for i, ev := range conflicts {
			if _, err := s.Apply(ev); CodeOf(err) != CodeConflictingBlock {
				t.Errorf("conflict %d: Apply err = %v, want %s", i, err, CodeConflictingBlock)
			}
		}
		if after := snapshotStats(s); after != before {
			t.Errorf("failed stores changed the index: stats %v → %v", before, after)
		}
		if got := matched(s, r20, 13); got != 0 {
			t.Errorf("rank 2/0 matched %d blocks from a rejected event", got)
		}
	})
}

func snapshotStats(s *Store) [3]uint64 {
	n, st, m := s.Stats()
	return [3]uint64{n, st, m}
}

func TestStore_ParentMustBeActiveForTheSameRank(t *testing.T) {
	eachBacking(t, func(t *testing.T, newStore func() *Store) {
		s := newStore()
		mustApply(t, s, chainStore(r10, 1, nil, []uint64{1, 2}), true)
		if _, err := s.Apply(chainStore(r20, 1, []uint64{1, 2}, []uint64{3})); CodeOf(err) != CodeMissingParent {
			t.Errorf("store below another rank's block: err = %v, want %s", err, CodeMissingParent)
		}
		mustApply(t, s, Event{Kind: KindRemove, Rank: r10, EventID: 2, Hashes: []uint64{chainHash(1, 2)}}, true)
		if _, err := s.Apply(chainStore(r10, 3, []uint64{1, 2}, []uint64{3})); CodeOf(err) != CodeMissingParent {
			t.Errorf("store below a deactivated parent: err = %v, want %s", err, CodeMissingParent)
		}
	})
}

func TestStore_EventIDFencesAndDuplicates(t *testing.T) {
	eachBacking(t, func(t *testing.T, newStore func() *Store) {
		s := newStore()
		mustApply(t, s, chainStore(r10, 5, nil, []uint64{1, 2}), true)
		mustApply(t, s, chainStore(r10, 6, nil, []uint64{1, 2}), false) // duplicate
		// A remove older than the store that activated the block is ignored.
		mustApply(t, s, Event{Kind: KindRemove, Rank: r10, EventID: 4, Hashes: []uint64{chainHash(1, 2)}}, false)
		if got := matched(s, r10, 1, 2); got != 2 {
			t.Errorf("after a stale remove: Match = %d, want 2", got)
		}
		mustApply(t, s, Event{Kind: KindRemove, Rank: r10, EventID: 7, Hashes: []uint64{chainHash(1, 2), 424242}}, true)
		// A store older than that remove is ignored too.
		mustApply(t, s, chainStore(r10, 6, []uint64{1}, []uint64{2}), false)
		if got := matched(s, r10, 1, 2); got != 1 {
			t.Errorf("after remove and stale re-store: Match = %d, want 1", got)
		}
	})
}

func TestStore_ClearIsWorkerWideWithWatermark(t *testing.T) {
	eachBacking(t, func(t *testing.T, newStore func() *Store) {
		s := newStore()
		mustApply(t, s, chainStore(r10, 1, nil, []uint64{1, 2, 3}), true)
		mustApply(t, s, chainStore(r11, 1, nil, []uint64{1, 2, 3}), true)
		mustApply(t, s, chainStore(r20, 1, nil, []uint64{1, 2, 3}), true)
		mustApply(t, s, Event{Kind: KindClear, Rank: r10, EventID: 10}, true)
		if got := s.Match([]uint64{1, 2, 3}); !reflect.DeepEqual(got, []MatchEntry{{Rank: r20, Matched: 3, Last: chainHash(1, 2, 3)}}) {
			t.Errorf("after worker 1's clear: Match = %+v, want only 2/0", got)
		}
		mustApply(t, s, Event{Kind: KindClear, Rank: r10, EventID: 10}, false) // dedupe watermark
		mustApply(t, s, chainStore(r10, 9, nil, []uint64{1}), false)           // older than the clear
		mustApply(t, s, chainStore(r10, 11, nil, []uint64{1}), true)
		if got := matched(s, r10, 1, 2); got != 1 {
			t.Errorf("re-store after clear: Match = %d, want 1", got)
		}
	})
}

func TestStore_RetirementUntilReset(t *testing.T) {
	eachBacking(t, func(t *testing.T, newStore func() *Store) {
		s := newStore()
		mustApply(t, s, chainStore(r10, 1, nil, []uint64{1, 2}), true)
		s.RemoveWorker(r10)
		if got := matched(s, r10, 1, 2); got != 0 {
			t.Errorf("after REMOVE_WORKER: Match = %d, want 0", got)
		}
		mustApply(t, s, chainStore(r10, 2, nil, []uint64{1, 2}), false) // ignored while retired
		if _, err := s.RegisterWorker(r10); CodeOf(err) != CodeWorkerRetired {
			t.Errorf("RegisterWorker(retired) err = %v, want %s", err, CodeWorkerRetired)
		}
		s.ResetWorker(r10)
		mustApply(t, s, chainStore(r10, 1, nil, []uint64{1, 2}), true) // fences reset: event id 1 again
		s.RemoveWorkerAll(1)
		mustApply(t, s, chainStore(Rank{1, 5}, 1, nil, []uint64{1}), false) // worker-wide fence covers new ranks
		if n, _, _ := s.Stats(); n != 0 {
			t.Errorf("after REMOVE_WORKER_ALL: %d nodes left, want 0 (pruned)", n)
		}
	})
}

func TestStore_ReplaceRankIfGeneration(t *testing.T) {
	eachBacking(t, func(t *testing.T, newStore func() *Store) {
		s := newStore()
		mustApply(t, s, chainStore(r10, 1, nil, []uint64{1, 2, 3}), true)
		mustApply(t, s, chainStore(r20, 1, nil, []uint64{7}), true)
		gen := s.RankGeneration(r10)
		if _, err := s.ReplaceRankIfGeneration(r10, gen+1, nil); CodeOf(err) != CodeStaleGeneration {
			t.Errorf("replace with a stale ticket: err = %v, want %s", err, CodeStaleGeneration)
		}
		bad := []Event{chainStore(r10, 1, []uint64{9}, []uint64{10})} // parent never stored
		before := snapshotStats(s)
		if _, err := s.ReplaceRankIfGeneration(r10, gen, bad); CodeOf(err) != CodeInvalidReplace {
			t.Errorf("replace with a bad snapshot: err = %v, want %s", err, CodeInvalidReplace)
		}
		if snapshotStats(s) != before || matched(s, r10, 1, 2, 3) != 3 {
			t.Errorf("failed replace changed the index")
		}
		good := []Event{chainStore(r10, 1, nil, []uint64{1, 2}), chainStore(r10, 2, []uint64{1, 2}, []uint64{4})}
		next, err := s.ReplaceRankIfGeneration(r10, gen, good)
		if err != nil || next == gen || s.RankGeneration(r10) != next {
			t.Fatalf("replace = %d, %v; want a new ticket", next, err)
		}
		if matched(s, r10, 1, 2, 3) != 2 || matched(s, r10, 1, 2, 4) != 3 || matched(s, r20, 7) != 1 {
			t.Errorf("after replace: [1,2,3]=%d [1,2,4]=%d other rank=%d; want 2, 3, 1",
				matched(s, r10, 1, 2, 3), matched(s, r10, 1, 2, 4), matched(s, r20, 7))
		}
	})
}

func TestStore_SelectOrdersByPrefixLoadThenRank(t *testing.T) {
	eachBacking(t, func(t *testing.T, newStore func() *Store) {
		s := newStore()
		mustApply(t, s, chainStore(r10, 1, nil, []uint64{1, 2, 3}), true)
		mustApply(t, s, chainStore(r20, 1, nil, []uint64{1, 2}), true)
		mustApply(t, s, chainStore(r11, 1, nil, []uint64{1, 2, 3}), true)
		got := s.Select([]uint64{1, 2, 3}, []SelectCandidate{{r20, 0}, {r11, 4}, {r10, 4}})
		if got == nil || got.Rank != r10 || got.Matched != 3 {
			t.Errorf("Select = %+v, want 1/0 with 3 (longest prefix, equal load, lower rank)", got)
		}
		got = s.Select([]uint64{1, 2, 3}, []SelectCandidate{{r11, 4}, {r10, 5}})
		if got == nil || got.Rank != r11 {
			t.Errorf("Select = %+v, want 1/1 (lower load)", got)
		}
		got = s.Select([]uint64{9}, []SelectCandidate{{Rank{5, 0}, 1}, {Rank{4, 0}, 1}})
		if got == nil || got.Rank != (Rank{4, 0}) || got.Matched != 0 {
			t.Errorf("Select(no match) = %+v, want 4/0 with 0", got)
		}
		if s.Select([]uint64{1}, nil) != nil {
			t.Error("Select(no candidates) != nil")
		}
	})
}

func TestStore_OwnedRegistration(t *testing.T) {
	eachBacking(t, func(t *testing.T, newStore func() *Store) {
		s := newStore()
		now := time.Unix(1000, 0)
		reg := Registration{Version: 3, OwnerNonce: 77, LeaseMs: 1000, ExpectedGeneration: s.RegistrationGeneration(1), Ranks: []uint32{0}}
		if c, err := s.RegisterWorkerRanks(1, reg, now); err != nil || !c {
			t.Fatalf("RegisterWorkerRanks = %v, %v", c, err)
		}
		other := reg
		other.OwnerNonce, other.ExpectedGeneration = 78, s.RegistrationGeneration(1)
		if _, err := s.RegisterWorkerRanks(1, other, now.Add(500*time.Millisecond)); CodeOf(err) != CodeWorkerOwned {
			t.Errorf("second owner within the lease: err = %v, want %s", err, CodeWorkerOwned)
		}
		stale := reg
		stale.ExpectedGeneration = 999
		if _, err := s.RegisterWorkerRanks(1, stale, now); CodeOf(err) != CodeStaleGeneration {
			t.Errorf("stale registration generation: err = %v, want %s", err, CodeStaleGeneration)
		}
		if _, err := s.ApplyOwned(78, chainStore(r10, 1, nil, []uint64{1})); CodeOf(err) != CodeStaleWorkerOwner {
			t.Errorf("ApplyOwned(wrong nonce) err = %v", err)
		}
		if _, err := s.ApplyOwned(77, chainStore(r11, 1, nil, []uint64{1})); CodeOf(err) != CodeUnregisteredWorkerRnk {
			t.Errorf("ApplyOwned(unregistered rank) err = %v", err)
		}
		if c, err := s.ApplyOwned(77, chainStore(r10, 1, nil, []uint64{1})); err != nil || !c {
			t.Errorf("ApplyOwned = %v, %v", c, err)
		}
		if err := s.UnregisterWorker(LeasePayload{Worker: 1, OwnerNonce: 77}); err != nil || matched(s, r10, 1) != 0 {
			t.Errorf("UnregisterWorker = %v, match %d; want nil, 0", err, matched(s, r10, 1))
		}
		other.ExpectedGeneration = s.RegistrationGeneration(1)
		if _, err := s.RegisterWorkerRanks(1, other, now.Add(2*time.Second)); err != nil {
			t.Errorf("new owner after release: err = %v", err)
		}
	})
}
