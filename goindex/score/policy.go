package score

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
)

// Policy names a selection rule.
type Policy uint8

// The policies. Their numbers match GOINDEX_POLICY_* in include/goindex.h
// where one exists.
const (
	// TTFT minimizes RTT + queue wait + uncached prefill time (goindex).
	TTFT Policy = iota + 1
	// PrefixThenLoad takes the longest cached prefix, then the lowest load.
	PrefixThenLoad
	// LoadOnly takes the lowest load and ignores the cache.
	LoadOnly
	// Credit is Dynamo's current cost: max(0, prefill blocks − overlap
	// credit) + decode blocks.
	Credit
	// RoundRobin cycles through the candidates in order.
	RoundRobin
	// SingleDC always takes Config.Home.
	SingleDC
	// GORGO is the static weighted cost of GORGO (Ricci Toniolo, Dinesh,
	// Thorstenson, "GORGO: Maximizing KV-Cache Reuse While Minimizing
	// Network Latency in Cross-Region LLM Load Balancing", arXiv
	// 2602.11688; its reference router, github.com/atoniolo76/gotoni,
	// pkg/cluster/loadbalancer.go): RTT + ms-per-token × (queued tokens +
	// uncached prompt tokens), every term weighted 1 in time, the
	// ms-per-token being the hardware's measured prefill time per token
	// (0.094 ms there, on 8×A100 with Mistral-7B; the candidate's reported
	// rates here, as its config note says to adjust it to the hardware).
	// Unlike TTFT it has no KV-admission term and trusts its signals as
	// they are.
	GORGO
)

var policyNames = map[Policy]string{
	TTFT: "ttft", PrefixThenLoad: "prefix-then-load", LoadOnly: "load-only",
	Credit: "credit", RoundRobin: "round-robin", SingleDC: "single-dc", GORGO: "gorgo",
}

