package score

import "math"

// The externality a routing choice imposes on later requests, in two parts
// TTFT can price (both opt-in: zero inputs leave them out).
//
// The KV it occupies. At a candidate whose KV admission is the bottleneck
// a request is a job of a FCFS queue whose server is the candidate's KV:
// it takes its blocks for its hold, so its service is x = blocks / release
// rate, the time the full pool takes to free that many blocks. In a FCFS
// M/G/1 queue at utilization ρ, a job of service x that finds a workload v
// ahead of it delays the jobs that arrive after it, in total and on
// average, by
//
//	E_v(x) = λ·x·(v + x/2) / (1 − ρ)
//
// (Haviv and Ritov, "Externalities, tangible externalities, and queue
// disciplines", Management Science 44(6), 1998; Jacobovic and Mandjes,
// "Externalities in queues as stochastic processes: the case of FCFS
// M/G/1", Stochastic Systems 13(3), 2023, whose mean this is): every
// request arriving in the rest of the busy period, λ(v + x)/(1 − ρ) of
// them, waits x longer, less the part of the extension nobody queues in.
// KVOthersMs writes λ·x as ρ·b/b̄ (Little's law: ρ = λ·E[b·H]/capacity,
// and the block-weighted hold H makes E[b·H] = b̄·H), so it needs no
// arrival rate: ρ is the candidate's KV occupancy (its running and queued
// requests' blocks over its capacity, capped at MaxFleetUtilization), b
// the request's prompt blocks and b̄ the mean (Candidate.MeanRequestBlocks,
// which a router learns from its sends), v the candidate's KV wait.
//
// The cached blocks it evicts. Each block an uncached prefill stores in a
// full LRU cache displaces the least recently used one; by the
// characteristic-time view of LRU (Che, Tung and Wang, "Hierarchical web
// caching systems: modeling, design and experimental results", IEEE JSAC
// 20(7), 2002) that is the cache one block smaller for one turnover, and
// the hits it loses are the chance p that a block the cache evicts is
// wanted again within one turnover of its eviction: the hit rate of a
// ghost list of the last capacity evictions (the shadow list of ARC,
// Megiddo and Modha, FAST 2003). Refetch measures p from a candidate's
// cache events; each lost hit is one block prefilled again, which stores
// a block and evicts another in turn, so the expected blocks prefilled
// again per block stored are p + p² + … = p/(1 − p) (CascadeFactor), the
// Candidate.EvictionFactor it replaces the reuse-window guess with.

// KVOthersMs is the wait, in ms, that a request of promptBlocks blocks
// admitted at a candidate adds for the requests that reach the candidate
// after it, by the FCFS M/G/1 externality above: ρ/(1 − ρ) · b/b̄ · (v +
// x/2), with x = promptBlocks / releaseBlocksPerMs and v = kvWaitMs. 0
// when any input is unknown (≤ 0) or the candidate is empty.
func KVOthersMs(occupancy, promptBlocks, meanBlocks, releaseBlocksPerMs, kvWaitMs float64) float64 {
	if !(occupancy > 0) || !(promptBlocks > 0) || !(meanBlocks > 0) || !(releaseBlocksPerMs > 0) {
		return 0
	}
	rho := min(occupancy, MaxFleetUtilization)
	x := promptBlocks / releaseBlocksPerMs
	return rho / (1 - rho) * promptBlocks / meanBlocks * (max(kvWaitMs, 0) + x/2)
}

// MaxRefetchShare caps the share CascadeFactor reads, so that the cascade
// stays finite (at most 19 blocks prefilled again per block stored).
const MaxRefetchShare = 0.95

// CascadeFactor is p/(1 − p), p capped at MaxRefetchShare: the blocks
// prefilled again, per block stored, at a cache where a share p of the
// evicted blocks is wanted again within a turnover. 0 for p ≤ 0 or NaN.
func CascadeFactor(p float64) float64 {
	if !(p > 0) {
		return 0
	}
	p = min(p, MaxRefetchShare)
	return p / (1 - p)
}

