package ingest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/internal/testseed"
)

// link is an in-memory leased transport from one publisher to a consumer:
// every message is encoded to a frame and queued; pump delivers the queue
// through Consumer.Apply. Tests drop, duplicate, reorder or corrupt queued
// frames, make Send fail, and replay history.
type link struct {
	t       testing.TB
	c       *Consumer
	queue   [][]byte
	history [][]byte // every frame ever sent, for replays
	fail    bool     // Send fails and nothing is queued
	lossy   bool     // frames that fail to decode are dropped (counted) instead of failing the test
	corrupt int      // frames dropped by the decoder
}

func (w *link) Send(m relayproto.Message) error {
	frame, err := wire.AppendFrame(nil, m)
	if err != nil {
		w.t.Fatalf("link: AppendFrame(%v): %v", m.Type(), err)
	}
	if w.fail {
		return prototest.ErrSinkDown
	}
	w.history = append(w.history, frame)
	w.queue = append(w.queue, frame)
	return nil
}

// pump delivers every queued frame and returns their outcomes.
func (w *link) pump() []Outcome {
	var outs []Outcome
	for _, f := range w.queue {
		o, rest, err := w.c.Apply(f)
		var le *LaneError
		var fe *wire.FrameError
		if w.lossy && errors.As(err, &fe) {
			w.corrupt++
			continue
		}
		if err != nil && !errors.As(err, &le) {
			w.t.Fatalf("link: Apply: %v", err)
		}
		if len(rest) != 0 {
			w.t.Fatalf("link: %d bytes left after a frame", len(rest))
		}
		outs = append(outs, o)
	}
	w.queue = w.queue[:0]
	return outs
}

// dc is one producer DC feeding lane `lane` of a consumer through a wire.
type dc struct {
	t     testing.TB
	id    relayproto.ProducerIdentity
	src   publish.Source
	pub   *publish.Publisher
	w     *link
	lane  *Lane
	chunk int // snapshot chunk words
	// advance runs events producer events, publishing at the boundaries the
	// producer's cadence asks for and at the end (a timer flush).
	advance func(rng *rand.Rand, events int) error
}

// newDC returns a DC whose producer is a modelSource mutated at random.
func newDC(t testing.TB, c *Consumer, lane int, f relayproto.Format, chunk int) *dc {
	m := prototest.NewModelSource(f.Buckets)
	d := newDCOver(t, c, lane, f, chunk, m)
	d.advance = func(rng *rand.Rand, events int) error {
		m.Mutate(rng, events)
		_, err := d.pub.Publish(m.Drain(nil))
		return err
	}
	return d
}

func newDCOver(t testing.TB, c *Consumer, lane int, f relayproto.Format, chunk int, src publish.Source) *dc {
	d := &dc{t: t, id: prototest.Identity(f, c.Lane(lane).Owner().DC, 1), src: src, w: &link{t: t, c: c}, lane: c.Lane(lane), chunk: chunk}
	d.restart()
	return d
}

// restart starts a new relay incarnation over the same producer words (a
// relay restart keeps no lease and no sequence).
func (d *dc) restart() {
	d.id.Incarnation++
	p, err := publish.New(publish.Config{Identity: d.id, Sink: d.w, Source: d.src})
	if err != nil {
		d.t.Fatalf("NewPublisher: %v", err)
	}
	d.pub = p
}

// recover takes a new lease, assigns it, and installs the barrier snapshot.
func (d *dc) recover() {
	d.t.Helper()
	if d.lane.Status().State == StateUnclaimed {
		if err := d.lane.Claim(); err != nil {
			d.t.Fatalf("lane %d Claim: %v", d.lane.Index(), err)
		}
	}
	lease := d.lane.NextLease()
	if err := d.lane.Assign(d.id, lease); err != nil {
		d.t.Fatalf("lane %d Assign(%v): %v", d.lane.Index(), lease, err)
	}
	snap, err := d.pub.SnapshotAfterBarrier(lease)
	if err != nil {
		d.t.Fatalf("lane %d SnapshotAfterBarrier: %v", d.lane.Index(), err)
	}
	for c := range snap.Chunks(d.chunk) {
		if err := d.w.Send(c); err != nil {
			d.t.Fatalf("lane %d snapshot chunk: %v", d.lane.Index(), err)
		}
	}
	if outs := d.w.pump(); outs[len(outs)-1] != Installed {
		d.t.Fatalf("lane %d recovery ended with %v, want Installed", d.lane.Index(), outs)
	}
}

