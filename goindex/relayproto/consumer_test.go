package relayproto

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
)

func TestManifest_Validation(t *testing.T) {
	f := testFormat(t, 8)
	pool := func(dc DCID) PoolID { return PoolID{Domain: testDomain, DC: dc} }
	many := make([]PoolID, MaxLanes+1)
	for i := range many {
		many[i] = pool(DCID(i))
	}
	badFormat := f
	badFormat.Version = 2
	for _, tc := range []struct {
		name string
		m    Manifest
		want error
	}{
		{"no lanes", Manifest{Domain: testDomain, Format: f}, ErrBadManifest},
		{"65 lanes", Manifest{Domain: testDomain, Format: f, Lanes: many}, ErrBadManifest},
		{"duplicate owner", Manifest{Domain: testDomain, Format: f, Lanes: []PoolID{pool(1), pool(2), pool(1)}}, ErrBadManifest},
		{"owner outside the domain", Manifest{Domain: testDomain, Format: f, Lanes: []PoolID{pool(1), {Domain: testDomain + 1, DC: 2}}}, ErrBadManifest},
		{"bad format", Manifest{Domain: testDomain, Format: badFormat, Lanes: []PoolID{pool(1)}}, ErrBadFormat},
	} {
		if err := tc.m.Validate(); !errors.Is(err, tc.want) {
			t.Errorf("Validate(%s) = %v, want %v", tc.name, err, tc.want)
		}
	}
	ok := Manifest{Domain: testDomain, Format: f, Lanes: many[:MaxLanes]}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(64 lanes) = %v", err)
	}
}

func TestFormat_Validation(t *testing.T) {
	for _, n := range []uint64{0, 1, 3, 12, 1<<24 + 1, 1 << 25} {
		if _, err := NewFormat(1, n); !errors.Is(err, ErrBadFormat) {
			t.Errorf("NewFormat(n=%d) = %v, want ErrBadFormat", n, err)
		}
	}
	for _, n := range []uint64{2, 8, 1 << 24} {
		if _, err := NewFormat(1, n); err != nil {
			t.Errorf("NewFormat(n=%d) = %v", n, err)
		}
	}
	cf, err := ckf.NewFormat(ckf.DefaultSeed, 1024)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := NewFormat(ckf.DefaultSeed, 1024)
	if got := FormatOf(cf); got != want {
		t.Errorf("FormatOf(ckf n=1024) = %+v, want %+v", got, want)
	}
	for _, bad := range []Format{{Version: 1, Buckets: 8, FingerprintBits: 8, SlotsPerBucket: 4}, {Version: 1, Buckets: 8, FingerprintBits: 16, SlotsPerBucket: 2}} {
		if err := bad.Validate(); !errors.Is(err, ErrBadFormat) {
			t.Errorf("Validate(%+v) = %v, want ErrBadFormat", bad, err)
		}
	}
}

func TestConsumer_NewChecksTheTable(t *testing.T) {
	f := testFormat(t, 8)
	m := Manifest{ConsumerInstance: 1, Domain: testDomain, Format: f, Lanes: []PoolID{{Domain: testDomain, DC: 1}, {Domain: testDomain, DC: 2}}}
	for _, tbl := range []*memTable{newMemTable(1, 8), newMemTable(2, 16)} {
		if _, err := NewConsumer(m, tbl, ConsumerConfig{}); !errors.Is(err, ErrBadConfig) {
			t.Errorf("NewConsumer over %d lanes × %d buckets = %v, want ErrBadConfig", tbl.Lanes(), tbl.n, err)
		}
	}
	if _, err := NewConsumer(Manifest{Domain: testDomain, Format: f}, newMemTable(2, 8), ConsumerConfig{}); !errors.Is(err, ErrBadManifest) {
		t.Errorf("NewConsumer(no lanes) = %v, want ErrBadManifest", err)
	}
	tbl := newMemTable(3, 8)
	tbl.ready.Store(0b111)
	c, err := NewConsumer(m, tbl, ConsumerConfig{})
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
	if i, ok := c.LaneOf(PoolID{Domain: testDomain, DC: 2}); !ok || i != 1 {
		t.Errorf("LaneOf(dc 2) = %d, %v; want 1", i, ok)
	}
	if c.Lanes() != 2 {
		t.Errorf("Lanes() = %d, want 2", c.Lanes())
	}
}

