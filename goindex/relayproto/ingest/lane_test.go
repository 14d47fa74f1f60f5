package ingest

import (
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
	"github.com/goindex/goindex/internal/testseed"
)

// laneFixture is a 2-lane consumer (n = 8) whose lane 0 is READY at
// sequence 5 with words 1..8 under lease epoch 1.
type laneFixture struct {
	c     *Consumer
	tbl   *memTable
	f     relayproto.Format
	id    relayproto.ProducerIdentity
	lease relayproto.Lease
	l     *Lane
}

func newLaneFixture(t *testing.T, cfg Config) *laneFixture {
	t.Helper()
	c, tbl, f := newTestConsumer(t, 2, 8, cfg)
	id := prototest.Identity(f, 1, 1)
	lease := readyLane(t, c, 0, id, []uint64{1, 2, 3, 4, 5, 6, 7, 8}, 5)
	return &laneFixture{c: c, tbl: tbl, f: f, id: id, lease: lease, l: c.Lane(0)}
}

func (fx *laneFixture) delta(base, seq uint64, images ...relayproto.Image) *relayproto.Delta {
	return &relayproto.Delta{Identity: fx.id, Lease: fx.lease, Base: base, Sequence: seq, Images: images}
}

// expectUnchanged checks that lane 0 kept its state, installed sequence,
// ready bit and words.
func (fx *laneFixture) expectUnchanged(t *testing.T, call string, before LaneStatus, words []uint64, ready bool) {
	t.Helper()
	after := fx.l.Status()
	if after.State != before.State || after.Installed != before.Installed || after.Lease != before.Lease || after.Disposition != before.Disposition {
		t.Errorf("%s changed the lane: %v@%d → %v@%d", call, before.State, before.Installed, after.State, after.Installed)
	}
	if got := fx.tbl.words[0]; !slices.Equal(got, words) {
		t.Errorf("%s changed words: %v, want %v", call, got, words)
	}
	if fx.tbl.isReady(0) != ready {
		t.Errorf("%s: ready bit %v, want %v", call, fx.tbl.isReady(0), ready)
	}
}

func (fx *laneFixture) expectFault(t *testing.T, call string, got, want Outcome) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", call, got, want)
	}
	st := fx.l.Status()
	if st.State != StateFaulted || st.Disposition.Outcome != want {
		t.Errorf("%s: state %v disposition %v, want FAULTED with %v", call, st.State, st.Disposition.Outcome, want)
	}
	if fx.tbl.isReady(0) {
		t.Errorf("%s: ready bit still set after the fault", call)
	}
}

func TestLane_Rule1_ForeignLeaseIsIgnoredInEveryState(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	words := fx.tbl.laneCopy(0)
	older := fx.lease
	older.Epoch--
	otherInstance := fx.lease
	otherInstance.ConsumerInstance++
	msgs := func(lease relayproto.Lease) []relayproto.Message {
		return []relayproto.Message{
			whole(fx.id, lease, 9, make([]uint64, 8)),
			&relayproto.Delta{Identity: fx.id, Lease: lease, Base: 5, Sequence: 6, Images: []relayproto.Image{{Bucket: 0, Word: 99}}},
			&relayproto.DrainMarker{Identity: fx.id, Lease: lease, Expected: 77},
			&relayproto.Heartbeat{Identity: fx.id, Lease: lease, Sequence: 77},
		}
	}
	check := func(state string, lease relayproto.Lease) {
		t.Helper()
		before, ready := fx.l.Status(), fx.tbl.isReady(0)
		words := fx.tbl.laneCopy(0)
		for _, m := range msgs(lease) {
			if o := handleOn(fx.l, m); o != ForeignLease {
				t.Errorf("%s lane: %v under %v = %v, want ForeignLease", state, m.Type(), lease, o)
			}
			fx.expectUnchanged(t, state+" "+m.Type().String(), before, words, ready)
		}
	}
	check("READY (older epoch)", older)
	check("READY (other consumer)", otherInstance)
	check("READY (no lease)", relayproto.Lease{})
	_ = words

	fx.l.Delta(fx.delta(7, 8, relayproto.Image{Bucket: 0, Word: 1})) // a gap faults the lane
	if fx.l.Status().State != StateFaulted {
		t.Fatalf("setup: gap did not fault the lane")
	}
	check("FAULTED (current lease)", fx.lease)

	if err := fx.l.Retire(); err != nil {
		t.Fatalf("Retire: %v", err)
	}
	check("IDLE (last lease)", fx.lease)

	fx.l.Release()
	check("UNCLAIMED (last lease)", fx.lease)
}

