package relay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// waitStatus polls the pool's status (relaytest.CheckFor) until ok holds,
// or fails the test after 30 s naming what it waited for.
func waitStatus(t *testing.T, r *Relay, what string, ok func(PoolStatus) bool) PoolStatus {
	t.Helper()
	var st PoolStatus
	relaytest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if st = poolStatus(t, r); !ok(st) {
			return fmt.Errorf("%s: intake %+v, publisher %+v", what, st.Intake, st.Publisher)
		}
		return nil
	})
	return st
}

// relayWithStores starts a relay on nc fed by a message feed and returns
// it with n store messages of worker 1 (sequences 1 to n, a new block
// each), the first of them taken.
func relayWithStores(t *testing.T, nc *nats.Conn, n int) (Config, *running, *msgFeed, []Message) {
	t.Helper()
	f := newMsgFeed()
	cfg := testConfig(nc)
	cfg.Pools[0].Feeds = []Feed{f}
	run := startRelay(t, cfg)
	src := &Source{Scope: testScope, PublisherID: 0x11, ReportsGone: true, Name: "worker 1"}
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = planeMsg(t, src, dynamo.EventTopic, storeEnvelope(t, 1, 0x11, uint64(i+1), kv.Stored, uint64(0x1000+i)))
	}
	f.msgs <- msgs[0]
	settle(t, run.r, f)
	return cfg, run, f, msgs
}

// TestRelay_IntakeGoesOnWhileNATSIsDown stops the relay's NATS server
// while a worker keeps storing: every one of 3,000 events is taken while
// NATS is down (the pool fences instead of waiting out a JetStream
// timeout on its goroutine for every write, which starved the intake to a
// few events a second, so that the workers' sockets overflowed and their
// events were lost), and once the server is back the pool recovers with a
// snapshot holding them all.
func TestRelay_IntakeGoesOnWhileNATSIsDown(t *testing.T) {
	srv, nc := natstest.Start(t)
	const n = 3000
	_, run, f, msgs := relayWithStores(t, nc, n)
	srv.NATS().Shutdown()
	srv.NATS().WaitForShutdown()
	for nc.IsConnected() {
		time.Sleep(10 * time.Millisecond)
	}
	go func() {
		for _, m := range msgs[1:] {
			f.msgs <- m
		}
	}()
	st := waitStatus(t, run.r, fmt.Sprintf("all %d events taken with NATS down", n), func(st PoolStatus) bool { return st.Intake.Events >= n })
	if st.Producer.TrackedBlocks != n {
		t.Errorf("tracked blocks with NATS down = %d, want %d", st.Producer.TrackedBlocks, n)
	}
	if err := srv.Restart(); err != nil {
		t.Fatalf("restart nats: %v", err)
	}
	before := st.Snapshots
	st = waitStatus(t, run.r, "recovery once NATS is back", func(st PoolStatus) bool {
		return st.Publisher.Fence == publish.FenceNone && st.Snapshots > before
	})
	if st.Producer.TrackedBlocks != n || st.Intake.Events != n {
		t.Errorf("after the recovery: %d tracked blocks, %d events; want %d and %d", st.Producer.TrackedBlocks, st.Intake.Events, n, n)
	}
}

// TestRelay_BacklogGoesOutInFewDeltas holds the pool's goroutine (as a
// JetStream acknowledgement slow to come does) while one worker's 3,000
// stores queue, then lets it go: the backlog is published in a few deltas
// rather than one every BatchEvents (16) events, each of which would wait
// for its own acknowledgement, and every store is taken and published.
func TestRelay_BacklogGoesOutInFewDeltas(t *testing.T) {
	_, nc := natstest.Start(t)
	const n = 3000
	cfg, run, f, msgs := relayWithStores(t, nc, n)
	before := poolStatus(t, run.r).Publisher.Deltas
	hold, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = run.r.do(context.Background(), cfg.Pools[0].Domain, func(*pool) { close(held); <-hold })
	}()
	<-held
	for _, m := range msgs[1:] {
		f.msgs <- m
	}
	for len(f.msgs) > 0 { // the feed has handed every message to the pool's queue
		time.Sleep(time.Millisecond)
	}
	close(hold)
	st := waitStatus(t, run.r, fmt.Sprintf("all %d events taken", n), func(st PoolStatus) bool { return st.Intake.Events >= n })
	st = waitStatus(t, run.r, "the backlog published", func(st PoolStatus) bool { return st.Producer.TrackedBlocks == n && st.Publisher.Deltas > before })
	if d := st.Publisher.Deltas - before; d > 8 {
		t.Errorf("%d queued stores went out in %d deltas; want a few (one per %d events would be %d)", n-1, d, ckf.DefaultBatchEvents, (n-1)/ckf.DefaultBatchEvents)
	}
}

// TestRelay_LoadReportsGoOnWhileTheLogIsFenced removes the pool's delta
// stream under it (a JetStream that fails while core NATS is up): the
// publication fences and cannot recover, but the load reports, which go
// out on core NATS, keep coming (a fenced pool used to skip them, so
// routers saw the DC's load go stale for the whole failure).
func TestRelay_LoadReportsGoOnWhileTheLogIsFenced(t *testing.T) {
	_, nc := natstest.Start(t)
	f := newMsgFeed()
	cfg := testConfig(nc)
	cfg.Pools[0].Feeds = []Feed{f}
	run := startRelay(t, cfg)
	names := run.r.pools[0].names
	reports := make(chan struct{}, 1024)
	sub, err := nc.Subscribe(names.LoadSubject(), func(*nats.Msg) { reports <- struct{}{} })
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	if err := js.DeleteStream(context.Background(), names.Stream()); err != nil {
		t.Fatalf("delete stream %s: %v", names.Stream(), err)
	}
	src := &Source{Scope: testScope, PublisherID: 0x11, ReportsGone: true, Name: "worker 1"}
	f.msgs <- planeMsg(t, src, dynamo.EventTopic, storeEnvelope(t, 1, 0x11, 1, kv.Stored, 0x101))
	waitStatus(t, run.r, "the publication fenced", func(st PoolStatus) bool { return st.Publisher.Fence != publish.FenceNone })
	for len(reports) > 0 {
		<-reports
	}
	for i := range 3 {
		select {
		case <-reports:
		case <-time.After(10 * time.Second):
			t.Fatalf("load report %d of 3 after the fence: none in 10 s (load every %v)", i+1, cfg.LoadEvery)
		}
	}
}

