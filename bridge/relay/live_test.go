package relay

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
)

// testScope is testConfig's pool's endpoint scope.
var testScope = dynamo.Scope{Namespace: "dynamo", Component: "backend", Endpoint: dynamo.DefaultEndpoint}

// msgFeed delivers the Messages sent on it, as a feed would.
type msgFeed struct{ msgs chan Message }

func newMsgFeed() *msgFeed { return &msgFeed{msgs: make(chan Message, 64)} }

func (f *msgFeed) String() string { return "test messages" }

func (f *msgFeed) Run(ctx context.Context, deliver func(Message) bool) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-f.msgs:
			if !deliver(m) {
				return nil
			}
		}
	}
}

// planeMsg is envelope env (on topic, the bare frame-0 topic of direct
// mode) as a ZMQ event-plane message of src.
func planeMsg(t testing.TB, src *Source, topic string, env []byte) Message {
	t.Helper()
	e, err := dynamo.DecodeEnvelope(env)
	if err != nil {
		t.Fatalf("DecodeEnvelope: %v", err)
	}
	framed := append(binary.BigEndian.AppendUint32([]byte{1}, uint32(len(env))), env...)
	return Message{Kind: KindPlane, Source: src, Frames: [][]byte{[]byte(topic),
		binary.BigEndian.AppendUint64(nil, e.PublisherID), binary.BigEndian.AppendUint64(nil, e.Sequence), framed}}
}

// activeLoadEnvelope is a kv_metrics envelope of publisher pub carrying
// worker w's own ActiveLoad sample (kv_used_blocks set, as workers send
// it): a named msgpack map, rmp-serde's encoding.
func activeLoadEnvelope(w, pub, kvUsed uint64) []byte {
	u64 := func(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(append(b, 0xcf), v) }
	p := []byte{0x82, 0xa9}
	p = u64(append(p, "worker_id"...), w)
	p = u64(append(append(p, 0xae), "kv_used_blocks"...), kvUsed)
	return dynamo.AppendEnvelope(nil, &dynamo.Envelope{Topic: dynamo.MetricsTopic, PublisherID: pub, PublishedAtMs: 1, Payload: p})
}

// settle delivers a message of one frame and waits until the
// pool counted it: the pool takes a feed's messages in order, so every
// message sent before has been handled.
func settle(t testing.TB, r *Relay, f *msgFeed) {
	t.Helper()
	// The marker is counted as a bad frame: watching Messages instead
	// would return as soon as the first of the earlier messages was taken.
	before := poolStatus(t, r).Intake.BadFrames
	f.msgs <- Message{Kind: KindPlane, Frames: [][]byte{[]byte("not a plane message")}, Source: &Source{Name: "settle"}}
	relaytest.CheckFor(t, 10*time.Second, 2*time.Millisecond, func() error {
		if got := poolStatus(t, r).Intake.BadFrames; got <= before {
			return fmt.Errorf("bad frames = %d, want > %d", got, before)
		}
		return nil
	})
}

// reportQuietFor waits for a load report made windows live windows after
// now, when every worker has been silent that long, and returns it.
func reportQuietFor(t *testing.T, r *Relay, cfg Config, windows int) PoolLoad {
	t.Helper()
	at := time.Now().Add(time.Duration(windows) * cfg.LiveWindow)
	var pl PoolLoad
	relaytest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		var ok bool
		if pl, ok = r.Load(1); !ok || time.Unix(0, int64(pl.Report.TimestampUnixNano)).Before(at) {
			return fmt.Errorf("no load report %d live windows on yet", windows)
		}
		return nil
	})
	return pl
}

// liveConfig is testConfig with a 50 ms live window, a configured
// per-worker capacity and f as the pool's feed.
func liveConfig(t *testing.T, f *msgFeed) Config {
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	cfg.LiveWindow, cfg.WorkerCapacityBlocks = 50*time.Millisecond, 100
	cfg.Pools[0].Feeds = []Feed{f}
	return cfg
}

// wantLive checks a report's live workers and their capacity (the
// configured 100 each unless a sample said otherwise).
func wantLive(t *testing.T, when string, pl PoolLoad, live uint32) {
	t.Helper()
	if pl.Report.LiveWorkers != live || pl.Report.CapacityBlocks != 100*uint64(live) {
		t.Errorf("%s: load report counts %d live workers with capacity %d; want %d and %d",
			when, pl.Report.LiveWorkers, pl.Report.CapacityBlocks, live, 100*live)
	}
}