// handleOn dispatches m to lane l directly.
func handleOn(l *Lane, m relayproto.Message) Outcome {
	switch m := m.(type) {
	case *relayproto.Snapshot:
		return l.Snapshot(m)
	case *relayproto.Delta:
		return l.Delta(m)
	case *relayproto.DrainMarker:
		return l.DrainMarker(m)
	case *relayproto.Heartbeat:
		return l.Heartbeat(m)
	case *relayproto.LoadReport:
		return l.Load(m)
	}
	panic("unknown message")
}

func TestLane_Rule2_WrongIdentityFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  func(fx *laneFixture, id relayproto.ProducerIdentity) relayproto.Message
	}{
		{"snapshot", func(fx *laneFixture, id relayproto.ProducerIdentity) relayproto.Message {
			return whole(id, fx.lease, 9, make([]uint64, 8))
		}},
		{"delta", func(fx *laneFixture, id relayproto.ProducerIdentity) relayproto.Message {
			return &relayproto.Delta{Identity: id, Lease: fx.lease, Base: 5, Sequence: 6, Images: []relayproto.Image{{Bucket: 1, Word: 9}}}
		}},
		{"heartbeat", func(fx *laneFixture, id relayproto.ProducerIdentity) relayproto.Message {
			return &relayproto.Heartbeat{Identity: id, Lease: fx.lease, Sequence: 5}
		}},
		{"drain marker [EXT]", func(fx *laneFixture, id relayproto.ProducerIdentity) relayproto.Message {
			return &relayproto.DrainMarker{Identity: id, Lease: fx.lease, Expected: 5}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newLaneFixture(t, Config{})
			restarted := fx.id
			restarted.Incarnation++
			words := fx.tbl.laneCopy(0)
			fx.expectFault(t, tc.name+" from a new incarnation", handleOn(fx.l, tc.msg(fx, restarted)), WrongIdentity)
			if !slices.Equal(fx.tbl.words[0], words) {
				t.Errorf("%s from a new incarnation wrote words", tc.name)
			}
		})
	}
	t.Run("awaiting snapshot", func(t *testing.T) {
		fx := newLaneFixture(t, Config{})
		fx.lease = fx.l.NextLease()
		if err := fx.l.Assign(fx.id, fx.lease); err != nil {
			t.Fatalf("Assign: %v", err)
		}
		rebuilt := fx.id
		rebuilt.LayoutGeneration++
		o := fx.l.Snapshot(whole(rebuilt, fx.lease, 0, make([]uint64, 8)))
		fx.expectFault(t, "AWAITING Snapshot(new layout generation)", o, WrongIdentity)
	})
}

func TestLane_Rule3_StaleSnapshotIgnoredBeforePayloadValidation(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	before, words := fx.l.Status(), fx.tbl.laneCopy(0)
	for _, s := range []*relayproto.Snapshot{
		{Identity: fx.id, Lease: fx.lease, Sequence: 5, Words: make([]uint64, 8)},
		{Identity: fx.id, Lease: fx.lease, Sequence: 4, Words: make([]uint64, 3)}, // bad length too
		{Identity: fx.id, Lease: fx.lease, Sequence: 0, Total: 8},
	} {
		if o := fx.l.Snapshot(s); o != StaleOrDuplicate {
			t.Errorf("READY@5 Snapshot(N=%d, %d words) = %v, want StaleOrDuplicate", s.Sequence, len(s.Words), o)
		}
		fx.expectUnchanged(t, "stale snapshot", before, words, true)
	}
}

