package kvrelay

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/goindex/goindex/bridge/kvrelay/cbi1"
	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
	"github.com/goindex/goindex/internal/movable"
	"github.com/goindex/goindex/internal/testseed"
)

const testBuckets = 64

func producerOf(dc, incarnation uint64) *pb.ProducerIdentity {
	return &pb.ProducerIdentity{
		PoolId: &pb.KvPoolId{IdentityVersion: 1, DcId: dc, IndexerDomain: &pb.IndexerDomainId{
			CacheSemantics: &pb.DigestIdentity{Digest: []byte{1, 2}, Source: pb.IdentitySource_IDENTITY_SOURCE_DEFAULT_DERIVED},
			RoutingScope:   &pb.DigestIdentity{Digest: []byte{3}, Source: pb.IdentitySource_IDENTITY_SOURCE_DEFAULT_DERIVED}}},
		ProducerIncarnation: incarnation, LayoutGeneration: 1,
		CkfFormat: &pb.CkfFormat{FormatVersion: 1, Seed: 0x5DEECE66D1B54A33, BucketCount: testBuckets, FingerprintBits: 16, SlotsPerBucket: 4},
	}
}

// model is a test Source: one pool whose words it mutates, fanned out to
// every follower as a snapshot then deltas.
type model struct {
	mu        sync.Mutex
	producer  *pb.ProducerIdentity
	words     []uint64
	seq       uint64
	revision  uint64
	changed   chan struct{}
	followers []chan Update
	gapOnce   bool // the next delta skips a sequence (a lost frame)
}

func newModel(dc uint64) *model {
	return &model{producer: producerOf(dc, 1), words: make([]uint64, testBuckets), seq: 5, revision: 1, changed: make(chan struct{})}
}

func (m *model) Catalog() (uint64, []*Pool, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.revision, []*Pool{{Producer: m.producer, ServingEndpoint: &pb.DynamoEndpointId{Namespace: "dynamo", Component: "backend", Endpoint: "generate"},
		QuerySemantics: &pb.KvQuerySemantics{KvBlockSize: 16, HashFormat: pb.KvQueryHashFormat_KV_QUERY_HASH_FORMAT_DYNAMO_STANDARD_V1},
		PoolRoles:      []pb.WorkerRole{pb.WorkerRole_WORKER_ROLE_AGGREGATED}}}, m.changed
}

func (m *model) Follow(ctx context.Context, p *pb.ProducerIdentity) (<-chan Update, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !samePool(p, m.producer):
		return nil, ErrPoolNotFound
	case !sameProducer(p, m.producer):
		return nil, ErrProducerChanged
	}
	ch := make(chan Update, 1024)
	ch <- Update{Kind: Snapshot, Sequence: m.seq, Words: slices.Clone(m.words)}
	m.followers = append(m.followers, ch)
	go func() {
		<-ctx.Done()
		m.mu.Lock()
		defer m.mu.Unlock()
		if i := slices.Index(m.followers, ch); i >= 0 {
			m.followers = slices.Delete(m.followers, i, i+1)
			close(ch)
		}
	}()
	return ch, nil
}

func (m *model) Loads() []*Load {
	m.mu.Lock()
	defer m.mu.Unlock()
	return []*Load{{Producer: m.producer, KvUsedBlocks: 10, TotalKvBlocks: 100, KvObservedRanks: 2, KvExpectedRanks: 2}}
}

// publish applies random images and sends them as the next delta, or a
// heartbeat when n is 0.
func (m *model) publish(rng *rand.Rand, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n == 0 {
		for _, f := range m.followers {
			f <- Update{Kind: Heartbeat, Sequence: m.seq}
		}
		return
	}
	images := make([]cbi1.Image, n)
	for i := range images {
		b := uint32(rng.IntN(testBuckets))
		images[i] = cbi1.Image{Bucket: b, Word: rng.Uint64()}
		m.words[b] = images[i].Word
	}
	base := m.seq
	if m.gapOnce {
		base, m.gapOnce = base+1, false // the delta base→base+1 "was lost"
	}
	m.seq = base + 1
	for _, f := range m.followers {
		f <- Update{Kind: Delta, Base: base, Sequence: m.seq, Images: images}
	}
}