// String returns the policy's name as the command line spells it.
func (p Policy) String() string {
	if n, ok := policyNames[p]; ok {
		return n
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// ParsePolicy returns the policy named s.
func ParsePolicy(s string) (Policy, error) {
	for p, n := range policyNames {
		if n == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown policy %q (want ttft, prefix-then-load, load-only, credit, gorgo, round-robin or single-dc)", ErrBadConfig, s)
}

// Candidate is one place a request can go, with its signals. Has* flags say
// which optional signals are present; absent ones are never read as zero.
type Candidate struct {
	ID   uint64 // DC id or worker id
	Rank uint32 // lane or dp rank

	CachedBlocks int // probe depth of the request's prefix, in blocks

	HasLoad             bool
	ActivePrefillTokens uint64 // tokens queued or running prefill
	ActiveDecodeBlocks  uint64 // KV blocks held by running decodes
	// QueueSpreadTokens is the standard deviation of ActivePrefillTokens
	// when that is a forecast (Drift.Spread); 0: taken as exact. Of the
	// candidates whose TTFT estimates are within their combined spread of
	// the cheapest, TTFT takes the least uncertain.
	QueueSpreadTokens float64

	HasCapacity    bool
	CapacityBlocks uint64 // KV capacity in blocks

	HasRTT bool
	RTTms  float64 // round trip router ↔ candidate, ms

	// PrefillTokensPerMs, QueueTokensPerMs and DecodeBlocksPerMs override
	// Config's throughput model for this candidate (from its load report);
	// 0 means the default.
	PrefillTokensPerMs float64
	QueueTokensPerMs   float64
	DecodeBlocksPerMs  float64

	// Weights scale TTFT's terms (Calibration learns them per candidate);
	// zero weights mean 1.
	Weights Weights
	// ResidenceMs is how long a request holds its KV after its first
	// token, on average (Calibration learns it); with it, a full
	// candidate frees blocks at CapacityBlocks/ResidenceMs (Little's law)
	// instead of DecodeBlocksPerMs. 0: unknown.
	ResidenceMs float64
	// HoldMs is how long a request holds its KV blocks at the candidate,
	// from admission to its last token, weighted by its blocks (Holding
	// learns it); it takes ResidenceMs's place when set: a request's
	// blocks are taken from its admission on, and long prompts, which
	// hold many blocks, weigh more. 0: unknown.
	HoldMs float64
	// EvictionFactor is the share of an uncached prefill's time that
	// later requests pay again because the blocks it stores evict cached
	// blocks they would have hit (EvictionFactor, from the rate the
	// candidate's cache stores blocks); TTFT adds it to OthersMs. 0: none.
	EvictionFactor float64
	// MeanRequestBlocks is the mean prompt size, in blocks, of the
	// requests the router sends (RequestSize learns it); with it, TTFT
	// also adds to OthersMs the wait the request's KV adds for the
	// requests that reach the candidate after it (KVOthersMs). 0: not
	// priced.
	MeanRequestBlocks float64
}

// Request is what is being routed.
type Request struct {
	ISLTokens   int     // prompt length in tokens
	Temperature float64 // 0: minimum cost; > 0: softmax sampling
	// FleetUtilization is the share of the fleet's prefill capacity in
	// use, ρ (Demand measures it from the work a router sends). With it,
	// TTFT also prices the wait a request's prefill adds for the requests
	// queued behind it (Parts.OthersMs); 0 (unknown) prices only the
	// request's own time to first token. Values above
	// MaxFleetUtilization count as that.
	FleetUtilization float64
}

// MaxFleetUtilization caps Request.FleetUtilization, so that the price of
// a request's prefill for the others stays finite (at most 19 times the
// prefill itself).
const MaxFleetUtilization = 0.95

// Config configures a Scorer.
type Config struct {
	Policy    Policy // optional; default: TTFT
	BlockSize int    // tokens per KV block; required

	// PrefillTokensPerMs is one request's prefill speed on one worker;
	// optional; default: 20 (20k tokens/s, a mid-size model on one GPU).
	PrefillTokensPerMs float64
	// QueueTokensPerMs is the rate a candidate drains its queued prefill
	// tokens (all its workers together); optional; default: PrefillTokensPerMs.
	QueueTokensPerMs float64
	// DecodeBlocksPerMs is the rate running decodes release KV blocks when a
	// candidate is full; optional; default: 1.
	DecodeBlocksPerMs float64
	// Credit is Dynamo's overlap-score credit; optional; default: 1.
	Credit float64
	// Home is the candidate ID SingleDC always picks.
	Home uint64
}

// Result is the chosen candidate and the cost that chose it.
type Result struct {
	Index        int     // into the candidates slice
	Eligible     int     // candidates with every needed signal
	CachedTokens int     // cached blocks × block size, capped at the prompt
	Cost         float64 // the policy's cost: ms for TTFT, blocks otherwise
	Parts        Parts   // TTFT's parts; zero for other policies
}

// Parts breaks a TTFT cost into its terms, in ms, each scaled by the
// candidate's Weights. RTTms + QueueMs + PrefillMs is the request's own
// estimated time to first token (QueueMs the longer of the wait for the
// prefills ahead and the wait for KV room); OthersMs is the wait its
// prefill adds for the requests behind it (0 without a fleet
// utilization) plus, with an EvictionFactor, what the blocks it stores
// cost later requests that would have hit the blocks they evict, plus,
// with a MeanRequestBlocks, the wait its KV adds for the requests that
// reach the candidate after it (KVOthersMs).
type Parts struct {
	RTTms, QueueMs, PrefillMs, OthersMs float64
}

// TTFTms is the request's own estimated time to first token.
func (p Parts) TTFTms() float64 { return p.RTTms + p.QueueMs + p.PrefillMs }

// Total is the TTFT policy's cost: TTFTms plus OthersMs.
func (p Parts) Total() float64 { return p.TTFTms() + p.OthersMs }

// Scorer applies one policy. Build it with New.
type Scorer struct {
	cfg Config
	rr  atomic.Uint64
}

// New validates cfg, fills defaults and returns a Scorer.
func New(cfg Config) (*Scorer, error) {
	if cfg.Policy == 0 {
		cfg.Policy = TTFT
	}
	if _, ok := policyNames[cfg.Policy]; !ok {
		return nil, fmt.Errorf("%w: policy %d", ErrBadConfig, cfg.Policy)
	}
	if cfg.BlockSize <= 0 {
		return nil, fmt.Errorf("%w: block size %d must be > 0", ErrBadConfig, cfg.BlockSize)
	}
	if cfg.PrefillTokensPerMs == 0 {
		cfg.PrefillTokensPerMs = 20
	}
	if cfg.QueueTokensPerMs == 0 {
		cfg.QueueTokensPerMs = cfg.PrefillTokensPerMs
	}
	if cfg.DecodeBlocksPerMs == 0 {
		cfg.DecodeBlocksPerMs = 1
	}
	if cfg.Credit == 0 {
		cfg.Credit = 1
	}
	if cfg.PrefillTokensPerMs < 0 || cfg.QueueTokensPerMs < 0 || cfg.DecodeBlocksPerMs < 0 || cfg.Credit < 0 {
		return nil, fmt.Errorf("%w: rates and credit must be positive", ErrBadConfig)
	}
	return &Scorer{cfg: cfg}, nil
}

// Config returns the scorer's configuration with defaults filled in.
func (s *Scorer) Config() Config { return s.cfg }

// Score picks a candidate for req. rng breaks ties and samples; it may be nil
// only when ties are impossible to matter to the caller (the first minimum
// then wins). Costs of every candidate can be read with Cost.
func (s *Scorer) Score(req Request, cands []Candidate, rng *rand.Rand) (Result, error) {
	isl, rho := max(req.ISLTokens, 0), req.FleetUtilization
	switch s.cfg.Policy {
	case RoundRobin:
		if len(cands) == 0 {
			return Result{}, ErrNoCandidate
		}
		i := int(s.rr.Add(1)-1) % len(cands)
		return s.result(i, len(cands), isl, 0, Parts{}, cands), nil
	case SingleDC:
		for i, c := range cands {
			if c.ID == s.cfg.Home {
				return s.result(i, 1, isl, 0, Parts{}, cands), nil
			}
		}
		return Result{}, fmt.Errorf("%w: home %d is not a candidate", ErrNoCandidate, s.cfg.Home)
	}
	costs := make([]float64, len(cands))
	eligible := make([]bool, len(cands))
	n := 0
	for i := range cands {
		c, ok := s.cost(&cands[i], isl, rho)
		costs[i], eligible[i] = c, ok
		if ok {
			n++
		}
	}
	if n == 0 {
		return Result{}, ErrNoCandidate
	}
	i := choose(costs, eligible, req.Temperature, rng)
	if s.cfg.Policy == TTFT && req.Temperature <= 0 {
		i = s.robust(cands, costs, eligible, i)
	}
	var parts Parts
	if s.cfg.Policy == TTFT {
		parts = s.ttftParts(&cands[i], isl, rho)
	}
	return s.result(i, n, isl, costs[i], parts, cands), nil
}

// Cost returns candidate c's cost under the scorer's policy and whether c is
// eligible (has every signal the policy needs). RoundRobin and SingleDC have
// no cost and report 0, true.
func (s *Scorer) Cost(req Request, c Candidate) (float64, bool) {
	return s.cost(&c, max(req.ISLTokens, 0), req.FleetUtilization)
}

// FleetTokensPerMs is the rate the candidates with a load signal drain
// queued prefill together (each one's QueueTokensPerMs, or the configured
// default): the capacity side of Demand.Utilization.
func (s *Scorer) FleetTokensPerMs(cands []Candidate) float64 {
	total := 0.0
	for i := range cands {
		if cands[i].HasLoad {
			total += orDefault(cands[i].QueueTokensPerMs, s.cfg.QueueTokensPerMs)
		}
	}
	return total
}

func (s *Scorer) result(i, eligible, isl int, cost float64, parts Parts, cands []Candidate) Result {
	return Result{Index: i, Eligible: eligible, CachedTokens: s.cachedTokens(&cands[i], isl), Cost: cost, Parts: parts}
}

// robust returns, among the eligible candidates whose cost is within the
// combined spread of the cheapest one's (statistically indistinguishable
// from it: c_j − c_min ≤ √(σ_j² + σ_min²), σ being the queue forecast's
// standard deviation in ms), the one whose forecast is the least
// uncertain, the cheaper on a tie. With no spreads it returns min.
func (s *Scorer) robust(cands []Candidate, costs []float64, eligible []bool, min int) int {
	sigma := func(j int) float64 {
		return max(cands[j].QueueSpreadTokens, 0) / orDefault(cands[j].QueueTokensPerMs, s.cfg.QueueTokensPerMs)
	}
	best, bestSigma := min, sigma(min)
	for j := range cands {
		if !eligible[j] || j == min {
			continue
		}
		sj := sigma(j)
		if costs[j]-costs[min] > math.Hypot(sj, sigma(min)) {
			continue
		}
		if sj < bestSigma || sj == bestSigma && costs[j] < costs[best] {
			best, bestSigma = j, sj
		}
	}
	return best
}
