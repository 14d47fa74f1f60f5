// Package dynkv is a RESP2 server that speaks the command set of Dynamo's
// Valkey module `dynkv`, so an unmodified Dynamo frontend started with
// `--router-valkey-urls redis://HOST:PORT` keeps its KV index in goindex.
//
// Concepts. Every key (`dynamo:kv-router:{ns}:component-{comp}:scope-{scope}:
// block-size-{bs}`) selects an independent Store. Payloads are the module's
// fixed-width big-endian binary formats (dynamo-compat §5b), decoded with
// exact-length checks and named limits before any allocation. A Store
// reproduces the module's semantics, which differ from Dynamo's in-process
// radix tree: global nodes keyed by external hash, whole-event rejection of
// conflicting blocks, per-(node, rank) event-id fences, worker-wide clears with
// a dedupe watermark, retirement until reset, generation tickets and atomic
// rank replacement. MATCH counts each rank's contiguous active run, so after a
// mid-chain remove and a re-store of that block the descendants count again
// (the radix tree would not): both stay within the differential harness's
// bounds (reachable ≤ score ≤ held).
//
// Accepted but not implemented: the admission and lifecycle-GC commands
// (SELECT_RESERVE, RELEASE, RENEW, GC, GC_STATS, LIFECYCLE_STATS,
// ADMISSION_STATS) answer DYNKV_UNSUPPORTED, since they only matter with the
// module's admission or direct-worker-events modes; the replication-internal
// commands (APPLY_OWNED_AT, ADMIT_APPLY, WORKER_LEASE_APPLY, GC_APPLY,
// RESTORE) answer DYNKV_INTERNAL_COMMAND as the module does for normal
// clients. WAIT acknowledges the requested replica count (a standalone server
// is its own primary) and ROLE answers master. The module's connection
// handshake beyond plain commands is [unverified]; HELLO 2 (with AUTH) and
// CLIENT are answered, HELLO 3 gets NOPROTO so clients fall back to RESP2.
//
// Errors. A failed command changes nothing and replies the module's error
// name followed by a detail. A mutation that applied but could not be
// written to the append-only log replies ERR: it is applied in memory but
// not durable.
//
// Persistence. With Config.LogPath every successful mutation is appended
// (length, CRC-32C, the time it was applied, arguments) before the reply; a
// restarted server replays the log at each record's time (owner leases
// depend on it) and truncates a torn tail.
//
// Concurrency. Connections are served concurrently; each Store serializes
// mutations and lets MATCH/SELECT run in parallel under a read lock. With a
// log, mutations run one at a time across keys, each with its record, so
// the log replays in the order they were applied.
//
// Files:
//   - wire.go: payload codecs and limits.
//   - store.go: the module's index semantics; register.go: worker
//     registration and owner leases.
//   - commands.go: the Engine, command table and plain Redis commands.
//   - server.go: the redcon server, AUTH, connection and request-size limits.
//   - aof.go: the append-only log.
//   - errors.go: the module's error names.
//
// Tests prove the spec's golden byte vectors, the semantics above, error
// names, hostile inputs (malformed payloads, over-limit counts, unknown
// commands, oversized bulk strings, connections over the limit), a real
// Redis client end to end, the randomized harness stream over the wire
// (replies equal to an in-process Store's, scores within the harness's
// bounds), restart recovery
// (after Close and after SIGKILL, with lease takeovers and concurrent
// writers in the log) and concurrency under -race.
package dynkv
