package consume

import (
	"context"
	"fmt"
	"io"
	"strconv"
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
	// (Config.SnapshotReads): it is the object push in flight.
	select {
	case l.c.reads <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("wait to read the stored snapshot: %w", ctx.Err())
	}
	body, err := readStored(wd, obs, meta, watch.Updates(), cfg.RequestTimeout)
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

// chunkBytes is what the read of a stored snapshot reads at a time:
// nats.go's object store chunk size (the relay's objects use the default),
// so each read takes one chunk.
const chunkBytes = 128 << 10

// snapshotReadRate is the slowest a stored snapshot's read may go, in
// bytes per second, beyond ten RequestTimeouts (readLimit). A push keeps a
// few MiB in flight per round trip (DefaultSnapshotReads), about 10 MiB/s
// to the reference deployment's farthest DC (239 ms), so 1 MiB/s leaves
// room for a slow link and a busy consumer, and still ends a read that
// trickles: MaxSnapshotBytes gets 50 s + 130 s with the defaults.
const snapshotReadRate = 1 << 20

// readLimit bounds a whole read of a stored snapshot of size bytes.
func readLimit(timeout time.Duration, size uint64) time.Duration {
	return 10*timeout + time.Duration(size)*time.Second/snapshotReadRate
}

// readStored reads the stored snapshot object, whose info is meta, in
// full. The relay refreshes its stored snapshot with an object store Put,
// which purges the chunks of the object it replaces, and a DC's JetStream
// may stop sending chunks altogether: a read then waits for chunks that
// never come, and a blocked nats.go object read returns only at its
// context's deadline (it sees neither a cancelled context nor a watch). So
// the read runs aside and is given up, with the caller's read slot, as
// soon as that is known: when updates, a watch of the store started before
// meta was read, reports the snapshot replaced or deleted
// (ErrSnapshotReplaced; the next subscription reads the new one); when wd
// ends, its countdown run out between two chunks or before the read
// started (ErrJetStreamTimeout); or after readLimit in all, the chunks
// trickling (ErrJetStreamTimeout). A read given up holds only its chunk
// buffer until its deadline. A context that ends ends the read too.
func readStored(wd *watchdog, obs jetstream.ObjectStore, meta *jetstream.ObjectInfo, updates <-chan *jetstream.ObjectInfo, timeout time.Duration) ([]byte, error) {
	limit := readLimit(timeout, meta.Size)
	ctx, cancel := context.WithTimeoutCause(wd.ctx, limit,
		fmt.Errorf("%w: %d bytes not read within %v", ErrJetStreamTimeout, meta.Size, limit))
	defer cancel()
	wd.feed() // the countdown starts again: waiting for a read slot is no stall
	res, err := obs.Get(ctx, relay.SnapshotObject)
	if err != nil {
		return nil, fmt.Errorf("stored snapshot: %w", why(ctx, err))
	}
	wd.feed()
	// Get reads the snapshot's info again: it may be another object now.
	got, err := res.Info()
	if err == nil && got.NUID != meta.NUID {
		err = fmt.Errorf("%w: %s replaced before its read", ErrSnapshotReplaced, meta.NUID)
	}
	if err != nil {
		_ = res.Close()
		return nil, fmt.Errorf("stored snapshot: %w", err)
	}
	var (
		mu sync.Mutex
		// A buffer of the object's size (checked against the limit):
		// io.ReadAll's doublings cost a third of a 13 × 10M cold resync's
		// CPU in zeroing and copying (BENCHMARKS.md, bench relay).
		body = make([]byte, 0, int(meta.Size))
		gone bool // the read was given up, and body dropped
	)
	done := make(chan error, 1) // io.EOF: read whole
	go func() {
		defer func() { _ = res.Close() }()
		// Read into chunk, not straight into body, so that a read given up
		// keeps no more than a chunk until it returns.
		chunk := make([]byte, chunkBytes)
		for {
			n, err := res.Read(chunk)
			mu.Lock()
			if gone {
				mu.Unlock()
				return
			}
			if n > 0 {
				body = append(body, chunk[:n]...)
				wd.feed()
			}
			if err == nil && len(body) > MaxSnapshotBytes {
				err = fmt.Errorf("%w: more than %d bytes", ErrSnapshotTooLarge, MaxSnapshotBytes)
			}
			mu.Unlock()
			if err != nil {
				done <- err
				return
			}
		}
	}()
	giveUp := func(err error) ([]byte, error) {
		mu.Lock()
		gone = true
		got := len(body)
		body = nil
		mu.Unlock()
		return nil, fmt.Errorf("read stored snapshot (%d of %d bytes): %w", got, meta.Size, err)
	}
	finished := func(err error) ([]byte, error) {
		if err != io.EOF {
			return giveUp(why(ctx, err))
		}
		return body, nil
	}
	for {
		select {
		case err := <-done:
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
			case err := <-done: // the read finished first
				return finished(err)
			default:
			}
			return giveUp(fmt.Errorf("%w: %s replaced during its read", ErrSnapshotReplaced, meta.NUID))
		}
	}
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
