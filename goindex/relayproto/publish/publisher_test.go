package publish

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/bucketgen"
	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
	"github.com/goindex/goindex/internal/testseed"
)

type pubFixture struct {
	src  *prototest.ModelSource
	sink *prototest.Recorder
	p    *Publisher
	id   relayproto.ProducerIdentity
	rng  *rand.Rand
}

func newPubFixture(t *testing.T, start uint64) *pubFixture {
	t.Helper()
	f := prototest.Format(t, 16)
	fx := &pubFixture{src: prototest.NewModelSource(16), sink: &prototest.Recorder{}, id: prototest.Identity(f, 1, 1), rng: testseed.Rand(t, 5)}
	var err error
	fx.p, err = New(Config{Identity: fx.id, StartSequence: start, Sink: fx.sink, Source: fx.src})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return fx
}

// event applies one producer event and publishes the boundary's batch.
func (fx *pubFixture) event(t *testing.T) (bool, error) {
	t.Helper()
	fx.src.Mutate(fx.rng, 1)
	batch := fx.src.Drain(nil)
	for len(batch) == 0 { // a net reversion published nothing; change something for real
		fx.src.Mutate(fx.rng, 1)
		batch = fx.src.Drain(nil)
	}
	return fx.p.Publish(batch)
}

func lease(epoch uint64) relayproto.Lease {
	return relayproto.Lease{ConsumerInstance: 42, Lane: 0, Epoch: epoch}
}

func TestPublisher_PinnedSnapshotAt7ThenOneEvent(t *testing.T) {
	fx := newPubFixture(t, 7)
	s, err := fx.p.SnapshotAfterBarrier(lease(1))
	if err != nil || s.Sequence != 7 || s.Lease != lease(1) || s.Total != 16 || len(fx.sink.Msgs) != 0 {
		t.Fatalf("SnapshotAfterBarrier(lease 1) = %+v, %v; want N=7 and nothing sent", s, err)
	}
	if sent, err := fx.event(t); !sent || err != nil {
		t.Fatalf("Publish after one event = %v, %v", sent, err)
	}
	ds := fx.sink.Deltas()
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
	fx.sink.Fail = func(relayproto.Message) bool { return true }
	sent, err := fx.event(t)
	if sent || !errors.Is(err, errDeliveryUncertain) || !errors.Is(err, prototest.ErrSinkDown) {
		t.Errorf("Publish with a failing sink = %v, %v; want errDeliveryUncertain wrapping the sink error", sent, err)
	}
	if st := fx.p.Status(); st.LastSequence != 9 || st.Fence != FenceDeliveryUncertain {
		t.Errorf("after the failure: lastSeq %d fence %v, want 9 and delivery-uncertain", st.LastSequence, st.Fence)
	}
	fx.sink.Fail = nil
	if _, err := fx.event(t); !errors.Is(err, errFenced) || !errors.Is(err, errDeliveryUncertain) {
		t.Errorf("Publish while fenced = %v, want errFenced + errDeliveryUncertain", err)
	}
	if len(fx.sink.Msgs) != 0 {
		t.Errorf("a fenced publisher sent %d messages", len(fx.sink.Msgs))
	}
	fx.src.Set(5, 0x50005) // a pending tail on the fenced stream
	s, err := fx.p.SnapshotAfterBarrier(lease(2))
	if err != nil || s.Sequence != 9 || s.Lease != lease(2) {
		t.Fatalf("SnapshotAfterBarrier(lease 2) = %+v, %v; want N=9 under lease 2", s, err)
	}
	if st := fx.p.Status(); st.Fence != FenceNone || st.Absorbed != 1 {
		t.Errorf("after the snapshot: fence %v, absorbed %d; want none and 1 (the fenced tail)", st.Fence, st.Absorbed)
	}
	if !slices.Equal(s.Words, fx.src.Words) {
		t.Errorf("the snapshot does not hold the producer's words (the refused batch or the absorbed tail is missing)")
	}
	if len(fx.sink.Msgs) != 0 {
		t.Errorf("the fenced stream's tail was sent")
	}
}

