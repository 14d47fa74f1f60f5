package hostile

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/consume"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/nats-io/nats.go/jetstream"
)

// TestHostile_ForgedAndPoisonFramesInTheDeltaLog writes hostile messages
// into a live relay's delta log (what anyone allowed to publish on its
// subject could do) while a consumer follows it:
//
//   - deltas of another pool and of an older incarnation, which would
//     change a word if applied, are ignored: no fault, no resync, and the
//     lane keeps equal to the producer;
//   - an undecodable message, or a delta forging a newer incarnation, ends
//     the subscription once; the consumer asks for a fresh snapshot so its
//     next subscription starts past the poison message, and the lane
//     converges again and stays (no resync loop).
func TestHostile_ForgedAndPoisonFramesInTheDeltaLog(t *testing.T) {
	_, nc := natstest.Start(t)
	const expected = 4096
	// No heartbeats and a batch per event: the relay writes its log only
	// when an event arrives, so the test knows when it is idle and the
	// forged messages never race one of its publishes.
	r, err := relay.New(relay.Config{Conn: nc, DC: 3, HeartbeatEvery: time.Hour, LoadEvery: 50 * time.Millisecond, BatchEvents: 1,
		Pools: []relay.PoolConfig{{Domain: 1, Namespace: "dynamo", Component: "backend", ExpectedBlocks: expected}}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopRelay := context.WithCancel(context.Background())
	relayDone := make(chan error, 1)
	go func() { relayDone <- r.Run(rctx) }()
	t.Cleanup(func() { stopRelay(); <-relayDone })
	select {
	case <-r.Ready():
	case err := <-relayDone:
		t.Fatalf("relay: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("relay not ready")
	}
	gen := relaytest.NewGenerator(seed(t, 7), 3)
	fed := uint64(0)
	feed := func(n int) {
		fed += uint64(n)
		for range n {
			if err := nc.Publish(dynamo.EventSubject("dynamo", "backend"), gen.Next()); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "replica")
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := consume.New(cctx, consume.Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{3}, Path: path,
		PingEvery: 20 * time.Millisecond, RetryEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("consume.New: %v", err)
	}
	runCtx, stopConsumer := context.WithCancel(context.Background())
	consumerDone := make(chan error, 1)
	go func() { consumerDone <- c.Run(runCtx) }()
	t.Cleanup(func() { stopConsumer(); <-consumerDone })
	reader, err := shm.Attach(path)
	if err != nil {
		t.Fatalf("attach replica: %v", err)
	}
	defer reader.Close()

	// converged: the relay has handled every event fed, and the lane holds
	// exactly its producer's words at its last sequence.
	converged := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := r.Status(ctx)
		if err != nil {
			return err
		}
		if in := st[0].Intake; in.Events+in.NonPrimary < fed {
			return fmt.Errorf("relay handled %d of %d events", in.Events, fed)
		}
		if got := c.Status()[0].Installed; got != st[0].Publisher.LastSequence {
			return fmt.Errorf("lane installed %d, relay at %d", got, st[0].Publisher.LastSequence)
		}
		if stale, err := reader.Stale(); err != nil || stale {
			return fmt.Errorf("replica file replaced (%v)", err)
		}
		want, err := r.AppendWords(ctx, nil, 1)
		if err != nil {
			return err
		}
		if reader.Ready()&1 == 0 {
			return fmt.Errorf("lane not ready: %+v", c.Status()[0])
		}
		if got := reader.Table().AppendLane(nil, 0); !slices.Equal(got, want) {
			return fmt.Errorf("lane words differ from the producer's: %+v", c.Status()[0])
		}
		return nil
	}
	feed(100)
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, converged)

	// Forge deltas that would apply if their identity were the lane's.
	st, err := r.Status(cctx)
	if err != nil {
		t.Fatal(err)
	}
	buckets, _ := ckf.BucketCount(expected)
	format, err := relayproto.NewFormat(ckf.DefaultSeed, buckets)
	if err != nil {
		t.Fatal(err)
	}
	own := relayproto.ProducerIdentity{Pool: relayproto.PoolID{Domain: 1, DC: 3}, Incarnation: st[0].Incarnation,
		LayoutGeneration: st[0].LayoutGeneration, Format: format}
	foreign := own
	foreign.Pool.DC = 99
	older := own
	older.Incarnation--
	names := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 3}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	publishLog := func(b []byte) {
		if _, err := js.Publish(cctx, names.DeltaSubject(), b); err != nil {
			t.Fatalf("publish into the delta log: %v", err)
		}
	}
	last := st[0].Publisher.LastSequence
	before := c.Status()[0]
	for _, id := range []relayproto.ProducerIdentity{foreign, older} {
		f, err := wire.AppendFrame(nil, &relayproto.Delta{Identity: id, Base: last, Sequence: last + 1,
			Images: []relayproto.Image{{Bucket: 1, Word: 0xdeadbeef}, {Bucket: 2, Word: 0xfeedface}}})
		if err != nil {
			t.Fatal(err)
		}
		publishLog(f)
	}
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if got := c.Status()[0].FramesReceived["delta"]; got < before.FramesReceived["delta"]+2 {
			return fmt.Errorf("forged deltas not read yet (%d delta frames)", got)
		}
		return nil
	})
	if after := c.Status()[0]; after.Resyncs != before.Resyncs || after.Faults != before.Faults || after.Deltas != before.Deltas {
		t.Errorf("forged deltas of another pool and an older incarnation: resyncs %d → %d, faults %d → %d, applied %d → %d; want all unchanged (%s)",
			before.Resyncs, after.Resyncs, before.Faults, after.Faults, before.Deltas, after.Deltas, after.LastFault)
	}
	if err := converged(); err != nil {
		t.Errorf("after the forged deltas: %v", err)
	}
	// A consumer's snapshot request makes the relay pass the foreign
	// messages (its publishes expect the log's last sequence); then it
	// goes on publishing and the lane follows.
	if _, err := nc.Request(names.SnapshotSubject(), nil, 10*time.Second); err != nil {
		t.Fatalf("snapshot request: %v", err)
	}
	feed(50)
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, converged)

	// Poison messages: undecodable bytes, and a delta claiming a newer
	// incarnation of the pool (which must fault: it looks like a restart).
	newer := own
	newer.Incarnation++
	forgedRestart, err := wire.AppendFrame(nil, &relayproto.Delta{Identity: newer, Base: 0, Sequence: 1,
		Images: []relayproto.Image{{Bucket: 5, Word: 0xbadc0de}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, poison := range []struct {
		what string
		msg  []byte
	}{{"undecodable bytes", []byte("GIRF\x01\x02\x00\x00garbage that is not a frame")}, {"a forged newer incarnation", forgedRestart}} {
		start := c.Status()[0]
		publishLog(poison.msg)
		feed(50)
		relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
			if c.Status()[0].Resyncs == start.Resyncs {
				return fmt.Errorf("%s: not read yet", poison.what)
			}
			return converged()
		})
		settled := c.Status()[0]
		feed(50)
		relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
			if c.Status()[0].Deltas <= settled.Deltas {
				return fmt.Errorf("%s: no new delta applied yet: %+v", poison.what, c.Status()[0])
			}
			return converged()
		})
		if after := c.Status()[0]; after.Resyncs != settled.Resyncs || settled.Resyncs != start.Resyncs+1 {
			t.Errorf("%s: resyncs %d → %d → %d, want exactly one (the consumer must start past it)",
				poison.what, start.Resyncs, settled.Resyncs, after.Resyncs)
		}
	}
}