// step runs k producer events and publishes them.
func (d *dc) step(rng *rand.Rand, k int) error { return d.advance(rng, k) }

// publishOne steps until exactly one more delta went out (a step whose
// changes net-revert publishes nothing).
func (d *dc) publishOne(rng *rand.Rand) {
	d.t.Helper()
	want := d.pub.Status().LastSequence + 1
	for range 100 {
		if err := d.step(rng, 1); err != nil {
			d.t.Fatalf("lane %d Publish: %v", d.lane.Index(), err)
		}
		if d.pub.Status().LastSequence == want {
			return
		}
	}
	d.t.Fatalf("lane %d: 100 steps published nothing", d.lane.Index())
}

// drain publishes the pending window and a drain marker, delivers
// everything, and returns the marker's outcome.
func (d *dc) drain() Outcome {
	d.t.Helper()
	if _, err := d.pub.Publish(d.src.Drain(nil)); err != nil {
		d.t.Fatalf("lane %d final Publish: %v", d.lane.Index(), err)
	}
	m, err := d.pub.DrainMarker()
	if err != nil {
		d.t.Fatalf("lane %d DrainMarker: %v", d.lane.Index(), err)
	}
	if err := d.w.Send(m); err != nil {
		d.t.Fatalf("lane %d drain marker: %v", d.lane.Index(), err)
	}
	outs := d.w.pump()
	return outs[len(outs)-1]
}

// checkConverged checks that the lane is READY, its ready bit set, and its
// words equal the producer's byte for byte.
func (d *dc) checkConverged(tbl *memTable) {
	d.t.Helper()
	st := d.lane.Status()
	if st.State != StateReady || !tbl.isReady(d.lane.Index()) {
		d.t.Errorf("lane %d: %v ready=%v, want READY", d.lane.Index(), st.State, tbl.isReady(d.lane.Index()))
	}
	if !slices.Equal(tbl.words[d.lane.Index()], d.src.AppendWords(nil)) {
		d.t.Errorf("lane %d words differ from its producer's", d.lane.Index())
	}
}

// faults returns how many messages faulted the lane.
func faults(l *Lane) uint64 {
	st := l.Status()
	var n uint64
	for o := WrongIdentity; o < outcomeCount; o++ {
		n += st.Counts[o]
	}
	return n
}

// grid is a consumer with one DC per lane, every lane recovered.
type grid struct {
	c          *Consumer
	tbl        *memTable
	dcs        []*dc
	rng        *rand.Rand
	recoveries int // lanes healed by the control plane
}

func newGrid(t testing.TB, lanes int, n uint64, chunk int, cfg Config, seed uint64) *grid {
	t.Helper()
	c, tbl, f := newTestConsumer(t, lanes, n, cfg)
	g := &grid{c: c, tbl: tbl, rng: testseed.Rand(t, seed)}
	for i := range lanes {
		d := newDC(t, c, i, f, chunk)
		if err := d.step(g.rng, int(n)); err != nil { // dropped: no lease yet
			t.Fatal(err)
		}
		d.recover()
		g.dcs = append(g.dcs, d)
	}
	return g
}

// run publishes rounds random batches on every lane and delivers them.
func (g *grid) run(t testing.TB, rounds int) {
	t.Helper()
	for range rounds {
		for _, d := range g.dcs {
			if err := d.step(g.rng, 1+g.rng.IntN(4)); err != nil {
				t.Fatalf("lane %d Publish: %v", d.lane.Index(), err)
			}
			d.w.pump()
		}
	}
}
