package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/score"
)

// Policy is a global routing policy: how the router picks the DC of each
// request.
type Policy uint8

// The policies, in the order reports list them. Every policy sees the same
// model; they differ only in the rule and in where prefix depths come from.
const (
	// SingleDC puts the whole grid's workers (WorkersPerDC × sites) in one
	// DC at the site with the least mean client RTT and sends every
	// request there: the same capacity as every other policy, no WAN
	// choice.
	SingleDC Policy = iota + 1
	// SingleDCSlice sends every request to the DC at that site with its
	// own WorkersPerDC workers only, the other DCs idle: 1/sites of the
	// capacity the other policies have, so it measures capacity, not
	// routing (the original single-DC baseline, kept under this name).
	SingleDCSlice
	// RoundRobin cycles through the DCs in grid order.
	RoundRobin
	// LoadOnly takes the DC with the lowest reported load (Dynamo's G2025
	// load in blocks), ignoring cache and RTT.
	LoadOnly
	// PrefixThenLoad takes the DC with the deepest CKF prefix, then the
	// lowest load (upstream's proof of concept).
	PrefixThenLoad
	// Credit is Dynamo's current block cost over CKF depths and reported
	// load: max(0, prefill blocks − overlap) + decode blocks.
	Credit
	// GORGO is GORGO's static weighted cost (score.GORGO: RTT + queued
	// tokens + uncached prefill, weights from its paper's router) over CKF
	// depths and the same load signals: the closest published rival.
	GORGO
	// TTFT is goindex's cost: RTT + queue wait + uncached prefill time, with
	// CKF replica depths, each router's queue forecast (score.Drift) and
	// its calibration from first-token times (score.Calibration).
	TTFT
	// TTFTUncalibrated is TTFT without the calibration: the configured
	// model's estimates as they are, to show what learning adds.
	TTFTUncalibrated
	// ExactOracle is the TTFT cost with the CKF replaced by an exact index:
	// each ready lane's depth is that of an exact radix index fed exactly
	// the events the lane has received, so it sees the same WAN delay and
	// differs from TTFT only where a fingerprint collision overcounts.
	ExactOracle
	// ExactNow is the TTFT cost with every DC's exact, current prefix depth
	// (its in-DC radix index): neither the CKF nor the WAN delay of its
	// updates, a bound no deployed router can reach.
	ExactNow
	// Clairvoyant is the perfect myopic router (clairvoyant.go): each
	// request goes to the DC where it gets its first token soonest, found
	// by running a copy of every DC forward from the present, with the
	// requests already on their way, until that first token. It is the
	// ceiling of every cost model that estimates a request's own TTFT; not
	// in AllPolicies (it is slow), named with ParsePolicies.
	Clairvoyant
	// ClairvoyantMeanOutput is Clairvoyant told every DC's exact state
	// but not how long the requests will decode: its copies run every
	// decode to the workload's mean output length, as a router that
	// knew each DC's queues, batch and KV but not the future would.
	// Opt-in like Clairvoyant.
	ClairvoyantMeanOutput
)

// AllPolicies lists every policy "all" runs, in report order.
var AllPolicies = []Policy{SingleDC, SingleDCSlice, RoundRobin, LoadOnly, PrefixThenLoad, Credit, GORGO, TTFTUncalibrated, TTFT, ExactOracle, ExactNow}

// OptInPolicies lists the policies that run only when named.
var OptInPolicies = []Policy{Clairvoyant, ClairvoyantMeanOutput}

var policyNames = map[Policy]string{
	SingleDC: "single-dc", SingleDCSlice: "single-dc-slice", RoundRobin: "round-robin", LoadOnly: "load-only",
	PrefixThenLoad: "prefix-then-load", Credit: "credit", GORGO: "gorgo", TTFTUncalibrated: "ttft-uncalibrated", TTFT: "ttft", ExactOracle: "exact-oracle", ExactNow: "exact-now",
	Clairvoyant: "clairvoyant", ClairvoyantMeanOutput: "clairvoyant-mean-output",
}

