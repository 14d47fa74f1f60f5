/*
 * goindex.h — the C ABI of libgoindex.so, goindex's KV-cache index and router
 * library for NVIDIA Dynamo hosts.
 *
 * This hand-written header is the contract. It is stable within one
 * GOINDEX_ABI_VERSION: calls are only ever added, and structs that may grow
 * carry a leading struct_size the caller sets to sizeof(the struct).
 *
 * General rules (every call):
 *   - Handles are opaque, non-zero 64-bit integers, never pointers, never
 *     reused within a process. A closed or unknown handle returns
 *     GOINDEX_EHANDLE; it never crashes.
 *   - Every call that can fail returns int: 0 (GOINDEX_OK) or a negative
 *     GOINDEX_E* code. goindex_strerror(code) names the code;
 *     goindex_last_error(handle, ...) gives the detail of the last failure on
 *     that handle.
 *   - Inputs are (pointer, length) pairs; a NULL pointer is allowed only with
 *     length 0. Outputs go into caller-owned buffers with an explicit capacity;
 *     a buffer that is too small returns GOINDEX_EBUFFER and stores the number
 *     of entries needed in *written.
 *   - The library never retains a host pointer after a call returns (inputs
 *     are copied or read during the call only) and never hands out a pointer to
 *     Go memory. Strings from goindex_strerror are static.
 *   - No Go panic crosses into the host: an internal failure returns
 *     GOINDEX_EINTERNAL. After GOINDEX_EINTERNAL the handle's state is
 *     unspecified; close it.
 *   - A failed call changes no state unless its Returns section says exactly
 *     what changed.
 *
 * Threading: goindex_probe, goindex_probe_batch, goindex_hash_tokens,
 * goindex_score, goindex_stats and goindex_last_error may run on any number of
 * host threads at once, concurrently with one thread applying events
 * (insert, remove, clear, remove_worker, remove_rank, apply_frame, set_rtt,
 * attach_replica). Event calls on one handle are serialized by the library
 * (calls from several threads are safe but run one at a time). goindex_close must not race with other calls on
 * the same handle: calls that start after close return GOINDEX_EHANDLE.
 *
 * Units: hashes are uint64 (Dynamo's u64 hash space; signed i64 hashes are the
 * same 64 bits); depths are in KV blocks; tokens are token counts; times are
 * milliseconds as double.
 *
 * Modes: "exact" and "ckf" index one DC's KV events (lanes are members);
 * "global" indexes DCs (lanes are DCs, fed by relay frames or a shared
 * replica). A call of the other kind returns GOINDEX_EMODE after its argument
 * checks.
 *
 * One Go runtime per process: this library also exports Dynamo's worker
 * selector plugin symbol (dynamo_worker_selector_plugin_v1, at the end of this
 * header); load only one Go-built shared library into a host process, and do
 * not fork after loading.
 *
 * Signals: loading the library installs the Go runtime's handlers for
 * SIGSEGV, SIGBUS, SIGFPE, SIGPIPE and SIGURG (its preemption signal),
 * keeping any handler the host installed before and calling it for signals
 * outside Go code; the library installs no other handler (SIGINT, SIGTERM
 * and the rest stay the host's). A fault inside a call becomes a Go panic,
 * which the call's guard turns into GOINDEX_EINTERNAL. A host that
 * installs a handler for those signals after loading must set SA_ONSTACK
 * and, for SIGSEGV, SIGBUS and SIGFPE, call the handler it replaced when
 * the fault is in Go code; one that does not turns such a fault into the
 * process's death. (Python: enable faulthandler before loading the
 * library, e.g. python3 -X faulthandler, or not at all.)
 */
#ifndef GOINDEX_H
#define GOINDEX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GOINDEX_ABI_VERSION is the ABI generation this header describes;
 * goindex_abi_version() returns the library's. It changes only when an
 * existing call or struct changes incompatibly. Additions within version 1,
 * which hosts built against earlier version-1 headers need not know about:
 * global mode (goindex_open "mode": "global" used to return
 * GOINDEX_EUNAVAILABLE), goindex_set_rtt, goindex_counters.frames_ignored
 * (filled only when struct_size covers it), the worker-selector plugin
 * export, and fail-open scoring: goindex_score_result.flags and .degraded
 * (80 bytes; a host passing the 72-byte result of earlier headers keeps
 * GOINDEX_ENOCANDIDATE where a newer one gets a degraded result), the
 * "default_dc" config key and goindex_counters' degraded_scores,
 * replica_state, lanes_bad, integrity_failures and replica_faults. */
#define GOINDEX_ABI_VERSION 1

/* Status codes. */
#define GOINDEX_OK 0            /* success */
#define GOINDEX_EINVAL -1       /* invalid argument: NULL with nonzero length, bad enum value, bad struct_size */
#define GOINDEX_EHANDLE -2      /* unknown or closed handle */
#define GOINDEX_ECONFIG -3      /* bad configuration JSON */
#define GOINDEX_ETOOBIG -4      /* a length exceeds a documented limit */
#define GOINDEX_EBUFFER -5      /* output buffer too small; *written holds the entries needed */
#define GOINDEX_EPARENT -6      /* stored event's parent is not held by the member; nothing changed */
#define GOINDEX_ESEQUENCE -7    /* invalid block sequence (parent among the blocks, remapped block); nothing changed */
#define GOINDEX_ENOTFOUND -8    /* some removed hashes were unknown; the known ones were removed */
#define GOINDEX_ECAPACITY -9    /* capacity: ckf blocks tracked but not all admitted to the filter; or no free lane, or no free tree node (nothing changed) */
#define GOINDEX_EMODE -10       /* the call is not available in this handle's mode (see Modes above) */
#define GOINDEX_EFRAME -11      /* malformed or rejected relay frame; only the frame's lane is affected */
#define GOINDEX_EREPLICA -12    /* the replica file cannot be attached (missing, bad header, wrong format) */
#define GOINDEX_ENOCANDIDATE -13 /* score: no eligible candidate */
#define GOINDEX_EINTERNAL -14   /* internal error (a recovered panic); close the handle */
#define GOINDEX_EUNAVAILABLE -15 /* feature not built into this library */