// replace starts a new producer generation with other words.
func (m *model) replace(rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.producer = producerOf(m.producer.GetPoolId().GetDcId(), m.producer.GetProducerIncarnation()+1)
	for i := range m.words {
		m.words[i] = rng.Uint64()
	}
	for _, f := range m.followers {
		close(f)
	}
	m.followers, m.seq = nil, 1
	m.revision++
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *model) state() ([]uint64, uint64, *pb.ProducerIdentity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.words), m.seq, m.producer
}

// lane is a test Lane.
type lane struct {
	mu       sync.Mutex
	words    []uint64
	seq      uint64
	producer *pb.ProducerIdentity
	ready    bool
	installs int
	retired  []error
}

func (l *lane) Install(p *pb.ProducerIdentity, seq uint64, words []uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.words, l.seq, l.producer, l.ready = slices.Clone(words), seq, p, true
	l.installs++
	return nil
}

func (l *lane) Apply(base, seq uint64, images []cbi1.Image) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ready || base != l.seq {
		return errors.New("test lane: delta out of order")
	}
	for _, im := range images {
		l.words[im.Bucket] = im.Word
	}
	l.seq = seq
	return nil
}

func (l *lane) Retire(reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ready = false
	l.retired = append(l.retired, reason)
}

// converged reports whether the lane holds the model's words at its sequence.
func (l *lane) converged(m *model) bool {
	words, seq, p := m.state()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready && l.seq == seq && proto.Equal(l.producer, p) && slices.Equal(l.words, words)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// serve starts a Server over src on a loopback port and returns a client
// connection to it.
func serve(t *testing.T, src Source) *grpc.ClientConn {
	t.Helper()
	return dial(t, listen(t, newTestServer(t, src), GRPCOptions()...))
}

// newTestServer is the tests' Server over src.
func newTestServer(t *testing.T, src Source) *Server {
	t.Helper()
	s, err := NewServer(ServerConfig{Relay: &pb.RelayIdentity{DrtInstanceId: 7, RelayIncarnation: 9}, Source: src,
		LoadInterval: 20 * time.Millisecond, ChunkWords: 24})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// listen serves srv over gRPC with opts on a loopback port, until the test
// ends, and returns its address.
func listen(t *testing.T, srv pb.KvEventRelayServer, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	pb.RegisterKvEventRelayServer(g, srv)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// follow runs Follow(conn, cfg) until the returned stop, which cancels it
// and checks that it ended with the cancellation.
func follow(t *testing.T, conn *grpc.ClientConn, cfg FollowConfig) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Follow(ctx, conn, cfg) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Follow after cancel = %v, want context.Canceled", err)
		}
	}
}

// dial returns a plaintext client connection to addr, closed when the
// test ends.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Our follower keeps a lane byte-identical to our server's pool through a
// chunked snapshot, random deltas, heartbeats, a lost delta (retire, fresh
// snapshot) and a new producer generation (retire, resubscribe), and reads
// its load windows.
func TestFollow_ConvergesThroughDeltasGapsAndNewGenerations(t *testing.T) {
	seed := testseed.For(t, 21)
	rng := rand.New(rand.NewPCG(seed, 2))
	m := newModel(3)
	conn := serve(t, m)
	l := &lane{}
	var loadMu sync.Mutex
	var loads []*Load
	stop := follow(t, conn, FollowConfig{SubscriberID: "test", DCID: 3, Lane: l, Retry: 10 * time.Millisecond,
		OnLoad: func(e *Load) { loadMu.Lock(); loads = append(loads, e); loadMu.Unlock() }})
	waitFor(t, "the snapshot is installed", func() bool { return l.converged(m) })
	for i := range 100 {
		m.publish(rng, i%10) // every tenth step a heartbeat
	}
	waitFor(t, "100 steps are applied", func() bool { return l.converged(m) })

	m.mu.Lock()
	m.gapOnce = true
	m.mu.Unlock()
	m.publish(rng, 3)
	waitFor(t, "the lane recovers from a lost delta", func() bool { return l.converged(m) })
	l.mu.Lock()
	installs, retired := l.installs, len(l.retired)
	l.mu.Unlock()
	if installs != 2 || retired == 0 {
		t.Errorf("after a lost delta: %d installs, %d retirements; want 2 and at least 1 (GOINDEX_SEED=%d)", installs, retired, seed)
	}

	m.replace(rng)
	m.publish(rng, 5)
	waitFor(t, "the lane follows the new generation", func() bool { return l.converged(m) })
	waitFor(t, "load windows arrive", func() bool { loadMu.Lock(); defer loadMu.Unlock(); return len(loads) > 0 })
	loadMu.Lock()
	if e := loads[len(loads)-1]; e.GetTotalKvBlocks() != 100 || e.GetKvUsedBlocks() != 10 {
		t.Errorf("load entry %v, want 10 of 100 blocks", e)
	}
	loadMu.Unlock()
	stop()
}

