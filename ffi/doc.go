// Command ffi is libgoindex.so: the C ABI of include/goindex.h as a guard
// layer over goindex/hostindex, which holds every index, mode and score
// the calls reach (a global handle's lanes follow a replica through
// goindex/follow). Build it with ffi/build.sh, never with a plain go build:
// the script adds the soname, the export list and the check that the
// hand-written header and cgo's generated one agree.
//
// # Concepts
//
// A handle is an open hostindex.Index under an id that counts up from 1 and
// is never reused; the registry (handle.go) is the package's only mutable
// global.
// Every export runs the same four steps: a deferred recover guard (a panic
// becomes GOINDEX_EINTERNAL with its detail recorded), the handle and
// argument checks (NULL with a nonzero length, the GOINDEX_MAX_* limits,
// output triples, struct_size, enum values and flags), one call into the
// index, and the mapping of the error to a code by the single table in
// errors.go (errors.Is against the ABI's and the engine's sentinels). A
// failure's detail, prefixed by the call's name, becomes the handle's last
// error (goindex_open's: handle 0's).
//
// The library's second ABI, Dynamo's worker-selector plugin and
// goindex_worker_costs, is package ffi/wsplugin, which main.go imports: its
// C descriptor and callbacks must sit with the Go exports they call. Both
// keep their objects in ffi/internal/idtable's id table.
//
// # Invariants
//
//   - No host pointer outlives a call: stored and removed events are copied
//     into Go memory before the index sees them; a probe's query and a
//     relay frame are passed as views of host memory because the index only
//     reads them during the call (a frame is copied before decoding).
//   - No Go pointer reaches the host: results are copied into the caller's
//     buffers, strerror's strings are C strings allocated once at start.
//   - Probe results are sorted by (id, rank); a too small buffer gets
//     GOINDEX_EBUFFER, the needed count in *written and no partial result.
//   - goindex_stats fills at most struct_size bytes and leaves struct_size as
//     the caller set it; last_error output is always NUL-terminated.
//
// # Errors
//
// An argument error changes nothing and is not counted as an event; event
// errors leave what hostindex documents. GOINDEX_EINTERNAL leaves the
// handle unspecified, as the header says.
//
// # Concurrency
//
// hostindex.Index is safe for probes concurrent with event calls; the
// handle adds only its last-error lock. Close removes the id first, so a
// call that starts after close sees GOINDEX_EHANDLE; one racing close
// finishes on the old index.
//
// # Files
//
//   - doc.go: this overview.
//   - main.go: the empty main of a c-shared build, importing ffi/wsplugin.
//   - exports.go: the //export functions, argument views and output checks,
//     conversions to and from the header's structs, strerror's strings.
//   - handle.go: the handle registry, handles, scratch.
//   - errors.go: the ABI's sentinels and the one error-to-code table.
//   - benchexport.go: goindex_bench_inprocess, only in the benchmark build
//     (-tags goindex_bench): the in-process Go probe tests/c/bench.c times
//     next to the ABI calls in one process.
//
// Also here: build.sh (builds
// libgoindex.so and checks the headers), exports.map (the linker version
// script) and check/headers.c (the translation unit holding both headers).
//
// # Tests
//
// The Go tests call the exports as Go functions with Go memory, under -race
// too: every bad-argument path, the code table, the panic guard, handle
// ids, probes concurrent with events, zero allocations per probe and batch,
// global mode through tests/c/fixture's DCs and scripts (random relay
// traffic against an exact model, generation changes under concurrent
// probes, bad replica files), and a fuzz target for goindex_apply_frame. tests/c, tests/python,
// tests/rust and tests/gohost test the real library from C, Python ctypes,
// Rust and Go; BenchmarkProbe here and tests/c/bench.c measure the
// boundary (BENCHMARKS.md).
package main