func TestLane_Rule4_BadSnapshotSizeRetriesWhileAwaitingAndFaultsWhenReady(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	fx.lease = fx.l.NextLease()
	if err := fx.l.Assign(fx.id, fx.lease); err != nil {
		t.Fatalf("Assign: %v", err)
	}
	for _, s := range []*relayproto.Snapshot{
		{Total: 7, Words: make([]uint64, 7)},
		{Total: 9, Words: make([]uint64, 9)},
		{Total: 9, Words: make([]uint64, 8)}, // n words, but a first chunk of 9
		{Total: 8},
		{Total: 8, Offset: 4, Words: make([]uint64, 4)}, // a chunk that does not continue an assembly
		{Total: 8, Offset: 8, Words: make([]uint64, 1)},
		{Total: 8, Offset: 6, Words: make([]uint64, 3)},
	} {
		s.Identity, s.Lease, s.Sequence = fx.id, fx.lease, 11
		if o := fx.l.Snapshot(s); o != RetrySnapshot {
			t.Errorf("AWAITING Snapshot(offset %d, %d words) = %v, want RetrySnapshot", s.Offset, len(s.Words), o)
		}
		if st := fx.l.Status(); st.State != StateAwaiting || fx.tbl.isReady(0) {
			t.Errorf("after a retry: state %v ready %v, want AWAITING and not ready", st.State, fx.tbl.isReady(0))
		}
	}
	// The same lease may retry.
	if o := fx.l.Snapshot(whole(fx.id, fx.lease, 11, make([]uint64, 8))); o != Installed {
		t.Errorf("retry Snapshot(N=11) = %v, want Installed", o)
	}
	o := fx.l.Snapshot(whole(fx.id, fx.lease, 12, make([]uint64, 3)))
	fx.expectFault(t, "READY@11 Snapshot(N=12, 3 words)", o, InvalidSnapshot)
}

func TestLane_Rule4_ChunkedSnapshotAssemblesInOrder(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	fx.lease = fx.l.NextLease()
	if err := fx.l.Assign(fx.id, fx.lease); err != nil {
		t.Fatalf("Assign: %v", err)
	}
	words := []uint64{10, 20, 30, 40, 50, 60, 70, 80}
	whole := whole(fx.id, fx.lease, 20, words)
	var chunks []*relayproto.Snapshot
	for c := range whole.Chunks(3) {
		chunks = append(chunks, c)
	}
	if len(chunks) != 3 || chunks[2].Offset != 6 || len(chunks[2].Words) != 2 {
		t.Fatalf("Chunks(3) of 8 words: %d chunks, want offsets 0,3,6", len(chunks))
	}
	// Out of order: the second chunk first is a retry; so is a chunk of
	// another sequence in the middle of an assembly.
	if o := fx.l.Snapshot(chunks[1]); o != RetrySnapshot {
		t.Errorf("chunk at 3 before chunk 0 = %v, want RetrySnapshot", o)
	}
	if o := fx.l.Snapshot(chunks[0]); o != ChunkStored {
		t.Errorf("chunk 0 = %v, want ChunkStored", o)
	}
	other := *chunks[1]
	other.Sequence = 21
	if o := fx.l.Snapshot(&other); o != RetrySnapshot {
		t.Errorf("chunk at 3 of N=21 during N=20 = %v, want RetrySnapshot", o)
	}
	for i, c := range chunks {
		want := ChunkStored
		if i == len(chunks)-1 {
			want = Installed
		}
		if o := fx.l.Snapshot(c); o != want {
			t.Errorf("chunk %d (offset %d) = %v, want %v", i, c.Offset, o, want)
		}
		if ready := fx.tbl.isReady(0); ready != (want == Installed) {
			t.Errorf("after chunk %d the ready bit is %v", i, ready)
		}
	}
	if !slices.Equal(fx.tbl.words[0], words) || fx.l.Status().Installed != 20 {
		t.Errorf("after all chunks: words %v installed %d, want %v at 20", fx.tbl.words[0], fx.l.Status().Installed, words)
	}
}

