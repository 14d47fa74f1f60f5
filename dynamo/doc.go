// Package dynamo holds everything specific to NVIDIA Dynamo: the block
// hashing that makes goindex's hashes comparable with Dynamo's, Dynamo's KV
// event model, the decoders of every wire form those events travel in, the
// encoders that produce Dynamo-shaped messages, and subject names.
//
// # Concepts
//
// A local hash (tokens_hash) is XXH3-64 of one block's tokens as LE u32,
// seed 1337 salted by LoRA name and cache namespace (SaltedSeed); a trailing
// partial block is never hashed; EAGLE windows are BlockSize+1 tokens with
// stride BlockSize; multimodal blocks either append their sorted mm hashes
// (scheme 1) or substitute pad tokens for image placeholder runs (scheme 2).
// Mooncake traces turn each hash id into a block of that id truncated to
// u32, repeated BlockSize times. The sequence-hash chain is goindex's own
// (kv.AppendChain).
//
// An event-plane message carries one RouterEvent (v1.3 and older) or a list
// of them (v1.4 on); decoders tell the two apart by their first byte.
// Dynamo's own worker load travels as ActiveLoad on topic kv_metrics.
//
// A RouterEvent is what Dynamo's router consumes: worker, storage tier,
// residency domain and a CacheEvent (stored run, removed hashes, or clear)
// of one dp rank. RouterEvent.TargetsPrimary says, by Dynamo's rules,
// whether it changes the primary index (worker-owned device-tier blocks;
// clears of every domain or the worker's), belongs to a lower tier or a
// cache owner, or is unsupported; KV converts to goindex's kv.Event. It travels as
// JSON (G2025 NATS subjects, /dump), as msgpack inside an Envelope (the
// current event plane) or, from engines, as vLLM/SGLang ZMQ KVEventBatches
// (EngineBatch) that a Normalizer turns into RouterEvents by Dynamo's rules.
// An engine event's cache namespace is its cache_salt or, from vLLM under
// Dynamo's handler, the "dynamo-cache-salt:"-tagged string in its first
// block's extra_keys.
//
// # Invariants
//
//   - Hashes keep all 64 bits: signed encodings are bit-reinterpreted,
//     nothing passes through float64; a byte-string hash is rejected unless
//     ZMQConfig.FoldByteHashes.
//   - Decoders check a named limit (MaxMessageBytes, MaxBlocksPerEvent, …)
//     and the bytes left before every allocation, never panic, ignore
//     unknown keys and default missing optional fields.
//   - Encoders write exactly the shape Dynamo writes (CUR JSON; rmp-serde
//     named msgpack), so decoding an encoded valid event gives it back field
//     for field (a nil slice comes back empty).
//
// # Errors
//
// A decoder that fails returns a zero value and a *DecodeError wrapping
// ErrMalformed, a *LimitError or a sentinel (ErrByteHash, ErrFrameCount,
// ErrFrameHeader, ErrIdentity); nothing is partially applied anywhere. An
// event whose residency_domain or storage_tier Dynamo's rules refuse is
// not a decode error: it decodes (ResidencyUnsupported, TierUnknown), and
// TargetsPrimary reports ErrUnsupportedResidency or ErrUnknownStorageTier,
// so a caller skips that event and takes the rest of its message. A Normalizer never fails: it drops, rewrites or
// truncates events by Dynamo's rules and counts each in its Stats.
//
// # Concurrency
//
// Hasher, the decoders, encoders and subject functions are stateless or
// immutable and safe for concurrent use. A Normalizer is stateful per engine
// source (event ids, learned attention-group kinds, stats): one goroutine at
// a time.
//
// # Non-goals
//
// No transport: ZMQ sockets and NATS connections live in bridge/. The
// RouterEvent's state_source is skipped, not modelled. Things the spec marks
// [unverified] (the newest envelope key set, the ZMQ frame header, the
// positional slot of locality) are decoded tolerantly, in every plausible
// form, and say so where they are handled.
//
// # Files
//
//   - doc.go: this overview.
//   - errors.go: limits, sentinels, LimitError, DecodeError.
//   - hash.go: Hasher, SaltedSeed, multimodal schemes, MMIdentifierHash,
//     PadValue, the Mooncake mapping.
//   - event.go: RouterEvent, CacheEvent, StoreData, tiers and residency,
//     conversion to kv.Event.
//   - json.go: JSON RouterEvent decoder and CUR-shape encoder.
//   - msgpack.go: msgpack RouterEvent decoder and rmp-serde named encoder.
//   - envelope.go: event-plane Envelope (msgpack and early JSON), DecodeMessage.
//   - eventplane.go: the ZMQ event plane's 4-part message, frame header and
//     identity checks (PlaneMessage, DecodePlane, CheckIdentity).
//   - load.go: Dynamo's ActiveLoad worker load sample (kv_metrics).
//   - mpreader.go: the strict, limit-checking msgpack reader and the writer.
//   - zmq.go: vLLM/SGLang ZMQ frames and KVEventBatch decoder (EngineBatch).
//   - normalize.go: Normalizer, Dynamo's conversion and filter rules; MediumTier.
//   - subjects.go: Scope (namespace, component, endpoint) subjects and
//     discovery key prefixes, legacy subject and stream names.
//   - hash_test.go: every §1.5 vector, multimodal schemes, Mooncake fast path
//     against the generic path.
//   - event_test.go: conversion, tiers, residency, validation; TargetsPrimary
//     against testdata/targets_primary.txt, the table the Rust crate shares.
//   - wire_test.go: JSON, msgpack and envelope golden bytes, round trips,
//     hostile inputs.
//   - zmq_test.go: engine batches in every shape; normalizer rules 1–7.
//   - release_test.go: one message per released payload shape, written by
//     Debian's python3-msgpack (testdata/releases); event-plane frames and
//     identity checks; ActiveLoad; scoped subjects and key prefixes.
//   - subjects_test.go: subject and stream names, escaping.
//   - fuzz_test.go: fuzz targets of every decoder.
//   - bench_test.go: BenchmarkMooncakeLocal and decoder benchmarks.
//   - doc_test.go: keeps this file map in step with the directory.
//   - example_test.go: the main call sequences.
//   - testdata/: golden wire messages; targets_primary.txt, the
//     TargetsPrimary table of every tier × residency × kind.
//
// # What the tests prove
//
// Every hash vector of spec/dynamo-compat.md §1.5; fast paths equal their
// generic references on random inputs (seeded, GOINDEX_SEED overrides);
// golden bytes of each wire form decode to the expected events and the
// encoders reproduce them byte for byte; decoders reject hostile sizes and
// shapes with the right error and survive fuzzing; the normalizer follows
// each of Dynamo's rules.
package dynamo
