package consume

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/nats-io/nats.go/jetstream"
)

// install loads the stored snapshot into the lane and returns the log
// position it reflects. When the store's snapshot is of another identity,
// or the log no longer holds the deltas after it, it asks the relay for a
// fresh one (the next sync installs it).
//
// A DC's JetStream can hang while its relay answers pings (a half-broken
// leafnode link, an API that never answers, chunks that stop coming), and
// no DC may hold back the other lanes' installs. So each request is
// bounded by RequestTimeout; the lane takes one of the consumer's read
// slots only once the snapshot is located and the log found to hold the
// deltas after it; and the read, which holds the slot, is given up once
// JetStream makes no progress for a RequestTimeout (readStored). Each ends
// with ErrJetStreamTimeout naming the JetStream domain, and the lane
// retries.
func (l *laneRunner) install(ctx context.Context, js jetstream.JetStream, info *relay.Info, lease relayproto.Lease) (uint64, error) {
	cfg := &l.c.cfg
	where := "no domain"
	if info.JSDomain != "" {
		where = fmt.Sprintf("domain %q", info.JSDomain)
	}
	stalled := fmt.Errorf("%w (%s): no progress for %v", ErrJetStreamTimeout, where, cfg.RequestTimeout)
	obs, err := request(ctx, cfg.RequestTimeout, stalled, func(c context.Context) (jetstream.ObjectStore, error) {
		return js.ObjectStore(c, info.SnapshotBucket)
	})
	if err != nil {
		return 0, fmt.Errorf("snapshot store %s: %w", info.SnapshotBucket, err)
	}
	// Watched from before the snapshot's info is read: see readStored. The
	// watch and the read are subscriptions, which nats.go ends with the
	// context they were made in: theirs has no deadline, and ends instead
	// once they make no progress for a RequestTimeout.
	wd := newWatchdog(ctx, cfg.RequestTimeout, stalled)
	defer wd.stop()
	watch, err := obs.Watch(wd.ctx, jetstream.UpdatesOnly())
	wd.pause()
	if err != nil {
		return 0, fmt.Errorf("watch snapshot store %s: %w", info.SnapshotBucket, why(wd.ctx, err))
	}
	defer func() { _ = watch.Stop() }()
	meta, err := request(ctx, cfg.RequestTimeout, stalled, func(c context.Context) (*jetstream.ObjectInfo, error) {
		return obs.GetInfo(c, relay.SnapshotObject)
	})
	if err != nil {
		return 0, fmt.Errorf("stored snapshot: %w", err)
	}
	logSeq, err := l.position(ctx, js, info, meta, stalled)
	if err != nil {
		return 0, err
	}
	// Only the read holds one of the consumer's read slots
	// (Config.SnapshotReads): it is the chunks in flight.
	select {
	case l.c.reads <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("wait to read the stored snapshot: %w", ctx.Err())
	}
	body, err := readStored(wd, js, info.SnapshotBucket, meta, watch.Updates(), cfg.RequestTimeout)
	<-l.c.reads // decoding and installing need no read slot
	if err != nil {
		return 0, err
	}
	for len(body) > 0 {
		m, rest, err := l.dec.Decode(body)
		if err != nil {
			return 0, fmt.Errorf("stored snapshot frame: %w", err)
		}
		n := len(body) - len(rest)
		l.count(func(st *LaneStatus) { st.received(m.Type().String(), n) })
		body = rest
		s, ok := m.(*relayproto.Snapshot)
		if !ok {
			return 0, fmt.Errorf("stored snapshot holds a %v frame", m.Type())
		}
		s.Lease = lease
		switch o := l.lane.Snapshot(s); o {
		case ingest.ChunkStored:
		case ingest.Installed:
			l.count(func(st *LaneStatus) { st.Snapshots++; st.Drained = false })
			l.publish(time.Now())
			l.log.Info("snapshot installed", "sequence", s.Sequence)
			return logSeq, nil
		case ingest.WrongIdentity, ingest.ForeignIdentity:
			// The store still holds an older producer's snapshot (ignored as
			// superseded), or one of another identity altogether.
			l.requestSnapshot(ctx)
			return 0, fmt.Errorf("stored snapshot of incarnation %d, relay is %d", s.Identity.Incarnation, info.Incarnation)
		default:
			return 0, fmt.Errorf("stored snapshot chunk at %d: %v", s.Offset, o)
		}
	}
	return 0, ErrSnapshotIncomplete
}

