// Package relayproto is the CKF publication protocol (spec ckf-algorithm.md
// §1 and §5): the identities that name a producer stream and a consumer
// lane, the wire frames, the publisher that sequences a producer's drained
// batches, and the consumer lane state machine that installs them into a
// transposed replica.
//
// # Concepts
//
// A pool (domain, DC) has one producer. Its identity (pool, incarnation,
// layout generation, format) changes on every relay start or rebuild and
// forces a re-snapshot. A consumer serves one domain through an immutable
// Manifest mapping each physical lane to its owning pool; all lanes share
// one Format. A Lease (consumer instance, lane, epoch) binds one producer
// stream to one lane; epochs strictly increase per lane, across
// retirements too. The publisher increments the sequence once per published
// batch; a Snapshot carries terminal sequence N, each Delta moves N → N+1
// with absolute bucket images, a DrainMarker names the sequence a drained
// lane must hold, a Heartbeat [EXT] reports the sequence on idle streams,
// and a LoadReport carries the DC's load for the TTFT scorer.
//
// Two transports are supported. Leased (upstream): a Publisher per
// consumer lane, with snapshotAfterBarrier moving the stream to a new
// lease. Fan-out [EXT]: a FanoutPublisher writes an ordered delta log and a
// snapshot store that many consumers read; each subscription takes a local
// epoch (Lane.NextLease) and the transport stamps it on delivered
// messages, so the lease check stays consumer-local. A lagging lane keeps
// its state and catches up from the log (Lane.CatchUp), re-snapshotting only
// when the deltas it needs are gone (spec §8 open problems 1 and 3).
//
// # Wire format
//
// A frame is a 16-byte header (magic "GIRF", wire version 1, frame type,
// body length, low 32 bits of XXH3-64 of the body) and a msgpack body (see
// body.go for the field layout). Snapshot chunks use the Compact encoding by
// default: a 4-bit occupancy mask per bucket plus the non-zero
// fingerprints, (0.5 + 8α) bytes per bucket against 8 dense (spec §8 open
// problem 2); both encodings round-trip byte for byte. Limits:
// MaxFrameBytes (8 MiB), MaxDeltaImages, MaxChunkWords and MaxBuckets (2^24),
// checked before anything is allocated. Decoders never panic on any input.
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
//   - A publisher advances lastSeq only for a delivered delta; a batch with
//     no lease is dropped without advancing; at u64max it fences without
//     sending.
//
// # Errors
//
// Decoders return a *FrameError (ErrMalformed, ErrChecksum, ErrTooLarge,
// ErrVersion, ErrBadFormat) and change nothing but the destination message.
// Encoders refuse over-limit input and return dst unchanged. Lane methods
// return an Outcome; Consumer.Handle also returns a *LaneError when the
// outcome faults the lane, whose Disposition records the same facts. Assign
// refuses with ErrUnclaimed, ErrForeignLease, ErrForeignPool, ErrWrongFormat
// or ErrStaleEpoch and changes nothing. Publishers return errors wrapping
// ErrFenced plus ErrSequenceExhausted, ErrDeliveryUncertain or
// ErrLeaseStalled; their doc says what a failure changed (the fence).
//
// # Concurrency
//
// Each lane has one serialized ingestor: Lane.Claim is safe to race and
// exactly one caller wins; every other Lane method must be called from the
// claiming goroutine. Different lanes may be driven concurrently, and
// Consumer.Handle may be called concurrently for messages of different
// lanes. Consumer.Apply, Decoder, Publisher and FanoutPublisher are not
// safe for concurrent use. Queries read the LaneTable concurrently under the
// weak-read contract (spec §5.4): one atomic store per word, a ready bit
// set with release semantics; a multi-bucket delta is not atomic to readers.
//
// Non-goals: no seqlock, table lock, double buffering or query retry
// (spec §5.4); no buffering across sequence gaps; no transport (NATS lives
// in bridge/). Producers and replicas are reached only through the Source
// and LaneTable interfaces, which *ckf.Producer and *replica.Table implement
// as they are (the package imports ckf for its types, and replica only in
// tests).
//
// # Files
//
//   - identity.go: DomainID, DCID, PoolID, Format, ProducerIdentity, Lease, Manifest.
//   - message.go: Image, FrameType, Message and the five messages; Encoding; snapshot chunking.
//   - frame.go: header, limits, checksum, Append* encoders, Decode* decoders, Decoder.
//   - body.go: the msgpack body layout, writer and bounded reader.
//   - snapcodec.go: dense and compact snapshot word encodings.
//   - publisher.go: Sink, Source, the shared sequencing core, Publisher, FanoutPublisher.
//   - lane.go: LaneTable, State, Outcome, the Lane state machine.
//   - catchup.go: DeltaLog, ApplyDeltas, CatchUp (lag policy [EXT]).
//   - consumer.go: Consumer, the manifest-driven router of messages to lanes.
//   - errors.go: sentinels, FrameError, LaneError.
//
// # Tests
//
// The tests prove: golden frame bytes and exact round trips of both
// snapshot encodings; that corruption, truncation and over-limit sizes are
// rejected (and fuzz targets that no input panics or decodes to something
// that re-encodes differently); the pinned publisher examples of spec §5.2,
// rollover at u64max−1 and the barrier tail under the old lease; one test
// per rule of spec §5.3 plus epoch monotonicity, one ingestor per lane and
// validation before write; the fault-injection list of spec §9 item 10 with
// recovery to a converged READY lane and undisturbed neighbours; randomized
// convergence (§9 item 11) of every lane to its producer's words under
// random batches, cadence and faults, with a model producer and with the
// real ckf.Producer, down to a real replica.Table whose probes find every
// tracked block; that a lagging lane catches up from a retained log and
// re-snapshots when it is truncated; and that this file map matches the
// directory.
package relayproto
