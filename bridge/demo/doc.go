// Package demo is `goindex demo`: the whole goindex path run on one
// machine, on loopback, from a shipped trace slice, with every part a real
// one except the inference engines.
//
// # Concepts
//
// Topology. A NATS hub at the router site and one leaf server per DC (its
// own JetStream domain, store in the run's temporary directory), each leaf
// joined to the hub through a loopback TCP link that delivers every byte
// half the DC's grid RTT later in each direction (wan.go). Per DC, a
// `goindex relay` child consumes the DC's Dynamo event plane on its leaf
// and publishes CKF frames and load reports; a stub frontend (frontend.go)
// answers OpenAI completions with mock engines (bridge/trace LRU prefix
// caches behind a longest-prefix local router), sleeps the prefill time of
// the uncached tokens, and publishes the engines' KV events as msgpack
// event-plane envelopes and their load samples. At the router site, a
// `goindex consume` child keeps the shared-memory replica and a `goindex
// route` child forwards completions to the frontends.
//
// Stages (Run). wan, dcs, consumer and router start the topology and wait,
// by polling, until each part answers (pings through the hub, every lane
// ready with an RTT and a load report, /readyz with every DC eligible).
// traffic replays the trace slice through the router from closed-loop
// clients, every streamEvery-th streamed. replica waits until every lane
// has installed its relay's last sequence and looks repeat, then checks
// that for every replayed prompt and DC the replica's depth is never below
// what the DC's engines hold. library writes host.py and the module it
// imports, goindex_ctypes.py (both embedded), into the run's directory and
// runs host.py under python3: a separate process that loads libgoindex.so
// with ctypes (one Go runtime per process: the library is never loaded
// into goindex), attaches the replica and probes and scores every prompt; the demo checks each depth against the engines and its own
// read of the file. route sends a few requests and checks the router's
// diagnostic headers against the replica and the engines. sim runs
// `goindex sim --json --report` on the slice across the whole grid and
// keeps the per-policy figures for the final table. shutdown sends SIGINT
// to every child (router, consumer, relays) and checks their final
// reports: every event published was taken in, no gap, duplicate, malformed
// message, fault or failed request.
//
// # Invariants
//
//   - Every child runs in its own process group with a parent-death
//     signal (Linux), and Run stops every child and removes the temporary
//     directory before it returns, on success, failure or cancellation.
//   - A stage that cannot run here (no library, no python3, a library
//     without global mode: exit status hostSkipExit) is skipped and says
//     why; any other failure ends the run with a *StageError.
//   - Nothing listens beyond 127.0.0.1, and every port is chosen by the
//     kernel.
//
// # Errors
//
// Run returns ErrConfig (wrapped, with the reason) and no Summary for a
// Config it cannot run, before it starts anything; otherwise a Summary and,
// when a stage failed, a *StageError naming it and wrapping ErrCheck, a
// child's failure (with its last log lines) or the context's cause.
//
// # Concurrency
//
// Run is one run; several may run at once in one process (no shared state,
// separate ports and directories). Within a run, stages run one after
// another; replay clients, links and frontends run on their own
// goroutines.
//
// Non-goals: no real inference (prefill is a sleep proportional to
// uncached tokens, decoding a few fixed chunks), no multi-host
// deployment, no fault injection (tests/e2e does that), no timing in any
// check.
//
// # Files
//
//   - config.go: Config, its defaults and limits, resolve (inputs read and checked up front).
//   - demo.go: Run, Summary, the stages and their progress lines, shutdown with the final-report checks.
//   - children.go: child processes (start, log capture, SIGINT then SIGKILL), poll.
//   - procattr_linux.go, procattr_other.go: a child's process group and parent-death signal.
//   - wan.go: the NATS hub, the leaf servers and the delayed links between them.
//   - frontend.go: the stub DC frontends and their mock engines.
//   - events.go: RouterEvent and Publisher, the engines' events as Dynamo envelopes.
//   - traffic.go: completions through the router, the closed-loop replay.
//   - check.go: prompts, the replica view, looks at the replica and the engines, settle.
//   - library.go: the library stage: the embedded host.py and goindex_ctypes.py, its files, the checks of its answers.
//   - sim.go: the sim stage and the policy table.
//   - errors.go: ErrConfig, ErrCheck, ErrSkipped, StageError.
//
// # Tests
//
// The links deliver every byte in order and cut connections on close (no
// timing is checked); capture keeps the tail; poll ends with the context's
// cause; Config errors are refused before anything starts, naming the
// input (unknown or repeated sites, missing binary, library or trace,
// unwritable directories). In bridge/cmd/goindex, with the test binary
// standing in for goindex: a reduced run end to end (three DCs, 40
// requests; TestDemo_ReducedRunEndToEnd) passes every stage (the library
// stage against $GOINDEX_BUILD/libgoindex.so when there), routes every
// request, relays every event, finds no replica depth below the engines',
// simulates every policy, writes the report and leaves no child process
// or temporary directory behind; SIGINT during the replay stops every
// child and says "interrupted"; stand-in hosts show the library stage
// skipped on exit status hostSkipExit and failed otherwise. ExampleRun
// shows the call.
package demo
