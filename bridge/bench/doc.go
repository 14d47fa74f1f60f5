// Package bench is goindex's benchmark library: the workloads, runners and
// reports behind `goindex bench radix`, `goindex bench ckf` and `goindex
// bench relay`, importable by tests and other suites. The command only
// turns flags into a Config and prints the report.
//
// # Benchmarks
//
//   - Replay (ReplayConfig, ReplayReport): a Mooncake trace replayed as KV
//     traffic through one mock LRU engine per worker into any kv.Index (the
//     radix index for `bench radix`): apply rate, match latency, heap per
//     block, every answer checked against the engines' caches.
//   - CKF (CKFConfig, CKFReport): the transposed CKF replica against our
//     exact radix index, as built and churned, and per-lane cuckoo filters,
//     on identical lanes filled from a universe of trace copies; per cell
//     (lanes × blocks per lane) the probe latencies of every structure from
//     one interleaved run (the chunked scan also reading row B only where
//     row A leaves a lane unresolved, and on 4 KiB pages), the ratios
//     chunked / other, what the search reads per query, ingest rates and
//     memory per block.
//   - Relay (RelayConfig, RelayReport): DC relays and a consumer over an
//     embedded NATS server: cold resync time, its CPU time and optionally
//     its CPU profile (RelayConfig.ResyncProfile), wire bytes per block,
//     snapshot encodings, steady delta rates, event → replica latency and
//     the consumer's delta apply.
//
// Each report carries the Machine it ran on (CPU model, Go, transparent
// huge page policy), and figures are meant to be read as ratios of one
// run: the machines are shared and absolute times drift.
//
// # Invariants
//
//   - A report's figures come from answers that passed its checks; a
//     report whose Check fails (ErrCheck) measured something else than it
//     claims and says so.
//   - The workload depends only on the Config (trace, counts, seed): the
//     same Config gives the same lanes, events and queries on every run.
//   - Nothing here is timed in a test's pass/fail decision.
//
// # Errors
//
// A Config out of range is ErrConfig (a command maps it to a usage error);
// a trace that does not read is the trace package's error; a failed check
// is ErrCheck, from the report's Check (Replay, CKF) or from Relay itself.
//
// # Concurrency
//
// Every benchmark runs its timed work on one goroutine and is not meant to
// run alongside another; Relay starts its own server, relays and consumer
// and stops them before it returns.
//
// # Files
//
//   - errors.go: ErrConfig and ErrCheck.
//   - counts.go: ParseCounts, the K/M count lists of the commands.
//   - latency.go: Latency and LatencyOf, ratios.
//   - format.go: rate and byte formatting of the human reports.
//   - progress.go: the once-a-second progress lines.
//   - machine.go: Machine and ReadMachine.
//   - machine_linux.go, machine_other.go: CPU model, huge page policy and
//     backing, thread CPU time, mappings with or without huge pages,
//     available memory.
//   - replay.go: ReplayConfig, ReplayTarget and Replay's phases.
//   - replayreport.go: ReplayReport, its figures, Check and Print.
//   - universe.go: the universe of trace copies the CKF lanes walk.
//   - ckf.go: CKFConfig and CKF.
//   - ckfbuild.go: a cell's structures, lane walks and ingest.
//   - ckftime.go: the interleaved timing, the checks and the ratios.
//   - ckfshape.go: CKFShape, what the chunked search reads per query
//     (positions, lines, lines in flight, 4 KiB pages, row-B needs).
//   - ckfreport.go: CKFReport, its figures, Check and Print.
//   - radixchurn.go: churnRadix, the churned-heap radix index.
//   - relay.go: RelayConfig, Relay, RelayReport and Print.
//   - relayrun.go: the relay benchmark's phases.
//   - synth.go: the synthetic tables of a Synthetic relay run.
//   - entropy.go: the information in a lane's table, the floor under
//     every snapshot encoding.
//
// # Tests
//
// The tests hold the replay's figures exact on a hand-worked trace and its
// check failing on an index that ignores removals; a small CKF run with
// every structure whose checks all pass (no underestimate, radix equal to
// the engines in both layouts, chunked equal to linear, to locals, to its
// 4 KiB copy and to the A-first scan), its ratios consistent with its
// latencies, its shape counts consistent with the search's schedule and
// its skipped radix reported; the churned radix index answering exactly
// like the one built in order; small relay runs, event-fed and synthetic, with
// every phase's figures; and every Config refusal.
package bench
