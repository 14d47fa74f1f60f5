package follow

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/testseed"
)

// TestTurnover_MatchesTheDecayedSumOfIncrements drives one DC's lane
// record through random relay histories (counted reports with random
// increments, the same sample's uncounted layout before or after it,
// repeated reads, a relay restart under a new incarnation, a counter that
// goes down, a relay that never counts) and holds InsertRate to a plain
// reference: the sum over the counter's increments since the last start
// over, each increment/W decayed by exp(−age/W) (W = the reuse window),
// which is 0 until an increment was seen. Seed: GOINDEX_SEED.
func TestTurnover_MatchesTheDecayedSumOfIncrements(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.For(t, 16), 5))
	const w = float64(score.DefaultReuseWindow / time.Millisecond)
	type inc struct{ atMs, blocks float64 }
	for run := range 40 {
		tr := NewTurnover(3)
		incarnation, counter, counting := uint64(1+rng.IntN(3)), uint64(0), true
		at := time.Unix(1_760_000_000, 0)
		// The reference: the incarnation it measures, the counter of its
		// last counted report (0: none) and the increments since.
		var refInc, base uint64
		var history []inc
		want := func(ld *shm.Load) float64 {
			atMs := float64(ld.At.UnixNano()) / 1e6
			if ld.Incarnation != refInc {
				refInc, base, history = ld.Incarnation, 0, nil
			}
			switch {
			case ld.StoredBlocks == 0:
			case ld.StoredBlocks < base:
				history = nil
			case base != 0:
				history = append(history, inc{atMs, float64(ld.StoredBlocks - base)})
			}
			if ld.StoredBlocks != 0 {
				base = ld.StoredBlocks
			}
			sum := 0.0
			for _, h := range history {
				sum += h.blocks / w * math.Exp(-(atMs-h.atMs)/w)
			}
			return sum
		}
		read := func(step int, ld shm.Load, again bool) {
			t.Helper()
			got := tr.InsertRate(1, &ld)
			var ref float64
			if again { // a record read before: the reference does not count it twice
				ref = 0
				for _, h := range history {
					ref += h.blocks / w * math.Exp(-(float64(ld.At.UnixNano())/1e6-h.atMs)/w)
				}
			} else {
				ref = want(&ld)
			}
			if math.Abs(got-ref) > 1e-12+1e-9*ref {
				t.Fatalf("run %d step %d: InsertRate(%+v) = %g blocks/ms, reference %g", run, step, ld, got, ref)
			}
		}
		for step := range 60 {
			switch k := rng.IntN(20); {
			case k == 0: // the relay restarts, counting from 0 again (or never)
				incarnation++
				counter, counting = 0, rng.IntN(4) > 0
			case k == 1 && counter > 0: // the counter goes down
				counter = uint64(rng.IntN(int(counter)))
			}
			at = at.Add(time.Duration(200+rng.IntN(2000)) * time.Millisecond)
			if counting {
				counter += uint64(rng.IntN(3) * rng.IntN(5000))
			}
			ld := shm.Load{At: at, Incarnation: incarnation, StoredBlocks: counter}
			plain := ld
			plain.StoredBlocks = 0
			if rng.IntN(3) == 0 {
				read(step, plain, false) // the uncounted layout arrived first
			}
			read(step, ld, false)
			for range rng.IntN(3) {
				read(step, ld, true) // the same record read again
			}
			if rng.IntN(3) == 0 {
				read(step, plain, true) // the uncounted layout after it
			}
		}
		// Another DC's record never disturbs this one.
		before := tr.InsertRate(1, &shm.Load{At: at, Incarnation: incarnation})
		tr.InsertRate(0, &shm.Load{At: at, Incarnation: 99, StoredBlocks: 5})
		tr.InsertRate(0, &shm.Load{At: at.Add(time.Second), Incarnation: 99, StoredBlocks: 50_000})
		if after := tr.InsertRate(1, &shm.Load{At: at, Incarnation: incarnation}); after != before {
			t.Errorf("run %d: DC 1's rate %g became %g after DC 0's reports", run, before, after)
		}
	}
}