// position checks the stored snapshot's info meta against the size limit
// and returns the log position it reflects, which the log must still
// retain the deltas after (retained).
func (l *laneRunner) position(ctx context.Context, js jetstream.JetStream, info *relay.Info, meta *jetstream.ObjectInfo, stalled error) (uint64, error) {
	if meta.Size > MaxSnapshotBytes {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrSnapshotTooLarge, meta.Size, MaxSnapshotBytes)
	}
	logSeq, err := strconv.ParseUint(meta.Metadata[relay.MetaLogSequence], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stored snapshot: log sequence %q: %w", meta.Metadata[relay.MetaLogSequence], err)
	}
	return logSeq, l.retained(ctx, js, info, logSeq, stalled)
}

// The object store's layout (nats.go jetstream/object.go: objNameTmpl,
// objChunksPreTmpl): a bucket's objects live in stream OBJ_<bucket>, and
// an object's chunks, in order, on subject $O.<bucket>.C.<nuid>.
func objectStream(bucket string) string { return "OBJ_" + bucket }

func chunkSubject(bucket, nuid string) string { return "$O." + bucket + ".C." + nuid }

// readWindowBytes is how much of a stored snapshot its read keeps
// requested (its pull's max bytes; nats.go asks for more as each half
// arrives): 4 to 8 MiB per round trip, 17–33 MiB/s to the reference
// deployment's farthest DC (239 ms), while DefaultSnapshotReads reads keep
// at most 32 MiB in flight, half the server's 64 MiB max_pending per
// connection (an object store Get's push ramps up to 32 MiB each, the
// server's flow-control window).
const readWindowBytes = 8 << 20

// snapshotReadRate is the slowest a stored snapshot's read may go, in
// bytes per second, beyond ten RequestTimeouts (readLimit). A read keeps
// readWindowBytes requested, over 17 MiB/s to the reference deployment's
// farthest DC (239 ms), so 1 MiB/s leaves room for a slow link and a busy
// consumer, and still ends a read that trickles: MaxSnapshotBytes gets
// 50 s + 130 s with the defaults.
const snapshotReadRate = 1 << 20

// readLimit bounds a whole read of a stored snapshot of size bytes.
func readLimit(timeout time.Duration, size uint64) time.Duration {
	return 10*timeout + time.Duration(size)*time.Second/snapshotReadRate
}

