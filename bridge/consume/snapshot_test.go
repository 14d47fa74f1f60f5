package consume

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

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
	baseline := consumers(ctx, t, stream)
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
	// The read given up ended with its consumer, long before its bounds.
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error { return readLeftovers(stream, baseline) })
}

// consumers returns how many consumers stream has.
func consumers(ctx context.Context, t *testing.T, stream jetstream.Stream) int {
	t.Helper()
	si, err := stream.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return si.State.Consumers
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
	stalledStore, _, _ := purgeStoredChunks(ctx, t, nc, 3)
	baseline := consumers(ctx, t, stalledStore)

	path := filepath.Join(t.TempDir(), "replica")
	c, stop, done := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{1, 2, 3, 4, 5}, Path: path,
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
	// DC 3's reads given up (every attempt's, and the one the stop ends)
	// left neither a goroutine nor a consumer on its server: each used
	// to linger to its total bound, ten RequestTimeouts.
	stop()
	done <- <-done // Run returned (and startConsumer's cleanup waits for it again)
	relaytest.CheckFor(t, 5*timeout, 5*time.Millisecond, func() error { return readLeftovers(stalledStore, baseline) })
}

// readBucket makes an object store bucket of its own on nc's server for a
// test of readStored, and returns its JetStream, store and stream.
func readBucket(ctx context.Context, t *testing.T, nc *nats.Conn) (jetstream.JetStream, jetstream.ObjectStore, jetstream.Stream) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "reads"})
	if err != nil {
		t.Fatalf("CreateObjectStore: %v", err)
	}
	stream, err := js.Stream(ctx, objectStream("reads"))
	if err != nil {
		t.Fatal(err)
	}
	return js, obs, stream
}

// writeChunks publishes chunks on the chunk subject of object nuid of
// bucket "reads", as a Put does.
func writeChunks(ctx context.Context, t *testing.T, js jetstream.JetStream, nuid string, chunks [][]byte) {
	t.Helper()
	for i, c := range chunks {
		if _, err := js.Publish(ctx, chunkSubject("reads", nuid), c); err != nil {
			t.Fatalf("publish chunk %d of %s: %v", i, nuid, err)
		}
	}
}

// objectInfo is the info a Put of chunks as object nuid of bucket "reads"
// stores.
func objectInfo(nuid string, chunks [][]byte) *jetstream.ObjectInfo {
	h := sha256.New()
	info := &jetstream.ObjectInfo{ObjectMeta: jetstream.ObjectMeta{Name: relay.SnapshotObject}, Bucket: "reads", NUID: nuid}
	for _, c := range chunks {
		h.Write(c)
		info.Size += uint64(len(c))
		info.Chunks++
	}
	info.Digest = jetstream.GetObjectDigestValue(h)
	return info
}

// pattern is n bytes that differ from one chunk to the next.
func pattern(from, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((from + i) * 7 / 5)
	}
	return b
}

// readLeftovers returns what a stored snapshot's read left running: the
// goroutines in one (readStored's own, a Get's object read, nats.go's
// Consume, which the package uses for nothing else) and stream's
// consumers past baseline.
func readLeftovers(stream jetstream.Stream, baseline int) error {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var reads []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		for _, frame := range []string{"bridge/consume.readStored", "bridge/consume.(*chunkRead)",
			"jetstream.(*objResult)", "jetstream.(*pullConsumer).Consume"} {
			if strings.Contains(g, frame) {
				reads = append(reads, g)
				break
			}
		}
	}
	if len(reads) > 0 {
		return fmt.Errorf("%d goroutines still in a stored snapshot's read, the first:\n%s", len(reads), reads[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	si, err := stream.Info(ctx)
	if err != nil {
		return err
	}
	if si.State.Consumers > baseline {
		return fmt.Errorf("stream %s has %d consumers, %d before the read", si.Config.Name, si.State.Consumers, baseline)
	}
	return nil
}

// slowLink returns a JetStream of a connection to s through a proxy that
// passes rateKB KB/s from the server, and the proxy's toxics (timeout 0
// stops the link dead).
func slowLink(t *testing.T, s *natslink.Server, rateKB int) (jetstream.JetStream, *nats.Conn, *toxiproxy.ToxicCollection) {
	t.Helper()
	proxy := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()), "slow", "127.0.0.1:0",
		strings.TrimPrefix(s.ClientURL(), "nats://"))
	if err := proxy.Start(); err != nil {
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(proxy.Stop)
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":"slow","type":"bandwidth","stream":"downstream","attributes":{"rate":%d}}`, rateKB))); err != nil {
		t.Fatalf("bandwidth toxic: %v", err)
	}
	nc, err := natslink.Connect("nats://"+proxy.Listen, "slow-reader", nil)
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js, nc, proxy.Toxics
}

