package ckf

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// outcome records everything a producer published over a stream: each
// event's step and error text, each drained batch, then the digest of the
// final words and counters.
type outcome struct {
	steps  []string
	images [][]Image
	final  uint64
}

func (o *outcome) event(st Step, err error) {
	o.steps = append(o.steps, fmt.Sprintf("%v %v", st, err))
}

func (o *outcome) drain(p *Producer) {
	o.images = append(o.images, p.Drain(nil))
}

func (o *outcome) equal(q *outcome) string {
	if !slices.Equal(o.steps, q.steps) {
		for i := range min(len(o.steps), len(q.steps)) {
			if o.steps[i] != q.steps[i] {
				return fmt.Sprintf("call %d: %q, want %q", i, q.steps[i], o.steps[i])
			}
		}
		return fmt.Sprintf("%d calls, want %d", len(q.steps), len(o.steps))
	}
	if len(o.images) != len(q.images) {
		return fmt.Sprintf("%d drains, want %d", len(q.images), len(o.images))
	}
	for i := range o.images {
		if !slices.Equal(o.images[i], q.images[i]) {
			return fmt.Sprintf("drain %d: %v, want %v", i, q.images[i], o.images[i])
		}
	}
	if o.final != q.final {
		return fmt.Sprintf("final words and counters digest %#x, want %#x", q.final, o.final)
	}
	return ""
}

// batchStep is one step of a replayed stream: an event, or a lifecycle
// call (lifecycle 1: RemoveMember, 2: RemoveWorker of ev.Member), and
// whether a "timer" drain follows it even without a boundary.
type batchStep struct {
	op
	flush bool
}

// replaySequential applies steps one call at a time, draining at every
// StepPublish and every flush.
func replaySequential(p *Producer, steps []batchStep) *outcome {
	o := &outcome{}
	for i := range steps {
		s := &steps[i]
		var st Step
		var err error
		switch s.lifecycle {
		case 0:
			st, err = p.Apply(&s.ev)
		case 1:
			st, err = p.RemoveMember(s.ev.Member)
		case 2:
			st, err = p.RemoveWorker(s.ev.Member.Worker)
		}
		o.event(st, err)
		if st == StepPublish || s.flush {
			o.drain(p)
		}
	}
	o.final = newLayoutDigest().final(p)
	return o
}

// replayBatched applies the same steps with ApplyBatch over runs of up to
// maxBatch events (sizes drawn from rng); the lifecycle calls and drains
// that follow an event run inside its callback, so they land between the
// batch's look-ahead and the next events.
func replayBatched(p *Producer, steps []batchStep, rng *rand.Rand, maxBatch int) *outcome {
	o := &outcome{}
	var lifecycle func(i int) int // runs the lifecycle calls from step i on; returns the next event's step
	lifecycle = func(i int) int {
		for ; i < len(steps) && steps[i].lifecycle != 0; i++ {
			s := &steps[i]
			var st Step
			var err error
			if s.lifecycle == 1 {
				st, err = p.RemoveMember(s.ev.Member)
			} else {
				st, err = p.RemoveWorker(s.ev.Member.Worker)
			}
			o.event(st, err)
			if st == StepPublish || s.flush {
				o.drain(p)
			}
		}
		return i
	}
	evs := make([]kv.Event, 0, maxBatch)
	idx := make([]int, 0, maxBatch) // step index of each event of evs
	for i := lifecycle(0); i < len(steps); {
		evs, idx = evs[:0], idx[:0]
		for n := 1 + rng.IntN(maxBatch); i < len(steps) && len(evs) < n; {
			evs, idx = append(evs, steps[i].ev), append(idx, i)
			i++
			for i < len(steps) && steps[i].lifecycle != 0 {
				i++ // the callback of the event before runs them
			}
		}
		next := i
		p.ApplyBatch(evs, func(j int, st Step, err error) {
			o.event(st, err)
			if st == StepPublish || steps[idx[j]].flush {
				o.drain(p)
			}
			lifecycle(idx[j] + 1)
		})
		i = next
	}
	o.final = newLayoutDigest().final(p)
	return o
}

