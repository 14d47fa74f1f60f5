package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goindex/goindex/bridge/sim"
	"github.com/goindex/goindex/bridge/trace"
)

const simSynopsis = `Usage: goindex sim [--trace FILE] [--dcs a,b,…] [--clients every-site | router-site] [--concurrency 256 | --open-loop] [--policies all] [--json] [--report DIR]

Replays a Mooncake request trace across simulated data centers and compares
global routing policies side by side, each on identical input (same
requests, arrivals, jitter and tie-break draws). A deterministic
discrete-event simulation: every DC runs mock engines (LRU prefix caches
emitting real KV events) behind Dynamo's in-DC KV router (credit rule over
an exact radix index); every DC's events feed a real CKF producer whose
deltas and load reports travel as relayproto frames over the WAN (one-way =
RTT/2) into one replica table at each router site, which its router probes.

Clients: by default requests originate at every site (shares configurable),
each site's router routes its own clients' requests and every request pays
the RTT between its client's site and the DC it is sent to;
--clients router-site puts every client and the only router at
--router-site (the original model).

Policies: single-dc (one DC holding the whole grid's workers, at the site
with the least mean client RTT: same capacity, no routing), single-dc-slice
(the original baseline: one DC's own workers take every request, 1/sites of
the capacity), round-robin, load-only, prefix-then-load, credit (Dynamo's
selectors over CKF depths and load reports), gorgo (GORGO's static weighted
cost: RTT + queued tokens + uncached prefill), ttft (goindex: RTT + queue
wait + uncached prefill, CKF depths),
exact-oracle (ttft with the CKF replaced by an exact index over the same
delivered events: what the CKF's collisions cost), exact-now (ttft with
every DC's exact, current depths: no CKF and no WAN delay, a bound);
clairvoyant, only when named (slow): the perfect myopic router, sending
each request where a copy of every DC, run forward with the requests
already on their way, gives it its first token soonest (the ceiling of
any estimate of a request's own TTFT; "all" leaves it out), and
clairvoyant-mean-output, the same copies told every DC's state but not
the requests' output lengths (every decode runs the trace's mean).

Model (vLLM's scheduler with chunked prefill; each default cites its source
in bridge/sim/config.go): a worker runs iterations of --token-budget tokens,
one per decoding sequence and the rest prefill (FIFO); an iteration lasts
the longer of its compute, (tokens)/--prefill-tokens-per-ms, and its memory
time, --decode-ms-per-token plus --decode-ms-per-ktoken per 1,000 context
tokens, so prefill and decode slow each other down. Requests are admitted
FCFS within --batch-limit sequences while their KV blocks fit (the cached
prefix pinned, LRU eviction of unused cached blocks); a decode that finds no
free block preempts the last-admitted sequence, which is recomputed later.
TTFT = request one-way + queue wait + prefill + first token one-way;
end-to-end adds the decode.

Trace and workload:
  --trace FILE                  Mooncake JSONL (default: ` + defaultSimTrace + `,
                                found from the working directory up)
  --requests N                  replay only the first N requests (0: all)
  --block-size TOKENS           KV block size; must divide 512 (one id = 512 tokens)
  --concurrency C               closed loop: C clients, each sending the next
                                request of the trace when its previous one completes
  --open-loop                   send at the trace's timestamps instead
  --time-scale F                open loop: timestamps × F (0.5 = twice as fast)
  --warmup N                    requests at the start of the trace served but left
                                out of the latency, hit-rate and throughput figures
                                (-1: the closed loop's concurrency, at most half the
                                requests, since its first C requests leave at once
                                to cold caches; none in open loop; 0: none);
                                all_requests in --json keeps the whole run
Data centers and WAN:
  --grid FILE                   RTT matrix CSV (default: ` + defaultSimGrid + `)
  --dcs a,b,…                   simulate only these sites (default: every site)
  --clients MODE                every-site: requests from every site, one router per
                                site; router-site: every client at --router-site
  --client-shares a=W,b=W,…     every-site: each site's weight in the requests' origins
                                (default: every site alike; sites left out: none)
  --router-site SITE            router-site mode: the site of every client and the router
  --rtt-jitter DURATION         extra RTT per request, uniform in [0, jitter] (0: none)
  --load-report-interval DUR    how often each DC publishes its load
  --no-inflight                 do not add the router's own in-flight requests to
                                the DCs' stale load reports
  --no-queue-drain              read a load report's queue as current instead of
                                draining it over the report's age and the
                                request's one-way trip (score.Backlog)
  --calibrate                   ttft also learns, per router and DC, a compute factor
                                from first-token times (finds a DC faster or slower
                                than configured) and scales its estimates by it
  --no-calibration              ttft learns nothing from first-token and last-token
                                times (not even the KV hold time)
  --dc-speed a=X,b=Y,…          the named sites' workers compute X× as fast as
                                configured, unbeknown to the routers (their
                                reports carry the configured rate)
  --no-drift                    ttft reads the drained report like every policy instead
                                of its forecast (the work reports show beyond the
                                router's own model, extrapolated, plus a margin of
                                its uncertainty)
  --foresight                   every decision of every policy but clairvoyant also
                                runs the clairvoyant's copies of every DC (slow) and
                                compares the TTFT model's estimate for each DC with
                                the TTFT the request would really get there, by the
                                DC's KV pressure, and the choice with the best DC
                                (--json: "foresight" and "clairvoyance")
  --price-others                ttft also prices the wait each request's prefill
                                adds for the requests behind it: prefill × ρ/(1−ρ),
                                ρ the fleet's utilization the router measures from
                                its sends (default: each request's own TTFT only)
  --price-kv                    ttft also prices the wait each request's KV adds for
                                the requests that reach its DC after it (the FCFS
                                M/G/1 externality, the DC's KV as the server:
                                ρ/(1−ρ) × blocks/mean blocks × (KV wait + x/2), x
                                the time the full DC takes to free its blocks)
  --price-evictions             ttft charges an uncached prefill's evictions at
                                p/(1−p) of it, p the share of the DC's evicted
                                blocks prefilled again within a turnover, which each
                                router measures (default: the reuse-window guess)
Workers (every DC alike):
  --workers-per-dc N            workers per DC
  --kv-blocks-per-worker B      KV capacity of a worker, in blocks of --block-size
                                tokens (1024 × 512 = 32k blocks of 16 tokens)
  --prefill-tokens-per-ms R     one worker's compute rate, tokens per ms (its prefill
                                speed with nothing decoding)
  --decode-ms-per-token T       memory-bound time of one iteration (the weights), ms:
                                the time per output token of a small batch
  --decode-ms-per-ktoken K      what each 1,000 context tokens of the decoding
                                sequences add to an iteration (their KV read), ms;
                                0 for none
  --token-budget B              tokens per iteration, decode first (vLLM's
                                max_num_batched_tokens)
  --batch-limit S               most sequences a worker runs at once (max_num_seqs)
  --prefill-jitter J            each request's prefill work × uniform [1−J, 1+J]
                                (0: none)
Sweep (--sweep; the first 2,000 requests unless --requests says otherwise, of
` + defaultSweepTrace + ` unless --trace says otherwise):
  --sweep                       run ttft and the baselines on every cell of a grid
                                and print ttft's TTFT p95 against the best baseline
                                per cell, marking every cell lost by more than 1%;
                                with --report DIR also sweep.md and sweep_heatmap.png
  --sweep-concurrency LIST      closed-loop client counts (default 64,128,256,512,1024)
  --sweep-workers LIST          workers per DC (default 1,2,4,8)
  --sweep-kv LIST               multiples of --kv-blocks-per-worker (default 0.25,1,4)
  --sweep-speeds LIST           open-loop replay speeds, × the trace's rate
                                (default 1,2,4; empty: no open-loop cells)
  --sweep-baselines LIST        the policies ttft is compared with
                                (default load-only,prefix-then-load,gorgo)
  --seeds N                     run every cell with N seeds, --seed … --seed+N−1,
                                every policy of a cell with the same seed, and
                                judge each cell on ttft's mean Δ against the better
                                of load-only and prefix-then-load (chosen per seed)
                                ± its standard error: lost when the mean exceeds +1%
                                by more than two standard errors, won when below −1%
                                by more than two, tied otherwise; the first seed's
                                columns stay in the table (default 1: the one-seed
                                sweep, no verdict)
Policies and output:
  --policies LIST               comma-separated policy names, or all (every
                                policy but the two clairvoyants)
  --seed S                      seed of every random draw (same seed, same results)
  --json                        print one JSON object instead of the table
  --report DIR                  also write DIR/report.md with PNG charts
  --quiet                       no progress on stderr

Progress goes to stderr every few seconds while policies run.`

