package relay

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
)

// TestIntake_LateCopyFromASlowerBrokerIsTaken is the HA-broker case: broker
// A loses sequence 4 (its HWM, a restart) and delivers 5; broker B delivers
// 4 later. Sequence 4 was never seen, so it must be taken, not dropped as
// a duplicate below the publisher's highest sequence.
func TestIntake_LateCopyFromASlowerBrokerIsTaken(t *testing.T) {
	var st IntakeStats
	in := newIntake(&st, 10*time.Second)
	now := time.Unix(1000, 0)
	const pub = 7
	take := func(seq uint64) bool {
		env, err := dynamo.DecodeEnvelope(storedEnvelope(t, 1, pub, seq, dynamo.EventTopic))
		if err != nil {
			t.Fatalf("DecodeEnvelope(seq %d): %v", seq, err)
		}
		evs, ok := in.sequenced(&env, now, nil)
		if ok != (len(evs) == 1) {
			t.Errorf("sequenced(seq %d) = %d events, taken %v", seq, len(evs), ok)
		}
		return ok
	}
	for _, c := range []struct {
		seq  uint64
		want bool
		why  string
	}{
		{1, true, "broker A"}, {2, true, "broker A"}, {3, true, "broker A"}, {5, true, "broker A, 4 lost"},
		{1, false, "broker B's copy"}, {2, false, "broker B's copy"}, {3, false, "broker B's copy"},
		{4, true, "broker B's copy, never seen"}, {5, false, "broker B's copy"},
		{4, false, "a second copy of 4"},
	} {
		if got := take(c.seq); got != c.want {
			t.Errorf("sequenced(pub %d, seq %d) (%s) taken = %v, want %v", pub, c.seq, c.why, got, c.want)
		}
	}
	if st.Events != 5 || st.Duplicates != 5 || st.Gaps != 1 || st.Late != 1 {
		t.Errorf("stats = events %d, duplicates %d, gaps %d, late %d; want 5, 5, 1 (4 skipped when 5 came), 1 (4 filled)",
			st.Events, st.Duplicates, st.Gaps, st.Late)
	}
}

// TestIntake_CopyBelowTheWindowIsDroppedAsADuplicate: a sequence more than
// windowSeqs below its publisher's highest is too old to tell from a copy;
// it is dropped (an old store applied that late could resurrect removed
// blocks), one just inside the window is still taken late.
func TestIntake_CopyBelowTheWindowIsDroppedAsADuplicate(t *testing.T) {
	var st IntakeStats
	in := newIntake(&st, 10*time.Second)
	now := time.Unix(1000, 0)
	const pub, top = 9, windowSeqs + 5
	for _, c := range []struct {
		seq  uint64
		want bool
	}{{0, true}, {top, true}, {top - windowSeqs, false}, {top - windowSeqs + 1, true}, {top - windowSeqs + 1, false}} {
		env, err := dynamo.DecodeEnvelope(storedEnvelope(t, 1, pub, c.seq, dynamo.EventTopic))
		if err != nil {
			t.Fatalf("DecodeEnvelope(seq %d): %v", c.seq, err)
		}
		if _, ok := in.sequenced(&env, now, nil); ok != c.want {
			t.Errorf("sequenced(pub %d, seq %d) with highest %d taken = %v, want %v", pub, c.seq, uint64(top), ok, c.want)
		}
	}
	if st.Gaps != top-1 || st.Late != 1 || st.Duplicates != 2 || st.Events != 3 {
		t.Errorf("stats = gaps %d, late %d, duplicates %d, events %d; want %d, 1, 2, 3", st.Gaps, st.Late, st.Duplicates, st.Events, uint64(top-1))
	}
}

// windowRef is the exact reference of a seqWindow: every sequence taken,
// the first and the highest.
type windowRef struct {
	seen       map[uint64]bool
	first, top uint64
}

func newWindowRef(first uint64) *windowRef {
	return &windowRef{seen: map[uint64]bool{first: true}, first: first, top: first}
}

// take is seqWindow.take's contract spelled out: above the highest is
// next; before the first, below the window or seen before is a
// duplicate; anything else is late.
func (r *windowRef) take(seq uint64) (seqVerdict, uint64) {
	switch {
	case seq > r.top:
		skipped := seq - r.top - 1
		r.seen[seq], r.top = true, seq
		return seqNext, skipped
	case seq < r.first || r.top-seq >= windowSeqs || r.seen[seq]:
		return seqDuplicate, 0
	}
	r.seen[seq] = true
	return seqLate, 0
}

func TestSeqWindow_MatchesAnExactReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(relaytest.Seed(t, 41), 0))
	for round := range 20 {
		// Low first sequences put "before the first" inside the window.
		first := rng.Uint64N(2 * windowSeqs)
		if round%2 == 1 {
			first = rng.Uint64() >> 1
		}
		w, ref := newSeqWindow(first), newWindowRef(first)
		for step := range 20_000 {
			var seq uint64
			switch c := rng.IntN(100); {
			case c < 35:
				seq = ref.top + 1
			case c < 45:
				seq = ref.top + 2 + rng.Uint64N(8)
			case c < 48:
				seq = ref.top + 1 + rng.Uint64N(windowSeqs+100)
			case c < 73:
				seq = ref.top - min(ref.top, rng.Uint64N(16))
			case c < 93:
				seq = ref.top - min(ref.top, rng.Uint64N(windowSeqs+50))
			default:
				seq = rng.Uint64N(ref.top + 1)
			}
			gv, gs := w.take(seq)
			wv, ws := ref.take(seq)
			if gv != wv || gs != ws {
				t.Fatalf("round %d step %d (first %d, top %d): take(%d) = (%d, %d skipped), want (%d, %d)",
					round, step, first, ref.top, seq, gv, gs, wv, ws)
			}
		}
	}
}

