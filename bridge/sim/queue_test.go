package sim

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestQueue_PopsByTimeThenSchedulingOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	var q queue
	var want []event
	for round := range 50 {
		// Few distinct times, so ties are common.
		for range rng.IntN(40) {
			at := float64(rng.IntN(20))
			q.push(at, evSend, round, 0)
			want = append(want, event{at: at, seq: q.seq, kind: evSend, a: round})
		}
		slices.SortFunc(want, func(x, y event) int { return cmp.Or(cmp.Compare(x.at, y.at), cmp.Compare(x.seq, y.seq)) })
		for range rng.IntN(len(want) + 1) {
			got := q.pop()
			if got != want[0] {
				t.Fatalf("round %d: pop() = %+v, want %+v", round, got, want[0])
			}
			want = want[1:]
		}
		if q.len() != len(want) {
			t.Fatalf("round %d: len() = %d, want %d", round, q.len(), len(want))
		}
	}
}
