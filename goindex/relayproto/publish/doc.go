// Package publish is the producer side of the CKF publication protocol
// (spec ckf-algorithm.md §5.2): it sequences a producer's drained batches
// into relayproto messages. The publisher increments the sequence once per
// published batch; a snapshot carries terminal sequence N and each delta
// moves N → N+1.
//
// Two transports are supported. Leased (upstream): a Publisher per
// consumer lane, with SnapshotAfterBarrier moving the stream to a new
// lease. Fan-out [EXT]: a Fanout writes an ordered delta log and a
// snapshot store that many consumers read; each subscription takes a
// local epoch and the transport stamps it on delivered messages, so the
// lease check stays consumer-local (goindex/relayproto/ingest).
//
// # Invariants
//
//   - lastSeq advances only for a delivered delta; a batch with no lease is
//     dropped without advancing; at u64max the publisher fences without
//     sending.
//   - A batch larger than relayproto.MaxDeltaImages goes out as several
//     deltas, one sequence each.
//   - A fan-out snapshot after an uncertain delivery skips two sequences,
//     so a live lane that did receive the uncertain delta faults and
//     re-subscribes instead of silently diverging.
//
// # Errors
//
// A fenced publisher refuses with an error naming the fence; Status().Fence
// says which (FenceSequenceExhausted, FenceDeliveryUncertain,
// FenceLeaseStalled). Each method's doc says what a failure changed (the
// fence). New and NewFanout refuse an invalid Config.
//
// # Concurrency
//
// A Publisher or Fanout is not safe for concurrent use; call it from the
// producer's writer goroutine. Draining a Source is destructive, so a
// Source feeds one publisher.
//
// # Files
//
//   - publisher.go: Sink, Source, the shared sequencing core, Publisher, Fanout.
//   - errors.go: the fence and configuration errors.
//
// # Tests
//
// The tests prove the pinned publisher examples of spec §5.2, rollover at
// u64max−1, the barrier tail under the old lease, lease retirement and
// stale-lease refusal, batch splitting, the fan-out tail, store failure
// and sequence burn rules, and that this file map matches the directory.
package publish