func TestSeqWindow_EdgesOfTheSequenceSpace(t *testing.T) {
	const top = math.MaxUint64
	w := newSeqWindow(top - 1)
	for _, c := range []struct {
		seq     uint64
		want    seqVerdict
		skipped uint64
	}{
		{top, seqNext, 0}, {top - 1, seqDuplicate, 0}, {top - 2, seqDuplicate, 0}, {0, seqDuplicate, 0}, {top, seqDuplicate, 0},
	} {
		if v, s := w.take(c.seq); v != c.want || s != c.skipped {
			t.Errorf("take(%d) after first %d = (%d, %d skipped), want (%d, %d)", c.seq, uint64(top-1), v, s, c.want, c.skipped)
		}
	}
	// A jump past the whole window leaves every sequence in it
	// outstanding, the old ones included.
	w = newSeqWindow(0)
	if v, s := w.take(3 * windowSeqs); v != seqNext || s != 3*windowSeqs-1 {
		t.Errorf("take(%d) after 0 = (%d, %d skipped), want (next, %d)", 3*windowSeqs, v, s, 3*windowSeqs-1)
	}
	for _, seq := range []uint64{2*windowSeqs + 1, 3*windowSeqs - 1} {
		if v, _ := w.take(seq); v != seqLate {
			t.Errorf("take(%d) after a jump to %d = %d, want late", seq, 3*windowSeqs, v)
		}
	}
	if v, _ := w.take(2 * windowSeqs); v != seqDuplicate {
		t.Errorf("take(%d) below the window of %d = %d, want duplicate", 2*windowSeqs, 3*windowSeqs, v)
	}
}

// lossyCopies interleaves two in-order copies of one publisher's stream
// 0..n-1, as two brokers forward it: each copy loses every message with
// probability loss (sequence 0 is in both: the stream's first), and
// neither copy runs more than lag stream positions ahead of the other. It
// returns the sequences in arrival order and which ones either copy had.
func lossyCopies(rng *rand.Rand, n int, loss float64, lag int) (arrivals []uint64, had []bool) {
	var copies [2][]bool
	had = make([]bool, n)
	for c := range copies {
		copies[c] = make([]bool, n)
		for s := range n {
			copies[c][s] = s == 0 || rng.Float64() >= loss
			had[s] = had[s] || copies[c][s]
		}
	}
	// One copy is favoured 3:1, so the other lags by close to lag.
	var pos [2]int
	fast := rng.IntN(2)
	for pos[0] < n || pos[1] < n {
		c := fast
		if rng.IntN(4) == 0 {
			c = 1 - fast
		}
		if pos[c] == n || pos[c]-pos[1-c] >= lag {
			c = 1 - c
		}
		if copies[c][pos[c]] {
			arrivals = append(arrivals, uint64(pos[c]))
		}
		pos[c]++
	}
	return arrivals, had
}

// TestIntake_TwoLossyBrokerCopiesDeliverEverySequenceOnce runs publishers
// whose streams come through two lossy brokers, one lagging the other by
// up to windowSeqs messages, interleaved into one intake: every sequence
// that either broker forwarded is taken exactly once, none other is, and
// Gaps − Late counts exactly the sequences both lost.
func TestIntake_TwoLossyBrokerCopiesDeliverEverySequenceOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(relaytest.Seed(t, 43), 0))
	now := time.Unix(1000, 0)
	for round := range 3 {
		var st IntakeStats
		in := newIntake(&st, 10*time.Second)
		const pubs, n = 3, 2 * windowSeqs
		loss := []float64{0.01, 0.2, 0.5}[round%3]
		type arrival struct{ pub, seq uint64 }
		var queues [pubs][]uint64
		var had [pubs][]bool
		for p := range pubs {
			queues[p], had[p] = lossyCopies(rng, n, loss, 1+rng.IntN(windowSeqs))
		}
		// Interleave the publishers' arrivals at random, each in its order.
		var all []arrival
		for left := true; left; {
			left = false
			p := rng.IntN(pubs)
			for range pubs {
				if len(queues[p]) > 0 {
					all = append(all, arrival{uint64(p) + 100, queues[p][0]})
					queues[p] = queues[p][1:]
					left = true
					break
				}
				p = (p + 1) % pubs
			}
		}
		taken := map[arrival]int{}
		for _, a := range all {
			env, err := dynamo.DecodeEnvelope(storedEnvelope(t, 1, a.pub, a.seq, dynamo.EventTopic))
			if err != nil {
				t.Fatalf("DecodeEnvelope(pub %d, seq %d): %v", a.pub, a.seq, err)
			}
			if _, ok := in.sequenced(&env, now, nil); ok {
				taken[a]++
			}
		}
		var missing uint64
		for p := range pubs {
			last := 0
			for s := range n {
				if had[p][s] {
					last = s
				}
			}
			for s := range n {
				a := arrival{uint64(p) + 100, uint64(s)}
				want := 0
				if had[p][s] {
					want = 1
				} else if s < last {
					missing++
				}
				if taken[a] != want {
					t.Errorf("round %d (loss %.2f): publisher %d sequence %d taken %d times, want %d",
						round, loss, a.pub, s, taken[a], want)
				}
			}
		}
		if st.Gaps-st.Late != missing || st.Late > st.Gaps || st.Duplicates != uint64(len(all)-len(taken)) {
			t.Errorf("round %d (loss %.2f): gaps %d, late %d, duplicates %d of %d arrivals; want gaps − late = %d lost by both, %d duplicates",
				round, loss, st.Gaps, st.Late, st.Duplicates, len(all), missing, len(all)-len(taken))
		}
	}
}
