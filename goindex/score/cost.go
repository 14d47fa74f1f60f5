package score

import "math"

// cost returns candidate c's cost for a prompt of isl tokens at fleet
// utilization rho and whether c is eligible under the policy.
func (s *Scorer) cost(c *Candidate, isl int, rho float64) (float64, bool) {
	switch s.cfg.Policy {
	case TTFT:
		if !c.HasLoad || !c.HasRTT {
			return 0, false
		}
		return s.ttftParts(c, isl, rho).Total(), true
	case PrefixThenLoad:
		if !c.HasLoad {
			return 0, false
		}
		// Longest prefix first, lowest load second: the depth dominates any
		// load (loads are far below 2^40 blocks).
		return -float64(c.CachedBlocks)*(1<<40) + s.loadBlocks(c), true
	case LoadOnly:
		if !c.HasLoad {
			return 0, false
		}
		return s.loadBlocks(c), true
	case GORGO:
		if !c.HasLoad || !c.HasRTT {
			return 0, false
		}
		uncached := float64(isl - s.cachedTokens(c, isl))
		return c.RTTms + float64(c.ActivePrefillTokens)/orDefault(c.QueueTokensPerMs, s.cfg.QueueTokensPerMs) +
			uncached/orDefault(c.PrefillTokensPerMs, s.cfg.PrefillTokensPerMs), true
	case Credit:
		if !c.HasLoad {
			return 0, false
		}
		bs := float64(s.cfg.BlockSize)
		rawPrefill := (float64(c.ActivePrefillTokens) + float64(isl)) / bs
		return CreditCost(rawPrefill, float64(s.cachedBlocks(c, isl)), s.decodeBlocks(c, isl), s.cfg.Credit), true
	}
	return 0, true
}

// CreditCost is Dynamo's current block cost (dynamo-compat §4.2, decay and
// lower tiers off): max(0, rawPrefillBlocks − credit·overlapBlocks) +
// decodeBlocks.
func CreditCost(rawPrefillBlocks, overlapBlocks, decodeBlocks, credit float64) float64 {
	return math.Max(0, rawPrefillBlocks-credit*overlapBlocks) + decodeBlocks
}

// ttftParts estimates the TTFT terms of candidate c, in ms, and the wait
// its prefill adds for the requests behind it at fleet utilization rho.
// The queue wait is the longer of the prefills ahead (queued tokens at
// the candidate's drain rate) and, when the KV the candidate's requests
// need exceeds its capacity, the time for the excess to be freed:
// admission is FIFO, so the request starts after both, and they overlap.
// The KV they need counts the queued prefill tokens too: each request
// ahead takes its blocks before this one is admitted, and counting only
// the running decodes put the estimate 12 s short at a fifth of the KV
// in the development runs.
func (s *Scorer) ttftParts(c *Candidate, isl int, rho float64) Parts {
	prefillRate := orDefault(c.PrefillTokensPerMs, s.cfg.PrefillTokensPerMs)
	queueRate := orDefault(c.QueueTokensPerMs, s.cfg.QueueTokensPerMs)
	uncached := isl - s.cachedTokens(c, isl)
	queue := float64(c.ActivePrefillTokens) / queueRate
	kvOthers := 0.0
	if c.HasCapacity && c.CapacityBlocks > 0 {
		need := float64(s.blocksFor(uncached))
		kvWait := 0.0
		if excess := s.kvBlocks(c) + need - float64(c.CapacityBlocks); excess > 0 {
			kvWait = excess / s.releaseBlocksPerMs(c)
			queue = max(queue, kvWait)
		}
		kvOthers = KVOthersMs(s.kvBlocks(c)/float64(c.CapacityBlocks), float64(s.blocksFor(isl)),
			c.MeanRequestBlocks, s.releaseBlocksPerMs(c), kvWait)
	}
	w := c.Weights
	prefill := w.prefill() * float64(uncached) / prefillRate
	// What the blocks this prefill stores cost later requests that would
	// have hit the blocks they evict, in prefill time.
	evicted := max(c.EvictionFactor, 0) * float64(uncached) / prefillRate
	return Parts{RTTms: w.rtt() * c.RTTms, QueueMs: w.queue() * queue, PrefillMs: prefill,
		OthersMs: prefill*othersFactor(rho) + evicted + kvOthers}
}

// kvBlocks is the KV a candidate's admitted and queued requests take:
// the blocks its running requests hold plus the queued prefill tokens'.
func (s *Scorer) kvBlocks(c *Candidate) float64 {
	return float64(c.ActiveDecodeBlocks) + float64(c.ActivePrefillTokens)/float64(s.cfg.BlockSize)
}

// releaseBlocksPerMs is the rate a full candidate frees KV blocks: its
// whole capacity once per mean hold (Little's law), HoldMs first, then
// ResidenceMs; without either, the configured rate.
func (s *Scorer) releaseBlocksPerMs(c *Candidate) float64 {
	switch {
	case c.HoldMs > 0:
		return float64(c.CapacityBlocks) / c.HoldMs
	case c.ResidenceMs > 0:
		return float64(c.CapacityBlocks) / c.ResidenceMs
	}
	return orDefault(c.DecodeBlocksPerMs, s.cfg.DecodeBlocksPerMs)
}

// othersFactor is ρ/(1−ρ) for a fleet utilization ρ clamped to [0,
// MaxFleetUtilization]: the wait, per ms of prefill a request adds, that the
// requests arriving behind it share (below).
func othersFactor(rho float64) float64 {
	if !(rho > 0) {
		return 0
	}
	rho = min(rho, MaxFleetUtilization)
	return rho / (1 - rho)
}

// loadBlocks is the G2025 load (prefill tokens in blocks plus decode blocks),
// used by LoadOnly and as PrefixThenLoad's tie-break.
func (s *Scorer) loadBlocks(c *Candidate) float64 { return s.kvBlocks(c) }

// decodeBlocks is the candidate's active blocks plus the request's blocks not
// already cached there.
func (s *Scorer) decodeBlocks(c *Candidate, isl int) float64 {
	return float64(c.ActiveDecodeBlocks) + float64(s.blocksFor(isl)-s.cachedBlocks(c, isl))
}

// cachedBlocks caps the probe depth at the prompt's blocks.
func (s *Scorer) cachedBlocks(c *Candidate, isl int) int {
	return max(0, min(c.CachedBlocks, s.blocksFor(isl)))
}

// cachedTokens is the cached part of the prompt in tokens.
func (s *Scorer) cachedTokens(c *Candidate, isl int) int {
	return min(isl, s.cachedBlocks(c, isl)*s.cfg.BlockSize)
}

// blocksFor is the number of KV blocks tokens occupy (a partial block counts).
func (s *Scorer) blocksFor(tokens int) int {
	return (tokens + s.cfg.BlockSize - 1) / s.cfg.BlockSize
}

func orDefault(v, def float64) float64 {
	if v > 0 {
		return v
	}
	return def
}
