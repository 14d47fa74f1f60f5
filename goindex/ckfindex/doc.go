// Package ckfindex is an in-process CKF index whose lanes are members
// (worker, dp rank): each member gets its own ckf.Producer (exact lineage and
// a cuckoo filter sized for ExpectedBlocksPerLane), every event's drained
// bucket images go straight into that member's lane of one transposed
// replica.Table, and a query probes every member's lane at once. It is the
// CKF counterpart of goindex/radix behind the same kv.Index, so the
// differential harness, the C ABI's "ckf" mode and the benchmarks drive both
// the same way.
//
// Guarantees. Exact ownership lives in the producers, so a block that was
// admitted to its member's filter is never missed: Match never reports below
// the reachable depth Dynamo's exact tree would report, and overcounts only
// through fingerprint collisions (≈ 8α/65535 per position per lane at slot
// occupancy α, spec §7). A block the filter could not admit (capacity
// exhausted) is tracked exactly but is a stable false negative until space
// frees; Apply then returns ckf.ErrCapacityExhausted and Stats counts it.
// Unlike the radix tree, a mid-chain removal does not orphan descendants in
// the filter (the filter holds canonical hashes, and a re-stored block makes
// its descendants reachable again): scores stay within the harness's bounds.
//
// Lanes. A member takes a free lane on its first stored event and gives it
// back when it holds no blocks any more (after removals, a clear or a member
// removal), so Config.Lanes bounds concurrent members, not members over the
// index's lifetime. A stored event for a new member when every lane is taken
// fails with ErrNoFreeLane and changes nothing. A removal naming blocks the
// member does not hold (or a member that holds none) removes the known ones
// and returns a *RemoveError wrapping ErrBlockNotFound, as the radix tree
// reports it, so both modes of the C ABI answer GOINDEX_ENOTFOUND.
//
// Concurrency. Mutations (Apply, RemoveMember, RemoveWorker) are serialized
// by an internal mutex. Match and Stats may run from any number of
// goroutines concurrently with mutations and never take that mutex: they read
// the table under the replica's weak-read contract and an immutable snapshot
// of the lane → member map. A query racing a lane's reassignment may, for
// that one query, attribute the lane to its old or new member.
//
// Files:
//   - index.go: Config, Index, New, Apply, RemoveMember, RemoveWorker, Stats.
//   - match.go: Match and its per-goroutine scratch.
//   - errors.go: sentinels and RemoveError.
//
// Tests run the differential harness (40 seeds × 2000 steps by default) in
// serial, concurrent-readers and lane-pool modes with overcounts reported,
// and fail on any undercount. In serial mode an audit beside the harness
// checks that every overcount is a fingerprint collision with a block the
// member holds, at the query's first absent position; that collisions,
// counted once per distinct first absent block (the raw count repeats one
// collision over many checks and is only logged), stay within a clear margin
// of spec §7's expectation for the lanes' actual slot occupancy α; and, with
// 64 buckets per member, that probes of never-stored hashes hit at
// 1 − (1 − 1/65535)^(8α) per lane within a margin a filter with twice that
// rate fails. Unit tests cover lane reuse, capacity omissions, clear scopes,
// removals of unknown blocks and zero-allocation Match.
package ckfindex
