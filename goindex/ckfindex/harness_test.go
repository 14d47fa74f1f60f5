package ckfindex

import (
	"testing"

	"github.com/goindex/goindex/goindex/harness"
	"github.com/goindex/goindex/goindex/kv"
)

func newHarnessIndex(t *testing.T, scope ClearScope, expected uint64) func() kv.Index {
	return func() kv.Index {
		x, err := New(Config{Lanes: 64, ExpectedBlocksPerLane: expected, ClearScope: scope})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return x
	}
}

// TestIndex_WithinHarnessBounds holds the CKF index against Dynamo's exact
// model: no undercount below reach_len ever; overcounts (fingerprint
// collisions) are reported and bounded by the spec's estimate.
func TestIndex_WithinHarnessBounds(t *testing.T) {
	cases := []struct {
		name     string
		opts     harness.Options
		scope    ClearScope
		expected uint64
	}{
		{"serial", harness.Options{Mode: harness.Serial}, ClearRank, 512},
		{"readers", harness.Options{Mode: harness.ConcurrentReaders}, ClearRank, 512},
		{"lanes4", harness.Options{Mode: harness.LanePool, Lanes: 4}, ClearRank, 512},
		{"worker-clear", harness.Options{Mode: harness.Serial, ClearScope: harness.ClearWorker}, ClearWorker, 512},
		// A small filter (64 buckets per member) raises the occupancy so
		// collisions actually happen and the rate check has teeth.
		{"dense", harness.Options{Mode: harness.Serial}, ClearRank, 128},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.AllowOvercount, c.opts.Short = true, testing.Short()
			rep := harness.Run(t, newHarnessIndex(t, c.scope, c.expected), c.opts)
			cnt := rep.Counters
			if cnt.Queries == 0 {
				t.Fatalf("harness checked no queries")
			}
			if cnt.Undercounts != 0 {
				t.Errorf("undercounts = %d, want 0", cnt.Undercounts)
			}
			// Spec §7: per position and lane p ≈ 8α/65535. A member check
			// overcounts when the first absent position falsely hits, so its
			// rate is ≲ p at the worst occupancy α ≤ 1; allow 3× for the
			// runs of false hits and fp = 1's double weight.
			const bound = 3 * 8.0 / 65535
			if rate := cnt.OvercountRate(); rate > bound {
				t.Errorf("overcount rate %.3g > bound %.3g (%s)", rate, bound, &cnt)
			}
			t.Logf("%s: %s", c.name, &cnt)
		})
	}
}