// The server refuses a wrong marker, a stale generation and an unknown
// pool with the contract's codes and reason trailers, and the readiness
// and serving-load streams of a source that projects none as
// UNIMPLEMENTED / UNSUPPORTED_FEATURE.
func TestServer_RefusesWithTheContractsCodesAndReasons(t *testing.T) {
	m := newModel(3)
	client := pb.NewKvEventRelayClient(serve(t, m))
	ctx := context.Background()
	if _, err := client.GetRelayInfo(ctx, &pb.RelayInfoRequest{ContractMarker: 1}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("GetRelayInfo(marker 1) = %v, want FAILED_PRECONDITION", err)
	}
	info, err := client.GetRelayInfo(ctx, &pb.RelayInfoRequest{ContractMarker: ContractMarker})
	if err != nil || checkResponse(info) != nil || info.GetRelay().GetRelayIncarnation() != 9 {
		t.Errorf("GetRelayInfo = %v, %v", info, err)
	}
	for name, call := range map[string]func(opt grpc.CallOption) error{
		"readiness": func(opt grpc.CallOption) error {
			s, err := client.SubscribeServingReadiness(ctx, &pb.SubscribeServingReadinessRequest{SubscriberId: "s", ContractMarker: ContractMarker}, opt)
			if err == nil {
				_, err = s.Recv()
			}
			return err
		},
		"serving load": func(opt grpc.CallOption) error {
			s, err := client.SubscribeServingLoad(ctx, &pb.SubscribeServingLoadRequest{SubscriberId: "s", ContractMarker: ContractMarker}, opt)
			if err == nil {
				_, err = s.Recv()
			}
			return err
		},
	} {
		var trailer metadata.MD
		if err := call(grpc.Trailer(&trailer)); status.Code(err) != codes.Unimplemented ||
			Reason(trailer) != pb.RelayErrorReason_RELAY_ERROR_REASON_UNSUPPORTED_FEATURE {
			t.Errorf("%s of a source that projects none = %v, reason %v; want UNIMPLEMENTED, UNSUPPORTED_FEATURE", name, err, Reason(trailer))
		}
	}
	for _, c := range []struct {
		name   string
		req    *pb.SubscribeKvPoolRequest
		code   codes.Code
		reason pb.RelayErrorReason
	}{
		{"stale generation", &pb.SubscribeKvPoolRequest{SubscriberId: "s", ExpectedProducer: producerOf(3, 0), ContractMarker: ContractMarker},
			codes.FailedPrecondition, pb.RelayErrorReason_RELAY_ERROR_REASON_PRODUCER_CHANGED},
		{"unknown pool", &pb.SubscribeKvPoolRequest{SubscriberId: "s", ExpectedProducer: producerOf(4, 1), ContractMarker: ContractMarker},
			codes.NotFound, pb.RelayErrorReason_RELAY_ERROR_REASON_POOL_NOT_FOUND},
		{"no subscriber id", &pb.SubscribeKvPoolRequest{ExpectedProducer: producerOf(3, 1), ContractMarker: ContractMarker},
			codes.InvalidArgument, pb.RelayErrorReason_RELAY_ERROR_REASON_INVALID_REQUEST},
		{"wrong marker", &pb.SubscribeKvPoolRequest{SubscriberId: "s", ExpectedProducer: producerOf(3, 1), ContractMarker: 7},
			codes.FailedPrecondition, pb.RelayErrorReason_RELAY_ERROR_REASON_CONTRACT_MISMATCH},
	} {
		var trailer metadata.MD
		stream, err := client.SubscribeKvPool(ctx, c.req, grpc.Trailer(&trailer))
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != c.code || Reason(trailer) != c.reason {
			t.Errorf("%s: SubscribeKvPool = %v, reason %v; want %v, %v", c.name, err, Reason(trailer), c.code, c.reason)
		}
	}
}

