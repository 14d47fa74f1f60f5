// Package ingest is the consumer side of the CKF publication protocol
// (spec ckf-algorithm.md §5.3): the lane state machine that installs a
// producer stream's relayproto messages into one lane of a transposed
// replica, and the manifest-driven Consumer that routes messages to lanes.
//
// # Concepts
//
// A Consumer serves one domain through an immutable relayproto.Manifest
// mapping each physical lane to its owning pool. A Lane binds one producer
// stream under a lease (Assign); epochs strictly increase per lane, across
// retirements too. On fan-out transports each subscription takes a local
// epoch (Lane.NextLease) and the transport stamps it on delivered
// messages, so the lease check stays consumer-local. A lagging lane
// follows the ordered delta log; one that missed deltas re-snapshots.
//
// # Invariants
//
//   - The lane rules of spec §5.3 run in order; a rule that ignores a message
//     leaves the lane exactly as it was, so stale traffic never harms a newer
//     state. Rule 10's overflow branch is unreachable after rules 8 and 9
//     (see checkDelta), so a lane at u64max ignores every delta.
//   - [EXT] Rule 2 faults only on an identity of the lane's own pool that
//     is newer than (or differs at the same age from) the assignment: a
//     restart or rebuild, which needs a re-snapshot. Frames of another pool
//     (misrouted or forged) and of a superseded identity (an older
//     incarnation, or an older layout generation; relays claim
//     incarnations in increasing order) are ignored as ForeignIdentity, so
//     a replaced relay's late frames never disturb the lane serving its
//     successor.
//   - A delta is validated completely (rules 7–11) before any word is
//     written; a faulting delta writes nothing.
//   - Entering FAULTED, Assign, Retire and Release clear the ready bit first.
//     A snapshot sets it only after all n words are stored.
//   - After snapshot N and deltas N+1..M, a lane's words equal the
//     producer's words at the cut that produced M, byte for byte.
//   - A fault or frame error on one lane never touches another lane.
//
// # Errors
//
// Lane methods return an Outcome; Consumer.Handle also returns a
// *LaneError when the outcome faults the lane, whose Disposition records
// the same facts. Consumer.Apply returns a *wire.FrameError for a frame
// that does not decode and changes no lane. Assign refuses with an error
// (ErrForeignPool, ErrWrongFormat and ErrStaleEpoch name the ones a caller
// can act on) and changes nothing.
//
// # Concurrency
//
// Each lane has one serialized ingestor: Lane.Claim is safe to race and
// exactly one caller wins; every other Lane method must be called from the
// claiming goroutine. Different lanes may be driven concurrently, and
// Consumer.Handle may be called concurrently for messages of different
// lanes. Consumer.Apply is not safe for concurrent use. Queries read the
// LaneTable concurrently under the weak-read contract (spec §5.4): one
// atomic store per word, a ready bit set with release semantics; a
// multi-bucket delta is not atomic to readers.
//
// Non-goals: no seqlock, table lock, double buffering or query retry
// (spec §5.4); no buffering across sequence gaps; no transport (NATS lives
// in bridge/). Replicas are reached only through the LaneTable interface,
// which *replica.Table and the shared-memory replica implement as they are
// (the package imports replica only in tests).
//
// # Files
//
//   - lane.go: LaneTable, State, Outcome, the Lane state machine.
//   - consumer.go: Consumer, the manifest-driven router of messages to lanes.
//   - errors.go: assignment errors, ErrLaneFaulted, LaneError.
//
// # Tests
//
// The tests prove one rule of spec §5.3 per test plus epoch monotonicity,
// one ingestor per lane and validation before write; the fault-injection
// list of spec §9 item 10 with recovery to a converged READY lane and
// undisturbed neighbours; randomized convergence (§9 item 11) of every
// lane to its producer's words under random batches, cadence and faults,
// with a model producer and with the real ckf.Producer, down to a real
// replica.Table whose probes find every tracked block; that a fan-out
// snapshot after an uncertain delivery makes a live lane re-subscribe;
// that Extend carries READY lanes into a wider table at their sequences and
// leases and adds UNCLAIMED lanes; a
// fuzz target that no input panics a consumer or changes a lane without
// decoding; and that this file map matches the directory.
package ingest
