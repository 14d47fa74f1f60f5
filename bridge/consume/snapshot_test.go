package consume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/shm"
)

// The relay replaces its stored snapshot with an object store Put, which
// purges the chunks of the object it replaces. A lane that had already read
// the old object's info then waits for chunks that never come: nats.go's
// object read blocks until its context's deadline (then ten RequestTimeouts),
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
	// What a reader of the stored object meets once a Put has replaced it.
	stream, old, chunks := purgeStoredChunks(ctx, t, nc, 8)
	// The old read's bounds (a RequestTimeout without a chunk, 10× in all)
	// are past the test's waits: the lane must not wait for them.
	path := filepath.Join(t.TempDir(), "replica")
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{8}, Path: path,
		RetryEvery: 10 * time.Millisecond, RequestTimeout: 2 * wait})
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

// purgeStoredChunks purges the chunks of DC dc's stored snapshot and keeps
// its info, which then names chunks that are gone (the object store's
// layout: stream OBJ_<bucket>, chunks on $O.<bucket>.C.<nuid>). It returns
// the store's stream, the snapshot's info and its chunks' subject.
func purgeStoredChunks(ctx context.Context, t *testing.T, nc *nats.Conn, dc relayproto.DCID) (jetstream.Stream, *jetstream.ObjectInfo, string) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	bucket := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: dc}.SnapshotBucket()
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		t.Fatalf("snapshot store: %v", err)
	}
	info, err := obs.GetInfo(ctx, relay.SnapshotObject)
	if err != nil {
		t.Fatalf("stored snapshot: %v", err)
	}
	stream, err := js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	chunks := fmt.Sprintf("$O.%s.C.%s", bucket, info.NUID)
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(chunks)); err != nil {
		t.Fatalf("purge the stored snapshot's chunks: %v", err)
	}
	return stream, info, chunks
}

// A DC's JetStream can hang while its relay answers pings: a half-broken
// leafnode link, a JetStream API that never answers, a stored snapshot
// whose chunks stop arriving. A lane's install held one of the consumer's
// read slots (Config.SnapshotReads) through all of it, up to ten
// RequestTimeouts per attempt and again at every retry, so as many hung
// DCs as slots kept every healthy lane from installing (50 s at a time
// with the defaults). Nothing a DC does may hold back the others: with
// more hung DCs than slots, healthy lanes install within a few
// RequestTimeouts, and each hung lane retries and says that JetStream
// timed out.
func TestConsumer_HungJetStreamsDoNotHoldBackHealthyLanes(t *testing.T) {
	const timeout = 500 * time.Millisecond
	seed := relaytest.Seed(t, 16)
	s, nc := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	// DCs 1 and 2 send consumers to JetStream domain "hung", whose API
	// requests a subscriber takes and never answers.
	hungJS, err := natslink.Connect(s.ClientURL(), "hung-jetstream", nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(hungJS.Close)
	var mu sync.Mutex
	asked := map[string]bool{}
	if _, err := hungJS.Subscribe("$JS.hung.API.>", func(m *nats.Msg) {
		mu.Lock()
		asked[m.Subject] = true
		mu.Unlock()
	}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := hungJS.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	startRelayIn(t, nc, 1, seed, 4096, "hung")
	startRelayIn(t, nc, 2, seed, 4096, "hung")
	// DC 3's stored snapshot has lost its chunks: a read of it gets nothing.
	stalled := startRelay(t, nc, 3, seed)
	stalled.feed(t, nc, 200)
	if err := stalled.r.Flush(ctx, 1); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	purgeStoredChunks(ctx, t, nc, 3)

	path := filepath.Join(t.TempDir(), "replica")
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{1, 2, 3, 4, 5}, Path: path,
		SnapshotReads: 2, RequestTimeout: timeout, RetryEvery: 20 * time.Millisecond, Logger: logOnFailure(t)})
	// Both of DC 1's and DC 2's lanes are installing (each took a read slot
	// before its first request, when an install held one throughout) before
	// the healthy DCs' relays start.
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(asked) < 2 {
			return fmt.Errorf("hung JetStream asked %v, want a request of each of DC 1 and DC 2", slices.Collect(maps.Keys(asked)))
		}
		return nil
	})
	healthy := []*dcRelay{startRelay(t, nc, 4, seed), startRelay(t, nc, 5, seed)}
	for _, d := range healthy {
		d.feed(t, nc, 200)
	}
	r, err := shm.Attach(path)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer r.Close()
	relaytest.CheckFor(t, 5*timeout, 5*time.Millisecond, func() error {
		for i, d := range healthy {
			if err := converged(r, 3+i, d); err != nil {
				return err
			}
		}
		return nil
	})
	relaytest.CheckFor(t, 5*timeout, 5*time.Millisecond, func() error {
		for _, st := range c.Status()[:3] {
			if st.Resyncs < 2 || !strings.Contains(st.LastFault, ErrJetStreamTimeout.Error()) {
				return fmt.Errorf("lane %d (dc %d): %d resyncs, last fault %q; want retries, each failing as %q",
					st.Lane, st.DC, st.Resyncs, st.LastFault, ErrJetStreamTimeout)
			}
			if st.DC != 3 && !strings.Contains(st.LastFault, `domain "hung"`) {
				return fmt.Errorf("lane %d (dc %d): last fault %q does not name JetStream domain \"hung\"", st.Lane, st.DC, st.LastFault)
			}
		}
		return nil
	})
	for _, st := range c.Status()[:3] {
		if st.Snapshots != 0 || r.Ready()&(1<<st.Lane) != 0 {
			t.Errorf("lane %d (dc %d): %d snapshots installed, ready mask %#x; want none from a hung JetStream",
				st.Lane, st.DC, st.Snapshots, r.Ready())
		}
	}
}

