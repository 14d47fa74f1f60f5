package relayproto

import (
	"errors"
	"slices"
	"testing"
)

// memLog is an ordered delta log retaining the newest `retain` deltas (0:
// all). It is also the Sink of a FanoutPublisher.
type memLog struct {
	deltas []Delta
	retain int
}

func (g *memLog) Send(m Message) error {
	if d, ok := m.(*Delta); ok {
		c := *d
		c.Images = slices.Clone(d.Images)
		g.deltas = append(g.deltas, c)
		if g.retain > 0 && len(g.deltas) > g.retain {
			g.deltas = g.deltas[len(g.deltas)-g.retain:]
		}
	}
	return nil
}

func (g *memLog) AppendDeltas(dst []Delta, after uint64, max int) ([]Delta, error) {
	i, _ := slices.BinarySearchFunc(g.deltas, after, func(d Delta, s uint64) int {
		switch {
		case d.Sequence <= s:
			return -1
		}
		return 1
	})
	if i == len(g.deltas) {
		return dst, nil
	}
	if g.deltas[i].Base > after {
		return dst, ErrNotRetained
	}
	return append(dst, g.deltas[i:min(len(g.deltas), i+max)]...), nil
}

type fanoutLane struct {
	pub   *FanoutPublisher
	src   *modelSource
	log   *memLog
	store *recorder
	l     *Lane
	tbl   *memTable
	id    ProducerIdentity
}