/* Limits (inputs above them return GOINDEX_ETOOBIG). */
#define GOINDEX_MAX_CONFIG_BYTES (1u << 20)   /* config JSON */
#define GOINDEX_MAX_BLOCKS (1u << 20)         /* blocks per event, hashes per query */
#define GOINDEX_MAX_TOKENS (1u << 26)         /* tokens per call */
#define GOINDEX_MAX_BATCH (1u << 16)          /* queries per goindex_probe_batch */
#define GOINDEX_MAX_CANDIDATES (1u << 16)     /* candidates per goindex_score */
#define GOINDEX_MAX_FRAME_BYTES (64u << 20)   /* one relay frame */
#define GOINDEX_MAX_NAME_BYTES 4096           /* LoRA name, cache namespace, file path */

/* Read-only element types of input arrays. They are const-qualified so hosts
 * may pass const data; the typedefs keep this header and the one the Go
 * toolchain generates identical (the build compiles both in one unit). */
typedef const uint64_t goindex_in_u64;
typedef const uint32_t goindex_in_u32;
typedef const uint8_t goindex_in_u8;
typedef const char goindex_in_char;
typedef const size_t goindex_in_size;

/* goindex_overlap is one entry of a probe result: a member's (or DC lane's)
 * matched prefix depth. In exact and ckf modes id is the worker id and rank
 * the dp rank; in global mode id is the DC id and rank the lane number.
 * 16 bytes. */
typedef struct goindex_overlap {
	uint64_t id;
	uint32_t rank;
	uint32_t blocks; /* matched prefix depth in KV blocks, > 0 */
} goindex_overlap;

/* Candidate flags: which optional signals a goindex_candidate carries. A
 * signal that is absent is excluded from the cost, never read as zero. */
#define GOINDEX_CAND_LOAD 1u     /* active_prefill_tokens and active_decode_blocks are valid */
#define GOINDEX_CAND_CAPACITY 2u /* capacity_blocks is valid */
#define GOINDEX_CAND_RTT 4u      /* rtt_ms is valid */

/* goindex_candidate is one routing candidate with its live signals. 48 bytes. */
typedef struct goindex_candidate {
	uint64_t id;                    /* worker id, or DC id in global mode */
	uint32_t rank;                  /* dp rank, or lane in global mode */
	uint32_t flags;                 /* GOINDEX_CAND_* */
	uint64_t active_prefill_tokens; /* tokens queued or running prefill */
	uint64_t active_decode_blocks;  /* KV blocks of running decodes */
	uint64_t capacity_blocks;       /* KV capacity in blocks */
	double rtt_ms;                  /* round trip from the router to the candidate */
} goindex_candidate;

/* Scoring policies (goindex_score_request.policy). */
#define GOINDEX_POLICY_DEFAULT 0          /* the handle's configured policy (default: ttft) */
#define GOINDEX_POLICY_TTFT 1             /* RTT + queue wait + uncached prefill time (goindex's model) */
#define GOINDEX_POLICY_PREFIX_THEN_LOAD 2 /* longest prefix, then lowest load (upstream's proof of concept) */
#define GOINDEX_POLICY_LOAD_ONLY 3        /* lowest load, prefix ignored */
#define GOINDEX_POLICY_CREDIT 4           /* Dynamo's block-cost rule with overlap credit */

/* goindex_score_request is one routing question. 64 bytes on LP64. */
typedef struct goindex_score_request {
	uint32_t struct_size;                  /* sizeof(goindex_score_request) */
	uint32_t policy;                       /* GOINDEX_POLICY_* */
	const uint64_t* local_hashes;          /* the prompt's local block hashes from the root */
	size_t n_hashes;
	uint64_t isl_tokens;                   /* prompt tokens; 0 means n_hashes * block_size */
	const goindex_candidate* candidates;   /* NULL with 0: every member or ready lane the handle knows */
	size_t n_candidates;
	double temperature;                    /* 0: minimum cost (ties broken uniformly); > 0: softmax sampling as Dynamo */
	uint64_t random_seed;                  /* seed for tie-breaking and sampling; 0 picks one */
} goindex_score_request;

/* Score result flags (goindex_score_result.flags). */
#define GOINDEX_SCORE_DEGRADED 1u /* no candidate had the fresh signals the policy needs: see degraded */

/* Why a score was degraded, or a replica is (goindex_score_result.degraded,
 * goindex_counters.replica_state). */
#define GOINDEX_DEGRADED_NONE 0            /* fresh signals decided; the replica is healthy */
#define GOINDEX_DEGRADED_REPLICA_MISSING 1 /* no replica is attached (the file is gone or unreadable) */
#define GOINDEX_DEGRADED_REPLICA_DAMAGED 2 /* the file is no valid replica (truncated, corrupt, foreign) */
#define GOINDEX_DEGRADED_CONSUMER_STALE 3  /* the replica's consumer stopped (its heartbeat is older than max_staleness_ms) */
#define GOINDEX_DEGRADED_SIGNALS_STALE 4   /* the replica is healthy but no candidate had fresh signals (or no replica is involved) */

/* goindex_score_result is the chosen candidate and its cost broken into parts.
 * 80 bytes (72 without flags and degraded, as earlier version-1 headers
 * had it: the library then fills only those 72). */
typedef struct goindex_score_result {
	uint32_t struct_size;   /* set by the caller to sizeof(goindex_score_result) */
	int32_t chosen;         /* index into the request's candidates, or the lane/member ordinal when candidates was NULL */
	uint64_t id;            /* chosen worker id or DC id */
	uint32_t rank;          /* chosen dp rank or lane */
	uint32_t eligible;      /* candidates that had every signal the policy needs */
	uint64_t cached_blocks; /* probe depth of the chosen candidate */
	uint64_t cached_tokens; /* cached_blocks * block_size, capped at isl_tokens */
	double cost;            /* the policy's cost (ms for ttft, blocks for credit/prefix/load) */
	double rtt_ms;          /* ttft parts; 0 where the policy has none */
	double queue_ms;
	double prefill_ms;
	uint32_t flags;         /* GOINDEX_SCORE_* */
	uint32_t degraded;      /* GOINDEX_DEGRADED_*: why, when flags has GOINDEX_SCORE_DEGRADED */
} goindex_score_result;

/* goindex_counters holds a handle's counters (filled by goindex_stats). Set struct_size first; the library
 * fills at most struct_size bytes, so a host built against the 96- or
 * 104-byte struct of earlier headers keeps working. 144 bytes. */