// reuseIDs renames some of ev's source ids to a few small ones, so that
// an id is removed and stored again under another canonical, and a parent
// id changes its canonical, between ApplyBatch's look-ahead and the
// event (the look-ahead must then not be used).
func reuseIDs(rng *rand.Rand, ev *kv.Event) {
	if rng.IntN(2) == 0 {
		return
	}
	for i := range ev.Blocks {
		if rng.IntN(2) == 0 {
			ev.Blocks[i].External = 1 + rng.Uint64N(6)
		}
	}
	for i := range ev.Removed {
		if rng.IntN(2) == 0 {
			ev.Removed[i] = 1 + rng.Uint64N(6)
		}
	}
	if ev.HasParent && rng.IntN(2) == 0 {
		ev.Parent = 1 + rng.Uint64N(6)
	}
}

// TestProducer_ApplyBatchMatchesApply replays random streams (remaps,
// repeats, aliases, missing parents, unknown removals, clears, member and
// worker removals, fences, filters too small for the stream) and a
// Mooncake stream into a too-small filter, once event by event with Apply
// and once with ApplyBatch in random batch sizes, and requires identical
// steps, errors, drained images, final words and counters. The Mooncake
// replay must also publish the pinned layout.
func TestProducer_ApplyBatchMatchesApply(t *testing.T) {
	seed := testSeed(t, 11)
	streams := 3000
	if testing.Short() {
		streams = 800
	}
	for ci, cfg := range []struct {
		buckets     uint64
		maxKicks    int
		batch       int
		clearWorker bool
	}{{1024, 0, 16, false}, {256, 500, 3, true}, {64, 8, 1, false}, {16, 500, 16, false}, {2, 4, 1, true}} {
		rng := rand.New(rand.NewPCG(seed, uint64(ci)))
		g := &streamGen{rng: rng, md: newModel(cfg.clearWorker)}
		for w := range uint64(3) {
			for r := range uint32(2) {
				g.members = append(g.members, kv.Member{Worker: 10 + w, Rank: r})
			}
		}
		steps := make([]batchStep, streams)
		for i := range steps {
			steps[i] = batchStep{op: g.next(), flush: rng.IntN(10) == 0}
			reuseIDs(rng, &steps[i].ev)
			switch steps[i].lifecycle {
			case 0:
				g.md.apply(&steps[i].ev)
			case 1:
				delete(g.md.lin, steps[i].ev.Member)
			case 2:
				g.md.removeWorker(steps[i].ev.Member.Worker)
			}
		}
		cfgP := Config{Format: mustFormat(t, cfg.buckets), MaxKicks: cfg.maxKicks, BatchEvents: cfg.batch, ClearWorker: cfg.clearWorker}
		seq, err := New(cfgP)
		if err != nil {
			t.Fatal(err)
		}
		bat, err := New(cfgP)
		if err != nil {
			t.Fatal(err)
		}
		want := replaySequential(seq, steps)
		got := replayBatched(bat, steps, rng, 64)
		if diff := want.equal(got); diff != "" {
			t.Fatalf("config %d: ApplyBatch differs from Apply: %s", ci, diff)
		}
	}

	st := mooncakeStream(readTrace(t, mooncakeTrace), 4, 1024, 2)
	steps := make([]batchStep, len(st.events))
	for i := range st.events {
		steps[i].ev = st.events[i]
	}
	p, err := New(Config{Format: mustFormat(t, 512), MaxKicks: 64})
	if err != nil {
		t.Fatal(err)
	}
	d := newLayoutDigest()
	p.ApplyBatch(st.events, func(_ int, step Step, err error) {
		d.step(step, err)
		if step == StepPublish {
			d.images(p.Drain(nil))
		}
	})
	if got := d.final(p); got != layoutDigestMooncake {
		t.Errorf("Mooncake stream through one ApplyBatch: digest %#x, want the pinned %#x", got, layoutDigestMooncake)
	}
	seq, err := New(Config{Format: mustFormat(t, 512), MaxKicks: 64})
	if err != nil {
		t.Fatal(err)
	}
	bat, err := New(Config{Format: mustFormat(t, 512), MaxKicks: 64})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	if diff := replaySequential(seq, steps).equal(replayBatched(bat, steps, rng, 256)); diff != "" {
		t.Fatalf("Mooncake stream: ApplyBatch differs from Apply: %s", diff)
	}
}
