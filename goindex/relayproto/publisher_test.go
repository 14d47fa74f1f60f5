package relayproto

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

type pubFixture struct {
	src  *modelSource
	sink *recorder
	p    *Publisher
	id   ProducerIdentity
	rng  *rand.Rand
}

func newPubFixture(t *testing.T, start uint64) *pubFixture {
	t.Helper()
	f := testFormat(t, 16)
	fx := &pubFixture{src: newModelSource(16), sink: &recorder{}, id: testIdentity(f, 1, 1), rng: testRand(t, 5)}
	var err error
	fx.p, err = NewPublisher(PublisherConfig{Identity: fx.id, StartSequence: start, Sink: fx.sink, Source: fx.src})
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return fx
}

// event applies one producer event and publishes the boundary's batch.
func (fx *pubFixture) event(t *testing.T) (bool, error) {
	t.Helper()
	fx.src.mutate(fx.rng, 1)
	batch := fx.src.Drain(nil)
	for len(batch) == 0 { // a net reversion published nothing; change something for real
		fx.src.mutate(fx.rng, 1)
		batch = fx.src.Drain(nil)
	}
	return fx.p.Publish(batch)
}

func lease(epoch uint64) Lease { return Lease{ConsumerInstance: 42, Lane: 0, Epoch: epoch} }

func TestPublisher_PinnedSnapshotAt7ThenOneEvent(t *testing.T) {
	fx := newPubFixture(t, 7)
	s, err := fx.p.SnapshotAfterBarrier(lease(1))
	if err != nil || s.Sequence != 7 || s.Lease != lease(1) || s.Total != 16 || len(fx.sink.msgs) != 0 {
		t.Fatalf("SnapshotAfterBarrier(lease 1) = %+v, %v; want N=7 and nothing sent", s, err)
	}
	if sent, err := fx.event(t); !sent || err != nil {
		t.Fatalf("Publish after one event = %v, %v", sent, err)
	}
	ds := fx.sink.deltas()
	if len(ds) != 1 || ds[0].Base != 7 || ds[0].Sequence != 8 || ds[0].Lease != lease(1) {
		t.Errorf("sent %d deltas (%+v), want one 7→8 under lease 1", len(ds), ds)
	}
	m, err := fx.p.DrainMarker()
	if err != nil || m.Expected != 8 || m.Lease != lease(1) {
		t.Errorf("DrainMarker() = %+v, %v; want expected 8 under lease 1", m, err)
	}
}

func TestPublisher_PinnedSinkFailureAt9ThenSnapshotTagged9(t *testing.T) {
	fx := newPubFixture(t, 9)
	if _, err := fx.p.SnapshotAfterBarrier(lease(1)); err != nil {
		t.Fatal(err)
	}
	fx.sink.fail = func(Message) bool { return true }
	sent, err := fx.event(t)
	if sent || !errors.Is(err, ErrDeliveryUncertain) || !errors.Is(err, errSinkDown) {
		t.Errorf("Publish with a failing sink = %v, %v; want ErrDeliveryUncertain wrapping the sink error", sent, err)
	}
	if st := fx.p.Status(); st.LastSequence != 9 || st.Fence != FenceDeliveryUncertain {
		t.Errorf("after the failure: lastSeq %d fence %v, want 9 and delivery-uncertain", st.LastSequence, st.Fence)
	}
	fx.sink.fail = nil
	if _, err := fx.event(t); !errors.Is(err, ErrFenced) || !errors.Is(err, ErrDeliveryUncertain) {
		t.Errorf("Publish while fenced = %v, want ErrFenced + ErrDeliveryUncertain", err)
	}
	if len(fx.sink.msgs) != 0 {
		t.Errorf("a fenced publisher sent %d messages", len(fx.sink.msgs))
	}
	fx.src.set(5, 0x50005) // a pending tail on the fenced stream
	s, err := fx.p.SnapshotAfterBarrier(lease(2))
	if err != nil || s.Sequence != 9 || s.Lease != lease(2) {
		t.Fatalf("SnapshotAfterBarrier(lease 2) = %+v, %v; want N=9 under lease 2", s, err)
	}
	if st := fx.p.Status(); st.Fence != FenceNone || st.Absorbed != 1 {
		t.Errorf("after the snapshot: fence %v, absorbed %d; want none and 1 (the fenced tail)", st.Fence, st.Absorbed)
	}
	if !slices.Equal(s.Words, fx.src.words) {
		t.Errorf("the snapshot does not hold the producer's words (the refused batch or the absorbed tail is missing)")
	}
	if len(fx.sink.msgs) != 0 {
		t.Errorf("the fenced stream's tail was sent")
	}
}

