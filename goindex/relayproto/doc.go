// Package relayproto is the vocabulary of the CKF publication protocol
// (spec ckf-algorithm.md §1 and §5): the identities that name a producer
// stream and a consumer lane, leases, the consumer's lane plan, and the five
// messages. The protocol's jobs live in its subpackages:
//
//   - wire: the frame codec (header, msgpack bodies, limits, Decoder).
//   - snapenc: the dense and compact encodings of a snapshot's words.
//   - publish: the producer side; Publisher (leased) and Fanout [EXT]
//     sequence a producer's drained batches into messages.
//   - ingest: the consumer side; the lane state machine of spec §5.3 and
//     the manifest-driven Consumer that installs messages into a
//     transposed replica.
//
// # Concepts
//
// A pool (domain, DC) has one producer. Its identity (pool, incarnation,
// layout generation, format) changes on every relay start or rebuild and
// forces a re-snapshot. A consumer serves one domain through an immutable
// Manifest mapping each physical lane to its owning pool; all lanes share
// one Format. A Lease (consumer instance, lane, epoch) binds one producer
// stream to one lane; epochs strictly increase per lane, across
// retirements too, and the zero Lease means "no lease" (fan-out messages,
// whose transport stamps the subscription's local lease on delivery).
//
// The publisher increments the sequence once per published batch: a
// Snapshot carries terminal sequence N, each Delta moves N → N+1 with
// absolute bucket images, a DrainMarker names the sequence a drained lane
// must hold, a Heartbeat [EXT] reports the sequence on idle streams, and a
// LoadReport carries the DC's load for the TTFT scorer (and, optionally,
// a count of the blocks the DC stored, for its insert rate). A Delta holds at
// most MaxDeltaImages images and a Snapshot chunk at most MaxChunkWords
// words; Snapshot.Chunks cuts a whole-lane snapshot to that size.
//
// # Errors
//
// Format.Validate and Manifest.Validate report what is wrong; a bad format
// wraps ErrBadFormat. Types are plain values, safe to copy and to read
// concurrently.
//
// # Files
//
//   - identity.go: DomainID, DCID, PoolID, Format, ProducerIdentity, Lease, Manifest.
//   - message.go: message limits, Image, FrameType, Message and the five messages, snapshot chunking.
//   - errors.go: ErrBadFormat and the manifest error.
//
// # Tests
//
// The tests prove the format and manifest rules, that Chunks cuts a
// snapshot into contiguous chunks within the limit, which load report
// supersedes which (a later sample, or the same one's counted layout),
// and that this file map matches the directory.
package relayproto