// slowStore is an object store whose one object is read slowBytes at a
// time, one read every gap, up to stopAt bytes (then nothing more comes);
// only Get is implemented.
type slowStore struct {
	jetstream.ObjectStore
	info   jetstream.ObjectInfo
	gap    time.Duration
	stopAt int
}

func (s *slowStore) Get(ctx context.Context, _ string, _ ...jetstream.GetObjectOpt) (jetstream.ObjectResult, error) {
	return &slowObject{s: s, ctx: ctx}, nil
}

// slowBytes is what one read of a slowStore's object returns at most:
// one every 10 ms is 3.2 MiB/s, slow, yet well above snapshotReadRate, the
// rate under which a read is a trickle and given up at its total bound.
const slowBytes = 32 << 10

type slowObject struct {
	s    *slowStore
	ctx  context.Context
	sent int
}

func (o *slowObject) Read(p []byte) (int, error) {
	if o.sent == int(o.s.info.Size) {
		return 0, io.EOF
	}
	wait := o.s.gap
	if o.sent >= o.s.stopAt {
		wait = time.Hour
	}
	select {
	case <-o.ctx.Done():
		return 0, o.ctx.Err()
	case <-time.After(wait):
	}
	n := min(len(p), slowBytes, int(o.s.info.Size)-o.sent)
	for i := range n {
		p[i] = byte(o.sent + i)
	}
	o.sent += n
	return n, nil
}

func (o *slowObject) Close() error                         { return nil }
func (o *slowObject) Info() (*jetstream.ObjectInfo, error) { return &o.s.info, nil }
func (o *slowObject) Error() error                         { return nil }

// TestReadStored_GoesOnWhileChunksArriveAndStopsWhenTheyDont: a stored
// snapshot's read is bounded by its progress, not by one deadline: one
// whose chunks keep coming (a large snapshot on a slow link) completes
// though it takes longer than ten RequestTimeouts, where one deadline of
// 10× gave it up, and one whose chunks stop is given up about a
// RequestTimeout later.
func TestReadStored_GoesOnWhileChunksArriveAndStopsWhenTheyDont(t *testing.T) {
	const timeout = 100 * time.Millisecond
	const size = 150 * slowBytes // 150 reads, one every timeout/10: 1.5 s in all, past 10 × timeout
	info := jetstream.ObjectInfo{ObjectMeta: jetstream.ObjectMeta{Name: relay.SnapshotObject}, NUID: "n1", Size: size}
	read := func(s *slowStore) ([]byte, time.Duration, error) {
		wd := newWatchdog(context.Background(), timeout, fmt.Errorf("%w: test", ErrJetStreamTimeout))
		defer wd.stop()
		start := time.Now()
		body, err := readStored(wd, s, &info, nil, timeout)
		return body, time.Since(start), err
	}

	body, took, err := read(&slowStore{info: info, gap: timeout / 10, stopAt: size})
	if err != nil || len(body) != size {
		t.Fatalf("readStored(%d bytes, %d every %v, RequestTimeout %v) = %d bytes, %v after %v; want all of them",
			size, slowBytes, timeout/10, timeout, len(body), err, took)
	}
	for i, b := range body {
		if b != byte(i) {
			t.Fatalf("readStored: byte %d = %#x, want %#x", i, b, byte(i))
		}
	}

	done := make(chan error, 1)
	go func() {
		_, _, err := read(&slowStore{info: info, gap: timeout / 10, stopAt: size / 2})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrJetStreamTimeout) || !strings.Contains(err.Error(), fmt.Sprintf("%d of %d bytes", size/2, size)) {
			t.Errorf("readStored(chunks stop at %d of %d bytes) = %v, want ErrJetStreamTimeout naming how far it got", size/2, size, err)
		}
	case <-time.After(wait):
		t.Fatalf("readStored(chunks stop at %d of %d bytes) still reading after %v", size/2, size, wait)
	}
}
