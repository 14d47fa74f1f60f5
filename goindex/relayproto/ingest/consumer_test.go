package ingest

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/bucketgen"
	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/internal/testseed"
)

func TestConsumer_NewChecksTheTable(t *testing.T) {
	f := prototest.Format(t, 8)
	m := relayproto.Manifest{ConsumerInstance: 1, Domain: prototest.Domain, Format: f, Lanes: []relayproto.PoolID{{Domain: prototest.Domain, DC: 1}, {Domain: prototest.Domain, DC: 2}}}
	for _, tbl := range []*memTable{newMemTable(1, 8), newMemTable(2, 16)} {
		if _, err := New(m, tbl, Config{}); !errors.Is(err, errBadConfig) {
			t.Errorf("NewConsumer over %d lanes × %d buckets = %v, want errBadConfig", tbl.Lanes(), tbl.n, err)
		}
	}
	if _, err := New(relayproto.Manifest{Domain: prototest.Domain, Format: f}, newMemTable(2, 8), Config{}); err == nil || errors.Is(err, errBadConfig) {
		t.Errorf("New(no lanes) = %v, want the manifest's error", err)
	}
	tbl := newMemTable(3, 8)
	tbl.ready.Store(0b111)
	c, err := New(m, tbl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.ready.Load() != 0b100 {
		t.Errorf("NewConsumer left ready mask %03b, want the manifest's lanes cleared (100)", tbl.ready.Load())
	}
	got := c.Manifest()
	got.Lanes[0].DC = 99
	if c.Manifest().Lanes[0].DC != 1 || c.Lane(0).Owner().DC != 1 {
		t.Errorf("the consumer's manifest is not immutable")
	}
	if i, ok := c.LaneOf(relayproto.PoolID{Domain: prototest.Domain, DC: 2}); !ok || i != 1 {
		t.Errorf("LaneOf(dc 2) = %d, %v; want 1", i, ok)
	}
	if c.Lanes() != 2 {
		t.Errorf("Lanes() = %d, want 2", c.Lanes())
	}
}

func TestConsumer_RoutesByLeaseAndLoadReportsByPool(t *testing.T) {
	c, _, f := newTestConsumer(t, 3, 8, Config{})
	ids := make([]relayproto.ProducerIdentity, 3)
	leases := make([]relayproto.Lease, 3)
	for i := range ids {
		ids[i] = prototest.Identity(f, relayproto.DCID(i+1), 1)
		leases[i] = readyLane(t, c, i, ids[i], make([]uint64, 8), 0)
	}
	d := &relayproto.Delta{Identity: ids[2], Lease: leases[2], Base: 0, Sequence: 1, Images: []relayproto.Image{{Bucket: 1, Word: 1}}}
	if i, ok := c.Route(d); !ok || i != 2 {
		t.Errorf("Route(delta under lane 2's lease) = %d, %v", i, ok)
	}
	if o, err := c.Handle(d); o != Applied || err != nil {
		t.Errorf("Handle(lane 2 delta) = %v, %v", o, err)
	}
	for _, l := range []relayproto.Lease{{ConsumerInstance: 41, Lane: 2, Epoch: 1}, {ConsumerInstance: 42, Lane: 5, Epoch: 1}, {}} {
		m := &relayproto.Heartbeat{Identity: ids[0], Lease: l}
		if _, ok := c.Route(m); ok {
			t.Errorf("Route(heartbeat under %v) routed it", l)
		}
		if o, err := c.Handle(m); o != ForeignLease || err != nil {
			t.Errorf("Handle(heartbeat under %v) = %v, %v; want ForeignLease", l, o, err)
		}
	}
	r := &relayproto.LoadReport{Identity: ids[1], TimestampUnixNano: 5, QueuedPrefillTokens: 10}
	if o, err := c.Handle(r); o != LoadRecorded || err != nil {
		t.Errorf("Handle(load report of dc 2) = %v, %v", o, err)
	}
	if got, ok := c.Lane(1).LastLoad(); !ok || got.QueuedPrefillTokens != 10 {
		t.Errorf("lane 1 LastLoad = %+v, %v", got, ok)
	}
	stranger := *r
	stranger.Identity.Pool.DC = 9
	if o, _ := c.Handle(&stranger); o != ForeignLease {
		t.Errorf("Handle(load report of an unknown pool) = %v, want ForeignLease", o)
	}
}

// TestConsumer_FaultOnOneLaneNeverDisturbsTheOthers faults lane 1 in every
// way and checks that lanes 0 and 2 keep their words, ready bits and state.
func TestConsumer_FaultOnOneLaneNeverDisturbsTheOthers(t *testing.T) {
	rng := testseed.Rand(t, 21)
	c, tbl, f := newTestConsumer(t, 3, 16, Config{OrderedHeartbeats: true})
	ids := make([]relayproto.ProducerIdentity, 3)
	leases := make([]relayproto.Lease, 3)
	for i := range ids {
		ids[i] = prototest.Identity(f, relayproto.DCID(i+1), 1)
	}
	restarted := ids[1]
	restarted.Incarnation++
	bad := []func(l relayproto.Lease) relayproto.Message{
		func(l relayproto.Lease) relayproto.Message {
			return &relayproto.Delta{Identity: ids[1], Lease: l, Base: 3, Sequence: 4, Images: []relayproto.Image{{Bucket: 1}}}
		},
		func(l relayproto.Lease) relayproto.Message {
			return &relayproto.Delta{Identity: ids[1], Lease: l, Base: 0, Sequence: 2, Images: []relayproto.Image{{Bucket: 1}}}
		},
		func(l relayproto.Lease) relayproto.Message {
			return &relayproto.Delta{Identity: ids[1], Lease: l, Base: 0, Sequence: 1}
		},
		func(l relayproto.Lease) relayproto.Message {
			return &relayproto.Delta{Identity: ids[1], Lease: l, Base: 0, Sequence: 1, Images: []relayproto.Image{{Bucket: 16}}}
		},
		func(l relayproto.Lease) relayproto.Message {
			return &relayproto.Delta{Identity: ids[1], Lease: l, Base: 0, Sequence: 1, Images: []relayproto.Image{{Bucket: 2}, {Bucket: 2}}}
		},
		func(l relayproto.Lease) relayproto.Message {
			return &relayproto.Delta{Identity: restarted, Lease: l, Base: 0, Sequence: 1, Images: []relayproto.Image{{Bucket: 1}}}
		},
		func(l relayproto.Lease) relayproto.Message {
			return &relayproto.DrainMarker{Identity: ids[1], Lease: l, Expected: 3}
		},
		func(l relayproto.Lease) relayproto.Message {
			return &relayproto.Heartbeat{Identity: ids[1], Lease: l, Sequence: 3}
		},
		func(l relayproto.Lease) relayproto.Message { return whole(ids[1], l, 5, make([]uint64, 16)) },
		func(l relayproto.Lease) relayproto.Message { return whole(ids[1], l, 5, make([]uint64, 15)) },
	}
	for i := range ids {
		leases[i] = readyLane(t, c, i, ids[i], bucketgen.AtLoad(rng, 16, 0.6), 0)
	}
	for k, mk := range bad {
		leases[1] = readyLane(t, c, 1, ids[1], bucketgen.AtLoad(rng, 16, 0.6), 0)
		before := [][]uint64{tbl.laneCopy(0), tbl.laneCopy(2)}
		st0, st2 := c.Lane(0).Status(), c.Lane(2).Status()
		o, err := c.Handle(mk(leases[1]))
		var le *LaneError
		if !o.Faults() || !errors.As(err, &le) || le.Lane != 1 || le.Outcome != o || !errors.Is(err, ErrLaneFaulted) {
			t.Errorf("bad message %d: %v, %v; want a *LaneError for lane 1", k, o, err)
		}
		if !slices.Equal(tbl.words[0], before[0]) || !slices.Equal(tbl.words[2], before[1]) ||
			c.Lane(0).Status() != st0 || c.Lane(2).Status() != st2 || !tbl.isReady(0) || !tbl.isReady(2) {
			t.Errorf("bad message %d (%v) on lane 1 disturbed lane 0 or 2", k, o)
		}
	}
}

func TestConsumer_ApplyFrameErrorChangesNothing(t *testing.T) {
	c, tbl, f := newTestConsumer(t, 1, 8, Config{})
	id := prototest.Identity(f, 1, 1)
	lease := readyLane(t, c, 0, id, []uint64{1, 2, 3, 4, 5, 6, 7, 8}, 0)
	frame, err := wire.AppendFrame(nil, &relayproto.Delta{Identity: id, Lease: lease, Base: 0, Sequence: 1, Images: []relayproto.Image{{Bucket: 0, Word: 9}}})
	if err != nil {
		t.Fatal(err)
	}
	frame[len(frame)-1] ^= 1
	st := c.Lane(0).Status()
	var fe *wire.FrameError
	if _, rest, err := c.Apply(frame); !errors.As(err, &fe) || !errors.Is(err, wire.ErrChecksum) || len(rest) != len(frame) {
		t.Errorf("Apply(corrupt) = %v, rest %d; want a checksum *FrameError and src back", err, len(rest))
	}
	if c.Lane(0).Status() != st || tbl.words[0][0] != 1 {
		t.Errorf("a frame error changed the lane")
	}
	frame[len(frame)-1] ^= 1
	if o, rest, err := c.Apply(frame); o != Applied || err != nil || len(rest) != 0 || tbl.words[0][0] != 9 {
		t.Errorf("Apply(good) = %v, %v", o, err)
	}
}

// TestConsumer_LanesIngestConcurrently drives every lane from its own
// goroutine through Handle (run with -race).
func TestConsumer_LanesIngestConcurrently(t *testing.T) {
	const lanes = 8
	c, tbl, f := newTestConsumer(t, lanes, 64, Config{})
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	srcs := make([]*prototest.ModelSource, lanes)
	var wg sync.WaitGroup
	for i := range lanes {
		srcs[i] = prototest.NewModelSource(64)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := testseed.Rand(t, uint64(100+i))
			id := prototest.Identity(f, relayproto.DCID(i+1), 1)
			l := c.Lane(i)
			if err := l.Claim(); err != nil {
				t.Error(err)
				return
			}
			lease := l.NextLease()
			if err := l.Assign(id, lease); err != nil {
				t.Error(err)
				return
			}
			if o, _ := c.Handle(whole(id, lease, 0, make([]uint64, 64))); o != Installed {
				t.Errorf("lane %d install: %v", i, o)
				return
			}
			for seq := range uint64(rounds) {
				srcs[i].Mutate(rng, 4)
				images := srcs[i].Drain(nil)
				if len(images) == 0 {
					images = []relayproto.Image{{Bucket: 0, Word: srcs[i].Words[0]}}
				}
				if o, err := c.Handle(&relayproto.Delta{Identity: id, Lease: lease, Base: seq, Sequence: seq + 1, Images: images}); o != Applied {
					t.Errorf("lane %d delta %d: %v %v", i, seq+1, o, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := range lanes {
		if !slices.Equal(tbl.words[i], srcs[i].Words) || !tbl.isReady(i) {
			t.Errorf("lane %d did not converge under concurrent ingestion", i)
		}
	}
}

// TestFanoutPublisher_UncertainDeliveryBurnsTwoSequences shows why the
// snapshot after a failed send skips two sequences: a live lane that did
// receive the uncertain delta must not take the next delta as a
// continuation (it lacks the absorbed tail); it must fault and re-subscribe.
func TestFanoutPublisher_UncertainDeliveryBurnsTwoSequences(t *testing.T) {
	fx := struct {
		src        *prototest.ModelSource
		log, store *prototest.Recorder
		id         relayproto.ProducerIdentity
		p          *publish.Fanout
	}{src: prototest.NewModelSource(8), log: &prototest.Recorder{}, store: &prototest.Recorder{}, id: prototest.Identity(prototest.Format(t, 8), 1, 1)}
	var err error
	fx.p, err = publish.NewFanout(publish.FanoutConfig{Config: publish.Config{Identity: fx.id, StartSequence: 10, Sink: fx.log, Source: fx.src}, Snapshots: fx.store})
	if err != nil {
		t.Fatalf("NewFanout: %v", err)
	}
	rng := testseed.Rand(t, 6)
	event := func() (bool, error) { // one producer event, published
		fx.src.Set(uint32(rng.IntN(len(fx.src.Words))), bucketgen.Word(rng)|1)
		return fx.p.Publish(fx.src.Drain(nil))
	}
	c, tbl, _ := newTestConsumer(t, 1, 8, Config{})
	l := c.Lane(0)
	if err := l.Claim(); err != nil {
		t.Fatal(err)
	}
	sub := l.NextLease()
	if err := l.Assign(fx.id, sub); err != nil {
		t.Fatal(err)
	}
	s0, err := fx.p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(m relayproto.Message) Outcome { // the subscription stamps its lease
		m = prototest.Clone(m)
		switch m := m.(type) {
		case *relayproto.Snapshot:
			m.Lease = sub
		case *relayproto.Delta:
			m.Lease = sub
		}
		return handleOn(l, m)
	}
	if o := deliver(s0); o != Installed {
		t.Fatalf("stored snapshot: %v", o)
	}
	// The send "fails" but the delta did reach this lane (a lost ack).
	var uncertain relayproto.Message
	fx.log.Fail = func(m relayproto.Message) bool { uncertain = prototest.Clone(m); return true }
	if _, err := event(); err == nil || fx.p.Status().Fence != publish.FenceDeliveryUncertain {
		t.Fatalf("Publish with a lost ack = %v, fence %v; want an error and delivery-uncertain", err, fx.p.Status().Fence)
	}
	fx.log.Fail = nil
	if o := deliver(uncertain); o != Applied {
		t.Fatalf("uncertain delta on the live lane: %v", o)
	}
	if _, err := event(); err == nil {
		t.Errorf("Publish before a new snapshot = nil, want a refusal (fenced)")
	}
	s1, err := fx.p.Snapshot() // absorbs the tail of the refused event
	if err != nil {
		t.Fatal(err)
	}
	if s1.Sequence != 12 {
		t.Errorf("snapshot after the uncertain delta 10→11 = N %d, want 12", s1.Sequence)
	}
	if _, err := event(); err != nil {
		t.Fatal(err)
	}
	next := fx.log.Deltas()[0]
	if next.Base != 12 {
		t.Fatalf("next delta base %d, want 12", next.Base)
	}
	if o := deliver(next); o != BaseSequenceMismatch {
		t.Errorf("live lane at 11 given delta 12→13 = %v, want BaseSequenceMismatch (re-subscribe), not a silent divergence", o)
	}
	// Re-subscribing from the store converges.
	sub = l.NextLease()
	if err := l.Assign(fx.id, sub); err != nil {
		t.Fatal(err)
	}
	if deliver(s1) != Installed || deliver(next) != Applied || !slices.Equal(tbl.words[0], fx.src.Words) {
		t.Errorf("after re-subscribing the lane does not equal the producer")
	}
}

// TestConsumer_ExtendCarriesLanesWithoutASnapshot moves two READY lanes into
// a wider table holding their words: they stay READY at their sequences,
// take their next deltas under the same lease, and the added lane starts
// UNCLAIMED and not ready; a duplicate pool is refused with c unchanged.
func TestConsumer_ExtendCarriesLanesWithoutASnapshot(t *testing.T) {
	const n = 8
	c, old, f := newTestConsumer(t, 2, n, Config{OrderedHeartbeats: true})
	var leases [2]relayproto.Lease
	var ids [2]relayproto.ProducerIdentity
	for i := range 2 {
		ids[i] = prototest.Identity(f, relayproto.DCID(i+1), 1)
		words := make([]uint64, n)
		words[i] = uint64(100 + i)
		leases[i] = readyLane(t, c, i, ids[i], words, 5)
	}
	dup := []relayproto.PoolID{{Domain: prototest.Domain, DC: 1}}
	if _, err := c.Extend(newMemTable(3, n), dup); err == nil {
		t.Errorf("Extend(pool of lane 0 again) = nil error, want the manifest refused")
	}
	if _, err := c.Extend(newMemTable(2, n), []relayproto.PoolID{{Domain: prototest.Domain, DC: 3}}); err == nil {
		t.Errorf("Extend(3 lanes over a 2-lane table) = nil error, want refused")
	}
	tbl := newMemTable(3, n)
	for i := range 2 { // what shm.Writer.ResizeCarrying does
		copy(tbl.words[i], old.words[i])
		tbl.SetReady(i)
	}
	nc, err := c.Extend(tbl, []relayproto.PoolID{{Domain: prototest.Domain, DC: 3}})
	if err != nil {
		t.Fatalf("Extend(+DC 3): %v", err)
	}
	if got := nc.Lanes(); got != 3 {
		t.Fatalf("Lanes() = %d, want 3", got)
	}
	if i, ok := nc.LaneOf(relayproto.PoolID{Domain: prototest.Domain, DC: 3}); !ok || i != 2 {
		t.Errorf("LaneOf(DC 3) = %d, %v; want 2, true", i, ok)
	}
	for i := range 2 {
		st := nc.Lane(i).Status()
		if st.State != StateReady || st.Installed != 5 || st.Lease != leases[i] {
			t.Errorf("lane %d after Extend = %v at %d under %v, want READY at 5 under %v", i, st.State, st.Installed, st.Lease, leases[i])
		}
		d := &relayproto.Delta{Identity: ids[i], Lease: leases[i], Base: 5, Sequence: 6, Images: []relayproto.Image{{Bucket: 7, Word: 77}}}
		if o, err := nc.Handle(d); o != Applied || err != nil {
			t.Errorf("lane %d Handle(delta 5→6) after Extend = %v, %v; want Applied", i, o, err)
		}
		if tbl.words[i][7] != 77 || old.words[i][7] != 0 {
			t.Errorf("lane %d delta after Extend: new table bucket 7 = %d, old = %d; want 77 in the new table only", i, tbl.words[i][7], old.words[i][7])
		}
		if !tbl.isReady(i) {
			t.Errorf("lane %d not ready in the new table", i)
		}
	}
	if st := nc.Lane(2).Status(); st.State != StateUnclaimed || tbl.isReady(2) {
		t.Errorf("added lane = %v, ready %v; want UNCLAIMED, not ready", st.State, tbl.isReady(2))
	}
	lease := readyLane(t, nc, 2, prototest.Identity(f, 3, 1), make([]uint64, n), 1)
	if lease.Lane != 2 || lease.ConsumerInstance != 42 {
		t.Errorf("added lane's lease = %v, want lane 2 of instance 42", lease)
	}
}
