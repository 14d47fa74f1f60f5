package follow

import (
	"time"

	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/goindex/shm"
)

// SetSignals fills c's load and RTT from a lane record: each only when it
// was received or measured within maxAge of now, so a stale or missing
// signal stays absent (the scorer then finds c ineligible), never read as
// zero. With maxAge ≤ 0 it takes the last known signals whatever their age,
// for degraded routing. A signal is known when its time is set: the
// consumer stamps a load report when it arrives and an RTT when it is
// measured.
func SetSignals(c *score.Candidate, info *shm.LaneInfo, now time.Time, maxAge time.Duration) {
	usable := func(at time.Time) bool { return !at.IsZero() && (maxAge <= 0 || now.Sub(at) <= maxAge) }
	if ld := &info.Load; usable(ld.ReceivedAt) {
		c.HasLoad = true
		c.ActivePrefillTokens, c.ActiveDecodeBlocks = ld.QueuedPrefillTokens, ld.ActiveDecodeBlocks
		c.HasCapacity, c.CapacityBlocks = ld.CapacityBlocks > 0, ld.CapacityBlocks
		c.PrefillTokensPerMs, c.QueueTokensPerMs, c.DecodeBlocksPerMs = ld.PrefillTokensPerMs, ld.QueueTokensPerMs, ld.DecodeBlocksPerMs
	}
	if usable(info.RTTAt) {
		c.HasRTT, c.RTTms = true, float64(info.RTT)/float64(time.Millisecond)
	}
}