// Default inputs of `goindex sim`, looked up from the working directory up.
const (
	defaultSimTrace = "testdata/mooncake/conversation_head400.jsonl"
	defaultSimGrid  = "testdata/wan/grid13_rtt_ms.csv"
)

// defaultSweepTrace is --sweep's default trace: the first 2,000 requests of
// the Mooncake conversation trace (the same as the first 2,000 of
// ../shared/data/mooncake's).
const defaultSweepTrace = "testdata/mooncake/conversation_head2000.jsonl"

// defaultSweepRequests is the reduced trace length of --sweep: enough for
// a steady state at concurrencies up to a few hundred, few enough that the
// whole grid runs in minutes on two cores.
const defaultSweepRequests = 2000

// maxSimRequests bounds --requests.
const maxSimRequests = 1 << 24

// maxSweepSeeds bounds --seeds: each seed is a whole sweep's work.
const maxSweepSeeds = 1000

// simProgressEvery is how often progress lines go to stderr.
const simProgressEvery = 3 * time.Second

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sim", simSynopsis, stderr)
	tracePath := fs.String("trace", "", "Mooncake JSONL trace (default: "+defaultSimTrace+" found from the working directory up)")
	requests := fs.Int("requests", 0, "replay only the first N requests (0: all)")
	blockSize := fs.Int("block-size", trace.DefaultBlockSize, "KV block size in tokens (divides 512)")
	concurrency := fs.Int("concurrency", sim.DefaultConcurrency, "closed-loop clients")
	openLoop := fs.Bool("open-loop", false, "send at the trace's timestamps instead of a closed loop")
	timeScale := fs.Float64("time-scale", 1, "open loop: multiply trace timestamps by this")
	warmup := fs.Int("warmup", -1, "requests at the start left out of the figures (-1: the closed loop's concurrency; 0: none)")
	gridPath := fs.String("grid", "", "RTT matrix CSV in ms (default: "+defaultSimGrid+" found from the working directory up)")
	dcs := fs.String("dcs", "", "comma-separated sites to simulate (default: every site of the grid)")
	clients := fs.String("clients", "every-site", "every-site (one router per site) or router-site (one site)")
	shares := fs.String("client-shares", "", "every-site: site=weight,… of the requests' origins (default: every site alike)")
	routerSite := fs.String("router-site", sim.DefaultRouterSite, "router-site mode: the site of every client and the router")
	jitter := fs.Duration("rtt-jitter", sim.DefaultRTTJitter, "extra round trip per request, uniform in [0, jitter]; 0 for none")
	reportEvery := fs.Duration("load-report-interval", sim.DefaultLoadReportInterval, "load report period of every DC")
	noInflight := fs.Bool("no-inflight", false, "do not add the router's in-flight requests to stale load reports")
	noDrain := fs.Bool("no-queue-drain", false, "read load reports' queues as current instead of draining them over their age")
	calibrate := fs.Bool("calibrate", false, "ttft also learns and applies a compute factor per router and DC")
	noCal := fs.Bool("no-calibration", false, "ttft learns nothing from first-token and last-token times")
	dcSpeed := fs.String("dc-speed", "", "site=X,…: those sites' workers compute X× as fast as configured, unbeknown to the routers")
	noDrift := fs.Bool("no-drift", false, "ttft reads the drained report like every policy instead of its forecast")
	priceOthers := fs.Bool("price-others", false, "ttft also prices the wait a request's prefill adds for the requests behind it")
	priceKV := fs.Bool("price-kv", false, "ttft also prices the wait a request's KV adds for the requests that reach its DC after it")
	priceEvictions := fs.Bool("price-evictions", false, "ttft prices evictions at the refetch cascade it measures per DC, not the reuse-window guess")
	foresight := fs.Bool("foresight", false, "measure every decision's TTFT estimates against every DC's true TTFT (slow)")
	workers := fs.Int("workers-per-dc", sim.DefaultWorkersPerDC, "workers per DC")
	kvBlocks := fs.Int("kv-blocks-per-worker", sim.DefaultKVBlocksPerWorker, "KV capacity per worker, blocks of --block-size tokens")
	prefill := fs.Float64("prefill-tokens-per-ms", sim.DefaultPrefillTokensPerMs, "prefill speed of one worker, tokens/ms")
	decode := fs.Float64("decode-ms-per-token", sim.DefaultDecodeMsPerToken, "memory-bound time of one iteration (the weights), ms")
	decodeKV := fs.Float64("decode-ms-per-ktoken", sim.DefaultDecodeMsPerKToken, "iteration time added per 1,000 context tokens decoding, ms (0: none)")
	budget := fs.Int("token-budget", sim.DefaultTokenBudget, "tokens per iteration, decode first (max_num_batched_tokens)")
	batch := fs.Int("batch-limit", sim.DefaultBatchLimit, "most sequences a worker runs at once")
	jitterPrefill := fs.Float64("prefill-jitter", 0, "each request's prefill work × uniform [1−J, 1+J] (0: none)")
	policies := fs.String("policies", "all", "comma-separated policies: "+policyNames()+", or all")
	seed := fs.Uint64("seed", sim.DefaultSeed, "seed of every random draw")
	sweep := fs.Bool("sweep", false, "run the grid of settings (--sweep-*) instead of one comparison")
	sweepConc := fs.String("sweep-concurrency", intList(sim.DefaultSweepConcurrency), "sweep: closed-loop client counts")
	sweepWorkers := fs.String("sweep-workers", intList(sim.DefaultSweepWorkers), "sweep: workers per DC")
	sweepKV := fs.String("sweep-kv", floatList(sim.DefaultSweepKVScale), "sweep: multiples of --kv-blocks-per-worker")
	sweepSpeeds := fs.String("sweep-speeds", floatList(sim.DefaultSweepSpeeds), "sweep: open-loop replay speeds (empty: none)")
	sweepBase := fs.String("sweep-baselines", "load-only,prefix-then-load,gorgo", "sweep: the policies ttft is compared with")
	seeds := fs.Int("seeds", 1, "sweep: seeds per cell (--seed onwards), judged by their mean and standard error")
	asJSON := fs.Bool("json", false, "print one JSON object")
	reportDir := fs.String("report", "", "write a Markdown report with PNG charts into this directory")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	usageErr := func(format string, a ...any) error {
		return fmt.Errorf("sim: %s: %w", fmt.Sprintf(format, a...), errUsage)
	}
	if *requests < 0 || *requests > maxSimRequests {
		return usageErr("--requests must be in [0, %d]", maxSimRequests)
	}
	pols, err := sim.ParsePolicies(*policies)
	if err != nil {
		return usageErr("--policies: %v", err)
	}
	grid, err := loadGrid(*gridPath, *dcs)
	if err != nil {
		return usageErr("%v", err)
	}
	if *tracePath == "" {
		def := defaultSimTrace
		if *sweep {
			def = defaultSweepTrace
		}
		if *tracePath, err = findUp(def); err != nil {
			return usageErr("no --trace given and %s not found from the working directory up", def)
		}
	}
	if *sweep && *requests == 0 {
		*requests = defaultSweepRequests
	}
	reqs, err := trace.ReadFile(*tracePath, *requests, trace.ReaderConfig{})
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w, err := sim.NewWorkload(reqs, *blockSize)
	if err != nil {
		return usageErr("%v", err)
	}
	oneSite := false
	switch *clients {
	case "every-site":
	case "router-site":
		oneSite = true
	default:
		return usageErr("--clients %q: want every-site or router-site", *clients)
	}
	clientShares, err := parseShares(*shares)
	if err != nil {
		return usageErr("--client-shares: %v", err)
	}
	speeds, err := parseShares(*dcSpeed)
	if err != nil {
		return usageErr("--dc-speed: %v", err)
	}
	if oneSite && clientShares != nil {
		return usageErr("--client-shares needs --clients every-site")
	}
	if *jitter == 0 {
		*jitter = -1 // the library's "off"; 0 there means the default
	}
	if *decodeKV == 0 {
		*decodeKV = -1 // likewise
	}
	switch {
	case *warmup < -1:
		return usageErr("--warmup must be -1 (default), 0 (none) or a request count")
	case *warmup == -1:
		*warmup = 0 // the library's default
	case *warmup == 0:
		*warmup = -1 // the library's "none"
	}
	cfg := sim.Config{
		Grid: grid, RouterSite: *routerSite, OneSite: oneSite, ClientShares: clientShares,
		WorkersPerDC: *workers, KVBlocksPerWorker: *kvBlocks, BlockSize: *blockSize,
		PrefillTokensPerMs: *prefill, DecodeMsPerToken: *decode, DecodeMsPerKToken: *decodeKV, TokenBudget: *budget, BatchLimit: *batch, PrefillJitter: *jitterPrefill,
		Concurrency: *concurrency, OpenLoop: *openLoop, TimeScale: *timeScale, Warmup: *warmup,
		LoadReportInterval: *reportEvery, RTTJitter: *jitter, NoInflight: *noInflight, NoQueueDrain: *noDrain, NoDrift: *noDrift, NoCalibration: *noCal, Calibrate: *calibrate, DCSpeed: speeds, PriceOthers: *priceOthers, PriceKV: *priceKV, PriceEvictions: *priceEvictions, Foresight: *foresight,
		Policies: pols, Seed: *seed,
	}
	if *sweep {
		if *seeds < 1 || *seeds > maxSweepSeeds {
			return usageErr("--seeds must be in [1, %d]", maxSweepSeeds)
		}
		sc := sim.SweepConfig{Base: cfg, NoOpenLoop: strings.TrimSpace(*sweepSpeeds) == "", Seeds: *seeds}
		if sc.Concurrency, err = parseInts(*sweepConc); err != nil {
			return usageErr("--sweep-concurrency: %v", err)
		}
		if sc.Workers, err = parseInts(*sweepWorkers); err != nil {
			return usageErr("--sweep-workers: %v", err)
		}
		if sc.KVScale, err = parseFloats(*sweepKV); err != nil {
			return usageErr("--sweep-kv: %v", err)
		}
		if !sc.NoOpenLoop {
			if sc.Speeds, err = parseFloats(*sweepSpeeds); err != nil {
				return usageErr("--sweep-speeds: %v", err)
			}
		}
		if sc.Baselines, err = sim.ParsePolicies(*sweepBase); err != nil {
			return usageErr("--sweep-baselines: %v", err)
		}
		return runSweep(ctx, sc, w, sim.RunInput{Trace: *tracePath, Requests: len(reqs)}, *reportDir, *asJSON, *quiet, stdout, stderr)
	}
	if !*quiet {
		cfg.Progress = sim.ProgressPrinter(stderr, len(pols), simProgressEvery)
	}
	began := time.Now()
	rep, err := sim.Run(ctx, cfg, w)
	if errors.Is(err, sim.ErrConfig) {
		return usageErr("%v", err)
	}
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	in := sim.RunInput{Trace: *tracePath, Requests: len(reqs), WallSeconds: time.Since(began).Seconds()}
	if *reportDir != "" {
		if err := sim.WriteReport(*reportDir, rep, in.Trace); err != nil {
			return fmt.Errorf("sim: report: %w", err)
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(sim.ReportJSON(rep, in))
	}
	sim.WriteTable(stdout, rep, in, *reportDir)
	return nil
}