// Refetch measures the share of the blocks one candidate evicts that are
// prefilled again before capacity more evictions have followed it (within
// about one turnover): a ghost list of the last capacity evicted blocks'
// hashes, and exponentially forgotten counts of evictions and of prefills
// that hit the ghost list. A prefill again is wherever it happens: stored
// by the candidate itself (its cache events), or missed by a request the
// router sent elsewhere, which would have found the block at the candidate
// had it not been evicted. Counting only the candidate's own stores would
// read a router's reaction as the cache's: a router that sends a prompt
// away from the candidate that lost its prefix moves the loss to another
// candidate, where it is a miss all the same (in the development runs the
// candidate's own stores alone gave p of 0.5–5% against 6–50% of the
// reuse-window guess). The zero value is not usable; build it with
// NewRefetch. Not safe for concurrent use.
type Refetch struct {
	limit  int
	ghosts map[uint64]uint64 // hash → eviction number
	order  []uint64          // ring of the last limit evicted hashes
	next   uint64            // evictions so far
	keep   float64           // per eviction, for the counts
	evicts float64           // forgotten evictions
	hits   float64           // forgotten ghost hits
}

// NewRefetch returns a Refetch whose ghost list holds the last
// capacityBlocks evictions (at least 1) and whose counts weigh about
// memory evictions' worth (capacityBlocks if memory < 1).
func NewRefetch(capacityBlocks, memory int) *Refetch {
	limit := max(capacityBlocks, 1)
	if memory < 1 {
		memory = limit
	}
	return &Refetch{limit: limit, ghosts: make(map[uint64]uint64), order: make([]uint64, 0, min(limit, 1<<16)),
		keep: 1 - 1/float64(memory)}
}

// Evict records that the candidate's cache evicted the block hash.
func (r *Refetch) Evict(hash uint64) {
	if len(r.order) < r.limit {
		r.order = append(r.order, hash)
	} else {
		slot := int(r.next % uint64(r.limit))
		if old := r.order[slot]; r.ghosts[old] == r.next-uint64(r.limit) {
			delete(r.ghosts, old)
		}
		r.order[slot] = hash
	}
	r.ghosts[hash] = r.next
	r.next++
	r.evicts = r.keep*r.evicts + 1
	r.hits *= r.keep
}

// Prefill records that the block hash was prefilled (stored by the
// candidate, or missed by a request sent elsewhere); a prefill of a block
// among the last limit evictions is a refetch, counted once.
func (r *Refetch) Prefill(hash uint64) {
	if _, ok := r.ghosts[hash]; ok {
		delete(r.ghosts, hash)
		r.hits++
	}
}

// Share is the measured refetch share p: refetches over evictions (both
// forgotten alike), 0 before any eviction, at most 1.
func (r *Refetch) Share() float64 {
	if !(r.evicts > 0) {
		return 0
	}
	return math.Min(r.hits/r.evicts, 1)
}

// RequestSize learns the mean prompt size, in blocks, of the requests a
// router sends (b̄ of KVOthersMs), exponentially forgotten. The zero value
// is ready (it weighs DefaultHoldMemory requests). Not safe for concurrent
// use.
type RequestSize struct{ sum, n float64 }

// Observe records one request of blocks blocks; non-positive or
// non-finite sizes are ignored.
func (q *RequestSize) Observe(blocks float64) {
	if !(blocks > 0) || math.IsInf(blocks, 1) {
		return
	}
	keep := 1 - 1/float64(DefaultHoldMemory)
	q.sum, q.n = keep*q.sum+blocks, keep*q.n+1
}

// MeanBlocks is the mean prompt size, 0 before any request.
func (q *RequestSize) MeanBlocks() float64 {
	if q.n <= 0 {
		return 0
	}
	return q.sum / q.n
}