// String returns the policy's command-line name.
func (p Policy) String() string {
	if n, ok := policyNames[p]; ok {
		return n
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// scorePolicy is the score package's rule behind p.
func (p Policy) scorePolicy() score.Policy {
	switch p {
	case SingleDC, SingleDCSlice:
		return score.SingleDC
	case GORGO:
		return score.GORGO
	case RoundRobin:
		return score.RoundRobin
	case LoadOnly:
		return score.LoadOnly
	case PrefixThenLoad:
		return score.PrefixThenLoad
	case Credit:
		return score.Credit
	}
	return score.TTFT
}

// ParsePolicies parses a comma-separated list of policy names ("all" for
// every policy), keeping the order given and refusing repeats.
func ParsePolicies(s string) ([]Policy, error) {
	if strings.TrimSpace(s) == "all" {
		return append([]Policy(nil), AllPolicies...), nil
	}
	var out []Policy
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		var found Policy
		for _, p := range slices.Concat(AllPolicies, OptInPolicies) {
			if p.String() == name {
				found = p
			}
		}
		if found == 0 {
			return nil, fmt.Errorf("%w: unknown policy %q (want all or some of %s)", ErrConfig, name, policyList())
		}
		for _, p := range out {
			if p == found {
				return nil, fmt.Errorf("%w: policy %q named twice", ErrConfig, name)
			}
		}
		out = append(out, found)
	}
	return out, nil
}

func policyList() string {
	var names []string
	for _, p := range slices.Concat(AllPolicies, OptInPolicies) {
		names = append(names, p.String())
	}
	return strings.Join(names, ",")
}

// Defaults of Config. The serving model is one worker = one 8-GPU node
// serving a 70B-class dense model in BF16 (Llama-3.1-70B: 141 GB of
// weights, 80 layers × 8 KV heads × 128 dims × 2 (K, V) × 2 bytes = 320
// KiB of KV per token, from the model's published config) with vLLM's
// scheduler; the defaults below cite their sources one by one. The fleet's
// size (2 workers per DC) is not a hardware fact: it sizes the fleet so
// that the default concurrency keeps it busy but not saturated (the sweep,
// `goindex sim --sweep`, runs 1, 2, 4 and 8 workers per DC besides).
const (
	DefaultRouterSite   = "fra"
	DefaultWorkersPerDC = 2
	// DefaultKVBlocksPerWorker: 1,024 blocks of 512 tokens = 524,288
	// tokens = 160 GiB of BF16 KV at 320 KiB/token, which fits beside the
	// 141 GB of weights on one 8 × 80 GB node (vLLM sizes the KV pool to
	// what gpu_memory_utilization = 0.9, its default, leaves after the
	// weights and activations); equal to 32k blocks of vLLM's default
	// 16 tokens.
	DefaultKVBlocksPerWorker = 1024
	// DefaultPrefillTokensPerMs: 15k prompt tokens/s per node: 2 × 70.6 G
	// FLOP per token (the dense-model rule of thumb of Kaplan et al.,
	// "Scaling Laws for Neural Language Models", 2020) = 2.1 PFLOP/s, 27% of
	// eight H100s' 989 TFLOP/s dense BF16 (NVIDIA H100 datasheet), within
	// the model FLOPs utilization prefill reaches with tensor parallelism
	// and long-context attention.
	DefaultPrefillTokensPerMs = 15
	// DefaultDecodeMsPerToken: a decode iteration reads every weight once:
	// 141 GB at an effective 4.7 TB/s (one 8-GPU node under tensor
	// parallelism, its all-reduces included) is 30 ms, in the 20–40 ms
	// time-per-output-token range serving benchmarks report for 70B
	// models at moderate batch sizes.
	DefaultDecodeMsPerToken = 30
	// DefaultDecodeMsPerKToken: the same iteration also reads the KV of
	// every decoding sequence: 320 KiB per token at the bandwidth above,
	// 30 ms × 327,680 B / 141 GB = 0.07 ms per 1,000 context tokens (a
	// full default KV adds 37 ms per token).
	DefaultDecodeMsPerKToken = 0.07
	// DefaultTokenBudget is vLLM's default max_num_batched_tokens
	// (SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048,
	// docs.vllm.ai/en/stable/api/vllm/config/scheduler/), the per-iteration
	// budget chunked prefill shares with decode.
	DefaultTokenBudget = 2048
	// DefaultBatchLimit is vLLM's default max_num_seqs
	// (SchedulerConfig.DEFAULT_MAX_NUM_SEQS = 128, same page).
	DefaultBatchLimit         = 128
	DefaultConcurrency        = 256
	DefaultLoadReportInterval = 100 * time.Millisecond
	DefaultRTTJitter          = 2 * time.Millisecond
	DefaultSampleInterval     = time.Second
	DefaultSeed               = 42
	// loadStaleReports is how many report intervals old a load report may
	// be before the router treats the DC's load as missing.
	loadStaleReports = 3
)

// Config limits, so that a typo cannot ask for millions of engines.
const (
	MaxWorkersPerDC      = 1024
	MaxBatchLimit        = 1 << 16
	MaxConcurrency       = 1 << 20
	MaxKVBlocksPerWorker = trace.MaxCapacityBlocks
	MaxTokenBudget       = 1 << 24
	// MaxPrefillJitter keeps every request's prefill work positive.
	MaxPrefillJitter = 0.9
	// MinDCSpeed and MaxDCSpeed bound Config.DCSpeed.
	MinDCSpeed = 0.1
	MaxDCSpeed = 10
)

// Config describes one simulation: the DCs and their workers, the
// throughput model, the client load and the policies to compare. The zero
// value of every optional field takes its default; Run validates it.
type Config struct {
	// Grid gives the DCs (one per site, in order) and their RTTs; required.
	Grid *Grid
	// ClientShares gives each site's share of the requests: every request
	// originates at a site drawn from the shares (fixed by the seed, the
	// same for every policy), and the router of that site routes it and
	// pays the RTT between the two sites to the DC it picks. Sites left
	// out have no clients. // optional; default: every site alike (no
	// public per-metro demand figures exist for this footprint, so the
	// neutral choice)
	ClientShares map[string]float64
	// OneSite puts every client, and the only router, at RouterSite (the
	// original model, in which one local DC is the ideal).
	// // optional; default: false (clients at every site)
	OneSite bool
	// RouterSite is the site of every client and of the only router in
	// OneSite mode; it must be a site of Grid. // optional; default: "fra"
	RouterSite string

	// WorkersPerDC is the workers of every DC. // optional; default: 2
	WorkersPerDC int
	// KVBlocksPerWorker is each worker's KV capacity in blocks of
	// BlockSize tokens. // optional; default: 1024
	KVBlocksPerWorker int
	// BlockSize is the KV block size in tokens; it must divide 512 (a
	// Mooncake hash id is 512 tokens). // optional; default: 512
	BlockSize int
	// PrefillTokensPerMs is one worker's compute rate in tokens/ms: an
	// iteration of p prompt tokens and n decode tokens takes at least
	// (p + n)/PrefillTokensPerMs (worker.go has the model).
	// // optional; default: 15
	PrefillTokensPerMs float64
	// DecodeMsPerToken is the memory-bound time of an iteration reading the
	// weights: the time per output token of a small decode batch.
	// // optional; default: 30
	DecodeMsPerToken float64
	// DecodeMsPerKToken is what every 1,000 context tokens of the decoding
	// sequences add to an iteration's memory-bound time (their KV read).
	// A negative value turns it off. // optional; default: 0.07
	DecodeMsPerKToken float64
	// TokenBudget is the tokens one iteration processes, decode tokens
	// first, the rest prefill (vLLM's max_num_batched_tokens).
	// // optional; default: 2048
	TokenBudget int
	// BatchLimit is the most sequences a worker runs at once (prefilling or
	// decoding; vLLM's max_num_seqs). // optional; default: 128
	BatchLimit int
	// PrefillJitter spreads each request's prefill work uniformly over
	// [1 − j, 1 + j] times its token count, drawn per request (kernel and
	// scheduling noise a router cannot see). No published figure fixes it,
	// so it is off unless asked for. // optional; default: 0 (off); at
	// most MaxPrefillJitter
	PrefillJitter float64

	// Concurrency is the closed-loop client count. // optional; default: 256
	Concurrency int
	// OpenLoop replays arrivals at the trace's timestamps instead.
	// // optional; default: false
	OpenLoop bool
	// Warmup is how many requests at the start of the trace are served but
	// left out of the per-request figures (latencies, hit rate, RTT, WAN
	// hops, estimate) and of the throughput window. A closed loop starts
	// with Concurrency requests sent at once to cold caches: that burst
	// is a start-up transient, not the steady state, and on a trace of a
	// few thousand requests it alone fills the top 5% of TTFTs. Result's
	// AllRequests keeps the figures over every request. A value at or
	// above the trace's length is an error. // optional; default:
	// Concurrency in closed loop (at most half the requests), none in open
	// loop; negative: none
	Warmup int
	// TimeScale multiplies trace timestamps in open loop (0.5 replays
	// twice as fast). // optional; default: 1
	TimeScale float64

	// LoadReportInterval is how often each DC publishes a load report.
	// // optional; default: 100ms
	LoadReportInterval time.Duration
	// RTTJitter is the most extra round-trip time a request pays above the
	// matrix mean (uniform in [0, RTTJitter], drawn per request). A negative
	// value turns jitter off. // optional; default: 2ms
	RTTJitter time.Duration
	// NoInflight turns off the router's own accounting of the requests it
	// routed since a DC's last load report (every load-aware policy adds
	// them to the stale report, as Dynamo's router tracks its own active
	// sequences). // optional; default: false (accounting on)
	NoInflight bool
	// NoQueueDrain reads each DC's reported queue as current, instead of
	// draining it (score.Backlog) over the report's age and the request's
	// one-way trip, for comparing the two queue models side by side.
	// // optional; default: false (drained)
	NoQueueDrain bool
	// NoCalibration turns off ttft's learning from its requests' first and
	// last tokens (per router and DC: the KV hold time, score.Holding,
	// and, with Calibrate, the compute factor, score.Calibration), as if ttft were
	// ttft-uncalibrated. // optional; default: false (learning on)
	NoCalibration bool
	// Calibrate makes ttft also scale its queue and prefill estimates by
	// the compute factor each router learns per DC from first-token times
	// (score.Calibration), which finds a DC faster or slower than
	// configured. It is opt-in: with every DC as configured, the factor a
	// router learns from only the requests it chose is biased (it sees a
	// DC when that DC's estimate was at its most optimistic) and the
	// correction cost TTFT in the development runs (BENCHMARKS.md).
	// // optional; default: false
	Calibrate bool
	// DCSpeed multiplies the compute rate of the named sites' workers
	// (1.0: as configured) without telling anyone: their load reports still
	// carry the configured rate, as a mis-configured relay's would; the
	// routers' calibration has to find out. Each value must be in
	// [MinDCSpeed, MaxDCSpeed]. // optional; default: every DC as
	// configured
	DCSpeed map[string]float64
	// NoDrift turns off ttft's queue forecast (score.Drift: the work its
	// reports show beyond the router's own model, extrapolated to the
	// request's arrival, with its spread), leaving ttft the drained report
	// every policy reads, for comparing the two side by side.
	// // optional; default: false (forecast on)
	NoDrift bool
	// PriceOthers makes ttft (and the oracles) also price the wait each
	// request's prefill adds for the requests behind it: the router
	// measures the fleet's utilization from its sends (score.Demand) and
	// passes it as score.Request.FleetUtilization. // optional; default:
	// false (each request's own estimated TTFT only)
	PriceOthers bool
	// PriceKV makes ttft (and the oracles) also price the wait each
	// request's KV adds for the requests that reach its DC after it
	// (score.KVOthersMs, the FCFS M/G/1 externality with the DC's KV as
	// the server): the router learns the mean prompt size from its sends
	// (score.RequestSize). // optional; default: false
	PriceKV bool
	// PriceEvictions makes ttft (and the oracles) charge the blocks an
	// uncached prefill stores at the cascade of refetches a router
	// measures at each DC (score.Refetch: the share of the DC's evicted
	// blocks stored again within a turnover, from the events its lane
	// receives; score.CascadeFactor) instead of the reuse-window guess
	// (score.EvictionFactor). // optional; default: false
	PriceEvictions bool
	// Foresight makes every decision of every policy but clairvoyant also
	// run the clairvoyant's shadows of every DC (slow), to measure the TTFT
	// model's estimates and the policy's choices against the TTFT the
	// request would really get at each DC (Result.Foresight).
	// // optional; default: false
	Foresight bool
	// SampleInterval is the period of the per-DC load samples kept for the
	// report's charts. // optional; default: 1s
	SampleInterval time.Duration

	// Policies are the policies to run, each on identical input.
	// // optional; default: AllPolicies
	Policies []Policy
	// Seed drives every random draw (jitter, tie-breaks); the same seed
	// gives identical results. // optional; default: 42
	Seed uint64
	// Progress, if set, is called from the policies' goroutines every
	// ProgressEvery completed requests and when a policy finishes; it must
	// be safe for concurrent use. // optional
	Progress func(Progress)
	// ProgressEvery is the completed-request period of Progress calls.
	// // optional; default: 500
	ProgressEvery int
}

// Progress is one progress note of a running policy.
type Progress struct {
	Policy    Policy
	Completed int
	Total     int
	SimMs     float64 // simulated time so far, ms
	Done      bool
}

// withDefaults returns c with every unset optional field at its default,
// or an ErrConfig error.
func (c Config) withDefaults() (Config, error) {
	if c.Grid == nil || len(c.Grid.Sites) == 0 {
		return c, fmt.Errorf("%w: no grid", ErrConfig)
	}
	if len(c.Grid.Sites) > MaxGridSites {
		return c, fmt.Errorf("%w: %d DCs, at most %d", ErrConfig, len(c.Grid.Sites), MaxGridSites)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	deff := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if c.RouterSite == "" {
		c.RouterSite = DefaultRouterSite
	}
	def(&c.WorkersPerDC, DefaultWorkersPerDC)
	def(&c.KVBlocksPerWorker, DefaultKVBlocksPerWorker)
	def(&c.BlockSize, trace.DefaultBlockSize)
	deff(&c.PrefillTokensPerMs, DefaultPrefillTokensPerMs)
	deff(&c.DecodeMsPerToken, DefaultDecodeMsPerToken)
	deff(&c.DecodeMsPerKToken, DefaultDecodeMsPerKToken)
	if c.DecodeMsPerKToken < 0 {
		c.DecodeMsPerKToken = 0
	}
	def(&c.TokenBudget, DefaultTokenBudget)
	def(&c.BatchLimit, DefaultBatchLimit)
	def(&c.Concurrency, DefaultConcurrency)
	deff(&c.TimeScale, 1)
	def(&c.ProgressEvery, 500)
	if c.LoadReportInterval == 0 {
		c.LoadReportInterval = DefaultLoadReportInterval
	}
	if c.RTTJitter == 0 {
		c.RTTJitter = DefaultRTTJitter
	}
	if c.RTTJitter < 0 {
		c.RTTJitter = 0
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = DefaultSampleInterval
	}
	if len(c.Policies) == 0 {
		c.Policies = append([]Policy(nil), AllPolicies...)
	}
	if c.Seed == 0 {
		c.Seed = DefaultSeed
	}
	bad := func(format string, a ...any) (Config, error) {
		return c, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case c.WorkersPerDC < 1 || c.WorkersPerDC > MaxWorkersPerDC:
		return bad("workers per DC %d not in [1, %d]", c.WorkersPerDC, MaxWorkersPerDC)
	case c.KVBlocksPerWorker < 1 || c.KVBlocksPerWorker > MaxKVBlocksPerWorker:
		return bad("KV blocks per worker %d not in [1, %d]", c.KVBlocksPerWorker, MaxKVBlocksPerWorker)
	case c.BlockSize < 1 || c.BlockSize > trace.TokensPerID || trace.TokensPerID%c.BlockSize != 0:
		return bad("block size %d must divide %d", c.BlockSize, trace.TokensPerID)
	case !positive(c.PrefillTokensPerMs):
		return bad("prefill rate %v tokens/ms must be a positive number", c.PrefillTokensPerMs)
	case !positive(c.DecodeMsPerToken):
		return bad("decode time %v ms/token must be a positive number", c.DecodeMsPerToken)
	case math.IsNaN(c.DecodeMsPerKToken) || math.IsInf(c.DecodeMsPerKToken, 0):
		return bad("decode KV read %v ms per 1k tokens must be a number", c.DecodeMsPerKToken)
	case c.BatchLimit < 1 || c.BatchLimit > MaxBatchLimit:
		return bad("batch limit %d not in [1, %d]", c.BatchLimit, MaxBatchLimit)
	case c.TokenBudget <= c.BatchLimit || c.TokenBudget > MaxTokenBudget:
		return bad("token budget %d must exceed the batch limit %d (decode takes one token per sequence) and be at most %d", c.TokenBudget, c.BatchLimit, MaxTokenBudget)
	case !(c.PrefillJitter >= 0 && c.PrefillJitter <= MaxPrefillJitter):
		return bad("prefill jitter %v not in [0, %v]", c.PrefillJitter, MaxPrefillJitter)
	case c.Concurrency < 1 || c.Concurrency > MaxConcurrency:
		return bad("concurrency %d not in [1, %d]", c.Concurrency, MaxConcurrency)
	case !positive(c.TimeScale):
		return bad("time scale %v must be a positive number", c.TimeScale)
	case c.LoadReportInterval < time.Millisecond:
		return bad("load report interval %v must be at least 1ms", c.LoadReportInterval)
	case c.SampleInterval < time.Millisecond:
		return bad("sample interval %v must be at least 1ms", c.SampleInterval)
	case c.Warmup > MaxConcurrency:
		return bad("warm-up %d requests, at most %d", c.Warmup, MaxConcurrency)
	case c.ProgressEvery < 1:
		return bad("progress period %d must be positive", c.ProgressEvery)
	}
	for name, v := range c.DCSpeed {
		if _, ok := c.Grid.Index(name); !ok {
			return bad("DC speed for %q, which is not a site", name)
		}
		if !(v >= MinDCSpeed && v <= MaxDCSpeed) {
			return bad("DC speed %v for %s not in [%v, %v]", v, name, MinDCSpeed, MaxDCSpeed)
		}
	}
	if _, ok := c.Grid.Index(c.RouterSite); !ok {
		return bad("router site %q is not one of the DCs (%s)", c.RouterSite, strings.Join(c.Grid.Sites, ","))
	}
	for i, p := range c.Policies {
		if _, ok := policyNames[p]; !ok {
			return bad("unknown policy %d", p)
		}
		for _, q := range c.Policies[:i] {
			if q == p {
				return bad("policy %v named twice", p)
			}
		}
	}
	return c, nil
}

func positive(v float64) bool { return v > 0 && !math.IsInf(v, 1) }

// warmupFor returns how many of n requests c leaves out of the per-request
// figures (Config.Warmup), or an ErrConfig error when an explicit warm-up
// would leave none.
func (c *Config) warmupFor(n int) (int, error) {
	switch {
	case c.Warmup < 0:
		return 0, nil
	case c.Warmup > 0:
		if c.Warmup >= n {
			return 0, fmt.Errorf("%w: warm-up of %d requests leaves none of %d measured", ErrConfig, c.Warmup, n)
		}
		return c.Warmup, nil
	case c.OpenLoop:
		return 0, nil
	}
	return min(c.Concurrency, n/2), nil
}
