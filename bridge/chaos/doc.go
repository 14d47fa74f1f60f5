// Package chaos is goindex's chaos driver: it runs the whole system as
// real processes on loopback, breaks them one fault at a time, and checks
// after each that the system kept its promises and came back. `goindex
// bench chaos` (the long form) and tests/chaos (the short form, in
// ./build.sh test) call Run.
//
// # Concepts
//
// Topology (Run's setup). A hub nats-server at the router site and, per
// simulated DC, a leaf nats-server with JetStream in its own domain whose
// leaf connection reaches the hub through a toxiproxy link (in the driver's
// process), so a DC's link can be cut or slowed. Per DC, a `goindex relay`
// on the leaf and a stub OpenAI frontend (in the driver's process); at the
// router site, `goindex consume` writing the replica file, `goindex route`
// in front of the frontends, and a C host of libgoindex.so
// (tests/chaos/host/host.c, compiled at the start against the build's
// library) probing and scoring the replica from two threads without pause.
// Every child runs from ./build.sh's build directory, logs to the run's
// directory and is watched: an exit no fault asked for is a violation and
// ends the run. Each DC's components are named apart (component
// backend-dcN), since the leaves share one account and a subject's interest
// crosses the hub.
//
// Workload. Per DC, a seeded relaytest.Generator publishes Dynamo KV events
// (msgpack envelopes) on the leaf at EventsPerSecond and models the blocks
// the DC's workers hold; request clients send completions with random
// token-id prompts to the router, without pause but for a short pacing
// delay, and count each outcome in the current fault's row. The C host
// reports its probes, degraded scores and failed calls on request.
//
// Faults (Kind; DefaultKinds, AllKinds, ParseKinds): kill -9 of a relay,
// a DC's nats-server, the hub, the consumer, the router or the C host
// (down for Hold, then started again on the same ports and stores); a DC's
// link cut (partition) or slowed by 250 ms each way for Hold; stalled
// clients flooding the router (internal/slowclient), whose connections and
// descriptors (/proc/PID/fd) must all be released; a DC's frontend down
// for Hold; and the replica file truncated, grown, replaced by junk or
// overwritten in its bucket region. Faults run in Config.Faults' order,
// Rounds times, those with a target on the next DC each time.
//
// Checkpoint (after the warm-up and after every fault). The events pause;
// every relay must have received each event published since it started
// (its metrics), and is asked for a fresh stored snapshot, read back from
// its JetStream: its producer's words. Then every lane of the replica file
// must be ready and equal those words, every block a DC's workers hold must
// be found in its lane, read in Go and by the C host through
// libgoindex.so (at least the depth the workers hold), and the router's
// /readyz must name every DC eligible. The time from a fault's healing to
// the checkpoint passing is its recovery.
//
// # Promises (a break is a violation: listed in the Report; Run fails)
//
//   - No process exits other than the one a fault killed.
//   - No request fails while the router is up: every DC's frontend but at
//     most one stays up throughout, so one is always reachable. Requests
//     that fail while the router is the process killed are counted apart;
//     those the router answered without fresh signals (X-Goindex-Degraded,
//     failing open) are counted as served and degraded.
//   - libgoindex.so answers its host without an error whatever happens to
//     the replica (a score without fresh signals is flagged degraded).
//   - After every fault the lanes converge back to the relays' bytes
//     within Recover, with no false negative.
//
// # Errors
//
// Run returns ErrConfig for a Config it cannot run (nothing started),
// ErrSetup when a part did not start, and ErrViolation when a promise
// broke; with the last two it also returns the Report so far, and keeps the
// run's directory (logs, configs, replica) for inspection.
//
// # Concurrency
//
// Run is one run; several may run at once (own ports, directories and
// processes), but each run's children want the machine's cores.
//
// Non-goals: no timing decides pass or fail (recoveries are measured and
// bounded only by Recover); no multi-host deployment; the frontends are
// stubs, not engines.
//
// # Files
//
//   - config.go: Config, its defaults and limits.
//   - faults.go: Kind, the faults and their injection, the replica-file damage, the slow-client flood.
//   - run.go: Run, the run's state, setup and teardown, violations, the rows.
//   - converge.go: the checkpoint: relay snapshots, the replica read-back, the C host's check.
//   - workload.go: the event feeders and the request clients.
//   - proc.go: child processes (start, kill -9, stop, exit watch, output), poll.
//   - procattr_linux.go, procattr_other.go: a child's process group and parent-death signal.
//   - nats.go: the hub and leaf nats-servers.
//   - goindex.go: the relay, consumer and router children, their arguments and readiness.
//   - host.go: the C host: compiling it, its command channel.
//   - frontend.go: the stub DC frontends.
//   - report.go: Report, Row, the table.
//   - errors.go: sentinels.
package chaos