// TestRelay_SnapshotRequestsInABurstCostOneSnapshot sends 20 snapshot
// requests while the pool's goroutine is held (every router site's lane
// asking after a relay restart): each is answered, and the pool stores
// one snapshot for them, not one each (each would stall its intake for
// the snapshot's encoding and store). A request after them gets a
// snapshot of its own.
func TestRelay_SnapshotRequestsInABurstCostOneSnapshot(t *testing.T) {
	_, nc := natstest.Start(t)
	_, run, _, _ := relayWithStores(t, nc, 1)
	subject := run.r.pools[0].names.SnapshotSubject()
	before := poolStatus(t, run.r).Snapshots
	hold, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = run.r.do(context.Background(), run.r.pools[0].cfg.Domain, func(*pool) { close(held); <-hold })
	}()
	<-held
	const requests = 20
	answered := make(chan error, requests)
	for range requests {
		go func() {
			_, err := nc.Request(subject, nil, 20*time.Second)
			answered <- err
		}()
	}
	p := run.r.pools[0]
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		p.snapReqMu.Lock()
		queued := len(p.snapReqs)
		p.snapReqMu.Unlock()
		if queued == requests {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d snapshot requests queued behind the hold after 20 s", queued, requests)
		}
	}
	close(hold)
	for range requests {
		if err := <-answered; err != nil {
			t.Fatalf("snapshot request: %v", err)
		}
	}
	if got := poolStatus(t, run.r).Snapshots - before; got != 1 {
		t.Errorf("%d snapshot requests in a burst stored %d snapshots, want 1", requests, got)
	}
	mid := poolStatus(t, run.r).Snapshots
	if _, err := nc.Request(subject, nil, 20*time.Second); err != nil {
		t.Fatalf("snapshot request after the burst: %v", err)
	}
	if got := poolStatus(t, run.r).Snapshots - mid; got != 1 {
		t.Errorf("a request after the burst stored %d snapshots, want 1", got)
	}
}

// TestRelay_WatchesAreServedThroughANATSOutage stops the relay's NATS
// server under a watch: the watch keeps getting every delta while the delta
// log is fenced, a watch started during the outage starts from the pool's
// words, and the recovery snapshot once the server is back disturbs
// neither (both stay contiguous and byte-identical to the pool).
func TestRelay_WatchesAreServedThroughANATSOutage(t *testing.T) {
	seed := relaytest.Seed(t, 23)
	rng := rand.New(rand.NewPCG(seed, 23))
	srv, nc := natstest.Start(t)
	cfg, src := staticConfig(t, nc)
	run := startRelay(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	publishSome := func(rounds int) {
		t.Helper()
		for range rounds {
			src.queueRandom(rng, 1+rng.IntN(20))
			if err := run.r.Flush(ctx, 1); err != nil {
				t.Fatalf("Flush: %v", err)
			}
		}
	}
	watch := func() (*Watch, *follower) {
		t.Helper()
		w, err := run.r.Watch(ctx, 1, 0)
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		t.Cleanup(w.Close)
		return w, newFollower(w)
	}
	caughtUp := func(what string, ws []*Watch, fs []*follower) {
		t.Helper()
		want, err := run.r.AppendWords(ctx, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		st := poolStatus(t, run.r)
		for i, f := range fs {
			f.drain(t, ws[i])
			if f.snapshot != nil || f.seq != st.WatchSequence || !slices.Equal(f.words, want) {
				t.Fatalf("%s: watch %d at %d (pool %d), words equal %v, snapshot seen %v; want the pool's words, no snapshot",
					what, i, f.seq, st.WatchSequence, slices.Equal(f.words, want), f.snapshot != nil)
			}
		}
	}
	w1, f1 := watch()
	publishSome(10)
	caughtUp("before the outage", []*Watch{w1}, []*follower{f1})

	srv.NATS().Shutdown()
	srv.NATS().WaitForShutdown()
	for nc.IsConnected() {
		time.Sleep(10 * time.Millisecond)
	}
	publishSome(10)
	if st := poolStatus(t, run.r); st.Publisher.Fence == publish.FenceNone {
		t.Fatalf("the delta log is not fenced with NATS down: %+v", st.Publisher)
	}
	caughtUp("during the outage", []*Watch{w1}, []*follower{f1})
	w2, f2 := watch()
	publishSome(10)
	caughtUp("a watch begun during the outage", []*Watch{w1, w2}, []*follower{f1, f2})

	before := poolStatus(t, run.r).Snapshots
	if err := srv.Restart(); err != nil {
		t.Fatalf("restart nats: %v", err)
	}
	waitStatus(t, run.r, "recovery once NATS is back", func(st PoolStatus) bool {
		return st.Publisher.Fence == publish.FenceNone && st.Snapshots > before
	})
	publishSome(10)
	caughtUp("after the recovery", []*Watch{w1, w2}, []*follower{f1, f2})
	for i, w := range []*Watch{w1, w2} {
		if err := w.Err(); err != nil {
			t.Errorf("watch %d ended: %v", i, err)
		}
	}
}
