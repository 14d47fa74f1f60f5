package ingest

import (
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/goindex/relayproto/wire"
)

// Fault injection at the protocol level (spec §9 item 10): a 3-lane grid,
// a fault on lane 1, then recovery and a drain; every lane ends READY and
// equal to its producer, and lanes 0 and 2 never see a fault.

const victim = 1

func newFaultGrid(t *testing.T, cfg Config) *grid {
	t.Helper()
	g := newGrid(t, 3, 64, 24, cfg, 10)
	g.run(t, 5)
	return g
}

// finish recovers the victim if it is not READY, drains every lane, and
// checks convergence and that the other lanes were undisturbed.
func (g *grid) finish(t *testing.T) {
	t.Helper()
	if g.dcs[victim].lane.Status().State != StateReady {
		g.dcs[victim].recover()
	}
	g.run(t, 3)
	for _, d := range g.dcs {
		if o := d.drain(); o != Acknowledged {
			t.Errorf("lane %d drain = %v, want Acknowledged", d.lane.Index(), o)
		}
		d.checkConverged(g.tbl)
	}
	for _, i := range []int{0, 2} {
		if n := faults(g.c.Lane(i)); n != 0 {
			t.Errorf("lane %d saw %d faults from lane %d's trouble", i, n, victim)
		}
	}
}

func (g *grid) expectLast(t *testing.T, what string, outs []Outcome, want Outcome) {
	t.Helper()
	if len(outs) == 0 || outs[len(outs)-1] != want {
		t.Errorf("%s: outcomes %v, want the last to be %v", what, outs, want)
	}
}

func TestFault_DroppedDeltaIsABaseSequenceMismatch(t *testing.T) {
	g := newFaultGrid(t, Config{})
	d := g.dcs[victim]
	d.publishOne(g.rng)
	d.w.queue = nil // lost
	d.publishOne(g.rng)
	g.expectLast(t, "delta after a dropped one", d.w.pump(), BaseSequenceMismatch)
	g.finish(t)
}

func TestFault_DroppedFinalDeltaIsADrainMismatch(t *testing.T) {
	g := newFaultGrid(t, Config{})
	d := g.dcs[victim]
	d.publishOne(g.rng)
	d.w.queue = nil
	m, err := d.pub.DrainMarker()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.w.Send(m); err != nil {
		t.Fatal(err)
	}
	g.expectLast(t, "drain marker after a dropped final delta", d.w.pump(), TerminalSequenceMismatch)
	g.finish(t)
}

func TestFault_DuplicateDeltaIsIgnored(t *testing.T) {
	g := newFaultGrid(t, Config{})
	d := g.dcs[victim]
	d.publishOne(g.rng)
	d.w.queue = append(d.w.queue, d.w.queue...)
	if outs := d.w.pump(); !slices.Equal(outs, []Outcome{Applied, StaleOrDuplicate}) {
		t.Errorf("a delta delivered twice: %v, want [Applied StaleOrDuplicate]", outs)
	}
	if faults(d.lane) != 0 {
		t.Errorf("a duplicate faulted the lane")
	}
	g.finish(t)
}

func TestFault_ReorderedDeltasFault(t *testing.T) {
	g := newFaultGrid(t, Config{})
	d := g.dcs[victim]
	for range 2 {
		d.publishOne(g.rng)
	}
	d.w.queue[0], d.w.queue[1] = d.w.queue[1], d.w.queue[0]
	if outs := d.w.pump(); !slices.Equal(outs, []Outcome{BaseSequenceMismatch, ForeignLease}) {
		t.Errorf("reordered deltas: %v, want [BaseSequenceMismatch ForeignLease]", outs)
	}
	g.finish(t)
}

func TestFault_BadImageIndexFaultsWithNoWrite(t *testing.T) {
	g := newFaultGrid(t, Config{})
	d := g.dcs[victim]
	d.publishOne(g.rng)
	bad, ok := decodeDelta(d.w.queue[0])
	if !ok {
		t.Fatalf("the queued frame is not a delta")
	}
	bad.Images = append(bad.Images, relayproto.Image{Bucket: 64, Word: 0xDEAD})
	frame, err := wire.AppendFrame(nil, bad)
	if err != nil {
		t.Fatal(err)
	}
	d.w.queue[0] = frame
	before, writes := g.tbl.laneCopy(victim), g.tbl.writes[victim]
	g.expectLast(t, "delta with image index n", d.w.pump(), InvalidIndex)
	if g.tbl.writes[victim] != writes || !slices.Equal(g.tbl.words[victim], before) {
		t.Errorf("a delta with a bad index wrote %d words", g.tbl.writes[victim]-writes)
	}
	g.finish(t)
}

