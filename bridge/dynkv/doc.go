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
// Backing index (Config.Backing, `goindex dynkv --index exact|ckf`). The
// bookkeeping above is exact in both modes; only MATCH, MATCH_PRIMARY and
// SELECT read the backing. exact (the default) answers from the Store's
// nodes. ckf answers from a CKF projection (ckf.go): a ckfindex.Index per
// key whose lane r holds the canonical hash (the chain of local hashes from
// the root) of every node rank r actively owns, fed exactly the changes the
// Store accepted — activated runs of a store, deactivated blocks of a
// remove, and a rank's whole lane on clear, reset, retirement,
// unregistration or replacement (which then replays the snapshot into a
// fresh lane). A ckf MATCH is each lane's run of consecutive hits from the
// root (a linear-equivalent scan: a bisecting search would step over the
// module's mid-chain holes), capped where the query leaves the node tree,
// with Last the external hash of the node at that depth. It never reports
// below the exact depth of a block the filter holds, and above it only
// through a 16-bit fingerprint collision (≈ 8α/65535 per probed position at
// slot occupancy α, ckf spec §7) at a position some node represents. Limits:
// each lane's filter is sized for Backing.CKFExpectedBlocks (default 65,536
// a rank: 256 KiB, and the key's 64-lane table 16 MiB, allocated with the
// key); a block the filter cannot admit (the spec's capacity omission, near
// 96% occupancy) is still tracked exactly and APPLY still answers OK, but
// until space frees MATCH stops before it for that rank — a stable
// undercount of what the filter does not hold, counted in STATS DETAIL as
// ckf_capacity_omissions. At most CKFLanes (64) ranks of one key may hold
// blocks at once (a rank's lane is freed when it holds none): a store that
// would make one more rank hold blocks fails whole with DYNKV_INVALID_EVENT,
// a replacement with DYNKV_INVALID_REPLACE. Otherwise every mutation replies
// the same bytes in both modes, STATS's triple included. The append-only log
// holds commands, so a replay rebuilds the projection with the Store.
//
// STATS. DYNKV.STATS key answers the module's triple. The goindex extension
// DYNKV.STATS key DETAIL answers name/value pairs: index, the triple,
// ranks_with_blocks and, in ckf mode, ckf_lanes, ckf_expected_blocks,
// ckf_buckets (per lane), ckf_members, ckf_tracked_blocks, ckf_resident,
// ckf_capacity_omissions, ckf_load_factor (the fullest lane's occupancy),
// ckf_memory_bytes and ckf_mirror_errors (projection calls ckfindex refused
// for a reason other than capacity: a bug if ever non-zero).
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
// name followed by a detail. A write command whose log record could not be
// written replies ERR: it ran in memory but is not durable.
//
// Persistence. With Config.LogPath every write command is appended, accepted
// or rejected (length, CRC-32C, the time it ran, its outcome, arguments),
// before the reply; a restarted server re-executes the log at each record's
// time (owner leases depend on it), so whatever a command did is replayed,
// counts a record whose outcome differs (a bug; Server.LogDiverged) instead
// of refusing to start, and truncates a torn tail.
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
//   - ckf.go: the Backing choice, the CKF projection and its MATCH, and
//     STATS DETAIL.
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
// (after Close and after SIGKILL, with lease takeovers, concurrent writers
// and rejected commands in the log; goindex dynkv's own test kills its child
// at random points of random workloads and compares with a twin) and concurrency under -race. In ckf mode they prove
// the semantic and golden tests unchanged, the harness's bounds with no
// undercount, and, on a random stream of every mutation kind over the wire
// against an exact server, byte-identical mutation replies, MATCH replies
// equal to what the filters' membership predicts from the exact state
// (so within [exact, exact + collisions]), the collision rate against the
// spec's estimate, the lane limit, capacity omissions, and restart from the
// log.
package dynkv
