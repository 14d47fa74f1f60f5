package hostindex

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/internal/testseed"
)

// SortMembers is checked against slices.SortFunc on random results, short
// (insertion) and long (fallback), with runs already in order as Match
// tends to emit them.
func TestSortMembers_MatchesSlicesSort(t *testing.T) {
	s := testseed.For(t, 3)
	rng := rand.New(rand.NewPCG(s, 2))
	for trial := 0; trial < 500; trial++ {
		n := rng.IntN(2 * InsertionSortMax)
		o := make([]kv.Overlap, n)
		for i := range o {
			o[i] = kv.Overlap{Member: kv.Member{Worker: uint64(rng.IntN(8)), Rank: uint32(rng.IntN(4))}, Blocks: i}
		}
		if rng.IntN(2) == 0 {
			slices.SortFunc(o[:n/2], byMember)
		}
		want := slices.Clone(o)
		slices.SortStableFunc(want, byMember)
		SortMembers(o)
		for i := range o {
			if o[i].Member != want[i].Member {
				t.Fatalf("SortMembers(%d entries)[%d] = %v, want %v (GOINDEX_SEED=%d)", n, i, o[i].Member, want[i].Member, s)
			}
		}
	}
}