func TestLane_Rule5_ForwardSnapshotOnLiveLeaseFaults(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	o := fx.l.Snapshot(whole(fx.id, fx.lease, 6, make([]uint64, 8)))
	fx.expectFault(t, "READY@5 Snapshot(N=6)", o, SnapshotWhileReady)
	if fx.tbl.words[0][0] != 1 {
		t.Errorf("a forward snapshot on a live lane wrote words")
	}
}

func TestLane_Rule6_SnapshotInstallsAllWordsThenSetsReady(t *testing.T) {
	c, tbl, f := newTestConsumer(t, 1, 8, Config{})
	l := c.Lane(0)
	id := prototest.Identity(f, 1, 1)
	if err := l.Claim(); err != nil {
		t.Fatal(err)
	}
	lease := l.NextLease()
	if err := l.Assign(id, lease); err != nil {
		t.Fatal(err)
	}
	if tbl.isReady(0) {
		t.Fatalf("ready before the snapshot")
	}
	words := []uint64{9, 0, 8, 0, 7, 0, 6, 0}
	if o := l.Snapshot(whole(id, lease, 0, words)); o != Installed {
		t.Errorf("AWAITING Snapshot(N=0) = %v, want Installed", o)
	}
	st := l.Status()
	if st.State != StateReady || st.Installed != 0 || !tbl.isReady(0) || !slices.Equal(tbl.words[0], words) {
		t.Errorf("after install: %v@%d ready=%v words=%v, want READY@0 with %v", st.State, st.Installed, tbl.isReady(0), tbl.words[0], words)
	}
}

func TestLane_Rule7_DeltaBeforeSnapshotIgnored(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	fx.lease = fx.l.NextLease()
	if err := fx.l.Assign(fx.id, fx.lease); err != nil {
		t.Fatal(err)
	}
	before, words := fx.l.Status(), fx.tbl.laneCopy(0)
	if o := fx.l.Delta(fx.delta(0, 1, relayproto.Image{Bucket: 0, Word: 5})); o != AwaitingSnapshot {
		t.Errorf("AWAITING Delta(0→1) = %v, want AwaitingSnapshot", o)
	}
	fx.expectUnchanged(t, "delta before snapshot", before, words, false)
}

func TestLane_Rule8_StaleOrDuplicateDeltaIgnored(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	if o := fx.l.Delta(fx.delta(5, 6, relayproto.Image{Bucket: 2, Word: 33})); o != Applied {
		t.Fatalf("Delta(5→6) = %v, want Applied", o)
	}
	before, words := fx.l.Status(), fx.tbl.laneCopy(0)
	writes := fx.tbl.writes[0]
	for _, d := range []*relayproto.Delta{
		fx.delta(5, 6, relayproto.Image{Bucket: 2, Word: 99}), // duplicate with other content
		fx.delta(3, 4, relayproto.Image{Bucket: 2, Word: 99}),
		fx.delta(6, 6, relayproto.Image{Bucket: 2, Word: 99}), // sequence ≤ installed wins over the base check
	} {
		if o := fx.l.Delta(d); o != StaleOrDuplicate {
			t.Errorf("READY@6 Delta(%d→%d) = %v, want StaleOrDuplicate", d.Base, d.Sequence, o)
		}
	}
	fx.expectUnchanged(t, "stale deltas", before, words, true)
	if fx.tbl.writes[0] != writes {
		t.Errorf("stale deltas wrote %d words", fx.tbl.writes[0]-writes)
	}
}

func TestLane_Rule9_GapFaultsWithoutWriting(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	words := fx.tbl.laneCopy(0)
	o := fx.l.Delta(fx.delta(6, 7, relayproto.Image{Bucket: 0, Word: 99}))
	fx.expectFault(t, "READY@5 Delta(6→7)", o, BaseSequenceMismatch)
	if !slices.Equal(fx.tbl.words[0], words) {
		t.Errorf("a gapped delta wrote words")
	}
	if d := fx.l.Status().Disposition; d.Installed != 5 || d.Sequence != 7 || d.Lease != fx.lease {
		t.Errorf("disposition = %+v, want installed 5, sequence 7, %v", d, fx.lease)
	}
}