typedef struct goindex_counters {
	uint32_t struct_size;         /* sizeof(goindex_counters) */
	uint32_t mode;                /* 1 exact, 2 ckf, 3 global */
	uint64_t blocks;              /* blocks tracked (exact ownership entries); global: the sum of active_blocks in the ready lanes' last load reports */
	uint64_t members;             /* members (worker, rank) known; global: lanes (DCs) */
	uint64_t lanes_ready;         /* ckf/global: lanes with an installed table (a snapshot) */
	uint64_t memory_bytes;        /* index memory, approximate; global: the lane table (mapped bytes when attached) */
	uint64_t capacity_omissions;  /* ckf: blocks tracked but not admitted to the filter; global: 0 (each relay counts its own) */
	uint64_t events_applied;      /* events accepted */
	uint64_t events_rejected;     /* events that returned an error */
	uint64_t probes;              /* probe and score calls served */
	uint64_t frames_applied;      /* global: relay frames that changed a lane (chunk stored, snapshot installed, delta applied, drain acknowledged, load recorded) */
	uint64_t frames_rejected;     /* global: relay frames that returned GOINDEX_EFRAME */
	uint64_t replica_generation;  /* global: layout generation of the attached replica, 0 if none */
	uint64_t frames_ignored;      /* global: frames accepted but ignored (stale, duplicate, of a DC without a lane, for a faulted lane) */
	uint64_t degraded_scores;     /* scores answered degraded (GOINDEX_SCORE_DEGRADED) */
	uint32_t replica_state;       /* global: the attached replica's GOINDEX_DEGRADED_* (0: healthy or none attached) */
	uint32_t reserved;            /* 0 */
	uint64_t lanes_bad;           /* global: mask of the attached replica's lanes failing their integrity check (left out of probes) */
	uint64_t integrity_failures;  /* global: lanes found failing it since attach */
	uint64_t replica_faults;      /* global: probes of the replica mapping that faulted (the file was truncated) */
} goindex_counters;

/* goindex_abi_version returns GOINDEX_ABI_VERSION of the loaded library.
 * Threading: any thread. Ownership: no pointers. Returns: the version
 * (never fails). */
uint32_t goindex_abi_version(void);

/* goindex_open creates an index from a JSON config and stores its handle in
 * *handle_out.
 * Config keys (all optional unless noted):
 *   "mode": "exact" (the radix tree, Dynamo's semantics; default), "ckf"
 *           (one cuckoo-filter lane per member, probed together), or "global"
 *           (lanes are DCs fed by goindex_apply_frame or goindex_attach_replica);
 *   "lanes": ckf: maximum members (1..64; default 64);
 *   "expected_blocks_per_lane": ckf: sizing of each lane; global: the bucket
 *           count of the frames' format, sized as `goindex relay` sizes its
 *           filter (default 1048576, i.e. 524288 buckets, as the relay's);
 *   "buckets": global: the bucket count itself (a power of two in [2, 2^24];
 *           default: from expected_blocks_per_lane);
 *   "block_size": tokens per KV block (default 16; used by goindex_*_tokens and score);
 *   "clear_scope": "rank" (default) or "worker": what a cleared event drops;
 *   "seed": ckf and global addressing seed (default 0x5DEECE66D1B54A33, the relay's);
 *   "max_kicks": ckf cuckoo kicks (1..4096; default 500);
 *   "dcs": global: the DC ids of the lanes fed by goindex_apply_frame, lane l
 *           being dcs[l] (1..64 distinct ids; the consumer manifest). Without
 *           it a global handle has no lanes until goindex_attach_replica;
 *           with it, it holds one in-process table of buckets words per lane
 *           (8 bytes × buckets × ceil(lanes/8)·8: 64 MiB for 13 DCs at the
 *           default size);
 *   "domain": global: the domain whose frames the lanes take (default 0);
 *   "consumer_instance": global: this consumer's instance id in leases (default 0);
 *   "max_staleness_ms": global: load reports and RTTs older than this are
 *           left out of score, never read as zero (default 5000); also the
 *           heartbeat age past which an attached replica's consumer counts
 *           as stopped;
 *   "default_dc": the DC id (global mode; the candidate id with candidates)
 *           a degraded score picks when no candidate has any signal
 *           (default: lane 0, or the first candidate);
 *   "replica_check_ms": global: how often probes and scores look for a new
 *           generation of the attached replica (default 100; 0: every call);
 *   "policy": default scoring policy name: "ttft" (default), "prefix-then-load", "load-only", "credit";
 *   "prefill_tokens_per_ms", "queue_tokens_per_ms", "decode_blocks_per_ms":
 *           the ttft throughput model where a candidate's load report gives
 *           none: one request's prefill rate, the rate queued prefill
 *           drains (0: the prefill rate), the rate decodes free KV blocks
 *           (defaults 20, 0, 50).
 * Unknown keys are rejected (GOINDEX_ECONFIG) so typos are caught. Every key
 * is checked whatever the mode.
 * Threading: any thread. Ownership: config is read during the call only.
 * Returns: GOINDEX_OK; GOINDEX_EINVAL (NULL config with nonzero length or NULL
 * handle_out); GOINDEX_ETOOBIG (config over GOINDEX_MAX_CONFIG_BYTES);
 * GOINDEX_ECONFIG (detail via goindex_last_error(0, ...)); GOINDEX_EINTERNAL. */
int goindex_open(goindex_in_char* config_json, size_t config_len, uint64_t* handle_out);

/* goindex_close releases a handle (a global handle's replica mapping is
 * unmapped once no probe reads it). Closing twice returns GOINDEX_EHANDLE.
 * Threading: must not race with other calls on the same handle.
 * Ownership: no pointers.
 * Returns: GOINDEX_OK; GOINDEX_EHANDLE; GOINDEX_EINTERNAL. */
int goindex_close(uint64_t handle);

/* goindex_insert applies one stored event of member (worker_id, dp_rank): the
 * blocks form a chain below *parent_hash (the parent's external hash), or below
 * the root when parent_hash is NULL. external_hashes[i] is the engine's block
 * hash, local_hashes[i] the block's tokens hash (Dynamo's tokens_hash).
 * Duplicate stores are idempotent. event_id is recorded for diagnostics.
 * Threading: event call (serialized per handle; concurrent with probes).
 * Ownership: arrays are read during the call only.
 * Returns: GOINDEX_OK; GOINDEX_EINVAL; GOINDEX_ETOOBIG (n_blocks over
 * GOINDEX_MAX_BLOCKS); GOINDEX_EHANDLE; GOINDEX_EMODE (global mode, after the
 * argument checks);
 * GOINDEX_EPARENT or GOINDEX_ESEQUENCE (nothing changed); GOINDEX_ECAPACITY
 * (ckf: the blocks are tracked, some are not in the filter until space frees;
 * or, nothing changed, a new member found every lane taken or the exact tree
 * ran out of node ids); GOINDEX_EINTERNAL. */