func newFanoutLane(t *testing.T, retain int) *fanoutLane {
	t.Helper()
	c, tbl, f := newTestConsumer(t, 2, 256, ConsumerConfig{OrderedHeartbeats: true})
	fl := &fanoutLane{src: newModelSource(256), log: &memLog{retain: retain}, store: &recorder{}, l: c.Lane(0), tbl: tbl, id: testIdentity(f, 1, 1)}
	var err error
	fl.pub, err = NewFanoutPublisher(FanoutConfig{PublisherConfig: PublisherConfig{Identity: fl.id, Sink: fl.log, Source: fl.src}, Snapshots: fl.store, ChunkWords: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.l.Claim(); err != nil {
		t.Fatal(err)
	}
	return fl
}

// subscribe takes a fresh local epoch and loads the newest stored snapshot.
func (fl *fanoutLane) subscribe(t *testing.T) {
	t.Helper()
	lease := fl.l.NextLease()
	if err := fl.l.Assign(fl.id, lease); err != nil {
		t.Fatal(err)
	}
	last := fl.store.msgs[len(fl.store.msgs)-1].(*Snapshot).Sequence
	var o Outcome
	for _, m := range fl.store.msgs {
		if s := m.(*Snapshot); s.Sequence == last {
			c := *s
			c.Lease = lease
			o = fl.l.Snapshot(&c)
		}
	}
	if o != Installed {
		t.Fatalf("loading stored snapshot %d: %v", last, o)
	}
}

func (fl *fanoutLane) publish(t *testing.T, batches int) {
	t.Helper()
	rng := testRand(t, uint64(batches))
	for range batches {
		fl.src.mutate(rng, 3)
		if _, err := fl.pub.Publish(fl.src.Drain(nil)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCatchUp_SlowLaneKeepsItsStateAndCatchesUp(t *testing.T) {
	fl := newFanoutLane(t, 0)
	if _, err := fl.pub.Snapshot(); err != nil {
		t.Fatal(err)
	}
	fl.subscribe(t)
	fl.publish(t, 500) // the lane takes none of it live
	if !fl.tbl.isReady(0) {
		t.Fatalf("lane not ready before catching up")
	}
	want := fl.pub.Status().LastSequence // 500 batches less net reversions
	n, o, err := fl.l.CatchUp(fl.log, 64)
	if err != nil || uint64(n) != want || o != Applied || want < 400 {
		t.Errorf("CatchUp = %d, %v, %v; want %d applied", n, o, err, want)
	}
	st := fl.l.Status()
	if st.State != StateReady || st.Installed != want || !fl.tbl.isReady(0) || faults(fl.l) != 0 {
		t.Errorf("after catch-up: %v@%d ready=%v faults=%d, want READY@%d with no fault", st.State, st.Installed, fl.tbl.isReady(0), faults(fl.l), want)
	}
	if !slices.Equal(fl.tbl.words[0], fl.src.words) {
		t.Errorf("caught-up lane differs from the producer")
	}
	// Live traffic that overlaps the catch-up is ignored as stale; the next
	// heartbeat and drain marker agree.
	lease := fl.l.Status().Lease
	stale := fl.log.deltas[len(fl.log.deltas)-1]
	stale.Lease = lease
	if o := fl.l.Delta(&stale); o != StaleOrDuplicate {
		t.Errorf("live delta already caught up = %v, want StaleOrDuplicate", o)
	}
	hb, dm := fl.pub.Heartbeat(), fl.pub.DrainMarker()
	hb.Lease, dm.Lease = lease, lease
	if o1, o2 := fl.l.Heartbeat(hb), fl.l.DrainMarker(dm); o1 != HeartbeatSeen || o2 != Acknowledged {
		t.Errorf("heartbeat %v, drain %v after catch-up; want HeartbeatSeen, Acknowledged", o1, o2)
	}
	if n, o, err := fl.l.CatchUp(fl.log, 64); n != 0 || o != 0 || err != nil {
		t.Errorf("CatchUp with nothing newer = %d, %v, %v", n, o, err)
	}
}

func TestCatchUp_TruncatedLogRetiresTheLaneToASnapshot(t *testing.T) {
	fl := newFanoutLane(t, 100)
	if _, err := fl.pub.Snapshot(); err != nil {
		t.Fatal(err)
	}
	fl.subscribe(t)
	fl.publish(t, 300)
	_, o, err := fl.l.CatchUp(fl.log, 64)
	if err != nil || o != DeltasNotRetained || fl.l.Status().State != StateFaulted || fl.tbl.isReady(0) {
		t.Errorf("CatchUp past retention = %v, %v, state %v; want DeltasNotRetained and FAULTED", o, err, fl.l.Status().State)
	}
	if _, err := fl.pub.Snapshot(); err != nil {
		t.Fatal(err)
	}
	from := fl.pub.Status().LastSequence
	fl.publish(t, 20)
	want := int(fl.pub.Status().LastSequence - from)
	fl.subscribe(t)
	if n, o, err := fl.l.CatchUp(fl.log, 7); n != want || o != Applied || err != nil {
		t.Errorf("CatchUp after re-subscribing = %d, %v, %v; want %d applied", n, o, err, want)
	}
	if !slices.Equal(fl.tbl.words[0], fl.src.words) {
		t.Errorf("re-subscribed lane differs from the producer")
	}
}

type failingLog struct{}

var errLogDown = errors.New("log down")

func (failingLog) AppendDeltas(dst []Delta, _ uint64, _ int) ([]Delta, error) { return dst, errLogDown }

func TestCatchUp_LogErrorLeavesTheLaneAsItWas(t *testing.T) {
	fl := newFanoutLane(t, 0)
	if _, err := fl.pub.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, o, err := fl.l.CatchUp(fl.log, 0); o != ForeignLease || err != nil {
		t.Errorf("CatchUp on an IDLE lane = %v, %v; want ForeignLease", o, err)
	}
	fl.subscribe(t)
	before := fl.l.Status()
	if _, _, err := fl.l.CatchUp(failingLog{}, 0); !errors.Is(err, errLogDown) {
		t.Errorf("CatchUp(failing log) = %v, want the log's error", err)
	}
	if st := fl.l.Status(); st.State != before.State || st.Installed != before.Installed {
		t.Errorf("a log error changed the lane")
	}
}

func TestApplyDeltas_StopsAtTheFirstFault(t *testing.T) {
	c, tbl, f := newTestConsumer(t, 1, 8, ConsumerConfig{})
	id := testIdentity(f, 1, 1)
	lease := readyLane(t, c, 0, id, make([]uint64, 8), 3)
	d := func(base uint64, b uint32) Delta {
		return Delta{Identity: id, Lease: lease, Base: base, Sequence: base + 1, Images: []Image{{Bucket: b, Word: uint64(base)}}}
	}
	if n, o := c.Lane(0).ApplyDeltas(nil); n != 0 || o != 0 {
		t.Errorf("ApplyDeltas(nil) = %d, %v", n, o)
	}
	run := []Delta{d(3, 1), d(3, 1), d(4, 1), d(9, 2), d(5, 3)} // a duplicate, then a gap
	n, o := c.Lane(0).ApplyDeltas(run)
	st := c.Lane(0).Status()
	if n != 2 || o != BaseSequenceMismatch || st.Installed != 5 || st.State != StateFaulted {
		t.Errorf("ApplyDeltas(3→4, dup, 4→5, gap, 5→6) = %d, %v at %v@%d; want 2, BaseSequenceMismatch, FAULTED@5", n, o, st.State, st.Installed)
	}
	if tbl.words[0][1] != 4 || tbl.words[0][2] != 0 || tbl.words[0][3] != 0 {
		t.Errorf("words %v: want the last writer of bucket 1 (4) and nothing after the gap", tbl.words[0])
	}
}