// readStored reads the stored snapshot object of bucket, whose info is
// meta (its size checked against MaxSnapshotBytes), in full, into a buffer
// of that size, and checks it as nats.go's object store Get does: the
// chunks its info counts, its size and its SHA-256 digest. An object that
// fails (a chunk altered, missing or one too many) is refused with
// jetstream.ErrDigestMismatch, before its body outgrows meta's size.
//
// It pulls the chunks itself, through a consumer of its own on the
// bucket's stream, where Get's read, once blocked, returns only at its
// context's deadline (it sees no cancel, and Close waits on its lock): a
// read given up then kept its goroutine and chunk buffer to readLimit.
// This one also skips Get's second lookup of meta, and copies each chunk
// once. The relay refreshes its stored snapshot with an object store Put,
// which purges the chunks of the object it replaces, and a DC's JetStream
// may stop sending chunks altogether: a read then waits for chunks that
// never come. So it is given up, with the caller's read slot, as soon as
// that is known: when updates, a watch of the store started before meta
// was read, reports the snapshot replaced or deleted (ErrSnapshotReplaced;
// the next subscription reads the new one); when wd ends, its countdown
// run out between two chunks or before the read started
// (ErrJetStreamTimeout); or after readLimit in all, the chunks trickling
// (ErrJetStreamTimeout). A context that ends ends the read too. However it
// ends, its pull stops at once, and its consumer is deleted in the
// background within a RequestTimeout or, when the DC's JetStream does not
// answer, by that server a RequestTimeout after its pulls lapse (each
// waits 30 s at most: nats.go's expiry).
func readStored(wd *watchdog, js jetstream.JetStream, bucket string, meta *jetstream.ObjectInfo, updates <-chan *jetstream.ObjectInfo, timeout time.Duration) ([]byte, error) {
	if meta.NUID == "" || strings.ContainsAny(meta.NUID, ".*> \t\r\n") {
		// Its chunks' subject would be another's, or a wildcard.
		return nil, fmt.Errorf("stored snapshot: %w: object id %q", jetstream.ErrBadObjectMeta, meta.NUID)
	}
	want, err := jetstream.DecodeObjectDigest(meta.Digest)
	if err != nil {
		return nil, fmt.Errorf("stored snapshot: digest %q: %w", meta.Digest, err)
	}
	if meta.Chunks == 0 && meta.Size == 0 {
		return nil, nil
	}
	limit := readLimit(timeout, meta.Size)
	ctx, cancel := context.WithTimeoutCause(wd.ctx, limit,
		fmt.Errorf("%w: %d bytes not read within %v", ErrJetStreamTimeout, meta.Size, limit))
	defer cancel()
	wd.feed() // the countdown starts again: waiting for a read slot is no stall
	stream := objectStream(bucket)
	// Named here, so that it can be deleted even when its creation's
	// answer is lost.
	name := "snapshot-read-" + rand.Text()
	defer func() {
		go func() {
			c, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			_ = js.DeleteConsumer(c, stream, name)
		}()
	}()
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Name:              name,
		FilterSubject:     chunkSubject(bucket, meta.NUID),
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: timeout, // should its delete not get through
	})
	if err != nil {
		return nil, fmt.Errorf("stored snapshot: %w", why(ctx, err))
	}
	wd.feed()
	r := &chunkRead{
		meta: meta, want: want, wd: wd, hash: sha256.New(), done: make(chan error, 1),
		// A buffer of the object's size: io.ReadAll's doublings cost a
		// third of a 13 × 10M cold resync's CPU in zeroing and copying
		// (BENCHMARKS.md, bench relay).
		body: make([]byte, 0, int(meta.Size)),
	}
	pull, err := cons.Consume(r.chunk, jetstream.PullMaxBytes(readWindowBytes), jetstream.ConsumeErrHandler(r.fault))
	if err != nil {
		return nil, fmt.Errorf("stored snapshot: %w", err)
	}
	defer pull.Stop()
	giveUp := func(err error) ([]byte, error) {
		got := r.abandon()
		return nil, fmt.Errorf("read stored snapshot (%d of %d bytes): %w", got, meta.Size, err)
	}
	finished := func(err error) ([]byte, error) {
		if err != nil {
			return giveUp(why(ctx, err))
		}
		return r.body, nil
	}
	for {
		select {
		case err := <-r.done:
			return finished(err)
		case <-ctx.Done():
			return giveUp(context.Cause(ctx))
		case u, ok := <-updates:
			if !ok {
				updates = nil // the watch ended: the read's bounds still hold
				continue
			}
			if u == nil || u.Name != meta.Name || (u.NUID == meta.NUID && !u.Deleted) {
				continue
			}
			select {
			case err := <-r.done: // the read finished first
				return finished(err)
			default:
			}
			return giveUp(fmt.Errorf("%w: %s replaced during its read", ErrSnapshotReplaced, meta.NUID))
		}
	}
}

// chunkRead is a stored snapshot's read in progress: chunk takes its
// chunks in order, from the pull's goroutine, and done gets the read's
// end, once: nil when the object is read whole and checked. body is the
// reader's once done has been received.
type chunkRead struct {
	meta *jetstream.ObjectInfo
	want []byte // meta's SHA-256 digest
	wd   *watchdog
	done chan error

	mu     sync.Mutex
	ended  bool // done was sent, or the read given up
	body   []byte
	chunks uint32
	hash   hash.Hash
}

