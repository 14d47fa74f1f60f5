package consume

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/shm"
)

// The relay replaces its stored snapshot with an object store Put, which
// purges the chunks of the object it replaces. A lane that had already read
// the old object's info then waits for chunks that never come: nats.go's
// object read blocks until its context's deadline (ten RequestTimeouts),
// and every lane that started its read just before a refresh (every
// SnapshotEvery while deltas flow) stalled that long (seen as 50 s stalls,
// "read stored snapshot: nats: timeout", in the end-to-end suite on a
// loaded machine). The lane must see the new object and read that one.
func TestConsumer_SnapshotReplacedDuringItsReadIsReadAnew(t *testing.T) {
	seed := relaytest.Seed(t, 15)
	_, nc := natstest.Start(t)
	d := startRelay(t, nc, 8, seed)
	d.feed(t, nc, 200)
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	if err := d.r.Flush(ctx, 1); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	bucket := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 8}.SnapshotBucket()
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		t.Fatalf("snapshot store: %v", err)
	}
	old, err := obs.GetInfo(ctx, relay.SnapshotObject)
	if err != nil {
		t.Fatalf("stored snapshot: %v", err)
	}
	// What a reader of the stored object meets once a Put has replaced it:
	// its info names chunks that are gone (the object store's layout: stream
	// OBJ_<bucket>, chunks on $O.<bucket>.C.<nuid>).
	stream, err := js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	chunks := fmt.Sprintf("$O.%s.C.%s", bucket, old.NUID)
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(chunks)); err != nil {
		t.Fatalf("purge the stored snapshot's chunks: %v", err)
	}
	// The old read's deadline (10 × RequestTimeout) is well past the test's
	// waits: the lane must not wait for it.
	path := filepath.Join(t.TempDir(), "replica")
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{8}, Path: path,
		RetryEvery: 10 * time.Millisecond, RequestTimeout: 10 * time.Second})
	// The lane is reading the old object once its chunk consumer exists.
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		for ci := range stream.ListConsumers(ctx).Info() {
			if ci.Config.FilterSubject == chunks {
				return nil
			}
		}
		return fmt.Errorf("the lane is not reading snapshot %s", old.NUID)
	})
	if err := d.r.Snapshot(ctx, 1); err != nil {
		t.Fatalf("relay Snapshot: %v", err)
	}
	r, err := shm.Attach(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error { return converged(r, 0, d) })
	if st := c.Status()[0]; st.Snapshots != 1 || st.Resyncs == 0 {
		t.Errorf("lane status %+v: want one snapshot installed after a resync", st)
	}
}