int goindex_insert(uint64_t handle, uint64_t worker_id, uint32_t dp_rank, uint64_t event_id,
                   goindex_in_u64* parent_hash, goindex_in_u64* external_hashes,
                   goindex_in_u64* local_hashes, size_t n_blocks);

/* goindex_insert_tokens is goindex_insert with the local hashes computed from
 * token ids the Dynamo way (XXH3-64 of each block's tokens as LE u32, seed
 * 1337 salted by the LoRA name and cache namespace; a NULL or empty name means
 * none). tokens must hold at least n_blocks * block_size tokens; tokens past
 * the last full block are ignored.
 * Threading, Ownership: as goindex_insert.
 * Returns: as goindex_insert; GOINDEX_EINVAL also when n_tokens is short;
 * GOINDEX_ETOOBIG for n_tokens over GOINDEX_MAX_TOKENS or names over
 * GOINDEX_MAX_NAME_BYTES. */
int goindex_insert_tokens(uint64_t handle, uint64_t worker_id, uint32_t dp_rank, uint64_t event_id,
                          goindex_in_u64* parent_hash, goindex_in_u64* external_hashes, size_t n_blocks,
                          goindex_in_u32* tokens, size_t n_tokens,
                          goindex_in_char* lora_name, size_t lora_len,
                          goindex_in_char* cache_namespace, size_t namespace_len);

/* goindex_remove applies one removed event: the member drops the blocks with
 * these external hashes. A mid-chain removal makes the member's descendants
 * of that block unreachable (Dynamo's semantics).
 * Threading, Ownership: as goindex_insert.
 * Returns: GOINDEX_OK; GOINDEX_EINVAL; GOINDEX_ETOOBIG; GOINDEX_EHANDLE;
 * GOINDEX_EMODE; GOINDEX_ENOTFOUND (in exact and ckf modes alike: some
 * hashes were not the member's, or the member holds nothing; unknown
 * hashes skipped, known ones removed); GOINDEX_EINTERNAL. */
int goindex_remove(uint64_t handle, uint64_t worker_id, uint32_t dp_rank, uint64_t event_id,
                   goindex_in_u64* external_hashes, size_t n);

/* goindex_clear applies one cleared event: the member (or, with
 * "clear_scope": "worker", every rank of its worker) drops all blocks.
 * Threading: event call. Ownership: no pointers. Returns: GOINDEX_OK;
 * GOINDEX_EHANDLE; GOINDEX_EMODE; GOINDEX_EINTERNAL. */
int goindex_clear(uint64_t handle, uint64_t worker_id, uint32_t dp_rank, uint64_t event_id);

/* goindex_remove_worker drops every rank of a worker (unknown workers are a
 * no-op). Threading: event call. Ownership: no pointers. Returns:
 * GOINDEX_OK; GOINDEX_EHANDLE; GOINDEX_EMODE; GOINDEX_EINTERNAL. */
int goindex_remove_worker(uint64_t handle, uint64_t worker_id);

/* goindex_remove_rank drops one (worker, dp rank) (unknown members are a
 * no-op). Threading: event call. Ownership: no pointers. Returns: as
 * goindex_remove_worker. */
int goindex_remove_rank(uint64_t handle, uint64_t worker_id, uint32_t dp_rank);

/* goindex_hash_tokens computes the Dynamo local block hashes of token ids with
 * the handle's block size into out (one per full block; a trailing partial
 * block is ignored) and stores the count in *written.
 * Threading: any thread. Ownership: inputs read during the call only.
 * Returns: GOINDEX_OK; GOINDEX_EINVAL; GOINDEX_ETOOBIG; GOINDEX_EHANDLE;
 * GOINDEX_EBUFFER (*written = blocks needed); GOINDEX_EINTERNAL. */
int goindex_hash_tokens(uint64_t handle, goindex_in_u32* tokens, size_t n_tokens,
                        goindex_in_char* lora_name, size_t lora_len,
                        goindex_in_char* cache_namespace, size_t namespace_len,
                        uint64_t* out, size_t capacity, size_t* written);

/* goindex_probe matches a request's local block hashes (from the root)
 * against every member (exact, ckf) or ready DC lane (global) and writes one
 * goindex_overlap per member or lane with a positive depth into out, in
 * ascending (id, rank) order; *written = entries written. Exact mode gives
 * Dynamo's find_matches scores; ckf and global modes never report below the
 * exact depth of a tracked block and overcount only through fingerprint
 * collisions. Global mode reports id = DC id and rank = lane, and reads the
 * lanes in place (the in-process table, or the attached replica, whose new
 * generations it follows as goindex_attach_replica says).
 * Threading: any thread, concurrently with event calls.
 * Ownership: local_hashes read during the call only; out written only.
 * Returns: GOINDEX_OK; GOINDEX_EINVAL (NULL with nonzero n, NULL written);
 * GOINDEX_ETOOBIG; GOINDEX_EHANDLE; GOINDEX_EBUFFER (*written = entries
 * needed; nothing else is meaningful); GOINDEX_EINTERNAL. */
int goindex_probe(uint64_t handle, goindex_in_u64* local_hashes, size_t n,
                  goindex_overlap* out, size_t capacity, size_t* written);

/* goindex_probe_batch runs n_queries probes in one call. Query q is
 * local_hashes[offset_q .. offset_q + lengths[q]), offsets being the running
 * sum of lengths. Results are written back to back into out; counts[q] (an
 * array of n_queries) receives the number of entries of query q; *written =
 * total entries.
 * Threading, Ownership: as goindex_probe.
 * Returns: as goindex_probe; GOINDEX_ETOOBIG also for n_queries over
 * GOINDEX_MAX_BATCH or a total over GOINDEX_MAX_BLOCKS * 16. */
int goindex_probe_batch(uint64_t handle, goindex_in_u64* local_hashes, goindex_in_size* lengths,
                        size_t n_queries, goindex_overlap* out, size_t capacity,
                        size_t* counts, size_t* written);