func TestPublisher_PinnedBarrierTailGoesOutUnderTheOldLease(t *testing.T) {
	fx := newPubFixture(t, 0)
	if _, err := fx.p.SnapshotAfterBarrier(lease(1)); err != nil {
		t.Fatal(err)
	}
	fx.src.Set(3, 0x0000000000010002) // one pending event, not yet drained
	s, err := fx.p.SnapshotAfterBarrier(lease(2))
	if err != nil {
		t.Fatal(err)
	}
	ds := fx.sink.Deltas()
	if len(ds) != 1 || ds[0].Base != 0 || ds[0].Sequence != 1 || ds[0].Lease != lease(1) ||
		!slices.Equal(ds[0].Images, []relayproto.Image{{Bucket: 3, Word: 0x0000000000010002}}) {
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
	if st := fx.p.Status(); st.LastSequence != 4 || st.Dropped != 3 || len(fx.sink.Msgs) != 0 {
		t.Errorf("after 3 lease-less batches: lastSeq %d dropped %d sent %d; want 4, 3, 0", st.LastSequence, st.Dropped, len(fx.sink.Msgs))
	}
	if sent, err := fx.p.Publish(nil); sent || err != nil {
		t.Errorf("Publish(empty) = %v, %v; want no batch", sent, err)
	}
	if _, err := fx.p.DrainMarker(); !errors.Is(err, errNoLease) {
		t.Errorf("DrainMarker without a lease = %v, want errNoLease", err)
	}
	if _, err := fx.p.Heartbeat(); !errors.Is(err, errNoLease) {
		t.Errorf("Heartbeat without a lease = %v, want errNoLease", err)
	}
	s, err := fx.p.SnapshotAfterBarrier(lease(1))
	if err != nil || s.Sequence != 4 || !slices.Equal(s.Words, fx.src.Words) {
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
	if d := fx.sink.Deltas(); len(d) != 1 || d[0].Sequence != math.MaxUint64 {
		t.Fatalf("sent %+v, want one delta to u64max", d)
	}
	sent, err := fx.event(t)
	if sent || !errors.Is(err, errSequenceExhausted) || !errors.Is(err, errFenced) {
		t.Errorf("Publish at u64max = %v, %v; want errFenced + errSequenceExhausted", sent, err)
	}
	if st := fx.p.Status(); st.LastSequence != math.MaxUint64 || st.Fence != FenceSequenceExhausted || len(fx.sink.Msgs) != 1 {
		t.Errorf("after exhaustion: lastSeq %d fence %v sent %d; want u64max, sequence-exhausted, 1", st.LastSequence, st.Fence, len(fx.sink.Msgs))
	}
	if _, err := fx.p.SnapshotAfterBarrier(lease(2)); !errors.Is(err, errSequenceExhausted) {
		t.Errorf("SnapshotAfterBarrier when exhausted = %v, want errSequenceExhausted", err)
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
	if _, err := fx.event(t); !errors.Is(err, errLeaseStalled) || !errors.Is(err, errFenced) {
		t.Errorf("Publish after RetireStalledLease = %v, want errFenced + errLeaseStalled", err)
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
	if _, err := fx.p.SnapshotAfterBarrier(relayproto.Lease{}); !errors.Is(err, errNoLease) {
		t.Errorf("SnapshotAfterBarrier(zero lease) = %v, want errNoLease", err)
	}
	if _, err := fx.p.SnapshotAfterBarrier(lease(5)); err != nil {
		t.Fatal(err)
	}
	fx.src.Set(0, 1)
	for _, l := range []relayproto.Lease{lease(5), lease(4)} {
		if _, err := fx.p.SnapshotAfterBarrier(l); !errors.Is(err, errStaleLease) {
			t.Errorf("SnapshotAfterBarrier(%v) after epoch 5 = %v, want errStaleLease", l, err)
		}
	}
	if len(fx.sink.Msgs) != 0 || fx.src.Pending() != 1 {
		t.Errorf("a refused barrier drained or sent the tail")
	}
	fx.p.RetireLease()
	if _, err := fx.p.SnapshotAfterBarrier(lease(5)); !errors.Is(err, errStaleLease) {
		t.Errorf("SnapshotAfterBarrier(epoch 5) after retiring epoch 5 = %v, want errStaleLease", err)
	}
	// Another consumer instance (a restarted consumer) may start at epoch 1.
	other := relayproto.Lease{ConsumerInstance: 43, Epoch: 1}
	if s, err := fx.p.SnapshotAfterBarrier(other); err != nil || s.Lease != other {
		t.Errorf("SnapshotAfterBarrier(%v) = %v", other, err)
	}
}

func TestPublisher_SplitsBatchesLargerThanAFrame(t *testing.T) {
	f := prototest.Format(t, 1<<20)
	sink := &prototest.Recorder{}
	p, err := New(Config{Identity: prototest.Identity(f, 1, 1), Sink: sink, Source: prototest.NewModelSource(1 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.SnapshotAfterBarrier(lease(1)); err != nil {
		t.Fatal(err)
	}
	images := make([]relayproto.Image, relayproto.MaxDeltaImages+5)
	for i := range images {
		images[i] = relayproto.Image{Bucket: uint32(i), Word: 1}
	}
	if sent, err := p.Publish(images); !sent || err != nil {
		t.Fatalf("Publish(%d images) = %v, %v", len(images), sent, err)
	}
	ds := sink.Deltas()
	if len(ds) != 2 || len(ds[0].Images) != relayproto.MaxDeltaImages || len(ds[1].Images) != 5 || ds[0].Sequence != 1 || ds[1].Base != 1 || ds[1].Sequence != 2 {
		t.Errorf("Publish(MaxDeltaImages+5) sent %d deltas, want 0→1 with %d images and 1→2 with 5", len(ds), relayproto.MaxDeltaImages)
	}
}

func TestPublisher_ConfigIsValidated(t *testing.T) {
	f := prototest.Format(t, 8)
	bad := prototest.Identity(f, 1, 1)
	bad.Format.SlotsPerBucket = 2
	for _, cfg := range []Config{
		{Identity: prototest.Identity(f, 1, 1), Source: prototest.NewModelSource(8)},
		{Identity: prototest.Identity(f, 1, 1), Sink: &prototest.Recorder{}},
		{Identity: bad, Sink: &prototest.Recorder{}, Source: prototest.NewModelSource(8)},
	} {
		if _, err := New(cfg); !errors.Is(err, errBadConfig) {
			t.Errorf("New(%+v) = %v, want errBadConfig", cfg, err)
		}
	}
	if _, err := NewFanout(FanoutConfig{Config: Config{Identity: prototest.Identity(f, 1, 1), Sink: &prototest.Recorder{}, Source: prototest.NewModelSource(8)}}); !errors.Is(err, errBadConfig) {
		t.Errorf("NewFanout without a snapshot store = %v, want errBadConfig", err)
	}
}

type fanoutFixture struct {
	src        *prototest.ModelSource
	log, store *prototest.Recorder
	p          *Fanout
	id         relayproto.ProducerIdentity
	rng        *rand.Rand
}

func newFanoutFixture(t *testing.T, n uint64, start uint64, chunk int) *fanoutFixture {
	t.Helper()
	fx := &fanoutFixture{src: prototest.NewModelSource(n), log: &prototest.Recorder{}, store: &prototest.Recorder{}, id: prototest.Identity(prototest.Format(t, n), 1, 1), rng: testseed.Rand(t, 6)}
	var err error
	fx.p, err = NewFanout(FanoutConfig{
		Config:    Config{Identity: fx.id, StartSequence: start, Sink: fx.log, Source: fx.src},
		Snapshots: fx.store, ChunkWords: chunk,
	})
	if err != nil {
		t.Fatalf("NewFanout: %v", err)
	}
	return fx
}

func (fx *fanoutFixture) event() (bool, error) {
	fx.src.Set(uint32(fx.rng.IntN(len(fx.src.Words))), bucketgen.Word(fx.rng)|1)
	return fx.p.Publish(fx.src.Drain(nil))
}

func TestFanoutPublisher_PublishesWithoutLeaseAndSnapshotsAfterTheTail(t *testing.T) {
	fx := newFanoutFixture(t, 16, 0, 5)
	if sent, err := fx.event(); !sent || err != nil {
		t.Fatalf("fan-out Publish = %v, %v", sent, err)
	}
	fx.src.Set(2, 0x20002) // pending tail
	s, err := fx.p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ds := fx.log.Deltas()
	if len(ds) != 2 || !ds[0].Lease.IsZero() || ds[1].Base != 1 || ds[1].Sequence != 2 {
		t.Errorf("log holds %+v, want deltas 0→1 and the tail 1→2, unleased", ds)
	}
	if s.Sequence != 2 || !s.Lease.IsZero() || !slices.Equal(s.Words, fx.src.Words) {
		t.Errorf("Snapshot() = N %d, lease %v; want N=2, unleased, the producer's words", s.Sequence, s.Lease)
	}
	if len(fx.store.Msgs) != 4 { // 16 words in chunks of 5
		t.Fatalf("store holds %d chunks, want 4", len(fx.store.Msgs))
	}
	var got []uint64
	for i, m := range fx.store.Msgs {
		c := m.(*relayproto.Snapshot)
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

func TestFanoutPublisher_StoreFailureKeepsTheFence(t *testing.T) {
	fx := newFanoutFixture(t, 8, 0, 0)
	fx.store.Fail = func(relayproto.Message) bool { return true }
	if _, err := fx.p.Snapshot(); !errors.Is(err, errDeliveryUncertain) {
		t.Errorf("Snapshot with a failing store = %v, want errDeliveryUncertain", err)
	}
	if _, err := fx.event(); !errors.Is(err, errFenced) {
		t.Errorf("Publish after a failed store = %v, want errFenced", err)
	}
	fx.store.Fail = nil
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
	fx.log.Fail = func(relayproto.Message) bool { return true }
	if _, err := fx.event(); !errors.Is(err, errDeliveryUncertain) {
		t.Fatal(err)
	}
	fx.log.Fail = nil
	if s, err := fx.p.Snapshot(); err != nil || s.Sequence != math.MaxUint64 {
		t.Errorf("Snapshot at u64max−2 after a failure = %v; want N=u64max", err)
	}
	if _, err := fx.p.Snapshot(); !errors.Is(err, errSequenceExhausted) {
		t.Errorf("Snapshot at u64max = %v, want errSequenceExhausted", err)
	}
	fx2 := newFanoutFixture(t, 8, math.MaxUint64-1, 0)
	fx2.log.Fail = func(relayproto.Message) bool { return true }
	if _, err := fx2.event(); !errors.Is(err, errDeliveryUncertain) {
		t.Fatal(err)
	}
	if _, err := fx2.p.Snapshot(); !errors.Is(err, errSequenceExhausted) || len(fx2.store.Msgs) != 0 {
		t.Errorf("Snapshot at u64max−1 after a failure = %v, stored %d; want errSequenceExhausted, nothing stored", err, len(fx2.store.Msgs))
	}
}
