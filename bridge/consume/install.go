package consume

import (
	"bytes"
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
func (l *laneRunner) install(ctx context.Context, js jetstream.JetStream, info *relay.Info, lease relayproto.Lease) (uint64, error) {
	cfg := &l.c.cfg
	// One of the consumer's read slots (Config.SnapshotReads), taken
	// before the read's deadline starts.
	select {
	case l.c.reads <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("wait to read the stored snapshot: %w", ctx.Err())
	}
	release := sync.OnceFunc(func() { <-l.c.reads })
	defer release()
	c, cancel := context.WithTimeout(ctx, 10*cfg.RequestTimeout)
	defer cancel()
	obs, err := js.ObjectStore(c, info.SnapshotBucket)
	if err != nil {
		return 0, fmt.Errorf("snapshot store %s: %w", info.SnapshotBucket, err)
	}
	// Watched from before the read starts: see readStored.
	watch, err := obs.Watch(c, jetstream.UpdatesOnly())
	if err != nil {
		return 0, fmt.Errorf("watch snapshot store %s: %w", info.SnapshotBucket, err)
	}
	defer func() { _ = watch.Stop() }()
	res, err := obs.Get(c, relay.SnapshotObject)
	if err != nil {
		return 0, fmt.Errorf("stored snapshot: %w", err)
	}
	meta, logSeq, err := l.position(c, js, info, res)
	if err != nil {
		res.Close()
		return 0, err
	}
	body, err := readStored(ctx, res, meta, watch.Updates())
	if err != nil {
		return 0, err
	}
	release() // decoding and installing need no read slot
	if len(body) > MaxSnapshotBytes {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrSnapshotTooLarge, MaxSnapshotBytes)
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

// position checks the stored snapshot object res against the size limit
// and returns its info and the log position it reflects, which the log must
// still retain the deltas after (retained).
func (l *laneRunner) position(ctx context.Context, js jetstream.JetStream, info *relay.Info, res jetstream.ObjectResult) (*jetstream.ObjectInfo, uint64, error) {
	meta, err := res.Info()
	if err != nil {
		return nil, 0, fmt.Errorf("stored snapshot info: %w", err)
	}
	if meta.Size > MaxSnapshotBytes {
		return nil, 0, fmt.Errorf("%w: %d bytes, limit %d", ErrSnapshotTooLarge, meta.Size, MaxSnapshotBytes)
	}
	logSeq, err := strconv.ParseUint(meta.Metadata[relay.MetaLogSequence], 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("stored snapshot: log sequence %q: %w", meta.Metadata[relay.MetaLogSequence], err)
	}
	return meta, logSeq, l.retained(ctx, js, info, logSeq)
}

// readStored reads the stored snapshot object res, whose info is meta, in
// full, and closes it. The relay refreshes its stored snapshot with an
// object store Put, which purges the chunks of the object it replaces: a
// read of that object waits for chunks that never come, and nats.go's
// object reads block until their context's deadline (ten RequestTimeouts,
// for large snapshots on slow links). So the read runs aside while
// updates, a watch of the store started before the read, reports what is
// stored meanwhile: the snapshot replaced or deleted ends the read at once
// (ErrSnapshotReplaced; the next subscription reads the new one), and the
// abandoned read returns at its deadline. A context that ends ends the read
// too (a blocked read does not see it).
func readStored(ctx context.Context, res jetstream.ObjectResult, meta *jetstream.ObjectInfo, updates <-chan *jetstream.ObjectInfo) ([]byte, error) {
	type read struct {
		body []byte
		err  error
	}
	done := make(chan read, 1)
	go func() {
		defer res.Close()
		// A buffer of the object's size (checked against the limit):
		// io.ReadAll's doublings cost a third of a 13 × 10M cold resync's
		// CPU in zeroing and copying (BENCHMARKS.md, bench relay).
		buf := bytes.NewBuffer(make([]byte, 0, int(meta.Size)+bytes.MinRead))
		_, err := buf.ReadFrom(io.LimitReader(res, MaxSnapshotBytes+1))
		done <- read{buf.Bytes(), err}
	}()
	finished := func(r read) ([]byte, error) {
		if r.err != nil {
			return nil, fmt.Errorf("read stored snapshot: %w", r.err)
		}
		return r.body, nil
	}
	for {
		select {
		case r := <-done:
			return finished(r)
		case <-ctx.Done():
			return nil, fmt.Errorf("read stored snapshot: %w", ctx.Err())
		case u, ok := <-updates:
			if !ok {
				updates = nil // the watch ended: the read's deadline still bounds it
				continue
			}
			if u == nil || u.Name != meta.Name || (u.NUID == meta.NUID && !u.Deleted) {
				continue
			}
			select {
			case r := <-done: // the read finished first
				return finished(r)
			default:
			}
			return nil, fmt.Errorf("%w: %s replaced during its read", ErrSnapshotReplaced, meta.NUID)
		}
	}
}

// retained checks that the log still holds everything after logSeq; if
// not, it asks the relay for a fresh snapshot and returns ErrDeltasGone.
func (l *laneRunner) retained(ctx context.Context, js jetstream.JetStream, info *relay.Info, logSeq uint64) error {
	// Two requests, each a RequestTimeout at most (not the read's 10×: a
	// reply lost with a dropped connection should cost little).
	rc, cancel := context.WithTimeout(ctx, l.c.cfg.RequestTimeout)
	defer cancel()
	stream, err := js.Stream(rc, info.Stream)
	if err != nil {
		return fmt.Errorf("delta log %s: %w", info.Stream, err)
	}
	si, err := stream.Info(rc)
	if err != nil {
		return fmt.Errorf("delta log %s: %w", info.Stream, err)
	}
	if si.State.FirstSeq > logSeq+1 && si.State.LastSeq > logSeq {
		l.requestSnapshot(ctx)
		return fmt.Errorf("%w: log starts at %d, the snapshot needs %d", ErrDeltasGone, si.State.FirstSeq, logSeq+1)
	}
	return nil
}
