package radix_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

// Readers racing one writer must only ever see the state between two whole
// events. The writer cycles member w0 through states whose score for
// [1..8] is 8, 4, 5 and 0; member w1 holds [1..3] throughout.
func TestIndex_ConcurrentReadersSeeWholeEvents(t *testing.T) {
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(1), nil, seq(1, 3)))
	full := seq(1, 8)
	cycle := []*kv.Event{
		storeEvent(w(0), nil, full),                     // 8
		removeEvent(w(0), full, 4),                      // 4
		storeEvent(w(0), seq(1, 4), []uint64{5}),        // 5: 6..8 stay orphaned
		removeEvent(w(0), full, 0, 1, 2, 3, 4, 5, 6, 7), // 0
	}
	valid := map[int]bool{0: true, 4: true, 5: true, 8: true}

	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	report := func(format string, args ...any) {
		select {
		case errs <- fmt.Sprintf(format, args...):
		default:
		}
	}
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]kv.Overlap, 0, 4)
			for i := 0; !done.Load(); i++ {
				got := map[kv.Member]int{}
				for _, o := range x.Match(dst[:0], full) {
					got[o.Member] = o.Blocks
				}
				if got[w(1)] != 3 || !valid[got[w(0)]] {
					report("reader %d: Match([1..8]) = %v, want w1=3 and w0 in {0,4,5,8}", r, got)
				}
				if i%64 == 0 {
					for _, d := range x.MatchDetailed(nil, full) {
						if d.Last != chainOf(full)[d.Blocks-1] {
							report("reader %d: MatchDetailed entry %+v has the wrong last hash", r, d)
						}
					}
					// Between the cycle's last removal and its next store w0
					// holds nothing and is no member: then only w1's 3 blocks.
					if st := x.Stats(); st.Members != 2 && (st.Members != 1 || st.Blocks != 3) {
						report("reader %d: Stats() = %+v, want 2 members, or w1 alone with its 3 blocks", r, st)
					}
					x.Snapshot()
					x.Dump()
				}
			}
		}()
	}
	for i := range rounds * len(cycle) {
		if err := x.Apply(cycle[i%len(cycle)]); err != nil {
			t.Errorf("writer: Apply(cycle[%d]) = %v", i%len(cycle), err)
			break
		}
		if i%97 == 0 {
			x.Compact()
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	wantScores(t, x, full, map[kv.Member]int{w(1): 3})
}