func TestLane_Rule10_NonContiguousFaultsAndOverflowIsCaughtByRule8(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	o := fx.l.Delta(fx.delta(5, 7, relayproto.Image{Bucket: 0, Word: 99}))
	fx.expectFault(t, "READY@5 Delta(5→7)", o, NonContiguous)

	// A lane installed at u64max can take no delta: base+1 would overflow,
	// and rule 8 already ignores every sequence ≤ u64max.
	fx2 := newLaneFixture(t, Config{})
	fx2.lease = fx2.l.NextLease()
	if err := fx2.l.Assign(fx2.id, fx2.lease); err != nil {
		t.Fatal(err)
	}
	if o := fx2.l.Snapshot(whole(fx2.id, fx2.lease, math.MaxUint64, make([]uint64, 8))); o != Installed {
		t.Fatalf("Snapshot(N=u64max) = %v", o)
	}
	if o := fx2.l.Delta(fx2.delta(math.MaxUint64, 0, relayproto.Image{Bucket: 0, Word: 1})); o != StaleOrDuplicate {
		t.Errorf("READY@u64max Delta(u64max→0) = %v, want StaleOrDuplicate", o)
	}
	if st := fx2.l.Status(); st.State != StateReady {
		t.Errorf("lane at u64max: %v, want READY", st.State)
	}
}

func TestLane_Rule11_BadImagesFaultBeforeAnyWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		images []relayproto.Image
		want   Outcome
	}{
		{"empty", nil, EmptyDelta},
		{"index = n", []relayproto.Image{{Bucket: 0, Word: 1}, {Bucket: 8, Word: 1}}, InvalidIndex},
		{"index ≥ n after a duplicate", []relayproto.Image{{Bucket: 1, Word: 1}, {Bucket: 1, Word: 2}, {Bucket: 1 << 31, Word: 1}}, InvalidIndex},
		{"duplicate, ascending", []relayproto.Image{{Bucket: 1, Word: 1}, {Bucket: 1, Word: 2}}, DuplicateIndex},
		{"duplicate, unordered", []relayproto.Image{{Bucket: 5, Word: 1}, {Bucket: 2, Word: 1}, {Bucket: 5, Word: 2}}, DuplicateIndex},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newLaneFixture(t, Config{})
			words, writes := fx.tbl.laneCopy(0), fx.tbl.writes[0]
			o := fx.l.Delta(fx.delta(5, 6, tc.images...))
			fx.expectFault(t, "Delta("+tc.name+")", o, tc.want)
			if fx.tbl.writes[0] != writes || !slices.Equal(fx.tbl.words[0], words) {
				t.Errorf("Delta(%s) wrote %d words", tc.name, fx.tbl.writes[0]-writes)
			}
		})
	}
}

// TestLane_Rule11_ImageCheckMatchesMapReference cross-checks the ascending
// fast path and the sort fallback against a map-based reference.
func TestLane_Rule11_ImageCheckMatchesMapReference(t *testing.T) {
	rng := testseed.Rand(t, 11)
	c, _, _ := newTestConsumer(t, 1, 64, Config{})
	l := c.Lane(0)
	for i := range 20000 {
		images := make([]relayproto.Image, rng.IntN(12))
		for j := range images {
			images[j].Bucket = uint32(rng.IntN(70)) // some ≥ n = 64
		}
		if rng.IntN(2) == 0 {
			slices.SortFunc(images, func(a, b relayproto.Image) int { return int(a.Bucket) - int(b.Bucket) })
		}
		want := Applied
		seen := map[uint32]bool{}
		for _, im := range images {
			if im.Bucket >= 64 {
				want = InvalidIndex
				break
			}
		}
		if len(images) == 0 {
			want = EmptyDelta
		}
		if want == Applied {
			for _, im := range images {
				if seen[im.Bucket] {
					want = DuplicateIndex
				}
				seen[im.Bucket] = true
			}
		}
		if got := l.checkImages(images); got != want {
			t.Fatalf("case %d: checkImages(%v) = %v, want %v", i, images, got, want)
		}
	}
}

