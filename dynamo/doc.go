// Package dynamo holds everything specific to NVIDIA Dynamo: the block and
// sequence hashing that makes goindex's hashes comparable with Dynamo's
// (XXH3 seed 1337, LoRA and cache-namespace salting, partial-block rule), the
// KV event model's wire decoders, and subject names.
//
// Files:
//   - hash.go: Hasher (tokens → local block hashes), SaltedSeed, LocalHash.
//   - errors.go: limits and typed errors.
//
// Everything here is stateless or immutable and safe for concurrent use. The
// tests hold every hash vector of spec/dynamo-compat.md §1.5.
package dynamo