// readProgress returns how many bytes of how many a read that err ended
// had read, as err says.
func readProgress(err error) (got, of int, ok bool) {
	if err == nil {
		return 0, 0, false
	}
	m := regexp.MustCompile(`\((\d+) of (\d+) bytes\)`).FindStringSubmatch(err.Error())
	if m == nil {
		return 0, 0, false
	}
	got, _ = strconv.Atoi(m[1])
	of, _ = strconv.Atoi(m[2])
	return got, of, true
}

// TestReadStored_GoesOnWhileChunksArriveAndStopsWhenTheyDont: a stored
// snapshot's read is bounded by its progress, not by one deadline: one
// whose chunks keep coming (a large snapshot on a slow link) completes
// though it takes three RequestTimeouts, and one whose chunks stop is
// given up about a RequestTimeout later, saying how far it got, and
// leaving nothing behind. (RequestTimeout is a second: a test machine
// busy enough to pause the read that long between two chunks, under
// -race and beside other tests, is rare; at 250 ms it was not.)
func TestReadStored_GoesOnWhileChunksArriveAndStopsWhenTheyDont(t *testing.T) {
	const timeout = time.Second
	// 150 chunks of 32 KiB over a link of 1.6 MB/s, which passes what it
	// reads 32 KiB at a time: a chunk every 20 ms, 3.1 s in all, slow, yet
	// above snapshotReadRate (under which a read is a trickle, given up at
	// its total bound).
	const chunkBytes, count, rateKB = 32 << 10, 150, 1600
	const size = count * chunkBytes
	s, nc := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	js, _, stream := readBucket(ctx, t, nc)
	var chunks [][]byte
	for i := range count {
		chunks = append(chunks, pattern(i*chunkBytes, chunkBytes))
	}
	slow, slowConn, toxics := slowLink(t, s, rateKB)
	read := func(nuid string) ([]byte, time.Duration, error) {
		info := objectInfo(nuid, chunks)
		writeChunks(ctx, t, js, nuid, chunks)
		wd := newWatchdog(ctx, timeout, fmt.Errorf("%w: test", ErrJetStreamTimeout))
		defer wd.stop()
		start := time.Now()
		body, err := readStored(wd, slow, "reads", info, nil, timeout)
		return body, time.Since(start), err
	}

	body, took, err := read("whole")
	if want := slices.Concat(chunks...); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("readStored(%d chunks of %d bytes at %d KB/s, RequestTimeout %v) = %d bytes, %v after %v; want all %d",
			count, chunkBytes, rateKB, timeout, len(body), err, took, len(want))
	}

	done := make(chan error, 1)
	from := slowConn.Stats().InBytes
	go func() {
		_, _, err := read("stops")
		done <- err
	}()
	// Half way through, the link stops passing anything.
	relaytest.CheckFor(t, wait, time.Millisecond, func() error {
		if got := slowConn.Stats().InBytes - from; got < size/2 {
			return fmt.Errorf("%d of %d bytes received", got, size)
		}
		return nil
	})
	if _, err := toxics.AddToxicJson(strings.NewReader(`{"name":"dead","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)); err != nil {
		t.Fatalf("timeout toxic: %v", err)
	}
	select {
	case err := <-done:
		if got, of, ok := readProgress(err); !errors.Is(err, ErrJetStreamTimeout) || !ok || of != size || got <= 0 || got >= size {
			t.Errorf("readStored(chunks stop after about %d of %d bytes) = %v, want ErrJetStreamTimeout naming how far it got", size/2, size, err)
		}
	case <-time.After(wait):
		t.Fatalf("readStored(chunks stop after about %d of %d bytes) still reading after %v", size/2, size, wait)
	}
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error { return readLeftovers(stream, 0) })
}

// A read given up used to leave its goroutine blocked in nats.go's object
// read, with its chunk buffer, until the read's total bound (10 ×
// RequestTimeout plus a second per MiB: minutes for a large snapshot), so
// a DC that kept failing reads piled them up. However a read is given up
// (its snapshot replaced, its countdown run out, its context ended), its
// goroutines end, and its consumer on the DC's server is deleted, within
// a RequestTimeout; here an hour, past the test.
func TestReadStored_GivenUpReadLeavesNothingBehind(t *testing.T) {
	const timeout = time.Hour
	_, nc := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	js, obs, stream := readBucket(ctx, t, nc)
	stalled := fmt.Errorf("%w: test", ErrJetStreamTimeout)
	for _, tc := range []struct {
		name string
		// giveUp makes the read give up, once it is reading.
		giveUp func(wd *watchdog, updates chan<- *jetstream.ObjectInfo, info *jetstream.ObjectInfo, end context.CancelFunc)
		want   error
	}{
		{"snapshot replaced", func(_ *watchdog, updates chan<- *jetstream.ObjectInfo, info *jetstream.ObjectInfo, _ context.CancelFunc) {
			updates <- &jetstream.ObjectInfo{ObjectMeta: info.ObjectMeta, NUID: "another"}
		}, ErrSnapshotReplaced},
		{"countdown run out", func(wd *watchdog, _ chan<- *jetstream.ObjectInfo, _ *jetstream.ObjectInfo, _ context.CancelFunc) {
			wd.cancel(stalled)
		}, stalled},
		{"context ended", func(_ *watchdog, _ chan<- *jetstream.ObjectInfo, _ *jetstream.ObjectInfo, end context.CancelFunc) {
			end()
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			// A snapshot whose chunks are gone, as a Put that replaced it
			// leaves them: its read gets nothing.
			info, err := obs.PutBytes(ctx, relay.SnapshotObject, pattern(0, 4<<17))
			if err != nil {
				t.Fatalf("PutBytes: %v", err)
			}
			subject := chunkSubject("reads", info.NUID)
			if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
				t.Fatalf("purge %s: %v", subject, err)
			}
			lane, end := context.WithCancel(ctx)
			defer end()
			wd := newWatchdog(lane, timeout, stalled)
			defer wd.stop()
			updates := make(chan *jetstream.ObjectInfo, 1)
			done := make(chan error, 1)
			go func() {
				_, err := readStored(wd, js, "reads", info, updates, timeout)
				done <- err
			}()
			relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
				for ci := range stream.ListConsumers(ctx).Info() {
					if ci.Config.FilterSubject == subject {
						return nil
					}
				}
				return fmt.Errorf("no consumer reads %s", subject)
			})
			tc.giveUp(wd, updates, info, end)
			select {
			case err := <-done:
				if !errors.Is(err, tc.want) {
					t.Errorf("readStored given up (%s) = %v, want %v", tc.name, err, tc.want)
				}
			case <-time.After(wait):
				t.Fatalf("readStored given up (%s) still reading after %v", tc.name, wait)
			}
			relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error { return readLeftovers(stream, 0) })
		})
	}
}

// A stored snapshot's read keeps the integrity check of nats.go's object
// read it replaced: an object whose chunks are not what its info says (a
// chunk altered, missing or one too many, a digest, size or chunk count
// of something else) is refused with jetstream.ErrDigestMismatch, without
// waiting for chunks that will not come, and one that is is read whole.
func TestReadStored_RefusesACorruptOrShortObject(t *testing.T) {
	_, nc := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	js, obs, stream := readBucket(ctx, t, nc)
	const chunkBytes = 1 << 10
	data := pattern(0, 9*chunkBytes+100) // 10 chunks
	for _, tc := range []struct {
		name   string
		chunks func([][]byte) [][]byte     // what the store holds instead
		info   func(*jetstream.ObjectInfo) // what its info says instead
	}{
		{name: "as stored"},
		{name: "a chunk altered", chunks: func(c [][]byte) [][]byte {
			c[3] = slices.Clone(c[3])
			c[3][17] ^= 1
			return c
		}},
		{name: "the last chunk missing", chunks: func(c [][]byte) [][]byte { return c[:len(c)-1] }},
		{name: "a middle chunk missing", chunks: func(c [][]byte) [][]byte { return slices.Delete(c, 4, 5) }},
		{name: "a chunk too many", chunks: func(c [][]byte) [][]byte { return append(c, c[0]) }},
		{name: "another digest", info: func(i *jetstream.ObjectInfo) {
			h := sha256.New()
			h.Write(data[1:])
			i.Digest = jetstream.GetObjectDigestValue(h)
		}},
		{name: "a byte fewer", info: func(i *jetstream.ObjectInfo) { i.Size-- }},
		{name: "a chunk more", info: func(i *jetstream.ObjectInfo) { i.Chunks++ }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
			defer cancel()
			info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: relay.SnapshotObject,
				Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkBytes}}, bytes.NewReader(data))
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if tc.chunks != nil {
				subject := chunkSubject("reads", info.NUID)
				if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
					t.Fatalf("purge %s: %v", subject, err)
				}
				var chunks [][]byte
				for c := range slices.Chunk(data, chunkBytes) {
					chunks = append(chunks, c)
				}
				writeChunks(ctx, t, js, info.NUID, tc.chunks(chunks))
			}
			if tc.info != nil {
				tc.info(info)
			}
			// A read that waits for a chunk instead of refusing the object
			// runs into the test's deadline.
			wd := newWatchdog(ctx, wait, fmt.Errorf("%w: test", ErrJetStreamTimeout))
			defer wd.stop()
			body, err := readStored(wd, js, "reads", info, nil, wait)
			if tc.chunks == nil && tc.info == nil {
				if err != nil || !bytes.Equal(body, data) {
					t.Errorf("readStored(object as stored) = %d bytes, %v; want its %d", len(body), err, len(data))
				}
				return
			}
			// Refused before it holds more than its info's size.
			if got, of, ok := readProgress(err); !errors.Is(err, jetstream.ErrDigestMismatch) || body != nil || !ok || got > of {
				t.Errorf("readStored(object with %s) = %d bytes, %v; want %v, at most %d bytes read",
					tc.name, len(body), err, jetstream.ErrDigestMismatch, info.Size)
			}
		})
	}
}

// deliveredChunk is a chunk as a pull delivers it: the consumer's
// delivery count and what is pending after it.
type deliveredChunk struct {
	jetstream.Msg
	data      []byte
	delivered uint64
	pending   uint64
}

func (m *deliveredChunk) Data() []byte { return m.data }

func (m *deliveredChunk) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Consumer: m.delivered}, NumPending: m.pending}, nil
}

// A chunk lost between the server and the read (a reconnect drops what was
// in flight; AckNone never sends it again) shows as a skip in the
// consumer's delivery count: the read ends there, rather than refusing the
// object as corrupt or waiting for the chunk, and the lane retries.
func TestChunkRead_EndsAtAChunkLostInTransit(t *testing.T) {
	chunks := [][]byte{pattern(0, 10), pattern(10, 10), pattern(20, 10), pattern(30, 10)}
	info := objectInfo("lossy", chunks)
	want, err := jetstream.DecodeObjectDigest(info.Digest)
	if err != nil {
		t.Fatal(err)
	}
	wd := newWatchdog(context.Background(), wait, fmt.Errorf("%w: test", ErrJetStreamTimeout))
	defer wd.stop()
	r := &chunkRead{meta: info, want: want, wd: wd, hash: sha256.New(), done: make(chan error, 1)}
	for _, c := range []*deliveredChunk{
		{data: chunks[0], delivered: 1, pending: 3},
		{data: chunks[1], delivered: 2, pending: 2},
		{data: chunks[3], delivered: 4, pending: 0}, // the third lost
	} {
		r.chunk(c)
	}
	select {
	case err := <-r.done:
		if err == nil || errors.Is(err, jetstream.ErrDigestMismatch) || !strings.Contains(err.Error(), "chunk 3 lost in transit") {
			t.Errorf("chunkRead(deliveries 1, 2, 4 of 4) ended with %v, want chunk 3 lost in transit", err)
		}
	default:
		t.Errorf("chunkRead(deliveries 1, 2, 4 of 4) goes on, want it ended at chunk 3 lost in transit")
	}
}