func TestPublisher_PinnedBarrierTailGoesOutUnderTheOldLease(t *testing.T) {
	fx := newPubFixture(t, 0)
	if _, err := fx.p.SnapshotAfterBarrier(lease(1)); err != nil {
		t.Fatal(err)
	}
	fx.src.set(3, 0x0000000000010002) // one pending event, not yet drained
	s, err := fx.p.SnapshotAfterBarrier(lease(2))
	if err != nil {
		t.Fatal(err)
	}
	ds := fx.sink.deltas()
	if len(ds) != 1 || ds[0].Base != 0 || ds[0].Sequence != 1 || ds[0].Lease != lease(1) ||
		!slices.Equal(ds[0].Images, []Image{{Bucket: 3, Word: 0x0000000000010002}}) {
		t.Errorf("barrier sent %+v, want the tail as delta 0→1 under lease 1", ds)
	}
	if s.Sequence != 1 || s.Lease != lease(2) || s.Words[3] != 0x0000000000010002 {
		t.Errorf("snapshot = N %d under %v with word[3] %#x, want N=1 under lease 2 holding the tail", s.Sequence, s.Lease, s.Words[3])
	}
}

func TestPublisher_NoLeaseDropsWithoutAdvancing(t *testing.T) {
	fx := newPubFixture(t, 4)
	for range 3 {
		if sent, err := fx.event(t); sent || err != nil {
			t.Errorf("Publish without a lease = %v, %v; want dropped", sent, err)
		}
	}
	if st := fx.p.Status(); st.LastSequence != 4 || st.Dropped != 3 || len(fx.sink.msgs) != 0 {
		t.Errorf("after 3 lease-less batches: lastSeq %d dropped %d sent %d; want 4, 3, 0", st.LastSequence, st.Dropped, len(fx.sink.msgs))
	}
	if sent, err := fx.p.Publish(nil); sent || err != nil {
		t.Errorf("Publish(empty) = %v, %v; want no batch", sent, err)
	}
	if _, err := fx.p.DrainMarker(); !errors.Is(err, ErrNoLease) {
		t.Errorf("DrainMarker without a lease = %v, want ErrNoLease", err)
	}
	if _, err := fx.p.Heartbeat(); !errors.Is(err, ErrNoLease) {
		t.Errorf("Heartbeat without a lease = %v, want ErrNoLease", err)
	}
	s, err := fx.p.SnapshotAfterBarrier(lease(1))
	if err != nil || s.Sequence != 4 || !slices.Equal(s.Words, fx.src.words) {
		t.Errorf("SnapshotAfterBarrier after drops = N %d, %v; want N=4 covering the dropped batches", s.Sequence, err)
	}
	if h, err := fx.p.Heartbeat(); err != nil || h.Sequence != 4 || h.Lease != lease(1) {
		t.Errorf("Heartbeat = %+v, %v; want sequence 4 under lease 1", h, err)
	}
}

func TestPublisher_RolloverAtU64MaxMinus1FencesWithoutSending(t *testing.T) {
	fx := newPubFixture(t, math.MaxUint64-1)
	if _, err := fx.p.SnapshotAfterBarrier(lease(1)); err != nil {
		t.Fatal(err)
	}
	if sent, err := fx.event(t); !sent || err != nil {
		t.Fatalf("Publish at u64max−1 = %v, %v; want delta u64max−1 → u64max", sent, err)
	}
	if d := fx.sink.deltas(); len(d) != 1 || d[0].Sequence != math.MaxUint64 {
		t.Fatalf("sent %+v, want one delta to u64max", d)
	}
	sent, err := fx.event(t)
	if sent || !errors.Is(err, ErrSequenceExhausted) || !errors.Is(err, ErrFenced) {
		t.Errorf("Publish at u64max = %v, %v; want ErrFenced + ErrSequenceExhausted", sent, err)
	}
	if st := fx.p.Status(); st.LastSequence != math.MaxUint64 || st.Fence != FenceSequenceExhausted || len(fx.sink.msgs) != 1 {
		t.Errorf("after exhaustion: lastSeq %d fence %v sent %d; want u64max, sequence-exhausted, 1", st.LastSequence, st.Fence, len(fx.sink.msgs))
	}
	if _, err := fx.p.SnapshotAfterBarrier(lease(2)); !errors.Is(err, ErrSequenceExhausted) {
		t.Errorf("SnapshotAfterBarrier when exhausted = %v, want ErrSequenceExhausted", err)
	}
	if st := fx.p.Status(); st.Lease != lease(1) || st.Fence != FenceSequenceExhausted {
		t.Errorf("a refused snapshot changed the publisher: %+v", st)
	}
}

