package kvrelay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/relayproto"
	relaypublish "github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/internal/movable"
)

// testPool is the catalog description the tests publish goindex's relay
// pool under.
func testPool() *Pool {
	return &Pool{ServingEndpoint: &pb.DynamoEndpointId{Namespace: "dynamo", Component: "backend", Endpoint: "generate"},
		Registrations: []*pb.ModelRegistration{{CanonicalModelId: "Qwen/Qwen3-0.6B",
			Target: &pb.ModelTarget{Target: &pb.ModelTarget_Base{Base: &pb.BaseModelTarget{BaseModel: "Qwen/Qwen3-0.6B"}}}}},
		QuerySemantics: &pb.KvQuerySemantics{KvBlockSize: 16, HashFormat: pb.KvQueryHashFormat_KV_QUERY_HASH_FORMAT_DYNAMO_STANDARD_V1},
		PoolRoles:      []pb.WorkerRole{pb.WorkerRole_WORKER_ROLE_AGGREGATED}}
}

// goRelay is one run of goindex's relay for a DC, served over gRPC.
type goRelay struct {
	r    *relay.Relay
	g    *grpc.Server
	done chan error
}

// startGoRelay runs a relay of DC 3 (domain 1) on nc and serves it in the
// Pool Relay contract on a new loopback port, which it returns.
func startGoRelay(t *testing.T, nc *nats.Conn, heartbeat time.Duration) (*goRelay, string) {
	t.Helper()
	r, err := relay.New(relay.Config{Conn: nc, DC: 3, HeartbeatEvery: heartbeat, LoadEvery: 20 * time.Millisecond,
		WorkerCapacityBlocks: 100, Pools: []relay.PoolConfig{{Domain: 1, Namespace: "dynamo", Component: "backend", ExpectedBlocks: 4096}}})
	if err != nil {
		t.Fatal(err)
	}
	gr := &goRelay{r: r, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { gr.done <- r.Run(ctx) }()
	t.Cleanup(func() { r.Close(); cancel() })
	select {
	case <-r.Ready():
	case err := <-gr.done:
		t.Fatalf("relay Run ended before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("relay not ready")
	}
	src, err := NewRelaySource(RelaySourceConfig{Relay: r, Pools: map[relayproto.DomainID]*Pool{1: testPool()}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(ServerConfig{Relay: &pb.RelayIdentity{DrtInstanceId: 1, RelayIncarnation: uint64(time.Now().UnixNano())},
		Source: src, LoadInterval: 20 * time.Millisecond, ReadinessInterval: 20 * time.Millisecond, ChunkWords: 500})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gr.g = grpc.NewServer(GRPCOptions()...)
	pb.RegisterKvEventRelayServer(gr.g, s)
	go func() { _ = gr.g.Serve(ln) }()
	t.Cleanup(gr.g.Stop)
	return gr, ln.Addr().String()
}

// matches reports nil when the relay took events events and l holds the
// relay's words at its last sequence, of its current producer.
func (gr *goRelay) matches(ctx context.Context, l *lane, events uint64) error {
	if err := gr.r.Flush(ctx, 1); err != nil {
		return err
	}
	st, err := gr.r.Status(ctx)
	if err != nil {
		return err
	}
	if st[0].Intake.Events != events {
		return fmt.Errorf("the relay took %d events, want %d", st[0].Intake.Events, events)
	}
	want, err := gr.r.AppendWords(ctx, nil, 1)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.ready:
		return errors.New("lane not ready")
	case l.producer.GetProducerIncarnation() != st[0].Incarnation:
		return fmt.Errorf("lane of incarnation %d, relay %d", l.producer.GetProducerIncarnation(), st[0].Incarnation)
	case l.seq != st[0].WatchSequence:
		return fmt.Errorf("lane at %d, relay at %d", l.seq, st[0].WatchSequence)
	case !slices.Equal(l.words, want):
		return errors.New("lane words differ from the relay's")
	}
	return nil
}

// publish sends n generated events on the pool's Dynamo subject.
func publish(t *testing.T, nc *nats.Conn, g *relaytest.Generator, n int) {
	t.Helper()
	for range n {
		if err := nc.Publish(dynamo.EventSubject("dynamo", "backend"), g.Next()); err != nil {
			t.Fatal(err)
		}
	}
}

// goindex's relay served in the Pool Relay contract and followed by
// Follow: the lane converges byte-identical to the relay's own words and
// sequence through real events, a fenced delta log (a foreign message in it
// makes a publish uncertain; the relay burns the log's sequences and
// stores a recovery snapshot, which the stream, a publication of its own,
// never sees: the lane is not installed again), and a relay restart behind
// the same address (a new incarnation); the load windows carry the relay's
// load reports.
func TestRelaySource_FollowedPoolConvergesThroughGapsAndARestart(t *testing.T) {
	seed := relaytest.Seed(t, 17)
	_, nc := natstest.Start(t)
	gen := relaytest.NewGenerator(seed, 4)
	first, addr := startGoRelay(t, nc, time.Hour)
	fwd := movable.New(t, addr) // the relay's address across its restart
	conn := dial(t, fwd.Addr())
	l := &lane{}
	var loadMu sync.Mutex
	var last *Load
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, conn, FollowConfig{SubscriberID: "relaysource-test", DCID: 3, Lane: l, Retry: 10 * time.Millisecond,
			OnLoad: func(e *Load) { loadMu.Lock(); last = e; loadMu.Unlock() }})
	}()
	converge := func(what string, gr *goRelay, events uint64) {
		t.Helper()
		relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error { return gr.matches(ctx, l, events) })
		t.Logf("%s: converged", what)
	}
	publish(t, nc, gen, 300)
	converge("the first events", first, 300)
	for i := range 5 {
		publish(t, nc, gen, 100)
		converge("more events", first, uint64(400+100*i))
	}
	l.mu.Lock()
	installs := l.installs
	l.mu.Unlock()

	st, err := first.r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snapshots := st[0].Snapshots
	// A foreign message in the delta log: the next publish fails on its
	// expected last sequence, the log is fenced and recovers with a
	// snapshot two of its sequences on; the stream goes on.
	if err := nc.Publish(relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 3}.DeltaSubject(), []byte("foreign")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	publish(t, nc, gen, 50)
	converge("after the log's gap", first, 850)
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if st, err := first.r.Status(ctx); err != nil || st[0].Publisher.Fence != relaypublish.FenceNone || st[0].Snapshots == snapshots {
			return fmt.Errorf("no recovery snapshot yet: %+v, %v", st, err)
		}
		return nil
	})
	publish(t, nc, gen, 50)
	converge("after the log's recovery", first, 900)
	l.mu.Lock()
	reinstalled := l.installs > installs
	l.mu.Unlock()
	if reinstalled {
		t.Errorf("the lane was installed again after the relay's delta log was fenced (GOINDEX_SEED=%d)", seed)
	}
	relaytest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		loadMu.Lock()
		defer loadMu.Unlock()
		if last == nil || last.GetTotalKvBlocks() != 400 || last.GetKvObservedRanks() != 4 || last.GetKvExpectedRanks() != 4 {
			return fmt.Errorf("load entry %v, want 400 blocks over 4 of 4 workers", last)
		}
		return nil
	})

	// A relay restart behind the same address: a new incarnation, an
	// empty pool, then new events.
	first.r.Close()
	<-first.done
	first.g.Stop()
	second, addr := startGoRelay(t, nc, time.Hour)
	fwd.Point(addr)
	gen.Forget()
	converge("the restarted relay", second, 0)
	publish(t, nc, gen, 200)
	converge("the restarted relay's events", second, 200)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Follow = %v, want the context's error", err)
	}
}

