// Package ckf is goindex's Cuckoo-filter (CKF) projection of KV-cache
// ownership: the addressing format shared by producers and consumers, the
// packed 4 × 16-bit bucket, and the per-pool Producer that keeps exact
// ownership and publishes bucket images (spec ckf-algorithm.md §1–§4).
//
// # Concepts
//
// A canonical hash c identifies a cached KV block (the sequence-hash chain
// of its local hashes, kv.ChainHash). Format.Probe maps c to a 16-bit
// fingerprint and two buckets A ≠ B with B = A XOR d(fp). The Producer of a
// pool (domain, DC) keeps, per member, the lineage source block id → c; per
// canonical the DC-wide owner count and whether its fingerprint is
// resident; and the filter, n packed buckets. Only the first owner inserts
// a fingerprint and only the last owner removes it: ownership is exact,
// the filter is a lossy projection. Every physical write marks its bucket
// dirty; Drain, at a publication boundary, returns the absolute words of
// the buckets that changed since the last boundary (Image), in ascending
// bucket order. Apply reports the cadence Step (a boundary after N pending
// events; a timer armed by a window's first event) and the caller drives
// the clock.
//
// # Invariants
//
// After every call (spec §4.1): I1, a canonical's owner count equals the
// mappings to it across all lineages; I2, each resident canonical has
// exactly one copy of its fingerprint in A or B and the non-zero slots are
// exactly those copies; I3, the resident count equals the non-zero slots;
// I4, distinct canonicals with the same fingerprint and pair hold separate
// copies; I5, a fingerprint leaves only with the last owner of its
// canonical. After a Drain the filter words equal the last boundary's words
// plus the batch, byte for byte.
//
// # Errors
//
// A failed call changes nothing unless its doc says what changed. A Stored
// event rejected for a missing parent, a remap or an owner-count overflow
// changes nothing at all. ErrCapacityExhausted is a physical omission: the
// blocks are tracked exactly but not admitted (a stable false negative),
// the filter bytes are as before, nothing is fenced. ErrInvariantViolation
// leaves the offending block as it was, keeps the blocks removed before it,
// and fences the producer: it then refuses mutations (ErrFenced) and
// publishes nothing until the relay rebuilds a new layout generation.
// Every admitted event counts as pending, even when it fails.
//
// # Concurrency
//
// Format and Bucket are immutable values, safe everywhere. A Producer has a
// single writer: none of its methods may run concurrently with another.
// The filter words may live in caller memory (Config.Words); the producer
// writes them with plain stores, so concurrent readers need their own
// copy (that is what published images are for).
//
// Non-goals: no online resize (the bucket count is fixed per layout
// generation), no clock or timer inside the producer, and no byte parity
// with upstream layouts (consumers only copy producer bytes; layouts are
// reproducible from the seed and call order).
//
// # Files
//
//   - addressing.go: Format (seed, bucket count, fingerprint deltas), Probe, BucketCount sizing.
//   - bucket.go: the packed Bucket and the SWAR Contains test.
//   - errors.go: every error of the package.
//   - producer.go: Producer, Config, New, Stats and Counters, snapshot words, the exact state as Mappings.
//   - mutate.go: Apply (Stored, Removed, Cleared), RemoveMember, RemoveWorker.
//   - batch.go: ApplyBatch, Apply over many events with their lineage,
//     owner, filter and dirty-index lines prefetched chunks ahead.
//   - prefetch_amd64.go, prefetch_amd64.s: prefetchLines, PREFETCHT0 of a
//     list of addresses.
//   - prefetch_other.go: prefetchLines as a no-op, elsewhere.
//   - replace.go: ReplaceRanks, the off-to-the-side rebuild after an event gap; Restore of a saved lineage.
//   - cuckoo.go: the physical table: full and relocation-free insertion, removal.
//   - rng.go: the splitmix64 kick RNG and laneRngSeed.
//   - dirty.go: Image and the dirty window: marking, net reversion, drain.
//   - cadence.go: Step, the publication cadence, Drain.
//   - flatmap.go: the open-addressing uint64 map behind lineages and owners,
//     and the huge page advice for the producer's large tables.
//   - xxh3inline.go: Hash8, the inlined XXH3 of 8-byte inputs, and the
//     query path's ProbeFast and ProbesFast.
//   - xxh3inline_amd64.go, xxh3inline_amd64.s: probes8, ProbesFast's
//     AVX-512 batch of 8 probes, and the CPU check that selects it.
//   - xxh3inline_other.go: the scalar ProbesFast only, elsewhere.
//
// # Tests
//
// The tests prove the addressing vectors and sizing table of spec §2, SWAR
// (Contains and the table's slot search) against a scalar scan (§3), the
// RNG vectors (§4.6), one kick against the
// spec's draw order, failed insertions restoring every byte, the producer
// against a trivial exact model over random streams with I1–I5 checked
// after every event and a replica of the drained batches equal to the
// filter byte for byte (§9 item 5), the capacity cases of §9 item 6, remap
// rejection, fencing, owner overflow, cadence steps, ReplaceRanks against
// a producer fed the same history directly, AppendLineage and Restore
// round-tripping random states against the model (and Restore's refusals
// changing nothing), Hash8 against zeebo/xxh3 and
// the spec's raw hashes, ProbeFast and ProbesFast (vector and scalar, every
// batch length and offset) and the producer's primary probe against Probe,
// the file map above, zero allocations in steady ingest, and a pinned
// digest of everything the producer publishes over fixed streams (so a
// faster ingest path cannot change a published byte), ApplyBatch against
// Apply event by event over random streams whose ids change canonicals
// under the look-ahead (steps, errors, images, words, counters) and
// against the pinned digest; a fuzz target feeds
// arbitrary event streams through the same model and replica checks.
package ckf