func TestPublisher_RetireLeaseAndStalledLease(t *testing.T) {
	fx := newPubFixture(t, 0)
	if _, err := fx.p.SnapshotAfterBarrier(lease(1)); err != nil {
		t.Fatal(err)
	}
	fx.p.RetireLease()
	if sent, err := fx.event(t); sent || err != nil {
		t.Errorf("Publish after RetireLease = %v, %v; want dropped", sent, err)
	}
	if _, err := fx.p.SnapshotAfterBarrier(lease(2)); err != nil {
		t.Fatal(err)
	}
	fx.p.RetireStalledLease()
	if _, err := fx.event(t); !errors.Is(err, ErrLeaseStalled) || !errors.Is(err, ErrFenced) {
		t.Errorf("Publish after RetireStalledLease = %v, want ErrFenced + ErrLeaseStalled", err)
	}
	if st := fx.p.Status(); !st.Lease.IsZero() || st.Fence != FenceLeaseStalled {
		t.Errorf("after RetireStalledLease: %+v", st)
	}
	if _, err := fx.p.SnapshotAfterBarrier(lease(3)); err != nil || fx.p.Status().Fence != FenceNone {
		t.Errorf("SnapshotAfterBarrier(lease 3) = %v, fence %v; want the fence cleared", err, fx.p.Status().Fence)
	}
}

func TestPublisher_RefusesStaleOrZeroLeases(t *testing.T) {
	fx := newPubFixture(t, 0)
	if _, err := fx.p.SnapshotAfterBarrier(Lease{}); !errors.Is(err, ErrNoLease) {
		t.Errorf("SnapshotAfterBarrier(zero lease) = %v, want ErrNoLease", err)
	}
	if _, err := fx.p.SnapshotAfterBarrier(lease(5)); err != nil {
		t.Fatal(err)
	}
	fx.src.set(0, 1)
	for _, l := range []Lease{lease(5), lease(4)} {
		if _, err := fx.p.SnapshotAfterBarrier(l); !errors.Is(err, ErrStaleEpoch) {
			t.Errorf("SnapshotAfterBarrier(%v) after epoch 5 = %v, want ErrStaleEpoch", l, err)
		}
	}
	if len(fx.sink.msgs) != 0 || len(fx.src.original) != 1 {
		t.Errorf("a refused barrier drained or sent the tail")
	}
	fx.p.RetireLease()
	if _, err := fx.p.SnapshotAfterBarrier(lease(5)); !errors.Is(err, ErrStaleEpoch) {
		t.Errorf("SnapshotAfterBarrier(epoch 5) after retiring epoch 5 = %v, want ErrStaleEpoch", err)
	}
	// Another consumer instance (a restarted consumer) may start at epoch 1.
	other := Lease{ConsumerInstance: 43, Epoch: 1}
	if s, err := fx.p.SnapshotAfterBarrier(other); err != nil || s.Lease != other {
		t.Errorf("SnapshotAfterBarrier(%v) = %v", other, err)
	}
}

