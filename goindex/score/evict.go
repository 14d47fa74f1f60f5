package score

import (
	"math"
	"time"
)

// DefaultReuseWindow is the time scale of EvictionFactor: how long a
// cached block keeps a good chance of being hit again. A cache that turns
// over (stores its whole capacity anew) much faster than this evicts
// blocks that later requests would have hit; one that turns over much
// more slowly evicts mostly blocks nobody came back for. The held-out
// development runs chose it among 15, 30, 60 and 120 s (with 30 s the
// fewest losses against the baselines; the others within noise of it).
// It is also InsertRate's averaging window.
const DefaultReuseWindow = 30 * time.Second

// EvictionFactor is the share of an uncached prefill that later requests
// are expected to pay again at a candidate whose cache of capacityBlocks
// stores insertBlocksPerMs: 1 / (1 + turnover / DefaultReuseWindow), the
// turnover being capacityBlocks / insertBlocksPerMs, the time an LRU cache
// keeps a block nobody hits. Each block a prefill stores in a full cache
// evicts one; with a fast turnover the evicted block is as likely to be
// wanted again as the stored one, and its recomputation costs one more
// prefill of a block (factor 1); with a slow one, little.
//
// The share falls off hyperbolically (a half at one window, a tenth at
// nine), not exponentially: prompts come back after heavy-tailed gaps
// (conversation turns minutes apart, system prompts shared all day), so a
// block idle for several windows still has a fair chance of a later hit.
// With exp(−turnover / window), which ignores that tail, the caches of
// the DCs next to a busy site, turning over in a few minutes, were priced
// as free: in the held-out development runs with every client at one
// site and low load, ttft lost 1–5% at p95 to prefix-then-load, which
// spreads new prefixes over every DC's cache; with the hyperbola it won by
// 2–4% on the conversation trace and lost by at most 3% on the synthetic.
// 0 when either input is unknown (≤ 0).
func EvictionFactor(capacityBlocks, insertBlocksPerMs float64) float64 {
	if !(capacityBlocks > 0) || !(insertBlocksPerMs > 0) {
		return 0
	}
	turnover := capacityBlocks / insertBlocksPerMs
	return 1 / (1 + turnover/windowMs())
}

// InsertRate measures the rate a candidate's cache stores blocks, from
// its KV events, as an exponentially decaying average over
// DefaultReuseWindow. The zero value is ready; it is not safe for
// concurrent use.
type InsertRate struct {
	rate float64 // blocks per ms as of atMs
	atMs float64
	seen bool
}

// Add records blocks stored at atMs (ms on the caller's clock, not
// decreasing). Non-finite or negative counts are ignored.
func (r *InsertRate) Add(atMs, blocks float64) {
	if !(blocks >= 0) || math.IsInf(blocks, 1) || math.IsNaN(atMs) {
		return
	}
	r.rate = r.At(atMs) + blocks/windowMs()
	r.atMs, r.seen = max(atMs, r.atMs), true
}

// At is the rate, blocks per ms, at atMs: the average decayed since the
// last Add. 0 before any.
func (r *InsertRate) At(atMs float64) float64 {
	if !r.seen {
		return 0
	}
	return r.rate * math.Exp(-max(atMs-r.atMs, 0)/windowMs())
}

func windowMs() float64 { return float64(DefaultReuseWindow) / float64(time.Millisecond) }