func policyNames() string {
	var names []string
	for _, p := range slices.Concat(sim.AllPolicies, sim.OptInPolicies) {
		names = append(names, p.String())
	}
	return strings.Join(names, ",")
}

// parseShares parses "site=number,…" (empty: nil), the form of
// --client-shares and --dc-speed.
func parseShares(s string) (map[string]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]float64{}
	for _, kv := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not site=weight", kv)
		}
		w, err := strconv.ParseFloat(v, 64)
		if err != nil || !(w >= 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("%q: the weight must be a finite number ≥ 0", kv)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("site %q named twice", name)
		}
		out[name] = w
	}
	return out, nil
}

// loadGrid reads the RTT matrix (the default one found up from the
// working directory) and keeps the sites of dcs, if given.
func loadGrid(path, dcs string) (*sim.Grid, error) {
	if path == "" {
		var err error
		if path, err = findUp(defaultSimGrid); err != nil {
			return nil, fmt.Errorf("no --grid given and %s not found from the working directory up", defaultSimGrid)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--grid: %v", err)
	}
	defer f.Close()
	g, err := sim.ReadGrid(f)
	if err != nil {
		return nil, fmt.Errorf("--grid %s: %v", path, err)
	}
	if dcs == "" {
		return g, nil
	}
	names := strings.Split(dcs, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	if g, err = g.Subset(names); err != nil {
		return nil, fmt.Errorf("--dcs: %v", err)
	}
	return g, nil
}

// runSweep runs the sweep sc on w and prints its table (or JSON), writing
// the report and heat map into reportDir when given.
func runSweep(ctx context.Context, sc sim.SweepConfig, w *sim.Workload, in sim.RunInput, reportDir string, asJSON, quiet bool, stdout, stderr io.Writer) error {
	if !quiet {
		sc.Progress = sim.SweepProgressPrinter(stderr, time.Now())
	}
	rep, err := sim.Sweep(ctx, sc, w)
	if errors.Is(err, sim.ErrConfig) {
		return fmt.Errorf("sim: %v: %w", err, errUsage)
	}
	if err != nil {
		return fmt.Errorf("sim: sweep: %w", err)
	}
	if reportDir != "" {
		if err := sim.WriteSweep(reportDir, rep, in.Trace); err != nil {
			return fmt.Errorf("sim: sweep report: %w", err)
		}
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	return sim.WriteSweepTable(stdout, rep, in.Trace, reportDir)
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseFloats parses a comma-separated list of positive numbers.
func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 1) {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func intList(xs []int) string {
	parts := make([]string, len(xs))
	for k, x := range xs {
		parts[k] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}

func floatList(xs []float64) string {
	parts := make([]string, len(xs))
	for k, x := range xs {
		parts[k] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}
