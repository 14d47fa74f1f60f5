// Package trace replays Mooncake request traces (FAST'25, kvcache-ai/Mooncake)
// as KV-cache traffic: it reads the JSONL traces, applies upstream
// mooncake_bench's transforms, maps hash ids to Dynamo local block hashes and
// runs each worker's requests through a mock prefix-caching engine that emits
// the kv.Events a real engine would publish. `goindex bench`, `goindex
// parity` and `goindex sim` drive indexes with it.
//
// # Concepts
//
// A trace line is a Request: arrival time, prompt and output lengths, and one
// hash id per 512-token prompt block; equal ids at equal positions are a
// shared prefix. The pipeline, in upstream's order (dynamo-compat §6):
//
//	ReadAll / Reader.Next   JSONL → []Request, with size limits
//	Stretch(reqs, f)        id h → h·f … h·f+f−1 (longer prompts, same sharing)
//	Duplicate(reqs, d)      d disjoint copies, ids offset by (MaxID+1)·k
//	Partition.Worker(i)     request i → worker, seeded and uniform
//	Mapper.AppendLocals     ids → tokens → Dynamo local hashes (seed 1337)
//	Engine.Serve            locals → cache hit, evictions, Stored/Removed events
//
// Tokens: an id's tokens are its value truncated to u32, repeated (upstream's
// rule). With the default block size 512 every id is one block. For smaller
// block sizes the Split scheme (default) keeps an id's 512 tokens and cuts
// them into 512/bs equal blocks; the PerID scheme is upstream's literal
// mapping, one bs-token block per id. Both are checked against the spec's
// vectors V26–V29.
//
// Partition is a pure function of (seed, request index); it is uniform but
// not bit-identical to upstream's Rust StdRng assignment, which cannot be
// reproduced outside Rust.
//
// # Invariants
//
//   - An Engine's cache is prefix-closed and never exceeds its capacity.
//   - A Stored event's parent is cached on the emitting engine when emitted;
//     a Removed event lists leaf blocks first, so applying the events in
//     order never stores below a missing parent and never removes a parent
//     before its children.
//   - External hashes are the router's sequence-hash chain (kv.AppendChain),
//     so an index fed the events matches queries of the same locals exactly.
//     This external-hash scheme is [unverified] against upstream's mock
//     engine.
//   - Engine.Lookup on a worker equals the exact index's overlap for that
//     worker after all of its events are applied.
//
// # Errors
//
// Reader errors are *LineError values carrying the 1-based line number and a
// sentinel (ErrLineTooLong, ErrTooManyIDs, ErrMalformed) or the read error;
// a Reader stops at its first error. Transforms return ErrConfig or
// ErrIDOverflow and leave their input untouched; constructors return
// ErrConfig. Engine.Serve cannot fail.
//
// # Concurrency
//
// Reader, Mapper and Engine are not safe for concurrent use (each keeps
// scratch buffers); use one per goroutine. Partition is an immutable value;
// the transforms are pure functions.
//
// # Files
//
//   - reader.go: Request, Reader, ReadAll, ReadFile, the line and id limits.
//   - transform.go: Stretch, Duplicate, MaxID, Partition.
//   - hashing.go: Scheme, Mapper (hash ids → local block hashes).
//   - engine.go: Engine, the LRU prefix cache that emits events.
//   - errors.go: sentinels and LineError.
//   - doc.go: this overview.
//
// # Tests
//
// The tests prove the reader on the shipped slices and on every malformed
// shape (the error names the line), the limits before allocation, and never
// panicking (fuzz); the transforms on upstream's examples and their overflow
// checks; the partition's determinism and balance; the mapping against
// V26–V29 and, at random block sizes, against hashing the full token list
// with dynamo.Hasher; the engine against a slow reference LRU on random
// request streams (identical events and results), its leaf-first evictions
// and present parents, and its capacity bound. bench_test.go measures the
// reader, the mapping and the engine (requests/s, ids/s, block ops/s).
package trace
