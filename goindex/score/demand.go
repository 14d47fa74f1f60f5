package score

import (
	"sync"
	"time"
)

// DefaultDemandWindow is the sliding window over which Demand measures the
// fleet's utilization: long enough to average over the long prompts that
// dominate prefill work, short enough to follow a change of load.
const DefaultDemandWindow = 10 * time.Second

// Demand measures the fleet's prefill utilization ρ from the work a router
// sends: the prompt tokens it expects the chosen DCs to prefill (prompt
// minus the cached prefix it counted on), summed over a sliding window and
// divided by what the fleet can prefill in that window
// (Scorer.FleetTokensPerMs over the window's length).
//
// Why the router prices the others' wait: a request's own TTFT is all the
// greedy TTFT cost sees, but the uncached prefill it leaves on a DC also
// delays every request that queues behind it until that DC's queue next
// empties. For a work-conserving queue at utilization ρ that extra wait,
// summed over the requests behind, is about the added work times ρ/(1−ρ)
// (the busy period the work extends grows by 1/(1−ρ), and ρ of the
// requests' arrivals fall in it); routed across the fleet by a balancing
// router, the fleet behaves as one pooled queue, so ρ is the fleet's.
// Scoring own TTFT plus that wait is the marginal (system-optimal) cost:
// at low load it is the greedy TTFT, at high load cache hits, which
// remove work for everyone, weigh more. In the simulator (BENCHMARKS.md)
// it lowered ttft's p95 against prefix-then-load by about 6 points on the
// synthetic trace at 73% utilization and left the conversation trace at
// 48% where it was; with prefill weighing more, a one-block overcount of
// the CKF also changes a decision more often, so routers opt in.
//
// A router sees only its own sends: with several router sites, each
// measures its share of the fleet's demand and prices the others' wait
// too low (towards the greedy TTFT), never too high. The window starts
// full of nothing, so ρ rises from 0 over the first window.
//
// A Demand is safe for concurrent use. The zero value is not usable; build
// it with NewDemand.
type Demand struct {
	mu     sync.Mutex
	window float64 // ms
	sent   []Arrival
	head   int     // sent[head:] are inside the window
	tokens float64 // sum of sent[head:].Tokens
}

// NewDemand returns a Demand over window (DefaultDemandWindow if ≤ 0).
func NewDemand(window time.Duration) *Demand {
	if window <= 0 {
		window = DefaultDemandWindow
	}
	return &Demand{window: float64(window) / float64(time.Millisecond)}
}

// Add records tokens of prefill work sent at atMs (ms on the caller's
// clock, non-decreasing across calls; an earlier time counts as the last
// one). Non-positive work is ignored.
func (d *Demand) Add(atMs, tokens float64) {
	if !(tokens > 0) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := len(d.sent); n > 0 && atMs < d.sent[n-1].AtMs {
		atMs = d.sent[n-1].AtMs
	}
	d.sent = append(d.sent, Arrival{AtMs: atMs, Tokens: tokens})
	d.tokens += tokens
}

// Utilization returns ρ at nowMs: the work sent in (nowMs − window, nowMs]
// over fleetTokensPerMs × window, or 0 when the rate is not positive. It
// is not capped (the scorer caps it at MaxFleetUtilization).
func (d *Demand) Utilization(nowMs, fleetTokensPerMs float64) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.head < len(d.sent) && d.sent[d.head].AtMs <= nowMs-d.window {
		d.tokens -= d.sent[d.head].Tokens
		d.head++
	}
	if d.head == len(d.sent) {
		d.tokens = 0 // no rounding residue once the window is empty
	}
	// Reclaim the expired prefix once it is half the slice.
	if d.head > 0 && d.head >= len(d.sent)/2 {
		d.sent = append(d.sent[:0], d.sent[d.head:]...)
		d.head = 0
	}
	if !(fleetTokensPerMs > 0) {
		return 0
	}
	return max(d.tokens, 0) / (fleetTokensPerMs * d.window)
}