// TestRelay_IdleWorkerStaysLiveWhileItsPublisherIsPresent is the idle
// worker a router should send work to: worker 1 stores a block through
// its kv-events publisher and sends one ActiveLoad through its kv_metrics
// publisher (two ZMQ sources whose departure is reported), then says
// nothing, as Dynamo's debounced load does while nothing changes. It used
// to leave the load reports once the live window passed, so an idle DC
// looked like one without capacity; it now counts, 20 windows on, until
// both of its publishers are gone. Worker 2, fed by a source whose
// departure nobody reports (a fixed publisher without expiry), still
// leaves after the window.
func TestRelay_IdleWorkerStaysLiveWhileItsPublisherIsPresent(t *testing.T) {
	f := newMsgFeed()
	cfg := liveConfig(t, f)
	run := startRelay(t, cfg)
	events := &Source{Scope: testScope, PublisherID: 0x11, ReportsGone: true, Name: "worker 1 kv-events"}
	metrics := &Source{Scope: testScope, PublisherID: 0x12, ReportsGone: true, Name: "worker 1 kv_metrics"}
	fixed := &Source{Scope: testScope, Restarts: true, Name: "worker 2, no expiry"}
	f.msgs <- planeMsg(t, events, dynamo.EventTopic, storeEnvelope(t, 1, 0x11, 1, kv.Stored, 0x101))
	f.msgs <- planeMsg(t, metrics, dynamo.MetricsTopic, activeLoadEnvelope(1, 0x12, 7))
	f.msgs <- planeMsg(t, fixed, dynamo.EventTopic, storeEnvelope(t, 2, 0x21, 1, kv.Stored, 0x201))
	settle(t, run.r, f)
	if st := poolStatus(t, run.r); st.Intake.Events != 2 || st.Intake.LoadSamples != 1 {
		t.Fatalf("intake %+v, want 2 events and 1 load sample", st.Intake)
	}
	pl := reportQuietFor(t, run.r, cfg, 20)
	wantLive(t, "20 windows of silence, worker 1's publishers present", pl, 1)
	if pl.Report.ActiveDecodeBlocks != 7 || pl.Coverage.Sampled != 1 {
		t.Errorf("held worker's load: active %d, sampled %d; want its last sample's 7 and 1", pl.Report.ActiveDecodeBlocks, pl.Coverage.Sampled)
	}
	// Its kv-events publisher goes: the kv_metrics one still holds it.
	f.msgs <- Message{Kind: KindGone, Source: events}
	settle(t, run.r, f)
	wantLive(t, "after the kv-events publisher's KindGone", reportQuietFor(t, run.r, cfg, 20), 1)
	// Both gone: its last message is long past the window, so it leaves.
	f.msgs <- Message{Kind: KindGone, Source: metrics}
	settle(t, run.r, f)
	wantLive(t, "after both publishers' KindGone", reportQuietFor(t, run.r, cfg, 2), 0)
}

// TestRelay_WorkerPresentHoldsUntilWorkerGone is broker mode with
// discovery: worker 7's instance record appears (KindWorkerPresent) and
// the worker never sends a thing; it counts, with the configured capacity
// and no sample, until its record goes (KindWorkerGone).
func TestRelay_WorkerPresentHoldsUntilWorkerGone(t *testing.T) {
	f := newMsgFeed()
	cfg := liveConfig(t, f)
	run := startRelay(t, cfg)
	f.msgs <- Message{Kind: KindWorkerPresent, Worker: 7, Source: &Source{Scope: testScope, Name: "worker 7"}}
	settle(t, run.r, f)
	pl := reportQuietFor(t, run.r, cfg, 20)
	wantLive(t, "20 windows after worker 7's record appeared", pl, 1)
	if pl.Coverage.Sampled != 0 {
		t.Errorf("Coverage.Sampled = %d, want 0 (worker 7 sent no sample)", pl.Coverage.Sampled)
	}
	f.msgs <- Message{Kind: KindWorkerGone, Worker: 7, Source: &Source{Scope: testScope, Name: "worker 7"}}
	settle(t, run.r, f)
	wantLive(t, "after worker 7's KindWorkerGone", reportQuietFor(t, run.r, cfg, 1), 0)
}