/* goindex_score picks the candidate with the lowest cost under the request's
 * policy and fills *result (struct_size first). With the ttft policy:
 * cost = rtt_ms + queue_ms + prefill_ms + what the request costs others:
 * queue_ms is the wait behind the candidate's queued prefill, or for KV
 * room when its running and queued requests and this one's uncached blocks
 * exceed its capacity; prefill_ms is the uncached part of the prompt; the
 * rest (in cost, not in a part of its own) is the wait this prefill adds
 * for the requests behind it at the fleet's utilization plus, in global
 * mode with counted load reports, the cached blocks it evicts at a DC whose
 * cache turns over fast (see goindex_apply_frame).
 * Candidates missing a signal the policy needs are not eligible.
 * With candidates NULL (n_candidates 0), a global handle offers every ready
 * lane (id = DC id, rank = lane) with its load from the DC's last load report
 * and its RTT (the consumer's measurement in an attached replica,
 * goindex_set_rtt's for fed lanes), each only when younger than
 * "max_staleness_ms"; result->chosen is then the chosen lane.
 * Fail open: with the 80-byte result, when no candidate is eligible (the
 * replica missing, damaged or left by a stopped consumer, or every signal
 * stale) the call still succeeds, flags has GOINDEX_SCORE_DEGRADED and
 * degraded says why: a global handle's choice is then made over every lane
 * it knows (ready or not; with the replica gone, the last file's DCs) on
 * their last known load and RTT with cached blocks ignored, and is the lane
 * of "default_dc" when none has any; given candidates fall back to the one
 * whose id is "default_dc", or the first. eligible is 0 for a default pick.
 * A host passing the 72-byte result of earlier headers gets
 * GOINDEX_ENOCANDIDATE instead, as before.
 * Threading: any thread, concurrently with event calls.
 * Ownership: request and its arrays read during the call only.
 * Returns: GOINDEX_OK; GOINDEX_EINVAL (NULL pointers, bad struct_size, unknown
 * policy); GOINDEX_ETOOBIG; GOINDEX_EHANDLE; GOINDEX_ENOCANDIDATE (for
 * candidates NULL in exact and ckf modes: members carry no load signals; in
 * global mode when the handle knows no lane at all; and, with the 72-byte
 * result only, when no candidate is eligible); GOINDEX_EINTERNAL. */
typedef const goindex_score_request goindex_in_score_request;
int goindex_score(uint64_t handle, goindex_in_score_request* request, goindex_score_result* result);

/* goindex_apply_frame feeds one relay frame (exactly one, as `goindex relay`
 * publishes it: snapshot chunk, delta, drain marker, heartbeat or load
 * report) into a global handle opened with "dcs", for hosts with their own
 * transport. The frame's producer pool (domain, DC) picks its lane; frames
 * of other domains or DCs are ignored. Each lane runs the CKF protocol's
 * lane state machine (spec ckf-algorithm.md §5.3: identity, lease, sequence);
 * a frame for one lane never changes another.
 * Leases are consumer-local (fan-out transport). A frame without a lease,
 * as the relay publishes them, is given one by the library: the first chunk
 * (bucket 0) of a snapshot claims its DC's lane under a new lease (a new
 * subscription: the lane leaves READY until the last chunk is in) unless it
 * continues the snapshot being installed or repeats the installed one; every
 * other frame gets the lane's current lease. So a host feeds the lane its
 * DC's stored snapshot and then the deltas after it, in order; after a
 * gap (GOINDEX_EFRAME, the lane faulted) or a relay restart it feeds a
 * newer snapshot, which recovers the lane. Frames carrying a lease (leased
 * transports) must carry the lane's current lease. Heartbeats only measure
 * lag here (the transport's ordering is unknown). Load reports of the
 * lane's producer feed score. A relay publishes each load sample on
 * P.D.C.load and, once its DC has stored a block, the same sample with its
 * stored-blocks counter on P.D.C.load-stored: a host should subscribe to
 * both and feed both (a repeat of a sample already recorded is ignored).
 * The counter's increments between reports of one relay incarnation give
 * the DC's insert rate, from which ttft charges an uncached prefill for the
 * cached blocks it evicts: the prefill's time × 1 / (1 + turnover / 30 s),
 * turnover being the time the DC's cache takes to store its capacity anew
 * (a half at 30 s, a tenth at 270 s); without counted reports it is 0.
 * Threading: event call. Ownership: frame read during the call only.
 * Returns: GOINDEX_OK (applied, or ignored: stale, duplicate, under a
 * lease that is not the lane's current one, of a DC without a lane, for a
 * faulted lane awaiting a snapshot; see goindex_stats); GOINDEX_EINVAL; GOINDEX_ETOOBIG (over
 * GOINDEX_MAX_FRAME_BYTES); GOINDEX_EHANDLE; GOINDEX_EMODE (not a global
 * handle, opened without "dcs", or a replica is attached);
 * GOINDEX_EFRAME (malformed: nothing changed; or rejected by its lane: a
 * fault, after which the lane is not ready until a new snapshot, or a
 * snapshot chunk out of order, after which the lane awaits the snapshot from
 * bucket 0; goindex_last_error names the problem and the lane);
 * GOINDEX_EINTERNAL. */
int goindex_apply_frame(uint64_t handle, goindex_in_u8* frame, size_t len);

/* goindex_attach_replica maps the shared-memory replica file at path (written
 * by `goindex consume`; path_len bytes, no NUL needed) read-only into a global
 * handle; probes and scores then read the file's lanes (DC ids, RTTs and load
 * reports from its lane records) in place, with no copying, and
 * goindex_apply_frame and goindex_set_rtt return GOINDEX_EMODE from now on.
 * At most every "replica_check_ms" a probe or score checks whether the
 * consumer replaced the file with a new generation (a layout change) and maps
 * it; the old mapping stays until no probe on any thread still reads it. A
 * failed remap keeps the old generation serving. Attaching again (the same
 * or another path) replaces the mapping the same way. Nothing done to the
 * file crashes the host: if it is truncated, scribbled on or removed in
 * place, the reads that find it so (a SIGBUS included) answer as if no
 * lane were ready, the mapping is dropped, and the next valid file the
 * consumer writes at the path is attached by a later probe or score.
 * Threading: event call. Ownership: path read during the call only.
 * Returns: GOINDEX_OK; GOINDEX_EINVAL (NULL with nonzero length, empty, or
 * holding a NUL byte); GOINDEX_ETOOBIG (over GOINDEX_MAX_NAME_BYTES);
 * GOINDEX_EHANDLE; GOINDEX_EMODE (not a global handle); GOINDEX_EREPLICA
 * (missing or unreadable, not a replica file, another layout version,
 * corrupt: nothing changed, a replica attached before keeps serving);
 * GOINDEX_EINTERNAL. */
int goindex_attach_replica(uint64_t handle, goindex_in_char* path, size_t path_len);