// chunk takes the next chunk, which the consumer delivers in stream order
// with its delivery count: one skipped (lost in transit: AckNone never
// redelivers) ends the read, and the last, the one the info counts or the
// one with none pending after it, ends it checked.
func (r *chunkRead) chunk(msg jetstream.Msg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	md, err := msg.Metadata()
	if err != nil {
		r.end(err)
		return
	}
	r.chunks++
	data := msg.Data()
	if md.Sequence.Consumer != uint64(r.chunks) {
		r.end(fmt.Errorf("chunk %d lost in transit (delivery %d)", r.chunks, md.Sequence.Consumer))
		return
	}
	if uint64(len(r.body)+len(data)) > r.meta.Size {
		r.end(r.corrupt("more than %d bytes", r.meta.Size))
		return
	}
	r.body = append(r.body, data...)
	r.hash.Write(data)
	r.wd.feed()
	switch {
	case r.chunks == r.meta.Chunks && md.NumPending > 0:
		r.end(r.corrupt("more than %d chunks", r.meta.Chunks))
	case r.chunks < r.meta.Chunks && md.NumPending > 0:
		// more to come
	case r.chunks != r.meta.Chunks || uint64(len(r.body)) != r.meta.Size:
		r.end(r.corrupt("%d chunks, %d bytes; its info says %d, %d", r.chunks, len(r.body), r.meta.Chunks, r.meta.Size))
	case !bytes.Equal(r.hash.Sum(nil), r.want):
		r.end(r.corrupt("SHA-256 differs from its info's"))
	default:
		r.end(nil)
	}
}

// corrupt reports an object whose chunks are not what its info says.
func (r *chunkRead) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: object %s: %s", jetstream.ErrDigestMismatch, r.meta.NUID, fmt.Sprintf(format, args...))
}

// fault ends the read on the pull's errors that end it for good (its
// consumer gone, the connection closed); the others (a missed heartbeat)
// nats.go recovers from, within the read's bounds.
func (r *chunkRead) fault(_ jetstream.ConsumeContext, err error) {
	if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrBadRequest) ||
		errors.Is(err, jetstream.ErrConnectionClosed) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.ended {
			r.end(err)
		}
	}
}

// end sends the read's end; r.mu is held.
func (r *chunkRead) end(err error) {
	r.ended = true
	r.done <- err
}

// abandon gives the read up, dropping its body, and returns how many
// bytes it had read.
func (r *chunkRead) abandon() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	got := len(r.body)
	r.body = nil
	return got
}

// retained checks that the log still holds everything after logSeq; if
// not, it asks the relay for a fresh snapshot and returns ErrDeltasGone.
func (l *laneRunner) retained(ctx context.Context, js jetstream.JetStream, info *relay.Info, logSeq uint64, stalled error) error {
	// Two requests, a RequestTimeout at most.
	rc, cancel := context.WithTimeoutCause(ctx, l.c.cfg.RequestTimeout, stalled)
	defer cancel()
	stream, err := js.Stream(rc, info.Stream)
	if err != nil {
		return fmt.Errorf("delta log %s: %w", info.Stream, why(rc, err))
	}
	si, err := stream.Info(rc)
	if err != nil {
		return fmt.Errorf("delta log %s: %w", info.Stream, why(rc, err))
	}
	if si.State.FirstSeq > logSeq+1 && si.State.LastSeq > logSeq {
		l.requestSnapshot(ctx)
		return fmt.Errorf("%w: log starts at %d, the snapshot needs %d", ErrDeltasGone, si.State.FirstSeq, logSeq+1)
	}
	return nil
}

// request runs one JetStream request of an install under timeout, which
// ends it with stalled.
func request[T any](ctx context.Context, timeout time.Duration, stalled error, call func(context.Context) (T, error)) (T, error) {
	c, cancel := context.WithTimeoutCause(ctx, timeout, stalled)
	defer cancel()
	v, err := call(c)
	if err != nil {
		err = why(c, err)
	}
	return v, err
}

// why returns err, or, once ctx has ended, the cause it ended with:
// nats.go reports its context's error, which does not say which bound ran
// out.
func why(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// watchdog bounds a subscription by its progress rather than a deadline
// (nats.go ends a subscription with the context it was made in): its ctx
// ends, with cause, once the countdown, running from newWatchdog, runs out
// before feed restarts it. pause stops the countdown until the next feed.
// feed may be called from any goroutine.
type watchdog struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	after  time.Duration
}

func newWatchdog(ctx context.Context, after time.Duration, cause error) *watchdog {
	c, cancel := context.WithCancelCause(ctx)
	return &watchdog{ctx: c, cancel: cancel, after: after, timer: time.AfterFunc(after, func() { cancel(cause) })}
}

func (w *watchdog) feed() { w.timer.Reset(w.after) }

func (w *watchdog) pause() { w.timer.Stop() }

// stop ends the countdown and the context.
func (w *watchdog) stop() {
	w.timer.Stop()
	w.cancel(context.Canceled)
}