// The stream rules seen from a raw subscriber of goindex's relay: the
// catalog names the pool with upstream-valid identity digests, the pool
// stream is the snapshot's chunks (one sequence), then deltas contiguous
// from it and heartbeats at the installed sequence.
func TestRelaySource_StreamIsChunksThenContiguousDeltasAndHeartbeats(t *testing.T) {
	seed := relaytest.Seed(t, 19)
	_, nc := natstest.Start(t)
	gen := relaytest.NewGenerator(seed, 3)
	gr, addr := startGoRelay(t, nc, 20*time.Millisecond)
	client := pb.NewKvEventRelayClient(dial(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	publish(t, nc, gen, 100)
	cat, err := client.WatchKvPoolCatalog(ctx, &pb.WatchKvPoolCatalogRequest{SubscriberId: "raw", ContractMarker: ContractMarker})
	if err != nil {
		t.Fatal(err)
	}
	u, err := cat.Recv()
	if err != nil || checkResponse(u) != nil || len(u.GetSnapshot().GetPools()) != 1 {
		t.Fatalf("catalog = %v, %v; want one pool", u, err)
	}
	d := u.GetSnapshot().GetPools()[0]
	p := d.GetProducer()
	dom := p.GetPoolId().GetIndexerDomain()
	if err := checkDescriptor(d); err != nil || len(dom.GetCacheSemantics().GetDigest()) != 16 || len(dom.GetRoutingScope().GetDigest()) != 16 ||
		p.GetLayoutGeneration() == 0 || !proto.Equal(d.GetServingEndpoint(), testPool().GetServingEndpoint()) {
		t.Errorf("catalog pool %v (check %v): want a valid descriptor with 16-byte digests, generation ≥ 1, the test's endpoint", d, err)
	}
	stream, err := client.SubscribeKvPool(ctx, &pb.SubscribeKvPoolRequest{SubscriberId: "raw", ExpectedProducer: p, ContractMarker: ContractMarker}, recvOptions...)
	if err != nil {
		t.Fatal(err)
	}
	f := follower{producer: p, lane: &lane{}}
	var kinds []pb.FilterUpdateKind
	for deltas, heartbeats := 0, 0; deltas < 10 || heartbeats < 3; {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("pool stream after %v: %v", kinds, err)
		}
		if err := f.step(m); err != nil {
			t.Fatalf("pool stream after %v: %v", kinds, err)
		}
		if n := len(kinds); n == 0 || kinds[n-1] != m.GetKind() {
			kinds = append(kinds, m.GetKind())
		}
		switch m.GetKind() {
		case pb.FilterUpdateKind_FILTER_UPDATE_KIND_DELTA:
			deltas++
		case pb.FilterUpdateKind_FILTER_UPDATE_KIND_HEARTBEAT:
			heartbeats++
			publish(t, nc, gen, 20)
			if err := gr.r.Flush(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if kinds[0] != pb.FilterUpdateKind_FILTER_UPDATE_KIND_SNAPSHOT_CHUNK || slices.Contains(kinds[1:], pb.FilterUpdateKind_FILTER_UPDATE_KIND_SNAPSHOT_CHUNK) {
		t.Errorf("stream kinds %v: want the snapshot's chunks first and only", kinds)
	}
	if f.lane.(*lane).installs != 1 {
		t.Errorf("the snapshot was installed %d times, want once", f.lane.(*lane).installs)
	}
}

// A subscriber that does not read while the relay publishes past the
// source's buffer gets the start, what the buffer held, then an End of
// ErrLagged; the server turns that into RESOURCE_EXHAUSTED /
// SUBSCRIBER_LAGGED.
func TestRelaySource_SubscriberThatFallsBehindEndsLagged(t *testing.T) {
	_, nc := natstest.Start(t)
	gen := relaytest.NewGenerator(3, 2)
	gr, _ := startGoRelay(t, nc, time.Hour)
	src, err := NewRelaySource(RelaySourceConfig{Relay: gr.r, Pools: map[relayproto.DomainID]*Pool{1: testPool()}, Buffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, pools, _ := src.Catalog()
	updates, err := src.Follow(ctx, pools[0].GetProducer())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the pump holds the start until it is read: the watch overflows
		publish(t, nc, gen, 5)
		relaytest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
			if st, err := gr.r.Status(ctx); err != nil || st[0].Intake.Events != uint64(5*(i+1)) {
				return errors.New("events not taken yet")
			}
			return nil
		})
		if err := gr.r.Flush(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	var got []UpdateKind
	var end error
	for u := range updates {
		got = append(got, u.Kind)
		end = u.Err
	}
	if !slices.Equal(got, []UpdateKind{Snapshot, Delta, End}) || !errors.Is(end, ErrLagged) {
		t.Errorf("updates %v ending in %v; want Snapshot, Delta, End of ErrLagged", got, end)
	}
	if _, err := src.Follow(ctx, producerOf(3, 1)); !errors.Is(err, ErrPoolNotFound) {
		t.Errorf("Follow(a pool of another domain) = %v, want ErrPoolNotFound", err)
	}
	stale := proto.Clone(pools[0].GetProducer()).(*pb.ProducerIdentity)
	stale.ProducerIncarnation--
	if _, err := src.Follow(ctx, stale); !errors.Is(err, ErrProducerChanged) {
		t.Errorf("Follow(an older incarnation) = %v, want ErrProducerChanged", err)
	}
}

// goindex's relay projects serving readiness and serving load: the pool's
// topology (namespace, model) is UNAVAILABLE before a worker is live and
// READY after, with a new revision; the pool's serving load is UNAVAILABLE
// while no worker sent a load sample, DEGRADED (no gauges) while some did,
// COMPLETE with the summed gauges once every live worker did.
func TestRelaySource_ServesReadinessAndServingLoad(t *testing.T) {
	_, nc := natstest.Start(t)
	gen := relaytest.NewGenerator(7, 2)
	_, addr := startGoRelay(t, nc, time.Hour)
	client := pb.NewKvEventRelayClient(dial(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := client.SubscribeServingReadiness(ctx, &pb.SubscribeServingReadinessRequest{SubscriberId: "r", ContractMarker: ContractMarker})
	if err != nil {
		t.Fatal(err)
	}
	readiness := func(want pb.ServingReadinessState) *pb.ServingReadinessUpdate {
		t.Helper()
		for {
			u, err := rs.Recv()
			if err != nil || checkResponse(u) != nil {
				t.Fatalf("readiness stream: %v, %v", u, err)
			}
			if len(u.GetEntries()) == 1 && u.GetEntries()[0].GetState() == want {
				return u
			}
		}
	}
	before := readiness(pb.ServingReadinessState_SERVING_READINESS_STATE_UNAVAILABLE)
	publish(t, nc, gen, 20)
	after := readiness(pb.ServingReadinessState_SERVING_READINESS_STATE_READY)
	e := after.GetEntries()[0]
	if after.GetRevision() <= before.GetRevision() || e.GetNamespace() != "dynamo" || e.GetCanonicalModelId() != "Qwen/Qwen3-0.6B" ||
		!slices.Equal(e.GetPresentRoles(), []pb.WorkerRole{pb.WorkerRole_WORKER_ROLE_AGGREGATED}) || len(e.GetMissingRoles()) != 0 ||
		len(e.GetMembers()) != 1 || e.GetMembers()[0].GetPoolId().GetDcId() != 3 {
		t.Errorf("readiness %v after %v: want a new revision, dynamo/Qwen READY with the aggregated role present and the pool as member", after, before)
	}
	if u := readiness(pb.ServingReadinessState_SERVING_READINESS_STATE_READY); u.GetRevision() != after.GetRevision() {
		t.Errorf("the repeated projection has revision %d, want %d (nothing changed)", u.GetRevision(), after.GetRevision())
	}

	ls, err := client.SubscribeServingLoad(ctx, &pb.SubscribeServingLoadRequest{SubscriberId: "l", ContractMarker: ContractMarker})
	if err != nil {
		t.Fatal(err)
	}
	servingLoad := func(want pb.DataStatus) *pb.PoolServingLoad {
		t.Helper()
		for {
			u, err := ls.Recv()
			if err != nil || checkResponse(u) != nil || len(u.GetModels()) != 0 {
				t.Fatalf("serving load stream: %v, %v", u, err)
			}
			if len(u.GetPools()) == 1 && u.GetPools()[0].GetLoad().GetStatus() == want {
				return u.GetPools()[0]
			}
		}
	}
	if p := servingLoad(pb.DataStatus_DATA_STATUS_UNAVAILABLE); p.GetLoad().GetTokens() != nil || p.GetDeployment().GetLiveWorkers() != 2 {
		t.Errorf("serving load without samples %v: want no gauges, 2 live workers", p)
	}
	names := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 3}
	sample := func(worker, queued, decode uint64) {
		b := fmt.Appendf(nil, `{"worker_id": %d, "queued_prefill_tokens": %d, "active_decode_blocks": %d}`, worker, queued, decode)
		if err := nc.Publish(names.WorkerLoadSubject(), b); err != nil {
			t.Fatal(err)
		}
	}
	sample(1, 100, 10)
	if p := servingLoad(pb.DataStatus_DATA_STATUS_DEGRADED); p.GetLoad().GetTokens() != nil || p.GetLoad().GetSourceObservedMs() == 0 {
		t.Errorf("serving load with 1 of 2 workers sampled %v: want no gauges, the sample's time", p)
	}
	sample(2, 50, 5)
	p := servingLoad(pb.DataStatus_DATA_STATUS_COMPLETE)
	if tk := p.GetLoad().GetTokens(); tk.GetActivePrefillTokens() != 150 || tk.GetActiveDecodeBlocks() != 15 || tk.ActivePrefillTokens == nil {
		t.Errorf("serving load with every worker sampled %v: want 150 prefill tokens and 15 decode blocks", p)
	}
}
