// Command ffi is libgoindex.so: the C ABI of include/goindex.h as a thin,
// defensive layer over goindex/. Build it with ffi/build.sh, never with a
// plain go build: the script adds the soname, the export list and the check
// that the hand-written header and cgo's generated one agree.
//
// # Concepts
//
// A handle is an open index: mode "exact" is goindex/radix, mode "ckf" is
// goindex/ckfindex (one cuckoo-filter lane per member), mode "global" has
// one lane per DC. A global handle's lanes come from one of two sources:
// relay frames the host feeds with goindex_apply_frame into an in-process
// replica.Table run by relayproto's Consumer (the lane state machine of
// `goindex consume`; the config's "dcs" is the manifest), or the consumer's
// shared replica file mapped read-only by goindex_attach_replica
// (goindex/shm), searched in place. Once a replica is attached it is the
// only source. Handles are registered under ids that count up from 1 and
// are never reused; the registry (handle.go) is the package's only mutable
// global, and it also holds the states of Dynamo's worker-selector plugin.
//
// An attached replica is a sequence of views, one per layout generation:
// probes take a reference on the current view, and at most every
// "replica_check_ms" one of them asks shm whether the consumer retired the
// file; if so it maps the new generation and retires the old view, which
// the last probe still reading it unmaps. A failed remap keeps the old view.
//
// Frames from `goindex relay`'s fan-out log carry no lease: the handle, the
// lanes' one ingestor, gives each the lane's consumer-local lease, and a
// snapshot's first chunk that neither continues nor repeats the lane's
// snapshot takes a new one (a new subscription), so a lane faulted by a gap,
// a wrong drain marker or a restarted relay recovers with its DC's next
// snapshot.
//
// Every export runs the same four steps: a deferred recover guard (a panic
// becomes GOINDEX_EINTERNAL with its detail recorded), the handle and
// argument checks (NULL with a nonzero length, the GOINDEX_MAX_* limits,
// output triples, struct_size, enum values and flags), one call into
// goindex/ through the handle, and the mapping of the error to a code by the
// single table in errors.go (errors.Is against the ABI's and the indexes'
// sentinels). A failure's detail, prefixed by the call's name, becomes the
// handle's last error (goindex_open's: handle 0's).
//
// goindex_score hands the probe depths and the caller's candidates to
// goindex/score, whose policies carry the header's numbers (TTFT,
// PrefixThenLoad, LoadOnly, Credit). Every policy needs load signals: in
// exact and ckf modes only candidates carry them, so a request without
// candidates (NULL, 0) returns GOINDEX_ENOCANDIDATE; in global mode it is
// scored over the ready lanes with their DCs' load reports and RTTs, each
// left out (never read as zero) once older than "max_staleness_ms".
//
// Dynamo's worker-selector plugin (dynamo-compat §5a; never merged
// upstream, four layouts in circulation, include/goindex.h names them)
// lives in the same library: plugin.c holds the descriptor and its four
// callbacks in C memory, states are registry ids cast to pointers, and
// plugin.go tells the row layout from the columnar ones by the input's word
// at offset 4 and reads either (plugin.c asserts their offsets) into
// dynamo/selector, whose cost model chooses. select fails open: anything it
// cannot use, a panic included, is USE_DEFAULT with the reason. A state
// whose config names a replica follows it with global mode's attachment
// (plugin_replica.go) and takes its DC's measured rates from it; a missing
// or stale replica is USE_DEFAULT.
//
// # Invariants
//
//   - No host pointer outlives a call: stored and removed events are copied
//     into Go memory before the index sees them; a probe's query is passed as
//     a view of host memory because Match only reads it during the call; a
//     relay frame is copied before decoding (relayproto's Decoder keeps its
//     last input); the plugin reads Dynamo's columns as views during select
//     and keeps only its own candidates.
//   - No Go pointer reaches the host: results are copied into the caller's
//     buffers, strerror's strings are C strings allocated once at start.
//   - Probe results are sorted by (id, rank); a too small buffer gets
//     GOINDEX_EBUFFER, the needed count in *written and no partial result.
//   - goindex_stats fills at most struct_size bytes and leaves struct_size as
//     the caller set it; last_error output is always NUL-terminated.
//
// # Errors
//
// An argument error changes nothing and is not counted as an event. Event
// errors leave what the index documents: a rejected store changes nothing
// (GOINDEX_EPARENT, GOINDEX_ESEQUENCE); a removal naming unknown hashes
// (GOINDEX_ENOTFOUND) has removed the known ones; in ckf mode
// GOINDEX_ECAPACITY means the blocks are tracked but not all in the filter,
// or (no free lane) that nothing changed. GOINDEX_EINTERNAL leaves the
// handle unspecified, as the header says.
//
// # Concurrency
//
// Probes, batches, scores, stats, hash_tokens and last_error take no handle
// lock: they load the handle's index pointer, and both indexes allow Match
// and Stats concurrently with their mutations. Event calls serialize on the
// handle's mutex (so do the indexes, internally); close takes it too and
// clears the index pointer, so calls that start after close see
// GOINDEX_EHANDLE. last_error and the open error have their own small locks.
// In global mode apply_frame, set_rtt and attach_replica are the event
// calls: the handle is every fed lane's one ingestor, as relayproto's lane
// state machine requires; probes read the lanes under the weak-read
// contract of spec §5.4 (no seqlock: a probe during a multi-bucket delta may
// see old and new buckets mixed), and a replica view is unmapped only when
// its last reader releases it. Plugin states have a mutex each (Dynamo
// serializes select per state anyway).
// Non-goal: making close safe against calls racing it on the same handle
// (the header forbids the race; such a call finishes on the old index).
//
// # Files
//
//   - doc.go: this overview.
//   - main.go: the empty main of a c-shared build.
//   - exports.go: the //export functions, argument views and output checks,
//     strerror's static strings.
//   - handle.go: the handle registry, handles, the per-mode index wrappers
//     and their share of the counters.
//   - ops.go: the Go side of probe, batch, score and token hashing.
//   - config.go: goindex_open's strict JSON config and its defaults.
//   - errors.go: the ABI's sentinels and the one error-to-code table.
//   - global.go: global mode: lane views, the lane search, score's
//     candidates from lane signals, the counters.
//   - frames.go: the fed lanes: goindex_apply_frame through relayproto's
//     Consumer, consumer-local leases, load reports, goindex_set_rtt.
//   - attach.go: the attached replica: generations, reference-counted
//     views, the rate-limited check for a new generation.
//   - plugin.go: the Go side of Dynamo's worker-selector plugin: state
//     registry, the layouts' checks and decoding, the call into
//     dynamo/selector, fail-open statuses.
//   - plugin_replica.go: a plugin state's replica: lazy attach with a
//     retry interval, its DC's lane readiness and load freshness, the
//     measured rates.
//   - plugin_costs.go: goindex_worker_costs's Go side: a plugin state's
//     per-worker costs for Dynamo's compile-time scorer (dynamo/rust/goindex-scorer).
//   - benchexport.go: goindex_bench_inprocess, only in the benchmark build
//     (-tags goindex_bench): the in-process Go probe tests/c/bench.c times
//     next to the ABI calls in one process, 64 probes per crossing or one.
//
// Also here: plugin.c (the plugin's descriptor and C callbacks, with static
// asserts of the spec's struct sizes and offsets), build.sh (builds
// libgoindex.so and checks the headers), exports.map (the linker version
// script: goindex_* and dynamo_worker_selector_plugin_v1) and
// check/headers.c (the translation unit holding both headers).
//
// # Tests
//
// The Go tests call the exports as Go functions with Go memory, under -race
// too: config parsing (every key, every rejection, a fuzz target), the code
// table, the panic guard, handle ids, the concurrency of probes with events
// (depths never above what was stored), zero allocations per probe and
// batch; global mode through tests/c/fixture's DCs and scripts (the frames
// and replica scenarios tests/c runs too, a random walk of relay traffic
// with lost, duplicated and corrupted frames and relay restarts against an
// exact model of every lane, generation changes under concurrent probes,
// bad replica files, stale signals); and the plugin (its choice over rows,
// 72- and 96-byte columns equals dynamo/selector's over random candidates,
// USE_DEFAULT for every unusable input and for a missing, unready or stale
// replica, the replica's rates steering the choice, create/destroy,
// error-buffer truncation). Fuzz targets: the config
// parser, goindex_apply_frame on a fed handle (every frame OK or EFRAME and
// counted once) and the plugin's create. tests/c, tests/python and tests/gohost test the real library from C
// (also built with cgocheck2), Python ctypes (against the dynamo-compat §3.6
// model) and Go through purego; BenchmarkProbe here and tests/c/bench.c
// measure the boundary (BENCHMARKS.md).
package main