func TestConsumer_RoutesByLeaseAndLoadReportsByPool(t *testing.T) {
	c, _, f := newTestConsumer(t, 3, 8, ConsumerConfig{})
	ids := make([]ProducerIdentity, 3)
	leases := make([]Lease, 3)
	for i := range ids {
		ids[i] = testIdentity(f, DCID(i+1), 1)
		leases[i] = readyLane(t, c, i, ids[i], make([]uint64, 8), 0)
	}
	d := &Delta{Identity: ids[2], Lease: leases[2], Base: 0, Sequence: 1, Images: []Image{{Bucket: 1, Word: 1}}}
	if i, ok := c.Route(d); !ok || i != 2 {
		t.Errorf("Route(delta under lane 2's lease) = %d, %v", i, ok)
	}
	if o, err := c.Handle(d); o != Applied || err != nil {
		t.Errorf("Handle(lane 2 delta) = %v, %v", o, err)
	}
	for _, l := range []Lease{{ConsumerInstance: 41, Lane: 2, Epoch: 1}, {ConsumerInstance: 42, Lane: 5, Epoch: 1}, {}} {
		m := &Heartbeat{Identity: ids[0], Lease: l}
		if _, ok := c.Route(m); ok {
			t.Errorf("Route(heartbeat under %v) routed it", l)
		}
		if o, err := c.Handle(m); o != ForeignLease || err != nil {
			t.Errorf("Handle(heartbeat under %v) = %v, %v; want ForeignLease", l, o, err)
		}
	}
	r := &LoadReport{Identity: ids[1], TimestampUnixNano: 5, QueuedPrefillTokens: 10}
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
	rng := testRand(t, 21)
	c, tbl, f := newTestConsumer(t, 3, 16, ConsumerConfig{OrderedHeartbeats: true})
	ids := make([]ProducerIdentity, 3)
	leases := make([]Lease, 3)
	for i := range ids {
		ids[i] = testIdentity(f, DCID(i+1), 1)
	}
	restarted := ids[1]
	restarted.Incarnation++
	bad := []func(l Lease) Message{
		func(l Lease) Message {
			return &Delta{Identity: ids[1], Lease: l, Base: 3, Sequence: 4, Images: []Image{{Bucket: 1}}}
		},
		func(l Lease) Message {
			return &Delta{Identity: ids[1], Lease: l, Base: 0, Sequence: 2, Images: []Image{{Bucket: 1}}}
		},
		func(l Lease) Message { return &Delta{Identity: ids[1], Lease: l, Base: 0, Sequence: 1} },
		func(l Lease) Message {
			return &Delta{Identity: ids[1], Lease: l, Base: 0, Sequence: 1, Images: []Image{{Bucket: 16}}}
		},
		func(l Lease) Message {
			return &Delta{Identity: ids[1], Lease: l, Base: 0, Sequence: 1, Images: []Image{{Bucket: 2}, {Bucket: 2}}}
		},
		func(l Lease) Message {
			return &Delta{Identity: restarted, Lease: l, Base: 0, Sequence: 1, Images: []Image{{Bucket: 1}}}
		},
		func(l Lease) Message { return &DrainMarker{Identity: ids[1], Lease: l, Expected: 3} },
		func(l Lease) Message { return &Heartbeat{Identity: ids[1], Lease: l, Sequence: 3} },
		func(l Lease) Message { return whole(ids[1], l, 5, make([]uint64, 16)) },
		func(l Lease) Message { return whole(ids[1], l, 5, make([]uint64, 15)) },
	}
	for i := range ids {
		leases[i] = readyLane(t, c, i, ids[i], wordsAtLoad(rng, 16, 0.6), 0)
	}
	for k, mk := range bad {
		leases[1] = readyLane(t, c, 1, ids[1], wordsAtLoad(rng, 16, 0.6), 0)
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
	c, tbl, f := newTestConsumer(t, 1, 8, ConsumerConfig{})
	id := testIdentity(f, 1, 1)
	lease := readyLane(t, c, 0, id, []uint64{1, 2, 3, 4, 5, 6, 7, 8}, 0)
	frame, err := AppendDelta(nil, &Delta{Identity: id, Lease: lease, Base: 0, Sequence: 1, Images: []Image{{Bucket: 0, Word: 9}}})
	if err != nil {
		t.Fatal(err)
	}
	frame[len(frame)-1] ^= 1
	st := c.Lane(0).Status()
	var fe *FrameError
	if _, rest, err := c.Apply(frame); !errors.As(err, &fe) || !errors.Is(err, ErrChecksum) || len(rest) != len(frame) {
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
	c, tbl, f := newTestConsumer(t, lanes, 64, ConsumerConfig{})
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	srcs := make([]*modelSource, lanes)
	var wg sync.WaitGroup
	for i := range lanes {
		srcs[i] = newModelSource(64)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := testRand(t, uint64(100+i))
			id := testIdentity(f, DCID(i+1), 1)
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
				srcs[i].mutate(rng, 4)
				images := srcs[i].Drain(nil)
				if len(images) == 0 {
					images = []Image{{Bucket: 0, Word: srcs[i].words[0]}}
				}
				if o, err := c.Handle(&Delta{Identity: id, Lease: lease, Base: seq, Sequence: seq + 1, Images: images}); o != Applied {
					t.Errorf("lane %d delta %d: %v %v", i, seq+1, o, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := range lanes {
		if !slices.Equal(tbl.words[i], srcs[i].words) || !tbl.isReady(i) {
			t.Errorf("lane %d did not converge under concurrent ingestion", i)
		}
	}
}