// TestRelay_KVSourceRecordHoldsItsIdleWorker is a relay started after
// worker 8's last event: its KV event source record (v1.4 on) is listed
// (KindWorkerPresent from a source that reports its going), and the
// worker, idle, never sends a thing; it counts until the record goes
// (KindGone of that source). The record's going clears nothing its
// publisher fed: worker 9's block, stored through its own publisher while
// its record was present, stays after its record goes.
func TestRelay_KVSourceRecordHoldsItsIdleWorker(t *testing.T) {
	f := newMsgFeed()
	cfg := liveConfig(t, f)
	run := startRelay(t, cfg)
	record8 := &Source{Scope: testScope, ReportsGone: true, Name: "kv source of worker 8"}
	record9 := &Source{Scope: testScope, ReportsGone: true, Name: "kv source of worker 9"}
	events9 := &Source{Scope: testScope, PublisherID: 0x91, ReportsGone: true, Name: "worker 9 kv-events"}
	f.msgs <- Message{Kind: KindWorkerPresent, Worker: 8, Source: record8}
	f.msgs <- Message{Kind: KindWorkerPresent, Worker: 9, Source: record9}
	f.msgs <- planeMsg(t, events9, dynamo.EventTopic, storeEnvelope(t, 9, 0x91, 1, kv.Stored, 0x901))
	settle(t, run.r, f)
	wantLive(t, "20 windows after the records of workers 8 and 9 were listed", reportQuietFor(t, run.r, cfg, 20), 2)
	f.msgs <- Message{Kind: KindGone, Source: record8}
	f.msgs <- Message{Kind: KindGone, Source: record9}
	settle(t, run.r, f)
	// Worker 9's publisher still holds it; worker 8 leaves.
	wantLive(t, "after both records' KindGone", reportQuietFor(t, run.r, cfg, 2), 1)
	if st := poolStatus(t, run.r); st.Producer.TrackedBlocks != 1 {
		t.Errorf("tracked blocks after the records' KindGone = %d, want worker 9's 1", st.Producer.TrackedBlocks)
	}
}

// TestRelay_FollowedNATSPublisherHoldsItsWorkers runs workers on the NATS
// event plane: publisher 0x31's record is followed (KindPresent, as a
// feed's followNATS delivers it), publisher 0x32's is not (plain NATS, no
// discovery). Each one's worker stores a block and goes quiet: worker 3
// counts until 0x31's KindGone, worker 4 leaves after the window.
func TestRelay_FollowedNATSPublisherHoldsItsWorkers(t *testing.T) {
	f := newMsgFeed()
	cfg := liveConfig(t, f)
	run := startRelay(t, cfg)
	followed := &Source{Scope: testScope, PublisherID: 0x31, NATS: true, ReportsGone: true, Name: "nats publisher 0x31"}
	f.msgs <- Message{Kind: KindPresent, Source: followed}
	settle(t, run.r, f)
	subject := testScope.Subject(dynamo.EventTopic)
	publishAndWait(t, cfg.Conn, run.r, subject, storeEnvelope(t, 3, 0x31, 1, kv.Stored, 0x301))
	publishAndWait(t, cfg.Conn, run.r, subject, storeEnvelope(t, 4, 0x32, 1, kv.Stored, 0x401))
	wantLive(t, "20 windows after both NATS workers' stores", reportQuietFor(t, run.r, cfg, 20), 1)
	f.msgs <- Message{Kind: KindGone, Source: followed}
	settle(t, run.r, f)
	pl := reportQuietFor(t, run.r, cfg, 2)
	wantLive(t, "after the followed NATS publisher's KindGone", pl, 0)
	if st := poolStatus(t, run.r); st.Producer.TrackedBlocks != 1 {
		t.Errorf("tracked blocks after 0x31's KindGone = %d, want worker 4's 1", st.Producer.TrackedBlocks)
	}
}

// TestLoad_HeldWorkersFallBackToTheWindowWhenTheirSourcesGo drives the
// tracker on a fake clock: holds by present sources, a router's sample
// that holds nothing, several sources of one worker, and the window
// counted from a worker's last message once its holder goes.
func TestLoad_HeldWorkersFallBackToTheWindowWhenTheirSourcesGo(t *testing.T) {
	lt := newLoadTracker(time.Second, false)
	now := time.Unix(1000, 0)
	events := &Source{ReportsGone: true, Name: "kv-events"}
	metrics := &Source{ReportsGone: true, Name: "kv_metrics"}
	router := &Source{ReportsGone: true, Name: "router"}
	unreported := &Source{Name: "brokers"}
	lt.sawEvent(&kv.Event{Member: kv.Member{Worker: 1}, Kind: kv.Stored, Blocks: make([]kv.Block, 1)}, now, events)
	lt.active(dynamo.ActiveLoad{WorkerID: 1, HasKVUsedBlocks: true, KVUsedBlocks: 5}, 0, now, false, metrics)
	lt.sawEvent(&kv.Event{Member: kv.Member{Worker: 2}, Kind: kv.Stored}, now, unreported)
	// A router's view of worker 3 (no kv_used_blocks) does not hold it.
	lt.active(dynamo.ActiveLoad{WorkerID: 3, HasActiveDecodeBlocks: true, ActiveDecodeBlocks: 9}, 0, now, false, router)
	live := func(at time.Time) uint32 {
		var r relayproto.LoadReport
		lt.fill(&r, at, 100)
		return r.LiveWorkers
	}
	if got := live(now.Add(time.Hour)); got != 1 || lt.workers[1] == nil {
		t.Errorf("fill an hour on = %d live workers (worker 1 tracked: %v), want worker 1 alone", got, lt.workers[1] != nil)
	}
	lt.release(events)
	if got := live(now.Add(2 * time.Hour)); got != 1 {
		t.Errorf("after kv-events' release: %d live workers, want 1 (kv_metrics holds worker 1)", got)
	}
	lt.release(metrics)
	if got := live(now.Add(2 * time.Hour)); got != 0 || len(lt.holds) != 0 {
		t.Errorf("after both releases: %d live workers, %d holding sources; want 0 and 0", got, len(lt.holds))
	}
	// A worker that spoke within the window when its source went counts
	// for the rest of the window, from its last message.
	later := now.Add(3 * time.Hour)
	lt.sawEvent(&kv.Event{Member: kv.Member{Worker: 5}, Kind: kv.Removed}, later, events)
	lt.release(events)
	if got := live(later.Add(time.Second / 2)); got != 1 {
		t.Errorf("half a window after worker 5's message, its source gone: %d live, want 1", got)
	}
	if got := live(later.Add(2 * time.Second)); got != 0 {
		t.Errorf("two windows after worker 5's message, its source gone: %d live, want 0", got)
	}
}

