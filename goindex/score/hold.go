package score

import (
	"math"
	"sync"
)

// DefaultHoldMemory is how many recent requests of one candidate Holding's
// per-candidate means weigh (exponential forgetting); the fleet's mean
// weighs that many per candidate.
const DefaultHoldMemory = 50

// holdPrior is the weight, in requests, of the fleet's mean hold time in
// one candidate's estimate (empirical Bayes shrinkage): with identical
// hardware, a candidate's own few requests differ from the fleet's mostly
// by chance, and a cost that scales with a noisy per-candidate figure
// steers requests towards whichever candidate's last few requests
// happened to be short.
const holdPrior = 20

// Holding learns how long a request holds its KV blocks at each of a
// router's candidates, from its admission to its last token, weighted by
// the blocks it holds: by Little's law a candidate whose KV is full frees
// CapacityBlocks / (that mean) blocks per ms, the rate the TTFT cost
// needs for the wait for KV room. A router sees when a request's first
// and last tokens come back; the hold is the time between them plus the
// prefill before the first (the estimate's, since admission is not seen).
//
// A candidate's estimate is its own block-weighted mean shrunk towards
// the fleet's (every candidate's requests together) by holdPrior requests'
// worth: every candidate's own estimate is noisy, most of all with many
// routers each seeing a share of its requests.
//
// A Holding is safe for concurrent use; build it with NewHolding.
type Holding struct {
	mu    sync.Mutex
	keep  float64 // per observation, for one candidate's sums
	fkeep float64 // per observation, for the fleet's
	fleet holdSums
	per   []holdSums
}

// holdSums are forgotten sums of blocks × hold, blocks and observations.
type holdSums struct{ bt, b, n float64 }

func (s *holdSums) add(keep, holdMs, blocks float64) {
	s.bt = keep*s.bt + blocks*holdMs
	s.b = keep*s.b + blocks
	s.n = keep*s.n + 1
}

func (s *holdSums) mean() float64 {
	if s.b <= 0 {
		return 0
	}
	return s.bt / s.b
}

// NewHolding returns a Holding for candidates 0..candidates−1, each mean
// weighing about memory recent requests (DefaultHoldMemory if < 1).
func NewHolding(candidates, memory int) *Holding {
	if memory < 1 {
		memory = DefaultHoldMemory
	}
	n := max(candidates, 1)
	return &Holding{keep: 1 - 1/float64(memory), fkeep: 1 - 1/float64(memory*n), per: make([]holdSums, n)}
}

// Observe records that a request held blocks KV blocks at candidate k for
// holdMs. Out-of-range candidates and non-finite or negative inputs are
// ignored.
func (h *Holding) Observe(k int, holdMs, blocks float64) {
	if k < 0 || !(holdMs >= 0) || math.IsInf(holdMs, 1) || !(blocks > 0) || math.IsInf(blocks, 1) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if k >= len(h.per) {
		return
	}
	h.per[k].add(h.keep, holdMs, blocks)
	h.fleet.add(h.fkeep, holdMs, blocks)
}

// ObserveStream records a request seen, as a proxy sees it, by its first
// and last tokens at candidate k: firstToLastMs apart, with prefillMs the
// estimate's prefill (unweighted). Its hold is the two together, from its
// admission (not seen: the first token less the prefill) to its last
// token. Times taken where both tokens arrive, after the same one-way
// trip, need no correction; taken where the request was served, neither
// does. Bad input is ignored as Observe ignores it.
func (h *Holding) ObserveStream(k int, firstToLastMs, prefillMs, blocks float64) {
	h.Observe(k, firstToLastMs+max(prefillMs, 0), blocks)
}

// HoldMs is candidate k's estimated block-weighted hold time, ms: 0
// before any observation anywhere.
func (h *Holding) HoldMs(k int) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.fleet.mean()
	if k < 0 || k >= len(h.per) || f == 0 {
		return f
	}
	p := &h.per[k]
	if p.b <= 0 {
		return f
	}
	return (p.n*p.mean() + holdPrior*f) / (p.n + holdPrior)
}