func TestLane_Rule12_DeltaStoresImagesAndAdvances(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	if o := fx.l.Delta(fx.delta(5, 6, relayproto.Image{Bucket: 7, Word: 70}, relayproto.Image{Bucket: 0, Word: 0}, relayproto.Image{Bucket: 3, Word: 30})); o != Applied {
		t.Errorf("Delta(5→6, unordered) = %v, want Applied", o)
	}
	want := []uint64{0, 2, 3, 30, 5, 6, 7, 70}
	if st := fx.l.Status(); st.Installed != 6 || !slices.Equal(fx.tbl.words[0], want) || !fx.tbl.isReady(0) {
		t.Errorf("after 5→6: installed %d words %v, want 6 and %v", st.Installed, fx.tbl.words[0], want)
	}
}

func TestLane_Rule13_DrainMarkerAcknowledgesOnlyAnExactReadyLane(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	if o := fx.l.DrainMarker(&relayproto.DrainMarker{Identity: fx.id, Lease: fx.lease, Expected: 5}); o != Acknowledged {
		t.Errorf("READY@5 DrainMarker(5) = %v, want Acknowledged", o)
	}
	o := fx.l.DrainMarker(&relayproto.DrainMarker{Identity: fx.id, Lease: fx.lease, Expected: 6})
	fx.expectFault(t, "READY@5 DrainMarker(6)", o, TerminalSequenceMismatch)

	fx = newLaneFixture(t, Config{})
	o = fx.l.DrainMarker(&relayproto.DrainMarker{Identity: fx.id, Lease: fx.lease, Expected: 4})
	fx.expectFault(t, "READY@5 DrainMarker(4)", o, TerminalSequenceMismatch)

	fx = newLaneFixture(t, Config{})
	fx.lease = fx.l.NextLease()
	if err := fx.l.Assign(fx.id, fx.lease); err != nil {
		t.Fatal(err)
	}
	o = fx.l.DrainMarker(&relayproto.DrainMarker{Identity: fx.id, Lease: fx.lease, Expected: 0})
	fx.expectFault(t, "AWAITING DrainMarker(0)", o, TerminalSequenceMismatch)
}

func TestLane_Rule14_HeartbeatAheadFaultsOnlyOnOrderedTransports(t *testing.T) {
	fx := newLaneFixture(t, Config{OrderedHeartbeats: true})
	for _, seq := range []uint64{5, 3} {
		if o := fx.l.Heartbeat(&relayproto.Heartbeat{Identity: fx.id, Lease: fx.lease, Sequence: seq}); o != HeartbeatSeen {
			t.Errorf("ordered READY@5 Heartbeat(%d) = %v, want HeartbeatSeen", seq, o)
		}
	}
	o := fx.l.Heartbeat(&relayproto.Heartbeat{Identity: fx.id, Lease: fx.lease, Sequence: 6})
	fx.expectFault(t, "ordered READY@5 Heartbeat(6)", o, DeltaLost)

	fx = newLaneFixture(t, Config{})
	if o := fx.l.Heartbeat(&relayproto.Heartbeat{Identity: fx.id, Lease: fx.lease, Sequence: 9}); o != HeartbeatSeen {
		t.Errorf("unordered READY@5 Heartbeat(9) = %v, want HeartbeatSeen", o)
	}
	st := fx.l.Status()
	if st.State != StateReady || st.Lag() != 4 {
		t.Errorf("unordered heartbeat: %v lag %d, want READY lag 4", st.State, st.Lag())
	}
}

