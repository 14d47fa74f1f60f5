// Package parity is the engine of `goindex parity`: it feeds the same KV
// events to the exact radix index (goindex/radix) and to the CKF index
// (goindex/ckfindex, one lane per member) side by side and measures, query
// by query, how far the CKF's answers are from the exact ones (spec
// ckf-algorithm.md §7 accuracy semantics, §9 item 7).
//
// # Concepts
//
// A Study holds both indexes plus the exact ownership the CKF projects: per
// member, the lineage external hash → canonical hash that the member's
// producer keeps (spec §4.1). Events come from a Mooncake trace replayed
// through mock engines (ReplayTrace) or from an event log (ReplayLog,
// LogReader). Fill then tops every lane up to a target slot occupancy α
// with synthetic resident blocks: random root chains, stored by the lane's
// member in both indexes, that no query shares, so exact depths do not
// change and only the fingerprints a probe can collide with grow. Lane
// filters are sized once, by Config.BlocksPerLane (ckf.BucketCount, a power
// of two), so a load sweep (Fill 0.5, Measure, Fill 0.8, Measure, …) tops
// the same lanes up step by step. Measure runs a query set (Queries: the
// base paths, then diverging variants of them) and reports:
//
//   - per (query, member) pair the depth error CKF − exact, as a histogram,
//     with underestimates (the CKF promises none for admitted blocks) apart
//     from capacity misses (a block on the exact path was never admitted);
//   - per query whether the best member agrees, with ties explicit
//     (BestFigures);
//   - per (position, lane) probe of the position's canonical hash alone,
//     false positives against the member's exact ownership, next to the
//     spec's 8α/65535 for the probed lane's α, and false negatives.
//
// # Event log format
//
// One Dynamo JSON RouterEvent per line, as the router consumes them and as
// dynamo.AppendJSON writes them (CUR or G2025 shape, dynamo.DecodeJSON),
// in consumption order; blank lines are skipped, events the primary index
// does not take (dynamo.RouterEvent.TargetsPrimary) are skipped and
// counted. A line is at most MaxLogLineBytes.
// Example line:
//
//	{"worker_id":7,"event":{"event_id":1,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":1,"tokens_hash":1}]}},"dp_rank":0}}
//
// # Invariants
//
//   - The CKF index and the ownership model accept and reject the same
//     events, and after every Fill the CKF's resident count equals the
//     study's accounting (resident = owned canonicals − omitted + filler);
//     otherwise the study stops with ErrDiverged.
//   - A pair below its exact depth is a capacity miss (an omitted block on
//     the exact path), a rejected miss (the path holds a block of an event
//     only the exact index accepted: the two follow different upstream
//     rules, e.g. a start position without a parent) or an underestimate,
//     which the CKF promises never happens.
//   - Measure changes neither index.
//
// # Errors
//
// Apply returns ErrNoLane or ErrDiverged (fatal: the study's figures mean
// nothing afterwards) or a shape error that changed nothing; events either
// index rejects are counted (ApplyCounts), not returned, since an event log
// may hold them. A *LineError names the event-log line that did not decode;
// the LogReader then stays at it. Config mistakes are ErrConfig.
//
// # Concurrency
//
// A Study and a LogReader are single-goroutine objects. Queries is an
// immutable value.
//
// Non-goals: no timing (that is `goindex bench ckf`), and no torn reads:
// every query runs between whole events, so only fingerprint collisions and
// capacity omissions separate the CKF from the exact answer.
//
// # Files
//
//   - doc.go: this overview.
//   - errors.go: ErrConfig, ErrDiverged, ErrNoLane, ErrLineTooLong, LineError.
//   - study.go: Config, Lossy, Study, New, Apply, Fill, FillReport, ApplyCounts.
//   - owners.go: the per-member exact ownership with the producer's rules.
//   - measure.go: Measure and its Result, ErrorBin, BestFigures, ProbeFigures.
//   - queries.go: Queries, base paths plus diverging variants.
//   - source.go: ReplayTrace (Mooncake through mock engines), ReplayLog.
//   - eventlog.go: LogReader, MaxLogLineBytes.
//   - report.go: Report (a sweep's loads and pooled totals, its text),
//     ReplayTraceFile, ReplayLogFile, ParseLoads, ParseSearch.
//
// # Tests
//
// The tests prove zero underestimates and false negatives on the shipped
// trace slices at 50/80/90% load; a measured false-positive rate within
// 1.5× of 8α/65535 on a dense run; that a deliberately lossy CKF (one that
// drops a block) is caught as underestimates and false negatives; the best
// classification on hand-built ties; the ownership model against the
// producer's rules (parents, remaps, aliases, removals, clears) and against
// a CKF fed the same random event streams; event logs round-tripped through
// dynamo.AppendJSON, with bad lines named by number; the query set's
// determinism; and this file map. A fuzz target feeds arbitrary bytes to
// the LogReader.
package parity
