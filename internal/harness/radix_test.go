package harness

import (
	"testing"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

// radixIndex adapts radix.Index's detailed matches to DetailMatcher, so the
// gate also checks last_matched_hashes.
type radixIndex struct{ *radix.Index }

func (x radixIndex) MatchDetails(dst []Detail, locals []uint64) []Detail {
	for _, d := range x.MatchDetailed(nil, locals) {
		dst = append(dst, Detail{Member: d.Member, Blocks: d.Blocks, Last: d.Last})
	}
	return dst
}

// TestGate_Radix is the gate of the exact radix index (HARNESS_SEEDS seeds ×
// HARNESS_STEPS steps; 40 × 2000 by default): in every mode every query
// stays within the model's bounds, detailed matches agree with Match, and
// no op the model says must apply returns an error. Serial and concurrent
// readers are the required gate; the lane pool (1 and 4 lanes), the
// worker-wide clear scope and G2025's stop-at-unknown removal run the same
// workloads through the other configurations.
func TestGate_Radix(t *testing.T) {
	cases := []struct {
		name string
		cfg  radix.Config
		opts Options
	}{
		{"serial", radix.Config{ClearScope: radix.ClearRank}, Options{Mode: Serial}},
		{"concurrent-readers", radix.Config{ClearScope: radix.ClearRank}, Options{Mode: ConcurrentReaders}},
		{"lane-pool-1", radix.Config{ClearScope: radix.ClearRank}, Options{Mode: LanePool, Lanes: 1}},
		{"lane-pool-4", radix.Config{ClearScope: radix.ClearRank}, Options{Mode: LanePool, Lanes: 4}},
		{"clear-worker", radix.Config{ClearScope: radix.ClearWorker}, Options{Mode: Serial, ClearScope: ClearWorker}},
		{"stop-at-unknown-removal", radix.Config{StopAtUnknownRemoval: true}, Options{Mode: Serial}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Short = testing.Short()
			rep := Run(t, func() kv.Index { return radixIndex{radix.New(c.cfg)} }, c.opts)
			if rep.Counters.DetailChecks == 0 {
				t.Errorf("%s: no detailed match was checked", c.name)
			}
		})
	}
}