func TestFault_StaleLeaseReplayIsIgnored(t *testing.T) {
	g := newFaultGrid(t, Config{OrderedHeartbeats: true})
	d := g.dcs[victim]
	old := slices.Clone(d.w.history) // snapshot, deltas under the first lease
	d.recover()                      // lease 2
	g.run(t, 2)
	words := g.tbl.laneCopy(victim)
	d.w.queue = old
	for i, o := range d.w.pump() {
		if o != ForeignLease {
			t.Errorf("replayed old-lease frame %d = %v, want ForeignLease", i, o)
		}
	}
	if !slices.Equal(g.tbl.words[victim], words) || d.lane.Status().State != StateReady {
		t.Errorf("an old-lease replay changed the lane")
	}
	g.finish(t)
	if n := faults(d.lane); n != 0 {
		t.Errorf("the replay caused %d faults", n)
	}
}

func TestFault_SinkFailureFencesThenSnapshotAtTheSameSequence(t *testing.T) {
	g := newFaultGrid(t, Config{})
	d := g.dcs[victim]
	at := d.pub.Status().LastSequence
	d.w.fail = true
	var err error
	for tries := 0; err == nil && tries < 100; tries++ { // until a batch is not empty
		err = d.step(g.rng, 2)
	}
	if err == nil || d.pub.Status().Fence != publish.FenceDeliveryUncertain {
		t.Fatalf("Publish into a failing sink = %v, fence %v; want an error and delivery-uncertain", err, d.pub.Status().Fence)
	}
	d.w.fail = false
	if err := d.step(g.rng, 2); err == nil {
		t.Errorf("Publish while fenced = nil, want a refusal")
	}
	if st := d.pub.Status(); st.LastSequence != at || st.Fence != publish.FenceDeliveryUncertain {
		t.Errorf("after the failure: lastSeq %d fence %v, want %d and delivery-uncertain", st.LastSequence, st.Fence, at)
	}
	d.recover()
	if st := d.lane.Status(); st.Installed != at {
		t.Errorf("recovery snapshot installed at %d, want the same sequence %d", st.Installed, at)
	}
	d.checkConverged(g.tbl)
	g.finish(t)
}

func TestFault_RelayRestartReSnapshotsWithANewIncarnation(t *testing.T) {
	g := newFaultGrid(t, Config{})
	d := g.dcs[victim]
	d.publishOne(g.rng) // in flight when the relay dies
	inFlight := slices.Clone(d.w.queue)
	d.w.queue = nil
	oldID := d.id
	d.restart()
	if err := d.step(g.rng, 2); err != nil || len(d.w.queue) != 0 {
		t.Fatalf("the new incarnation without a lease sent %d frames (%v)", len(d.w.queue), err)
	}
	if d.lane.Status().Identity != oldID {
		t.Fatalf("lane lost its old identity before reassignment")
	}
	d.recover() // the control plane assigns the new identity under a new lease
	if st := d.lane.Status(); st.Identity.Incarnation != oldID.Incarnation+1 || st.Installed != 0 {
		t.Errorf("after restart: incarnation %d installed %d, want %d at 0", st.Identity.Incarnation, st.Installed, oldID.Incarnation+1)
	}
	d.w.queue = inFlight // the old incarnation's late frame
	g.expectLast(t, "old incarnation's late delta", d.w.pump(), ForeignLease)
	g.finish(t)
}

func TestFault_WorkerCrashMidApplyRetiresTheLane(t *testing.T) {
	g := newFaultGrid(t, Config{})
	d := g.dcs[victim]
	for tries := 0; len(d.w.queue) == 0 || !multiImage(d.w.queue[0]); tries++ {
		if tries == 100 {
			t.Fatalf("no multi-image delta in 100 steps")
		}
		d.w.pump() // deliver a single-image delta normally
		if err := d.step(g.rng, 8); err != nil {
			t.Fatal(err)
		}
	}
	g.tbl.panicAfter[victim] = 2 // crash on the second image store
	crashed := func() (crashed bool) {
		defer func() { crashed = recover() != nil }()
		d.w.pump()
		return false
	}()
	if !crashed {
		t.Fatalf("the injected crash did not happen")
	}
	d.w.queue = nil
	d.lane.Release() // the supervisor drops the dead ingestor
	if st := d.lane.Status(); st.State != StateUnclaimed || g.tbl.isReady(victim) {
		t.Errorf("after Release: %v ready=%v, want UNCLAIMED and not ready", st.State, g.tbl.isReady(victim))
	}
	d.recover() // a new ingestor claims the lane and re-snapshots
	g.finish(t)
}

// multiImage reports whether frame is a delta of two or more images.
func multiImage(frame []byte) bool {
	d, ok := decodeDelta(frame)
	return ok && len(d.Images) >= 2
}