/* goindex_set_rtt records the host's measured round trip to DC dc_id for a
 * global handle fed by goindex_apply_frame (an attached replica carries the
 * consumer's own measurements). score uses it for dc_id's lane until it is
 * older than "max_staleness_ms"; call it again to refresh it. rtt_ms is in
 * milliseconds; the sample is timestamped by the library's clock at the call.
 * Threading: event call. Ownership: no pointers.
 * Returns: GOINDEX_OK; GOINDEX_EINVAL (rtt_ms not finite or outside
 * [0, 86400000], or dc_id not in "dcs"); GOINDEX_EHANDLE; GOINDEX_EMODE (not
 * a global handle, opened without "dcs", or a replica is attached);
 * GOINDEX_EINTERNAL. */
int goindex_set_rtt(uint64_t handle, uint64_t dc_id, double rtt_ms);

/* goindex_stats fills at most stats->struct_size bytes of *stats (leaving
 * struct_size as the caller set it): counters other threads may be
 * changing, so the fields are not all read at one instant.
 * Threading: any thread. Ownership: stats written during the call only.
 * Returns: GOINDEX_OK; GOINDEX_EINVAL (NULL, or struct_size smaller than 8);
 * GOINDEX_EHANDLE; GOINDEX_EINTERNAL. */
int goindex_stats(uint64_t handle, goindex_counters* stats);

/* goindex_strerror returns a static, NUL-terminated name for a status code
 * ("unknown error" for codes it does not know). Threading: any thread.
 * Ownership: the string is static; never free it. Returns: the string
 * (never NULL). */
goindex_in_char* goindex_strerror(int code);

/* goindex_last_error copies the detail of the last failed call on handle
 * (handle 0: the last failed goindex_open of the process) into buf, always
 * NUL-terminated and truncated to capacity − 1 bytes; an empty string means no
 * failure recorded. *needed (optional, may be NULL) receives the full length
 * including the NUL.
 * Threading: any thread. Ownership: buf (capacity bytes) and *needed written
 * during the call only. Returns: GOINDEX_OK; GOINDEX_EINVAL (NULL buf with
 * nonzero capacity); GOINDEX_EHANDLE. */
int goindex_last_error(uint64_t handle, char* buf, size_t capacity, size_t* needed);

/* ---- Dynamo's worker-selector plugin, C ABI "v1" (dynamo-compat §5a) ----
 *
 * No Dynamo release loads C plugins. The runtime-loaded worker selector was
 * proposed upstream (ai-dynamo/dynamo PRs #11884 and #11886) and closed
 * without being merged; what Dynamo ships (v1.5 and later) is a compile-time
 * Rust extension point instead, which dynamo/rust's goindex-scorer crate
 * fits. This export serves the builds that carry one of the proposed
 * loaders. Four layouts circulate under the same entry symbol and the same
 * ABI version 1; the plugin accepts every one:
 *
 *   row       ai-dynamo/dynamo PR branch (API crate
 *             lib/worker-selector-plugin-api at 167f1d6, loader
 *             lib/kv-router/src/scheduling/runtime_plugin.rs at 33e85b1):
 *             input word @4 is candidate_size (128), candidates an array
 *             of dynamo_ws_candidate; 32-byte descriptor.
 *   columns72 ishandhanani/dynamo at d18d569: input word @4 is
 *             candidate_format (1), columns table of 72 bytes (through
 *             routing), bits 0–5 ("candidate signal groups"); 40-byte
 *             descriptor whose 4th callback is required_candidate_groups.
 *   columns96 ishandhanani/dynamo at d4c1cc2: the same with the three
 *             default_* columns (96 bytes, bits 0–8, "candidate inputs",
 *             callback required_candidate_inputs).
 *   worker columns  the renamed variant of the API crate proposed in #11884
 *             ("dynamo-worker-selection-api"): byte for byte columns96
 *             under worker names (worker_columns_format, worker_columns,
 *             worker_count, WorkerInputs, required_worker_inputs).
 *
 * The u32 at offset 4 of the input tells them apart: 128 is the row
 * layout's candidate size, 1 the columnar format; the columns table's own
 * struct_size tells 72 from 96. Each loader checks abi_version == 1,
 * struct_size >= its own descriptor size (32 for the row loader, 40 for the
 * columnar ones) and that its callbacks are non-NULL: the 40-byte
 * descriptor below, with all four, passes every one of them.
 *
 * Point DYN_ROUTER_WORKER_SELECTOR_PLUGIN at the absolute path of
 * libgoindex.so and, optionally, DYN_ROUTER_WORKER_SELECTOR_CONFIG at a JSON
 * config (all keys optional, unknown keys rejected, at most 64 KiB):
 * {"policy": "ttft" (default) | "credit" | "load-only" | "prefix-then-load",
 * "prefill_tokens_per_ms": 20, "queue_tokens_per_ms": (the prefill rate),
 * "decode_blocks_per_ms": 1, "credit": 1, "replica": "/dev/shm/goindex-1.replica",
 * "dc": 3, "max_staleness_ms": 5000}. The plugin chooses among the workers
 * Dynamo already found eligible, with goindex's cost model over Dynamo's
 * own cached-token, load and capacity figures (the input carries no block
 * hashes, so it does not probe an index). With "replica" (an absolute path;
 * "dc" is then this DC's id in it) the throughput rates come from the DC's
 * load report in goindex's shared replica, and a replica that is missing,
 * whose DC lane is not ready or whose load report is older than
 * max_staleness_ms makes select answer DYNAMO_WS_USE_DEFAULT.
 *
 * Fail open: select returns only DYNAMO_WS_OK or DYNAMO_WS_USE_DEFAULT.
 * Every input it does not recognise or cannot use (an unknown layout or
 * format, a struct_size below v1's, a NULL or misaligned pointer, too many
 * candidates, block_size 0, a missing column, a missing or stale replica,
 * an unknown state, a recovered panic) is USE_DEFAULT with the reason in
 * the error buffer (hosts ignore the buffer on USE_DEFAULT; it is there for
 * debugging), so no request Dynamo could serve fails because of goindex.
 * create and the 4th callback, which run when the router is built, return
 * INVALID_INPUT for a bad config, role or argument. Status codes: */
#define DYNAMO_WS_OK 0            /* *candidate_index_out is the choice */
#define DYNAMO_WS_INVALID_INPUT 1 /* create / required_*: a bad config or role, NULL state_out or inputs_out, an unknown state */
#define DYNAMO_WS_ERROR 2         /* not returned */
#define DYNAMO_WS_PANICKED 3      /* create / required_*: a recovered Go panic (the library stays usable) */
#define DYNAMO_WS_USE_DEFAULT 4   /* select: run Dynamo's default selector; the reason is in err */

