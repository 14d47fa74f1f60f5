// Package score chooses where a request goes. For every eligible candidate (a
// DC, or a worker inside one) it estimates a cost from the candidate's cached
// prefix depth and live signals and picks the minimum.
//
// goindex's own policy, TTFT, estimates the time to first token:
//
//	TTFT = RTT + queue wait + prefill time of the uncached prompt
//	queue wait   = max(queued prefill tokens / the candidate's aggregate prefill rate,
//	                   KV wait when the blocks its running and queued requests
//	                   and this one need exceed the capacity)
//	KV wait      = excess blocks / release rate, the release rate being
//	               capacity / mean KV hold (Little's law) once Holding has
//	               learned it (or the KV residence Calibration learns), the
//	               configured rate before
//	prefill time = (prompt tokens − cached tokens) / the per-request prefill rate
//
// The cost also charges, outside the request's own TTFT, what the blocks
// its uncached prefill stores cost later requests whose cached blocks they
// evict: prefill time × EvictionFactor, which a router derives from the
// rate a candidate's cache stores blocks (InsertRate): 1 / (1 + turnover
// / DefaultReuseWindow), near 1 when the cache turns over well within the
// window, a half at one window, falling off slowly (hyperbolically, as
// prompts come back after heavy-tailed gaps) when it keeps its blocks
// longer.
//
// Admission is FIFO, so the waits for the prefills ahead and for KV room
// overlap: the longer one counts. Candidate.Weights scale the queue and
// prefill terms by a compute factor a router may learn per candidate from
// first-token times (Calibration: a DC faster or slower than configured).
// Of the candidates whose estimates are within their combined uncertainty
// of the cheapest (Candidate.QueueSpreadTokens, the spread of a queue
// forecast; Drift learns it), TTFT takes the best-known one: the robust
// choice when estimates are close.
//
// With the fleet's prefill utilization ρ (Request.FleetUtilization, which a
// router measures with Demand), TTFT also prices the wait a request's
// prefill adds for the requests that queue behind it:
//
//	others = prefill time × ρ/(1−ρ)     (ρ capped at MaxFleetUtilization)
//
// so the cost is the marginal (system-optimal) one rather than the greedy
// per-request TTFT: the same choice on an idle fleet, a stronger pull
// towards cache hits, which remove work for everyone, on a busy one.
// Parts keeps the request's own TTFT terms and the others' wait apart.
//
// Two more prices of that externality are opt-in (extern.go): with
// Candidate.MeanRequestBlocks, the wait a request's KV adds for the
// requests that reach the candidate after it (the FCFS M/G/1 externality
// of Haviv and Ritov with the candidate's KV as the server, KVOthersMs);
// and, for EvictionFactor, the cascade of refetches p/(1 − p) at the share
// p of a candidate's evicted blocks stored again within a turnover, which
// Refetch measures from its cache events (CascadeFactor), in place of the
// reuse-window guess.
//
// The queued prefill tokens are those the request will find when it arrives,
// not those the load report saw: Backlog drains the report's queue at the
// candidate's rate over the report's age and the request's one-way trip,
// adding the work the caller sent since the sample as it arrives (the fluid
// model of a work-conserving queue). Read as current, a report overstates
// the wait by its age times the drain rate: in the simulator this was a
// +100 ms mean queue bias on a busy fleet, removed by draining. What the
// reports show beyond that model (other routers' sends, a drain slower or
// faster than the configured rate a relay reports) Drift learns from one
// report to the next, as a rate a router can extrapolate over the
// request's wait, and its spread.
//
// The other policies reproduce Dynamo's selectors so that every comparison can
// run side by side: PrefixThenLoad (upstream's proof of concept: longest
// prefix, then lowest load), LoadOnly, Credit (Dynamo's current block-cost
// rule with overlap credit), GORGO (the static weighted cost of the
// closest published rival: RTT + queued tokens + uncached prefill, each
// weighted 1 in time), plus the baselines RoundRobin and SingleDC.
//
// Missing signals are never read as zero: a candidate that lacks a signal its
// policy needs (load for every load-aware policy, RTT for TTFT) is not
// eligible, and the result counts the eligible candidates. With no eligible
// candidate Score returns ErrNoCandidate and the caller falls back.
//
// Ties and temperature follow Dynamo (dynamo-compat §4.3): at temperature 0
// the minimum cost wins and ties are broken uniformly at random; above 0 a
// candidate is drawn with probability ∝ exp(−(c − c_min)/((c_max − c_min)·T)).
//
// A Scorer is immutable apart from its round-robin cursor (atomic); Score may
// run concurrently from any number of goroutines, each with its own *rand.Rand.
//
// Files:
//   - policy.go: Policy names and parsing, Config, Scorer, Score.
//   - cost.go: the cost formulas of every policy.
//   - backlog.go: Backlog, the queue a request will find on arrival.
//   - drift.go: Drift, what a candidate's reports show beyond the router's model.
//   - calibrate.go: Calibration, the weights and KV residence learned from observed TTFTs.
//   - hold.go: Holding, how long requests hold their KV blocks, per candidate.
//   - evict.go: EvictionFactor and InsertRate, what an uncached prefill costs later hits.
//   - extern.go: KVOthersMs, Refetch, CascadeFactor and RequestSize, the externality a
//     choice imposes on later requests (the KV it occupies, the cached blocks it evicts).
//   - demand.go: Demand, the fleet's utilization from the work a router sends.
//   - sample.go: minimum with random tie-break, temperature sampling.
//   - errors.go: sentinels.
//
// The tests pin Dynamo's documented cost examples, the TTFT arithmetic with
// and without the others' wait, with a learned residence, hold time and
// weights, the KV wait growing with the queued blocks beyond a full
// candidate's capacity, the eviction charge, Holding's block-weighted and
// shrunk means and a stream's hold, EvictionFactor and InsertRate by hand, the
// robust choice among close estimates, Drift's rate and spread on a noisy
// stream, Calibration's factor on noisy requests of a mis-configured
// candidate and its residence, GORGO's cost by hand, Demand against a brute-force window sum,
// Backlog against a step-by-step queue simulation on random inputs, TTFT's
// choice against the formula written out apart on random DC-shaped sets and
// utilizations, KVOthersMs by hand, growing with pressure and against a
// simulated M/M/1 queue's externality, Refetch by hand and against an LRU
// cache's eviction log, the eligibility rules, tie-breaking uniformity and
// the temperature distribution.
package score