// TestLoad_WorkerPresentCountsWithConfiguredCapacityUntilDropped checks
// the instance-record hold: a present worker with no sample counts with
// the configured capacity and no coverage; one that sends a sample counts
// it; drop ends both at once.
func TestLoad_WorkerPresentCountsWithConfiguredCapacityUntilDropped(t *testing.T) {
	lt := newLoadTracker(time.Second, false)
	now := time.Unix(1000, 0)
	lt.present(7, nil, now)
	lt.present(8, nil, now)
	lt.active(dynamo.ActiveLoad{WorkerID: 8, HasKVUsedBlocks: true, KVUsedBlocks: 30}, 0, now, false, nil)
	var r relayproto.LoadReport
	cov := lt.fill(&r, now.Add(time.Hour), 100)
	if r.LiveWorkers != 2 || r.CapacityBlocks != 200 || r.ActiveDecodeBlocks != 30 || cov.Sampled != 1 || !cov.Oldest.Equal(now) {
		t.Errorf("fill an hour on = live %d, capacity %d, active %d, coverage %+v; want 2, 200, 30, 1 sampled at %v",
			r.LiveWorkers, r.CapacityBlocks, r.ActiveDecodeBlocks, cov, now)
	}
	lt.drop(7)
	lt.drop(8)
	r = relayproto.LoadReport{}
	if lt.fill(&r, now.Add(time.Hour), 100); r.LiveWorkers != 0 {
		t.Errorf("after drop(7), drop(8): %d live workers, want 0", r.LiveWorkers)
	}
}

// TestPool_FollowedNATSPublisherKeepsItsPlaceWhenTheTableFills fills the
// pool's table of NATS publishers with ones no feed follows and no member
// is owned by (made-up publisher ids, say): the next new id forgets those,
// not the followed publisher that holds a worker live, which keeps both
// its entry and its hold; and the workers a followed publisher fed before
// its KindPresent are held from then on.
func TestPool_FollowedNATSPublisherKeepsItsPlaceWhenTheTableFills(t *testing.T) {
	p := &pool{natsSrc: map[uint64]*Source{}, owners: map[kv.Member]*Source{}, load: newLoadTracker(time.Second, false)}
	now := time.Unix(1000, 0)
	early := p.natsSource(0x31)
	p.owners[kv.Member{Worker: 3}] = early
	p.load.sawEvent(&kv.Event{Member: kv.Member{Worker: 3}, Kind: kv.Removed}, now, early)
	if p.load.workers[3].held() {
		t.Fatalf("worker 3 held by a NATS publisher nobody follows")
	}
	p.present(&Source{PublisherID: 0x31, NATS: true, ReportsGone: true})
	if w := p.load.workers[3]; !w.held() || p.natsSrc[0x31] != early {
		t.Fatalf("after KindPresent of 0x31: worker 3 held %v, same source %v; want true, true", w.held(), p.natsSrc[0x31] == early)
	}
	delete(p.owners, kv.Member{Worker: 3}) // its blocks went: only the hold keeps its entry worth keeping
	for id := uint64(1); len(p.natsSrc) < maxPublishers; id++ {
		p.natsSource(1_000_000 + id)
	}
	p.natsSource(0x99)
	if p.natsSrc[0x31] != early || !p.load.workers[3].held() || len(p.natsSrc) != 2 {
		t.Errorf("after the table filled: 0x31 kept %v, worker 3 held %v, %d entries; want true, true, 2 (0x31 and 0x99)",
			p.natsSrc[0x31] == early, p.load.workers[3].held(), len(p.natsSrc))
	}
}