#define DYNAMO_WS_ABI_VERSION 1
#define DYNAMO_WS_COLUMNAR 1                 /* dynamo_ws_input.candidate_format of the columnar layouts */
#define DYNAMO_WS_ROW_CANDIDATE_SIZE 128     /* dynamo_ws_row_input.candidate_size of the row layout */
#define DYNAMO_WS_COLUMNS72_SIZE 72          /* dynamo_ws_columns.struct_size of fork d18d569 (through routing) */
#define DYNAMO_WS_MAX_CANDIDATES (1u << 16)  /* candidates per select (goindex's limit; more is USE_DEFAULT) */

/* Candidate input bits (dynamo_ws_columns.provided_inputs, and what
 * required_candidate_inputs asks for: identity, cached tokens, load and,
 * for ttft, capacity, all within the bits 0–5 every columnar host knows). */
#define DYNAMO_WS_INPUT_IDENTITY (1ull << 0)            /* worker_ids, dp_ranks */
#define DYNAMO_WS_INPUT_CACHED_TOKENS (1ull << 1)       /* cached_tokens */
#define DYNAMO_WS_INPUT_CACHE_TIERS (1ull << 2)         /* cache_tiers */
#define DYNAMO_WS_INPUT_LOAD (1ull << 3)                /* loads */
#define DYNAMO_WS_INPUT_CAPACITY (1ull << 4)            /* capacities */
#define DYNAMO_WS_INPUT_ROUTING (1ull << 5)             /* routing */
#define DYNAMO_WS_INPUT_DEFAULT_COST (1ull << 6)        /* default_costs (96-byte table only) */
#define DYNAMO_WS_INPUT_DEFAULT_KV_OVERLAP (1ull << 7)  /* default_kv_overlaps (96-byte table only) */
#define DYNAMO_WS_INPUT_DEFAULT_DECODE_LOAD (1ull << 8) /* default_decode_loads (96-byte table only) */

/* dynamo_ws_byte_slice is borrowed bytes; len 0 may come with a NULL ptr. 16 bytes. */
typedef struct dynamo_ws_byte_slice {
	const uint8_t* ptr; /* @0 */
	size_t len;         /* @8 */
} dynamo_ws_byte_slice;

/* dynamo_ws_error_buffer is the host's buffer for a failure's message: the
 * plugin writes at most capacity bytes (UTF-8, not NUL-terminated, cut at
 * a character boundary) and sets written. 24 bytes. */
typedef struct dynamo_ws_error_buffer {
	uint8_t* ptr;    /* @0 */
	size_t capacity; /* @8 */
	size_t written;  /* @16 */
} dynamo_ws_error_buffer;

/* Entries of the struct-valued candidate columns. */
typedef struct dynamo_ws_cache_tiers { /* 40 bytes */
	double effective_overlap_blocks;            /* @0 */
	uint64_t device_overlap_blocks;             /* @8 */
	uint64_t host_pinned_overlap_blocks;        /* @16 */
	uint64_t disk_overlap_blocks;               /* @24 */
	uint64_t shared_cache_beyond_device_blocks; /* @32 */
} dynamo_ws_cache_tiers;

typedef struct dynamo_ws_load { /* 24 bytes */
	uint64_t active_prefill_tokens;   /* @0 */
	uint64_t active_decode_blocks;    /* @8 */
	uint64_t additional_active_blocks; /* @16 */
} dynamo_ws_load;

typedef struct dynamo_ws_capacity { /* 16 bytes; UINT64_MAX = unavailable */
	uint64_t total_kv_blocks;        /* @0 */
	uint64_t max_num_batched_tokens; /* @8 */
} dynamo_ws_capacity;

typedef struct dynamo_ws_routing { /* 24 bytes */
	dynamo_ws_byte_slice stable_routing_id; /* @0; empty = none */
	double preferred_taint_multiplier;      /* @16; 1.0 neutral */
} dynamo_ws_routing;

/* dynamo_ws_columns holds the candidates column by column: each pointer is
 * to candidate_count entries, or NULL when the column is not provided. 96
 * bytes; a table whose struct_size is 72 (fork d18d569) ends after routing
 * and the plugin never reads past it. */
typedef struct dynamo_ws_columns {
	uint32_t struct_size;                       /* @0, 72 or >= 96 */
	uint32_t reserved;                          /* @4 */
	uint64_t provided_inputs;                   /* @8, DYNAMO_WS_INPUT_* */
	const uint64_t* worker_ids;                 /* @16 */
	const uint32_t* dp_ranks;                   /* @24 */
	const uint64_t* cached_tokens;              /* @32, effective cached tokens */
	const dynamo_ws_cache_tiers* cache_tiers;   /* @40 */
	const dynamo_ws_load* loads;                /* @48 */
	const dynamo_ws_capacity* capacities;       /* @56 */
	const dynamo_ws_routing* routing;           /* @64 */
	const double* default_costs;                /* @72 */
	const double* default_kv_overlaps;          /* @80 */
	const uint64_t* default_decode_loads;       /* @88 */
} dynamo_ws_columns;

/* dynamo_ws_input is one selection of a columnar layout. 88 bytes. */
typedef struct dynamo_ws_input {
	uint32_t struct_size;                       /* @0, >= 88 */
	uint32_t candidate_format;                  /* @4, DYNAMO_WS_COLUMNAR (the row layout's candidate_size) */
	uint32_t flags;                             /* @8: bit0 request_id, bit1 session_id, bit2 expected_output_tokens, bit3 prefill tracked, bit4 shared-cache hits */
	uint32_t block_size;                        /* @12, tokens per KV block */
	uint32_t selection_mode;                    /* @16: 0 query-only, 1 tracked, 2 tracked with admission */
	uint32_t reserved;                          /* @20 */
	uint64_t isl_tokens;                        /* @24 */
	uint64_t expected_output_tokens;            /* @32 */
	dynamo_ws_byte_slice request_id;            /* @40 */
	dynamo_ws_byte_slice session_id;            /* @56 */
	const dynamo_ws_columns* candidate_columns; /* @72 */
	size_t candidate_count;                     /* @80 */
} dynamo_ws_input;

