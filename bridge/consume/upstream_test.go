package consume

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/goindex/goindex/bridge/kvrelay"
	"github.com/goindex/goindex/bridge/kvrelay/cbi1"
	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/syncbuf"
)

// upstreamPool is a Dynamo Pool Relay's pool as a kvrelay.Source: one
// producer of dc 3 whose snapshot and one delta it streams.
type upstreamPool struct {
	producer *pb.ProducerIdentity
	words    []uint64
}

func (u *upstreamPool) Catalog() (uint64, []*kvrelay.Pool, <-chan struct{}) {
	return 1, []*kvrelay.Pool{{Producer: u.producer, PoolRoles: []pb.WorkerRole{pb.WorkerRole_WORKER_ROLE_AGGREGATED},
		QuerySemantics: &pb.KvQuerySemantics{KvBlockSize: 16, HashFormat: pb.KvQueryHashFormat_KV_QUERY_HASH_FORMAT_DYNAMO_STANDARD_V1}}}, nil
}

func (u *upstreamPool) Follow(ctx context.Context, _ *pb.ProducerIdentity) (<-chan kvrelay.Update, error) {
	ch := make(chan kvrelay.Update, 3)
	before := slices.Clone(u.words)
	before[5] = 0
	ch <- kvrelay.Update{Kind: kvrelay.Snapshot, Sequence: 4, Words: before}
	ch <- kvrelay.Update{Kind: kvrelay.Delta, Base: 4, Sequence: 5, Images: []cbi1.Image{{Bucket: 5, Word: u.words[5]}}}
	ch <- kvrelay.Update{Kind: kvrelay.Heartbeat, Sequence: 5}
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

func (u *upstreamPool) Loads() []*kvrelay.Load {
	return []*kvrelay.Load{{Producer: u.producer, KvUsedBlocks: 30, TotalKvBlocks: 300, KvObservedRanks: 3, KvExpectedRanks: 3}}
}

// A consumer given --upstream-relays follows that DC's lane from a Dynamo
// Pool Relay over dynamo.kvrelay.v1 into its replica file: the router's
// reader sees the upstream pool's words and a ready lane.
func TestConsumer_FollowsAnUpstreamPoolRelay(t *testing.T) {
	const seed, buckets = 0x5DEECE66D1B54A33, 32
	pool := &upstreamPool{producer: &pb.ProducerIdentity{
		PoolId: &pb.KvPoolId{IdentityVersion: 1, DcId: 3, IndexerDomain: &pb.IndexerDomainId{
			CacheSemantics: &pb.DigestIdentity{Digest: []byte{1}, Source: pb.IdentitySource_IDENTITY_SOURCE_EXPLICIT}}},
		ProducerIncarnation: 2, LayoutGeneration: 1,
		CkfFormat: &pb.CkfFormat{FormatVersion: 1, Seed: seed, BucketCount: buckets, FingerprintBits: 16, SlotsPerBucket: 4}}}
	for i := range buckets {
		pool.words = append(pool.words, uint64(i)*0x1_0001_0001_0001+1)
	}
	srv, err := kvrelay.NewServer(kvrelay.ServerConfig{Relay: &pb.RelayIdentity{RelayIncarnation: 1}, Source: pool,
		LoadInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(kvrelay.GRPCOptions()...)
	pb.RegisterKvEventRelayServer(g, srv)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)

	_, nc := natstest.Start(t)
	path := filepath.Join(t.TempDir(), "r.replica")
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncbuf.Buffer{}
	c, err := New(ctx, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{3}, Seed: seed, Buckets: buckets, Path: path,
		RetryEvery: 10 * time.Millisecond, PingEvery: 10 * time.Millisecond, Upstream: map[relayproto.DCID]string{3: ln.Addr().String()},
		Logger: debugLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
		}
	})
	r, err := shm.Attach(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if r.Ready()&1 != 0 && r.Lane(0).Installed == 5 && slices.Equal(r.Table().AppendLane(nil, 0), pool.words) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream pool never reached the replica: ready %b, installed %d", r.Ready(), r.Lane(0).Installed)
		}
	}
	// The lane's status reads as a native lane's: state, incarnation,
	// sequences, frames by kind, RTT and load.
	var st LaneStatus
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st = c.Status()[0]
		if st.RTT > 0 && st.Load != nil && st.FramesReceived[relayproto.FrameHeartbeat.String()] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream lane's status never showed an RTT, a load report and a heartbeat: %+v", st)
		}
	}
	if st.State != ingest.StateReady.String() || st.Incarnation != 2 || st.Installed != 5 || st.Latest != 5 || st.Lag != 0 ||
		st.Snapshots != 1 || st.Deltas != 1 || st.FramesReceived[relayproto.FrameSnapshot.String()] == 0 ||
		st.FramesReceived[relayproto.FrameDelta.String()] != 1 || st.Load.CapacityBlocks != 300 || st.Load.ActiveDecodeBlocks != 30 ||
		st.Load.LiveWorkers != 3 || st.FramesReceived[relayproto.FrameLoadReport.String()] == 0 {
		t.Errorf("upstream lane status %+v (load %+v): want READY of incarnation 2 at 5, lag 0, 1 snapshot, 1 delta, "+
			"frames of each kind, load 30 of 300 blocks over 3 workers", st, *st.Load)
	}
	if info := r.Lane(0); info.RTT <= 0 || info.Load.CapacityBlocks != 300 {
		t.Errorf("the replica's lane record has RTT %v, capacity %d; want the status's", info.RTT, info.Load.CapacityBlocks)
	}
	// Words damaged behind the consumer's back: its verifier finds them
	// and the lane follows its relay again from a fresh snapshot, as a
	// native lane does.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := r.Info()
	for b := range 3 {
		if _, err := f.WriteAt([]byte{0xa5}, int64(info.HeaderBytes)+64+int64(8*b*8)); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st = c.Status()[0]
		if st.IntegrityFailures > 0 && st.Snapshots >= 2 && r.Ready()&1 != 0 && slices.Equal(r.Table().AppendLane(nil, 0), pool.words) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the damaged upstream lane was not resynced: %+v", st)
		}
	}
	if st.Faults != 0 {
		t.Errorf("an integrity resync counted %d faults of the relay, want 0", st.Faults)
	}
	// The session's end is logged as a native lane's, with its pause.
	if waits := resyncWaits(t, logs.String()); len(waits) == 0 || !strings.Contains(logs.String(), "level=WARN msg=\"lane resync\"") {
		t.Errorf("the upstream lane's resync was not warned of with its pause (pauses %v):\n%s", waits, logs.String())
	}
	if _, err := New(ctx, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{3}, Seed: seed, Buckets: buckets, Path: path + "2",
		Upstream: map[relayproto.DCID]string{4: "x:1"}}); err == nil {
		t.Error("New accepted an upstream DC outside DCs")
	}
	stopped = true
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if st := c.Status()[0]; st.State != ingest.StateIdle.String() || r.Ready() != 0 {
		t.Errorf("after Run: lane %s, ready %b; want IDLE and no ready bit", st.State, r.Ready())
	}
}