func TestPublisher_SplitsBatchesLargerThanAFrame(t *testing.T) {
	f := testFormat(t, 1<<20)
	sink := &recorder{}
	p, err := NewPublisher(PublisherConfig{Identity: testIdentity(f, 1, 1), Sink: sink, Source: newModelSource(1 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.SnapshotAfterBarrier(lease(1)); err != nil {
		t.Fatal(err)
	}
	images := make([]Image, MaxDeltaImages+5)
	for i := range images {
		images[i] = Image{Bucket: uint32(i), Word: 1}
	}
	if sent, err := p.Publish(images); !sent || err != nil {
		t.Fatalf("Publish(%d images) = %v, %v", len(images), sent, err)
	}
	ds := sink.deltas()
	if len(ds) != 2 || len(ds[0].Images) != MaxDeltaImages || len(ds[1].Images) != 5 || ds[0].Sequence != 1 || ds[1].Base != 1 || ds[1].Sequence != 2 {
		t.Errorf("Publish(MaxDeltaImages+5) sent %d deltas, want 0→1 with %d images and 1→2 with 5", len(ds), MaxDeltaImages)
	}
}

func TestPublisher_ConfigIsValidated(t *testing.T) {
	f := testFormat(t, 8)
	bad := testIdentity(f, 1, 1)
	bad.Format.SlotsPerBucket = 2
	for _, cfg := range []PublisherConfig{
		{Identity: testIdentity(f, 1, 1), Source: newModelSource(8)},
		{Identity: testIdentity(f, 1, 1), Sink: &recorder{}},
		{Identity: bad, Sink: &recorder{}, Source: newModelSource(8)},
	} {
		if _, err := NewPublisher(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("NewPublisher(%+v) = %v, want ErrBadConfig", cfg, err)
		}
	}
	if _, err := NewFanoutPublisher(FanoutConfig{PublisherConfig: PublisherConfig{Identity: testIdentity(f, 1, 1), Sink: &recorder{}, Source: newModelSource(8)}}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("NewFanoutPublisher without a snapshot store = %v, want ErrBadConfig", err)
	}
}

type fanoutFixture struct {
	src        *modelSource
	log, store *recorder
	p          *FanoutPublisher
	id         ProducerIdentity
	rng        *rand.Rand
}

func newFanoutFixture(t *testing.T, n uint64, start uint64, chunk int) *fanoutFixture {
	t.Helper()
	fx := &fanoutFixture{src: newModelSource(n), log: &recorder{}, store: &recorder{}, id: testIdentity(testFormat(t, n), 1, 1), rng: testRand(t, 6)}
	var err error
	fx.p, err = NewFanoutPublisher(FanoutConfig{
		PublisherConfig: PublisherConfig{Identity: fx.id, StartSequence: start, Sink: fx.log, Source: fx.src},
		Snapshots:       fx.store, ChunkWords: chunk,
	})
	if err != nil {
		t.Fatalf("NewFanoutPublisher: %v", err)
	}
	return fx
}

func (fx *fanoutFixture) event() (bool, error) {
	fx.src.set(uint32(fx.rng.IntN(len(fx.src.words))), randomWord(fx.rng)|1)
	return fx.p.Publish(fx.src.Drain(nil))
}

func TestFanoutPublisher_PublishesWithoutLeaseAndSnapshotsAfterTheTail(t *testing.T) {
	fx := newFanoutFixture(t, 16, 0, 5)
	if sent, err := fx.event(); !sent || err != nil {
		t.Fatalf("fan-out Publish = %v, %v", sent, err)
	}
	fx.src.set(2, 0x20002) // pending tail
	s, err := fx.p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ds := fx.log.deltas()
	if len(ds) != 2 || !ds[0].Lease.IsZero() || ds[1].Base != 1 || ds[1].Sequence != 2 {
		t.Errorf("log holds %+v, want deltas 0→1 and the tail 1→2, unleased", ds)
	}
	if s.Sequence != 2 || !s.Lease.IsZero() || !slices.Equal(s.Words, fx.src.words) {
		t.Errorf("Snapshot() = N %d, lease %v; want N=2, unleased, the producer's words", s.Sequence, s.Lease)
	}
	if len(fx.store.msgs) != 4 { // 16 words in chunks of 5
		t.Fatalf("store holds %d chunks, want 4", len(fx.store.msgs))
	}
	var got []uint64
	for i, m := range fx.store.msgs {
		c := m.(*Snapshot)
		if c.Sequence != 2 || c.Total != 16 || c.Offset != uint64(5*i) {
			t.Errorf("chunk %d = N %d total %d offset %d", i, c.Sequence, c.Total, c.Offset)
		}
		got = append(got, c.Words...)
	}
	if !slices.Equal(got, s.Words) {
		t.Errorf("stored chunks do not reassemble the snapshot")
	}
	if h, m := fx.p.Heartbeat(), fx.p.DrainMarker(); h.Sequence != 2 || m.Expected != 2 || !h.Lease.IsZero() {
		t.Errorf("Heartbeat %+v, DrainMarker %+v; want sequence 2, unleased", h, m)
	}
}

// TestFanoutPublisher_UncertainDeliveryBurnsTwoSequences shows why the
// snapshot after a failed send skips two sequences: a live lane that did
// receive the uncertain delta must not take the next delta as a
// continuation (it lacks the absorbed tail); it must fault and re-subscribe.
func TestFanoutPublisher_UncertainDeliveryBurnsTwoSequences(t *testing.T) {
	fx := newFanoutFixture(t, 8, 10, 0)
	c, tbl, _ := newTestConsumer(t, 1, 8, ConsumerConfig{})
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
	deliver := func(m Message) Outcome { // the subscription stamps its lease
		m = cloneMessage(m)
		switch m := m.(type) {
		case *Snapshot:
			m.Lease = sub
		case *Delta:
			m.Lease = sub
		}
		return handleOn(l, m)
	}
	if o := deliver(s0); o != Installed {
		t.Fatalf("stored snapshot: %v", o)
	}
	// The send "fails" but the delta did reach this lane (a lost ack).
	var uncertain Message
	fx.log.fail = func(m Message) bool { uncertain = cloneMessage(m); return true }
	if _, err := fx.event(); !errors.Is(err, ErrDeliveryUncertain) {
		t.Fatalf("Publish with a lost ack = %v", err)
	}
	fx.log.fail = nil
	if o := deliver(uncertain); o != Applied {
		t.Fatalf("uncertain delta on the live lane: %v", o)
	}
	if _, err := fx.event(); !errors.Is(err, ErrFenced) {
		t.Errorf("Publish before a new snapshot = %v, want ErrFenced", err)
	}
	s1, err := fx.p.Snapshot() // absorbs the tail of the refused event
	if err != nil {
		t.Fatal(err)
	}
	if s1.Sequence != 12 {
		t.Errorf("snapshot after the uncertain delta 10→11 = N %d, want 12", s1.Sequence)
	}
	if _, err := fx.event(); err != nil {
		t.Fatal(err)
	}
	next := fx.log.deltas()[0]
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
	if deliver(s1) != Installed || deliver(next) != Applied || !slices.Equal(tbl.words[0], fx.src.words) {
		t.Errorf("after re-subscribing the lane does not equal the producer")
	}
}

func TestFanoutPublisher_StoreFailureKeepsTheFence(t *testing.T) {
	fx := newFanoutFixture(t, 8, 0, 0)
	fx.store.fail = func(Message) bool { return true }
	if _, err := fx.p.Snapshot(); !errors.Is(err, ErrDeliveryUncertain) {
		t.Errorf("Snapshot with a failing store = %v, want ErrDeliveryUncertain", err)
	}
	if _, err := fx.event(); !errors.Is(err, ErrFenced) {
		t.Errorf("Publish after a failed store = %v, want ErrFenced", err)
	}
	fx.store.fail = nil
	s, err := fx.p.Snapshot()
	if err != nil || s.Sequence != 2 {
		t.Errorf("Snapshot after the store recovers = %v, N %d; want N=2 (two sequences burned)", err, s.Sequence)
	}
	if sent, err := fx.event(); !sent || err != nil {
		t.Errorf("Publish after a stored snapshot = %v, %v", sent, err)
	}
}

func TestFanoutPublisher_RefusesWhenTheBurnWouldOverflow(t *testing.T) {
	fx := newFanoutFixture(t, 8, math.MaxUint64-2, 0)
	fx.log.fail = func(Message) bool { return true }
	if _, err := fx.event(); !errors.Is(err, ErrDeliveryUncertain) {
		t.Fatal(err)
	}
	fx.log.fail = nil
	if s, err := fx.p.Snapshot(); err != nil || s.Sequence != math.MaxUint64 {
		t.Errorf("Snapshot at u64max−2 after a failure = %v; want N=u64max", err)
	}
	if _, err := fx.p.Snapshot(); !errors.Is(err, ErrSequenceExhausted) {
		t.Errorf("Snapshot at u64max = %v, want ErrSequenceExhausted", err)
	}
	fx2 := newFanoutFixture(t, 8, math.MaxUint64-1, 0)
	fx2.log.fail = func(Message) bool { return true }
	if _, err := fx2.event(); !errors.Is(err, ErrDeliveryUncertain) {
		t.Fatal(err)
	}
	if _, err := fx2.p.Snapshot(); !errors.Is(err, ErrSequenceExhausted) || len(fx2.store.msgs) != 0 {
		t.Errorf("Snapshot at u64max−1 after a failure = %v, stored %d; want ErrSequenceExhausted, nothing stored", err, len(fx2.store.msgs))
	}
}