/* dynamo_ws_candidate is one candidate of the row layout. 128 bytes. */
typedef struct dynamo_ws_candidate {
	uint64_t worker_id;                         /* @0 */
	uint32_t dp_rank;                           /* @8 */
	uint32_t padding;                           /* @12 */
	uint64_t cached_tokens;                     /* @16, effective cached tokens */
	double effective_overlap_blocks;            /* @24 */
	uint64_t device_overlap_blocks;             /* @32 */
	uint64_t host_pinned_overlap_blocks;        /* @40 */
	uint64_t disk_overlap_blocks;               /* @48 */
	uint64_t shared_cache_beyond_device_blocks; /* @56 */
	uint64_t active_prefill_tokens;             /* @64 */
	uint64_t active_decode_blocks;              /* @72 */
	uint64_t additional_active_blocks;          /* @80 */
	dynamo_ws_byte_slice stable_routing_id;     /* @88 */
	double preferred_taint_multiplier;          /* @104 */
	uint64_t total_kv_blocks;                   /* @112, UINT64_MAX = unavailable */
	uint64_t max_num_batched_tokens;            /* @120, UINT64_MAX = unavailable */
} dynamo_ws_candidate;

/* dynamo_ws_row_input is one selection of the row layout: dynamo_ws_input's
 * header with candidate_size at @4 and an array of candidates at @72. 88
 * bytes. select's input is either struct; the word at @4 says which. */
typedef struct dynamo_ws_row_input {
	uint32_t struct_size;                   /* @0, >= 88 */
	uint32_t candidate_size;                /* @4, DYNAMO_WS_ROW_CANDIDATE_SIZE */
	uint32_t flags;                         /* @8, as dynamo_ws_input */
	uint32_t block_size;                    /* @12 */
	uint32_t selection_mode;                /* @16 */
	uint32_t reserved;                      /* @20 */
	uint64_t isl_tokens;                    /* @24 */
	uint64_t expected_output_tokens;        /* @32 */
	dynamo_ws_byte_slice request_id;        /* @40 */
	dynamo_ws_byte_slice session_id;        /* @56 */
	const dynamo_ws_candidate* candidates;  /* @72 */
	size_t candidate_count;                 /* @80 */
} dynamo_ws_row_input;

/* dynamo_ws_descriptor_v1 is the plugin's entry table, in static C memory.
 * 40 bytes (the row loader reads the first 32). create parses config
 * (passed by value) and writes a non-NULL opaque state (a number, never a
 * pointer into Go memory; NULL on failure); router_role is 0 unknown, 1
 * decode, 2 prefill (the cost model is the same for all three; other values
 * are INVALID_INPUT). select takes a dynamo_ws_input or a
 * dynamo_ws_row_input and writes the chosen index (< candidate_count) on
 * DYNAMO_WS_OK. destroy frees a state (an unknown one is ignored).
 * required_candidate_inputs (the columnar loaders' 4th callback under its
 * three names) writes the DYNAMO_WS_INPUT_* bits the configured policy
 * reads.
 * Threading: select calls on one state are serialized by Dynamo; different
 * states may run concurrently (the library is safe either way). Every
 * callback is bounded and never blocks (a replica is re-attached at most
 * once a second); a Go panic never crosses into the host. Nothing borrowed
 * is kept after a callback returns. */
typedef struct dynamo_ws_descriptor_v1 {
	uint32_t abi_version; /* @0, DYNAMO_WS_ABI_VERSION */
	uint32_t struct_size; /* @4, sizeof(dynamo_ws_descriptor_v1) */
	int32_t (*create)(dynamo_ws_byte_slice config, uint32_t router_role, void** state_out, dynamo_ws_error_buffer* err); /* @8 */
	int32_t (*select)(void* state, const dynamo_ws_input* in, size_t* candidate_index_out, dynamo_ws_error_buffer* err); /* @16 */
	void (*destroy)(void* state);                                                                                       /* @24 */
	int32_t (*required_candidate_inputs)(void* state, uint64_t* inputs_out, dynamo_ws_error_buffer* err);             /* @32 */
} dynamo_ws_descriptor_v1;

/* dynamo_worker_selector_plugin_v1 returns the plugin's descriptor.
 * Threading: any thread. Ownership: the descriptor is static C memory, the
 * same pointer on every call; never free it. Returns: the descriptor (never
 * NULL). The plugin's states are its own: goindex_* handles and plugin
 * states never mix. */
const dynamo_ws_descriptor_v1* dynamo_worker_selector_plugin_v1(void);

/* ---- Per-worker costs for Dynamo's compile-time extension point ----
 *
 * Dynamo v1.5 and later link WorkerScorer / WorkerPicker implementations
 * into a custom frontend (dynamo/rust/goindex-scorer is goindex's). A scorer
 * writes one cost per worker, so it asks the library for every worker's
 * cost at once, under a plugin state's policy and rates (created with the
 * descriptor's create and the same JSON config; destroyed with its
 * destroy). */

/* goindex_worker is one worker of a selection inside one DC. 40 bytes. */
typedef struct goindex_worker {
	uint64_t cached_tokens;         /* prompt tokens the worker already holds */
	uint64_t active_prefill_tokens; /* tokens queued or running prefill (GOINDEX_CAND_LOAD) */
	uint64_t active_decode_blocks;  /* KV blocks of running decodes (GOINDEX_CAND_LOAD) */
	uint64_t capacity_blocks;       /* KV capacity in blocks (GOINDEX_CAND_CAPACITY) */
	uint32_t flags;                 /* GOINDEX_CAND_LOAD | GOINDEX_CAND_CAPACITY; RTT is 0 inside a DC */
	uint32_t reserved;              /* zero */
} goindex_worker;

/* goindex_worker_costs writes costs[i], the cost of workers[i] under the
 * state's policy (ms for ttft; blocks for credit, prefix-then-load and
 * load-only), or NaN for a worker missing a signal the policy needs (load;
 * for every policy but load-only, cached tokens are always present here).
 * A state configured with a replica takes its DC's measured rates from it;
 * when the replica is missing or stale it uses the config's rates instead,
 * sets *degraded to 1 (else 0) and writes the reason into note (optional,
 * as the plugin's error buffers). block_size is tokens per KV block (> 0).
 * Threading: any thread; calls on one state serialize. Ownership: workers,
 * costs and note are used during the call only. Returns: GOINDEX_OK;
 * GOINDEX_EINVAL (NULL pointers with n > 0 or NULL degraded, block_size 0,
 * reserved not zero); GOINDEX_ETOOBIG (n over GOINDEX_MAX_CANDIDATES);
 * GOINDEX_EHANDLE (not a live plugin state); GOINDEX_EINTERNAL. */
typedef const goindex_worker goindex_in_worker;
int goindex_worker_costs(void* state, uint32_t block_size, uint64_t isl_tokens, goindex_in_worker* workers, size_t n, double* costs,
                         uint32_t* degraded, dynamo_ws_error_buffer* note);

#ifdef __cplusplus
}
#endif

#endif /* GOINDEX_H */