// TestTurnover_SetsTheEvictionFactorOnlyWhenKnown: after two counted
// reports a second apart storing the whole capacity, the factor is
// a half (turnover = capacity / (capacity / W) = W); with no fresh load,
// no capacity, one report only, or after a restart it is 0.
func TestTurnover_SetsTheEvictionFactorOnlyWhenKnown(t *testing.T) {
	tr := NewTurnover(1)
	at := time.Unix(1_760_000_000, 0)
	loaded := score.Candidate{HasLoad: true, HasCapacity: true, CapacityBlocks: 1000}
	factor := func(c score.Candidate, ld shm.Load) float64 {
		c.EvictionFactor = 0.5 // a stale value is overwritten
		tr.SetEvictionFactor(&c, 0, &ld)
		return c.EvictionFactor
	}
	if f := factor(loaded, shm.Load{At: at, Incarnation: 7, StoredBlocks: 10}); f != 0 {
		t.Errorf("one counted report: factor %g, want 0 (rate unknown)", f)
	}
	second := shm.Load{At: at.Add(time.Second), Incarnation: 7, StoredBlocks: 1010}
	if f, want := factor(loaded, second), 0.5; math.Abs(f-want) > 1e-12 {
		t.Errorf("1000 blocks stored into a 1000-block cache: factor %g, want %g", f, want)
	}
	if f := factor(score.Candidate{HasCapacity: true, CapacityBlocks: 1000}, second); f != 0 {
		t.Errorf("no fresh load: factor %g, want 0", f)
	}
	if f := factor(score.Candidate{HasLoad: true}, second); f != 0 {
		t.Errorf("capacity unknown: factor %g, want 0", f)
	}
	if f := factor(loaded, shm.Load{At: at.Add(2 * time.Second), Incarnation: 8, StoredBlocks: 5000}); f != 0 {
		t.Errorf("a restarted relay's first report: factor %g, want 0", f)
	}
	if f := factor(loaded, shm.Load{}); f != 0 {
		t.Errorf("no load record: factor %g, want 0", f)
	}
	// Steady routing allocates nothing here.
	next := shm.Load{At: at.Add(3 * time.Second), Incarnation: 8, StoredBlocks: 9000}
	if n := testing.AllocsPerRun(100, func() { factor(loaded, next) }); n != 0 {
		t.Errorf("SetEvictionFactor allocates %v times a call, want 0", n)
	}
}

// TestTurnover_ConcurrentReadersAgreeWithOneReader: goroutines reading
// one DC's records in order at once (each score call reads every DC's
// record) end where one reader does: every record is taken into account
// once and in order, and re-reading any of them afterwards, from the memo
// or not, gives one reader's answer. Run with -race.
func TestTurnover_ConcurrentReadersAgreeWithOneReader(t *testing.T) {
	at := time.Unix(1_760_000_000, 0)
	var records []shm.Load
	for k := range 200 {
		records = append(records, shm.Load{At: at.Add(time.Duration(k) * 250 * time.Millisecond), Incarnation: 3, StoredBlocks: uint64(1 + 700*k)})
	}
	one, many := NewTurnover(2), NewTurnover(2)
	for i := range records {
		one.InsertRate(1, &records[i])
	}
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range records {
				many.InsertRate(1, &records[i])
				many.InsertRate(1, &records[i])
			}
		}()
	}
	for range 4 {
		<-done
	}
	for _, i := range []int{len(records) - 1, 0, 57, len(records) - 1, len(records) - 1} {
		if got, want := many.InsertRate(1, &records[i]), one.InsertRate(1, &records[i]); got != want {
			t.Fatalf("record %d read again: %g blocks/ms after concurrent readers, %g after one", i, got, want)
		}
	}
}
