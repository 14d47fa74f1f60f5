// Package kv is goindex's own small vocabulary for KV-cache ownership: a
// member (worker id, dp rank) that owns blocks, a stored run (optional parent
// external hash, then blocks of external and local hashes), a removed set, a
// clear, and the sequence-hash chain that turns local block hashes into
// canonical, position-dependent block identities.
//
// Every index in goindex (the exact radix tree, the CKF index, the dynkv
// server) consumes these types; decoders of Dynamo's and the engines' wire
// formats (package dynamo) produce them. The package holds no state, so every
// function may be called concurrently.
//
// Files:
//   - member.go: Member, the unit that owns blocks and receives scores.
//   - event.go: Event and its kinds; Overlap, one member's matched depth.
//   - chain.go: the XXH3 sequence-hash chain with Dynamo's seed, its 16-byte
//     XXH3 written out inline.
//   - index.go: the Index contract every goindex index implements.
//
// The tests prove the chain against the spec's vectors and the inlined hash
// bit-identical to zeebo/xxh3 on millions of random inputs (and a fuzz
// target).
package kv