func TestLane_AssignRefusalsChangeNothing(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	next := fx.l.NextLease()
	otherFormat := fx.id
	otherFormat.Format = prototest.Format(t, 16)
	foreignPool := fx.id
	foreignPool.Pool.DC = 2 // lane 1's owner
	otherDomain := fx.id
	otherDomain.Pool.Domain++
	wrongInstance, wrongLane, sameEpoch := next, next, fx.lease
	wrongInstance.ConsumerInstance++
	wrongLane.Lane = 1
	for _, tc := range []struct {
		name  string
		id    relayproto.ProducerIdentity
		lease relayproto.Lease
		want  error
	}{
		{"other consumer instance", fx.id, wrongInstance, errForeignLease},
		{"other lane", fx.id, wrongLane, errForeignLease},
		{"pool owning another lane", foreignPool, next, ErrForeignPool},
		{"pool in another domain", otherDomain, next, ErrForeignPool},
		{"other format", otherFormat, next, ErrWrongFormat},
		{"same epoch", fx.id, sameEpoch, ErrStaleEpoch},
		{"lower epoch", fx.id, relayproto.Lease{ConsumerInstance: 42, Epoch: 0}, ErrStaleEpoch},
	} {
		before, words := fx.l.Status(), fx.tbl.laneCopy(0)
		if err := fx.l.Assign(tc.id, tc.lease); !errors.Is(err, tc.want) {
			t.Errorf("Assign(%s) = %v, want %v", tc.name, err, tc.want)
		}
		fx.expectUnchanged(t, "Assign("+tc.name+")", before, words, true)
	}
	fx.l.Release()
	if err := fx.l.Assign(fx.id, fx.l.NextLease()); !errors.Is(err, errUnclaimed) {
		t.Errorf("Assign on an unclaimed lane = %v, want errUnclaimed", err)
	}
	if err := fx.l.Retire(); !errors.Is(err, errUnclaimed) {
		t.Errorf("Retire on an unclaimed lane = %v, want errUnclaimed", err)
	}
}

func TestLane_AssignClearsReadyAndAwaitsSnapshot(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	next := fx.l.NextLease()
	if err := fx.l.Assign(fx.id, next); err != nil {
		t.Fatalf("Assign(%v): %v", next, err)
	}
	st := fx.l.Status()
	if st.State != StateAwaiting || st.Installed != 0 || st.Lease != next || fx.tbl.isReady(0) {
		t.Errorf("after reassign: %v@%d %v ready=%v, want AWAITING@0 %v not ready", st.State, st.Installed, st.Lease, fx.tbl.isReady(0), next)
	}
}

func TestLane_EpochsIncreaseAcrossRetireAndRelease(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	if err := fx.l.Retire(); err != nil {
		t.Fatal(err)
	}
	if st := fx.l.Status(); st.State != StateIdle || fx.tbl.isReady(0) || !st.Lease.IsZero() {
		t.Errorf("after Retire: %v ready=%v lease %v, want IDLE, not ready, no lease", st.State, fx.tbl.isReady(0), st.Lease)
	}
	if err := fx.l.Assign(fx.id, fx.lease); !errors.Is(err, ErrStaleEpoch) {
		t.Errorf("re-Assign of epoch %d after Retire = %v, want ErrStaleEpoch", fx.lease.Epoch, err)
	}
	fx.l.Release()
	if err := fx.l.Claim(); err != nil {
		t.Fatal(err)
	}
	if err := fx.l.Assign(fx.id, fx.lease); !errors.Is(err, ErrStaleEpoch) {
		t.Errorf("re-Assign of epoch %d after Release = %v, want ErrStaleEpoch", fx.lease.Epoch, err)
	}
	next := fx.l.NextLease()
	if next.Epoch != fx.lease.Epoch+1 {
		t.Errorf("NextLease().Epoch = %d, want %d", next.Epoch, fx.lease.Epoch+1)
	}
	if err := fx.l.Assign(fx.id, next); err != nil {
		t.Errorf("Assign(epoch %d): %v", next.Epoch, err)
	}
}

