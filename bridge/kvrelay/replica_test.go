package kvrelay

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/testseed"
)

// An upstream pool followed into lane 1 of a replica file: a reader of the
// file sees the pool's words byte for byte, the ready bit and the lane
// record; a producer of another format is refused; load windows land in
// the lane's load report.
func TestReplicaLane_FollowsAnUpstreamPoolIntoTheReplicaFile(t *testing.T) {
	seed := testseed.For(t, 31)
	rng := rand.New(rand.NewPCG(seed, 3))
	path := filepath.Join(t.TempDir(), "r.replica")
	w, err := shm.Create(path, shm.Layout{Seed: 0x5DEECE66D1B54A33, Buckets: testBuckets, Domain: 1, ConsumerInstance: 1, DCs: []uint64{7, 3}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	rl, err := NewReplicaLane(w, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(3)
	conn := serve(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Follow(ctx, conn, FollowConfig{SubscriberID: "replica-test", DCID: 3, Lane: rl, Retry: 10 * time.Millisecond, OnLoad: rl.RecordLoad})
	}()
	// Follow has returned, and with it every call into the lane, before the
	// file is closed (cleanups run last first).
	t.Cleanup(func() { cancel(); <-done })
	r, err := shm.Attach(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	for range 20 {
		m.publish(rng, 4)
	}
	waitFor(t, "the replica file holds the pool", func() bool {
		words, seq, _ := m.state()
		info := r.Lane(1)
		return r.Ready()&2 != 0 && info.Installed == seq && slices.Equal(r.Table().AppendLane(nil, 1), words)
	})
	if info := r.Lane(1); info.State != uint8(ingest.StateReady) || info.Incarnation != 1 {
		t.Errorf("lane record %+v, want READY of incarnation 1", info)
	}
	waitFor(t, "a load window lands", func() bool { return r.Lane(1).Load.CapacityBlocks == 100 })
	if ld := r.Lane(1).Load; ld.ActiveDecodeBlocks != 10 || ld.ActiveBlocks != 10 {
		t.Errorf("lane load %+v: want the pool's 10 used blocks as its active and decode blocks", ld)
	}
	if r.Ready()&1 != 0 {
		t.Error("lane 0 became ready: another lane was touched")
	}
	other := producerOf(3, 1)
	other.CkfFormat.BucketCount = 2 * testBuckets
	if err := rl.Install(other, 1, make([]uint64, 2*testBuckets)); !errors.Is(err, ErrInvalid) {
		t.Errorf("Install(a producer of another format) = %v, want ErrInvalid", err)
	}
	rl.Retire(nil)
	if r.Ready()&2 != 0 || r.Lane(1).State == uint8(ingest.StateReady) {
		t.Error("Retire left the lane ready")
	}
}
