// Package sim is `goindex sim`'s engine: a deterministic discrete-event
// simulation of a Mooncake trace served by N data centers, run once per
// global routing policy on identical input, to measure whether routing on
// the CKF replica pays off (throughput, TTFT, hit rate, WAN hops, balance)
// and how closely it tracks an exact oracle.
//
// # Concepts
//
// Every DC is a site of a Grid (an RTT matrix, default testdata/wan's 13
// sites). Clients are at every site by default (ClientShares, uniform
// unless given; topology.go): each request's site is drawn once from the
// shares, the same for every policy, and that site's own router routes
// it, holding its own replica and seeing only its own sends; the request
// pays the matrix RTT between its site and the DC chosen. OneSite keeps
// the original model: every client and the only router at RouterSite.
// A DC has WorkersPerDC workers, each a paged KV pool of
// KVBlocksPerWorker blocks with prefix caching (kvpool.go: pinned blocks
// of running requests, LRU eviction of the rest, real Stored and Removed
// events) behind a model of vLLM's scheduler with chunked prefill
// (worker.go: iterations of TokenBudget tokens shared by decode and
// prefill, each lasting the longer of its compute and its memory time, so
// the two slow each other down; FCFS admission within the batch limit and
// the free KV blocks; recompute preemption when a decode finds no free
// block). Config documents every parameter with its source. Inside a DC,
// Dynamo's local KV router places each request with the credit rule over
// an exact radix index of the DC's workers.
//
// The global routing decision comes from the real engine path. Each DC's
// events feed one ckf.Producer (one pool per DC); its cadence boundaries
// (16 events or 1 ms) drain bucket images that a publish.Publisher
// sends as Delta frames, encoded to bytes and carried over the DC's link
// to every router, which delivers them one way (half the RTT between the
// two sites) later to that router's ingest.Consumer writing one
// replica.Table lane per DC. Every LoadReportInterval each DC sends a
// LoadReport frame on the same links. For every request its router
// runs one replica.Searcher probe over all lanes, builds one
// score.Candidate per DC (probe depth, the lane's last load report plus the
// router's own in-flight requests since it was sampled, its queue drained
// by score.Backlog up to the request's arrival, matrix RTT) and asks a
// score.Scorer. ttft's own signal processing goes further (the baselines
// keep the drained report): each router forecasts every queue with
// score.Drift (what reports show beyond its own model, extrapolated to the
// request's arrival, with its spread) and learns per DC from its requests'
// first and last tokens, which reach it as they reach the client (the
// proxy sees both): how long requests hold their KV blocks always
// (score.Holding), the compute factor with Calibrate (score.Calibration) (DCSpeed makes some DCs faster or slower
// than the configuration their reports carry, for it to find);
// ttft-uncalibrated learns nothing. Every router also measures the rate
// each DC's cache stores blocks from the events it receives
// (score.InsertRate), for ttft's price of the blocks an uncached prefill
// evicts (score.EvictionFactor). Clairvoyant (opt-in, clairvoyant.go)
// needs no signal at all: it clones every DC's workers and runs each copy
// forward, with the requests already on their way, to the request's first
// token, and picks the least TTFT, the ceiling of every estimate of a
// request's own TTFT; ClairvoyantMeanOutput's copies know every DC's
// state but run every decode to the workload's mean output length; with Foresight every policy's decisions run the same
// shadows to measure the TTFT model's estimate for every DC against the
// truth. ExactOracle replaces each probe depth by the exact depth
// of what the lane has received (the CKF swapped for an exact index, the
// WAN delay kept); ExactNow by each DC's exact, current depth. With
// PriceOthers the router also measures the fleet's utilization from the
// prefill work it sends (score.Demand) and ttft prices the wait each
// request's prefill adds for the requests behind it. With PriceKV ttft
// also prices the wait each request's KV adds for the requests that reach
// its DC after it (score.KVOthersMs, from the mean prompt the router
// sends, score.RequestSize); with PriceEvictions every router measures,
// from the events each lane receives, the share of the DC's evicted
// blocks stored again within a turnover (score.Refetch), and ttft prices
// an uncached prefill's evictions at that share's cascade
// (score.CascadeFactor) instead of the reuse-window guess.
//
// Measurement: the first Config.Warmup requests (by default the closed
// loop's Concurrency, which leave at once to cold caches) are served but
// left out of the per-request figures, so that percentiles describe the
// steady state rather than the start-up burst; Result.AllRequests keeps
// the whole run's headline figures beside them.
//
// Capacity: every policy runs on WorkersPerDC × sites workers. single-dc
// puts them all in one DC at the site with the least mean client RTT;
// single-dc-slice is the original baseline, that site's own DC alone
// (1/sites of the capacity), kept under its own name. Result.Capacity
// states each policy's.
//
// Times: a request leaves the client at its send time, reaches the DC after
// half its RTT (the matrix mean plus a per-request jitter draw; the client
// to its site's router is not modelled, a metro hop), waits for
// admission and earlier prefills, is prefilled, and its first token reaches
// the client half an RTT after the prefill ends (TTFT); its last token
// follows (output − 1) decode steps later (end-to-end). Traffic starts once
// every lane holds its snapshot and a first load report. Closed loop keeps
// Concurrency clients busy in trace order; open loop sends at the trace's
// timestamps × TimeScale.
//
// # Invariants
//
//   - Determinism: a run is a pure function of (Config, Workload). Events
//     of equal time fire in scheduling order; every random draw comes from
//     a stream seeded by (Seed, request, stage), so one policy's choices
//     never shift another request's draws, and the policies of one Run see
//     identical requests, arrivals and jitter.
//   - Every request completes exactly once; a run whose queue empties
//     first, or that completes a request twice, fails with ErrEngine.
//   - A running request's cached prefix is pinned: the blocks its prefill
//     was timed with are still cached when it ends; a mismatch fails the
//     run.
//   - A DC's local index holds exactly its workers' cached blocks: every
//     arrival's per-worker depth from the index equals each pool's own
//     match (what a clairvoyant's shadow reads); a mismatch fails the run.
//   - Every frame a router receives makes progress on its lane; at the
//     end every lane of every router acknowledges its drain marker and
//     equals its producer's words byte for byte.
//   - Accuracy is audited on every decision: each ready lane's probe depth
//     is compared with an exact index (blockSet) fed with exactly the events
//     the lane has received; undercounts must stay 0 barring capacity
//     omissions, which the producers count.
//
// # Errors
//
// Run returns ErrConfig or ErrWorkload for bad input before anything runs,
// the context's error when cancelled, and ErrEngine when the engine path
// disagreed with itself (a bug, never bad input). A failed Run returns no
// results. ReadGrid returns ErrGrid and allocates nothing beyond its size
// limits.
//
// # Concurrency
//
// Run runs the policies on up to GOMAXPROCS goroutines; each run owns all
// its state and shares only the read-only Workload and Grid. Config's
// Progress callback is called from those goroutines. Grid, Workload and
// Report are safe to read concurrently once built.
//
// Non-goals: iterations are modelled as a fluid (rates constant between
// state changes, context growth folded in at the next change), not one by
// one; attention's growth with a prefill's own context, swap preemption,
// speculative decoding and disaggregated prefill are not modelled; no
// network loss or relay faults (the relay protocol tests cover those); the
// control plane has no jitter, so every link is FIFO.
//
// # Files
//
//   - doc.go: this overview.
//   - errors.go: the sentinels.
//   - grid.go: Grid, ReadGrid (the RTT matrix CSV, with size limits), Subset.
//   - config.go: Policy, Config and its defaults, Progress.
//   - topology.go: where the clients and routers are: request origins, the single-DC site.
//   - workload.go: Request, Workload, NewWorkload (hash the trace once).
//   - queue.go: the event kinds and the time-ordered event heap.
//   - kvpool.go: a worker's paged KV memory with prefix caching: pins, LRU eviction, events.
//   - worker.go: the worker model: iterations, admission, prefill, decode, preemption.
//   - dc.go: a DC: the in-DC credit router, the producer and its cadence, load reports.
//   - relay.go: the WAN link, frames in and out, the consumer's table, drain and convergence check.
//   - router.go: the global decision, in-flight accounting, Accuracy.
//   - clairvoyant.go: the clairvoyant router: each DC cloned and run forward to the request's
//     first token; Clairvoyance; Foresight (any policy's estimates against the true TTFTs).
//   - run.go: Run, Report, one policy's simulation and its event loop, the clients.
//   - metrics.go: Result, DCResult, LoadSeries, percentiles.
//   - report.go: WriteReport: the Markdown report and its PNG charts (policy styles, calibration chart).
//   - sweep.go: Sweep: ttft against the baselines on a grid of loads, worker counts and KV sizes,
//     over one seed or several (the verdict: mean Δ ± standard error).
//   - sweepreport.go: WriteSweep, SweepMarkdown: the sweep's table and heat map.
//   - console.go: a run's and a sweep's text, JSON and progress lines for a terminal.
//
// # Tests
//
// The tests prove: the grid parser on the shipped matrix and on every
// malformed shape (and never panicking, by fuzzing); the event heap against
// a sort; the KV pool against an exact radix index fed only its events
// (under random admissions, prefills, growth and releases: same depths,
// pins and memory bounds, evictions leaf-first); the worker model against
// hand-computed timelines (chunked prefill and decode slowing each other,
// decode slowing with the KV it reads, KV admission and preemption with
// recomputation, leaf-first LRU eviction, cache hits capped at input − 1,
// a request larger than the KV) and against the Pollaczek–Khinchine mean
// wait of an M/G/1 queue at three loads, rising superlinearly towards
// saturation; the calibration finding a DC twice as fast as configured
// (and applying nothing without Calibrate); the clients' origins against their shares (binomial
// bounds), the single-DC site by brute force, and bad shares refused;
// determinism (same seed, identical results; another seed, different
// jitter); conservation (every request completes once, hits ≤ prompt
// tokens, per-DC counts add up, workers end idle); that the engine path is
// used and exact within the CKF's bounds at every router (no undercounts,
// lanes converge, deltas and load reports flow) and that a corrupted frame
// stops the run; the policies' sanity on hand-made grids (single-dc holds
// the grid's capacity at the best site and charges each client's RTT,
// single-dc-slice stays home with one DC's share, round-robin cycles,
// load-only spreads, a far DC holding a long prefix wins under ttft only
// when the prefill saved exceeds the RTT while prefix-then-load always
// goes there, a prefix still crossing the WAN is counted as stale and as a
// decision exact, current depths would change, but not one the CKF
// changed); the Ideal reference by hand, with and without warm-up; that
// the figures leave out exactly the warm-up requests; that on one FIFO
// worker the drained queue estimate equals the wait every request then
// saw, to the token, while reports read as current overstate it; a KV
// pool's and a DC's clone evolving exactly as the original would and
// leaving it alone (through admissions, evictions, arrivals and
// preemptions); the clairvoyant's choices and foreseen TTFTs by hand, and
// every foreseen TTFT met when no request can overtake another (one site,
// no jitter; under KV pressure within 0.1%); the mean-output clairvoyant
// equal to the clairvoyant when every output is the mean, and apart
// otherwise; Foresight changing nothing
// of the run it measures, and its bands by hand; open-loop
// arrival times; config validation; the report's files (PNG headers, the
// calibration chart, a distinct style per policy); the sweep's cells
// judged against their own figures, its summary and band bookkeeping by
// hand, its table and heat map; the verdict over seeds by hand (one seed
// judged exactly as the one-seed sweep judges), a cell's seeds being the
// one-seed sweeps at those seeds; and that this file map matches the
// directory.
package sim
