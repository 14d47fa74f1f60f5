// Package wsplugin is the second ABI of libgoindex.so: Dynamo's runtime
// worker-selector plugin (dynamo-compat §5a; never merged upstream, four
// layouts in circulation, include/goindex.h names them), and
// goindex_worker_costs, the per-worker costs Dynamo's compile-time scorer
// (dynamo/rust/goindex-scorer) reads over the same plugin state. The
// library's main package, ffi, imports it for its exports; it shares with
// ffi only the header and the id table (ffi/internal/idtable).
//
// # Concepts
//
// Dynamo needs the descriptor and its four callbacks in C memory (a Go
// pointer returned to the host aborts it), so plugin.c holds them, and
// cgo lets a package's C code call only that package's exports: the C and
// Go halves live here together. A state is an id of the package's state
// table cast to a pointer, never a Go pointer; each callback turns it back
// into its number and calls one export of plugin.go. plugin.go tells the
// row layout from the columnar ones by the input's word at offset 4 and
// reads either (plugin.c asserts their offsets) into dynamo/selector,
// whose cost model chooses. select fails open: anything it cannot use, a
// panic included, is USE_DEFAULT with the reason. A state whose config
// names a replica takes its DC's measured rates from it (selector.Open's
// Replica, over the engine's one replica follower, goindex/follow, which
// also decides what is unusable: a missing, damaged or stale replica, a
// lane not ready, a load report past max_staleness_ms are USE_DEFAULT,
// named by follow's Reason).
//
// # Invariants
//
//   - No host pointer outlives a call: select reads Dynamo's columns and
//     rows as views during the call; create parses its config during the
//     call.
//   - No Go pointer reaches the host: the descriptor is C memory, states
//     are ids.
//   - create and required_candidate_inputs turn a panic into PANICKED,
//     select into USE_DEFAULT, goindex_worker_costs into GOINDEX_EINTERNAL;
//     destroy swallows it.
//
// # Concurrency
//
// Dynamo serializes select per state; each state has a mutex anyway, so
// concurrent misuse is safe too. A destroyed state's id is never reused,
// so a late call with it answers USE_DEFAULT (or INVALID_INPUT, EHANDLE).
//
// # Files
//
//   - plugin.go: the state table, the callbacks' Go side: the layouts'
//     checks and decoding, the call into dynamo/selector, fail-open
//     statuses.
//   - costs.go: goindex_worker_costs's Go side: a plugin state's
//     per-worker costs.
//
// Also here: plugin.c (the descriptor, its C callbacks and
// goindex_worker_costs, with static asserts of the spec's struct sizes and
// offsets).
//
// # Tests
//
// The tests call the exports as Go functions with Go memory: every layout
// against dynamo/selector in Go, missing inputs, unfamiliar input, states'
// life, the panic guards, replica rates and a missing replica, the
// per-worker costs, and a fuzz target for create. tests/c, tests/python,
// tests/rust and dynamo/rust test it through the real library.
package wsplugin