// A follower facing a relay of another contract stops at once with
// ErrContract instead of retrying forever.
func TestFollow_StopsOnAContractMismatch(t *testing.T) {
	s := &skewed{}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	g := grpc.NewServer()
	pb.RegisterKvEventRelayServer(g, s)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, _ := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := Follow(ctx, conn, FollowConfig{SubscriberID: "s", DCID: 1, Lane: &lane{}}); !errors.Is(err, ErrContract) {
		t.Errorf("Follow against protocol version 2 = %v, want ErrContract", err)
	}
}

type skewed struct {
	pb.UnimplementedKvEventRelayServer
}

func (skewed) GetRelayInfo(context.Context, *pb.RelayInfoRequest) (*pb.RelayInfo, error) {
	return &pb.RelayInfo{ProtocolVersion: 2, Relay: &pb.RelayIdentity{}, ContractMarker: ContractMarker}, nil
}

// mute is a Server whose GetRelayInfo can be made to hang, as a relay
// process that stopped answering behind a connection that stays up.
type mute struct {
	*Server
	hang atomic.Bool
}

func (m *mute) GetRelayInfo(ctx context.Context, req *pb.RelayInfoRequest) (*pb.RelayInfo, error) {
	if m.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return m.Server.GetRelayInfo(ctx, req)
}

// A relay that stops answering while its pool stream stays open (and
// silent) ends the session after MaxMissedProbes failed probes: the lane
// is retired as unavailable instead of served as if current, and follows
// again, from a fresh snapshot, once the relay answers.
func TestFollow_RetiresTheLaneOfARelayThatStopsAnswering(t *testing.T) {
	m := newModel(3)
	srv := &mute{Server: newTestServer(t, m)}
	conn := dial(t, listen(t, srv, GRPCOptions()...))
	l := &lane{}
	stop := follow(t, conn, FollowConfig{SubscriberID: "test", DCID: 3, Lane: l, Retry: 10 * time.Millisecond,
		PingEvery: 10 * time.Millisecond, CallTimeout: 50 * time.Millisecond})
	waitFor(t, "the snapshot is installed", func() bool { return l.converged(m) })
	srv.hang.Store(true)
	waitFor(t, "the lane is retired as unavailable", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !l.ready && len(l.retired) > 0 && errors.Is(l.retired[len(l.retired)-1], ErrUnavailable)
	})
	srv.hang.Store(false)
	waitFor(t, "the lane follows again", func() bool { return l.converged(m) })
	l.mu.Lock()
	installs := l.installs
	l.mu.Unlock()
	if installs < 2 {
		t.Errorf("%d installs, want a fresh one after the relay answered again", installs)
	}
	stop()
}

// following is a model that counts its pool streams still being served.
type following struct {
	*model
	active atomic.Int32
}

func (f *following) Follow(ctx context.Context, p *pb.ProducerIdentity) (<-chan Update, error) {
	ch, err := f.model.Follow(ctx, p)
	if err == nil {
		f.active.Add(1)
		context.AfterFunc(ctx, func() { f.active.Add(-1) })
	}
	return ch, err
}

// A subscriber whose path goes dark without a reset (the forwarder drops
// everything, both ways, and keeps the connection open) is found by the
// server's keepalive ping and its stream ended, instead of held until TCP
// gives up; the subscriber, retired by its own probes meanwhile, follows
// again once the path carries traffic.
func TestServer_EndsTheStreamsOfASubscriberThatWentDark(t *testing.T) {
	src := &following{model: newModel(3)}
	addr := listen(t, newTestServer(t, src), grpcOptions(keepalive.ServerParameters{Time: time.Second, Timeout: 200 * time.Millisecond})...)
	fw := movable.New(t, addr)
	conn := dial(t, fw.Addr())
	l := &lane{}
	stop := follow(t, conn, FollowConfig{SubscriberID: "test", DCID: 3, Lane: l, Retry: 10 * time.Millisecond,
		PingEvery: 50 * time.Millisecond, CallTimeout: 100 * time.Millisecond})
	waitFor(t, "the snapshot is installed", func() bool { return l.converged(src.model) && src.active.Load() == 1 })
	fw.Silence(true)
	waitFor(t, "the server ends the dark subscriber's stream", func() bool { return src.active.Load() == 0 })
	fw.Silence(false)
	waitFor(t, "the subscriber follows again", func() bool { return l.converged(src.model) })
	stop()
}
