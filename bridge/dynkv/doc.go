// Package dynkv is a RESP2 server that answers Dynamo's Valkey module
// `dynkv` reply for reply, so an unmodified Dynamo frontend started with
// `--router-valkey-urls redis://HOST:PORT` (or valkey://) keeps its KV
// index in goindex.
//
// Specification. The module's C source is the specification:
// ai-dynamo/dynamo lib/kv-router/valkey-module/ at commits 91de6e93 (the
// command files, registration, leases, GC, stats) and a9cc7efd (index,
// mutation, matching, persistence), read file by file. Every command checks
// its argument count first (the server's "ERR wrong number of arguments for
// 'dynkv.apply' command"), then its arguments, and replies the module's bare
// error name ("-DYNKV_MISSING_PARENT"), status (+OK, +NOOP), big-endian
// binary bulk strings or integer arrays, in the module's order of checks.
//
// Concepts. Every key selects an independent Store (store.go): global nodes
// keyed by external hash with one (parent, local) edge each; per (node,
// rank) owners with the event id that last touched them and an active
// flag, deactivated rather than deleted; per rank a clear barrier, a
// persistent clear dedupe watermark, retirement, registration, tombstone and
// provenance flags (legacy commands taint, owner-fenced ones are managed);
// per worker an epoch with the worker-wide ticket, the registration token
// and the owner lease; per key three counters: mutations (STATS), tickets
// (every rank or worker change takes the next one) and registration
// tokens. A key exists once a write opened it, even if that write then
// failed (as in the module, which opens the key before its checks). MATCH
// lists ranks in the owner order of the query's first block (the module's
// array order: append, swap-remove) and skips workers whose owner lease
// lapsed; SELECT reports 0 blocks and the root hash 0xFFFF…FFFF as the last
// block of a candidate with no match.
//
// Beyond the module. DYNKV.STATS key DETAIL (goindex extension) answers
// name/value pairs: index, the triple, ranks_with_blocks and, in ckf mode,
// ckf_lanes, ckf_expected_blocks, ckf_buckets (per lane), ckf_members,
// ckf_tracked_blocks, ckf_resident, ckf_capacity_omissions, ckf_load_factor
// (the fullest lane's occupancy), ckf_memory_bytes and ckf_mirror_errors
// (projection calls ckfindex refused for a reason other than capacity: a bug
// if ever non-zero).
//
// Backing index (Config.Backing, `goindex dynkv --index exact|ckf`). The
// bookkeeping above is exact in both modes; only MATCH, MATCH_PRIMARY and
// SELECT read the backing. exact (the default) answers from the Store's
// nodes: the module's replies. ckf answers from a CKF projection (ckf.go):
// a ckfindex.Index per key whose lane r holds the canonical hash (the chain
// of local hashes from the root) of every node rank r actively owns, fed
// every activation and deactivation. A ckf MATCH is each lane's run of
// consecutive hits from the root (a linear-equivalent scan: a bisecting
// search would step over the module's mid-chain holes), capped where the
// query leaves the node tree, with Last the external hash of the node at
// that depth, ranks sorted by worker and rank. It never reports below the
// exact depth of a block the filter holds, and above it only through a
// 16-bit fingerprint collision (≈ 8α/65535 per probed position at slot
// occupancy α, ckf spec §7) at a position some node represents. Limits:
// each lane's filter is sized for Backing.CKFExpectedBlocks (default 65,536
// a rank: 256 KiB, and the key's 64-lane table 16 MiB, allocated with the
// key); a block the filter cannot admit (the spec's capacity omission, near
// 96% occupancy) is still tracked exactly and APPLY still answers OK, but
// until space frees MATCH stops before it for that rank — a stable
// undercount, counted as ckf_capacity_omissions. At most CKFLanes (64) ranks
// of one key may hold blocks at once (a rank's lane is freed when it holds
// none): a store that would make one more rank hold blocks fails whole with
// DYNKV_INVALID_EVENT, a replacement with DYNKV_INVALID_REPLACE. Otherwise
// every mutation replies the same bytes in both modes.
//
// Authoritative admission (admission.go): SELECT_RESERVE, RELEASE and RENEW
// keep per-domain capacities and reservation leases as the module does,
// revoked by every rank lifecycle change; a SELECT_RESERVE also ends, inline,
// the first expired owner lease when that is little work.
//
// Lifecycle GC (gc.go) walks the module's resumable cursor over its four
// dictionaries and plans and applies the module's transitions, call for
// call, so a budget-limited call counts as the module's does; the orders it
// follows are kept as the module keeps them (order.go).
//
// Differs. GC's cursor survives a restart (the log replays the calls, an
// image holds it), where the module's, kept only in memory, starts again
// at the first phase (at the epochs while a cleanup is pending).
// Replication is out of scope: the replication-internal commands answer the
// module's internal-only errors, ROLE master, REPLICAOF and its kin an ERR
// line, and WAIT counts the log as the replica (admin.go). Each connection
// keeps its CLIENT SETNAME (or HELLO … SETNAME) name, checked and reported
// as Valkey does. An empty or null command array (`*0`, `*-1`) is
// ignored, as Valkey ignores it (redcon would refuse it: framing.go drops
// it before redcon reads). SELECT reaches Valkey's 16 logical databases,
// each with its own keys (databases.go: database 0's keys are stored as
// given, another's behind a prefix naming it, so logs and images of one
// database read the same; FLUSHDB is logged as a DEL of the keys it
// deleted).
//
// Errors. A failed command replies the module's error name and changes
// nothing beyond what the module changes (a write may leave its key
// created). A write whose log record could not be written replies ERR: it
// ran in memory but is not durable.
//
// Persistence. With Config.LogPath every write command is appended, accepted
// or rejected (length, CRC-32C, the time it ran, its outcome, arguments),
// before the reply; a restarted server re-executes the log at each record's
// time (owner leases depend on it), so whatever a command did is replayed,
// counts a record whose outcome differs (a bug; Server.LogDiverged) instead
// of refusing to start, and truncates a torn tail. A rewrite replaces the
// log by the engine's state image (every key's whole state, image.go)
// followed by the records appended since, written beside the log, synced
// and renamed over it, so the log grows with the state, not its history,
// and a crash at any point leaves a log that replays: SAVE (answered once
// the new log is on disk), BGSAVE and BGREWRITEAOF (in the background) and
// Valkey's automatic trigger (Config.AutoRewritePercentage,
// AutoRewriteMinSize, CONFIG SET auto-aof-rewrite-*) run one. SHUTDOWN syncs
// the log. In ckf mode a restored image rebuilds the filters from the exact
// state: the same blocks, with the CKF's own counters started over.
//
// Connections. Each connection is bounded: a command must arrive within
// Config.CommandTimeout of its first byte and be at most MaxRequestBytes, a
// reply must be taken within Config.WriteTimeout, and Config.IdleTimeout
// (default none, as Valkey's) ends silent connections; at most MaxConns
// connections are served.
//
// Concurrency. Connections are served concurrently. Write commands run one
// at a time (as the module's single-threaded server runs them), each with
// its log record; MATCH and SELECT run in parallel under each Store's read
// lock.
//
// Files:
//   - wire.go: payload codecs and limits.
//   - store.go: the index model, events (APPLY), MATCH and SELECT.
//   - rank.go: rank replacement, retirement, reset, worker-wide removal.
//   - register.go: registrations, registration tokens, owner leases.
//   - admission.go: authoritative admission (reservations, capacities).
//   - gc.go: lifecycle GC (the module's resumable cursor, plans and
//     transitions) and the lifecycle and GC counters.
//   - order.go: the module's dictionary orders and per-object arrays that
//     GC and the lifecycle commands follow.
//   - ckf.go: the Backing choice, the CKF projection and its MATCH, and
//     STATS DETAIL.
//   - commands.go: the Engine, the module's command table and keyspace
//     writes (DEL, FLUSHALL).
//   - admin.go: the server commands (INFO, CONFIG, EXISTS, ROLE, WAIT,
//     SAVE, SHUTDOWN, MEMORY, …).
//   - server.go: the redcon server, AUTH, connection bounds.
//   - sentinel.go: SENTINEL, answered as a Sentinel whose one primary is
//     this server (Config.SentinelMaster), and subscriptions to its event
//     channels.
//   - framing.go: arrayFilter, which drops empty and null command arrays
//     where commands begin.
//   - databases.go: SELECT's logical databases: stored keys, FLUSHDB,
//     keys per database.
//   - aof.go: the append-only log and its replay.
//   - image.go: the state image, the whole state of an Engine as bytes.
//   - rewrite.go: log rewrites (SAVE, BGSAVE, BGREWRITEAOF, the automatic
//     trigger) and ParseMemory.
//   - errors.go: the module's error names.
//
// Tests prove the spec's golden byte vectors; the scenarios of the module's
// own suites reply for reply (module_test.go: core, fences, registration,
// leases, limits, GC reclamation; gc_test.go: gc_bounded, gc_persistence
// and gc_oversized, GC replies call by call as derived from the module's
// source; admission_test.go: admission and its expiry order;
// sentinel_test.go: go-redis's Sentinel-backed client reaching the index,
// each SENTINEL reply as its SentinelClient parses it, the subscription
// bound, FuzzSentinelCommands;
// sentinel_real_test.go: every SENTINEL query's reply against Debian's
// redis-server running as a Sentinel of one primary (types, field names
// and order, errors byte for byte; addresses, ids and times by type), and
// a session of subscriptions to its event channels reply for reply;
// tests/dynkv
// over the wire with Debian's python3-redis,
// with the traffic of a Dynamo frontend and its workers); FuzzEngine; hostile inputs (malformed payloads,
// over-limit counts, unknown commands, oversized bulk strings, connections
// over the limit, clients stalling mid-command or never reading, while
// others are served); the randomized harness stream (Dynamo's exact model
// bounds every score), in process and over the wire; restart recovery (after Close and after SIGKILL,
// with lease takeovers, concurrent writers and rejected commands in the
// log; goindex dynkv's own test kills its child at random points of random
// workloads, during and between log rewrites, and compares with a twin);
// state images (engines restored at random points of random lifecycle
// streams answer every later command as the original, every state field
// placed, damaged images refused, FuzzDecodeImage); log rewrites (compaction,
// a crash at every stage of a rewrite, the automatic trigger and its
// CONFIG); the server commands Dynamo does not send answered byte for byte
// as redis-server answers them (CLIENT SETNAME/GETNAME, empty and null
// arrays, SELECT; recorded, and live against Debian's redis-server),
// databases kept apart across FLUSHDB and a restart from the log,
// FuzzArrayFilter; and concurrency under -race. In ckf
// mode they prove the semantic and golden tests unchanged, the harness's
// bounds with no undercount, and, on a random stream of every mutation kind
// over the wire against an exact server, byte-identical mutation replies,
// MATCH replies equal to what the filters' membership predicts from the
// exact state, the collision rate against the spec's estimate, the lane
// limit, capacity omissions, and restart from the log.
package dynkv