func TestLane_StaleTrafficCannotRetireANewerState(t *testing.T) {
	fx := newLaneFixture(t, Config{OrderedHeartbeats: true})
	old := fx.lease
	fx.lease = readyLane(t, fx.c, 0, fx.id, []uint64{8, 7, 6, 5, 4, 3, 2, 1}, 9)
	before, words := fx.l.Status(), fx.tbl.laneCopy(0)
	restarted := fx.id
	restarted.Incarnation++
	for _, m := range []relayproto.Message{
		whole(fx.id, old, 100, make([]uint64, 8)),
		whole(restarted, old, 0, make([]uint64, 3)),
		&relayproto.Delta{Identity: fx.id, Lease: old, Base: 3, Sequence: 4, Images: []relayproto.Image{{Bucket: 99}}},
		&relayproto.Delta{Identity: fx.id, Lease: old, Base: 9, Sequence: 10, Images: []relayproto.Image{{Bucket: 1, Word: 1}}},
		&relayproto.DrainMarker{Identity: fx.id, Lease: old, Expected: 1},
		&relayproto.Heartbeat{Identity: fx.id, Lease: old, Sequence: 1 << 40},
	} {
		if o := handleOn(fx.l, m); o != ForeignLease {
			t.Errorf("old-lease %v = %v, want ForeignLease", m.Type(), o)
		}
	}
	fx.expectUnchanged(t, "old-lease replay", before, words, true)
}

func TestLane_OneIngestorPerLane(t *testing.T) {
	c, _, _ := newTestConsumer(t, 1, 8, Config{})
	l := c.Lane(0)
	var wins, losses int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := l.Claim()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, errClaimed):
				losses++
			default:
				t.Errorf("Claim() = %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || losses != 15 {
		t.Errorf("16 racing Claims: %d won, %d got errClaimed; want 1 and 15", wins, losses)
	}
	l.Release()
	if err := l.Claim(); err != nil {
		t.Errorf("Claim after Release = %v", err)
	}
}

func TestLane_LoadReportsFollowTheAssignedIdentity(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	r := &relayproto.LoadReport{Identity: fx.id, Sequence: 9, TimestampUnixNano: 100, QueuedPrefillTokens: 512}
	if o := fx.l.Load(r); o != LoadRecorded {
		t.Errorf("Load(current identity) = %v, want LoadRecorded", o)
	}
	older := *r
	older.TimestampUnixNano = 99
	if o := fx.l.Load(&older); o != StaleOrDuplicate {
		t.Errorf("Load(older) = %v, want StaleOrDuplicate", o)
	}
	if o := fx.l.Load(r); o != StaleOrDuplicate {
		t.Errorf("Load(repeat) = %v, want StaleOrDuplicate", o)
	}
	restarted := *r
	restarted.Identity.Incarnation++
	if o := fx.l.Load(&restarted); o != ForeignIdentity {
		t.Errorf("Load(new incarnation) = %v, want ForeignIdentity", o)
	}
	// The same sample in the counted layout replaces the kept one; the
	// uncounted layout arriving after it does not take the counter away.
	counted := *r
	counted.StoredBlocks = 77
	if o := fx.l.Load(&counted); o != LoadRecorded {
		t.Errorf("Load(same sample, StoredBlocks 77) = %v, want LoadRecorded", o)
	}
	if o := fx.l.Load(r); o != StaleOrDuplicate {
		t.Errorf("Load(same sample without the counter, after it) = %v, want StaleOrDuplicate", o)
	}
	r = &counted
	got, ok := fx.l.LastLoad()
	if !ok || got != *r {
		t.Errorf("LastLoad() = %+v, %v; want %+v", got, ok, *r)
	}
	if st := fx.l.Status(); st.State != StateReady || st.Lag() != 4 {
		t.Errorf("after load reports: %v lag %d, want READY lag 4", st.State, st.Lag())
	}
}

func TestLane_TableRefusalIsAnIngestFailure(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	fx.tbl.refuse = true
	o := fx.l.Delta(fx.delta(5, 6, relayproto.Image{Bucket: 1, Word: 9}))
	fx.expectFault(t, "Delta into a refusing table", o, IngestFailure)
	if d := fx.l.Status().Disposition; d.Detail != errTableRefused.Error() || d.Installed != 5 {
		t.Errorf("disposition = %+v, want the table's error at installed 5", d)
	}
}
