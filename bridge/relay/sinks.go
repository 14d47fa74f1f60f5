package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// frameOverheadBytes is room for a delta frame's header and identity
// fields beside its images when a batch is cut to the server's max payload.
const frameOverheadBytes = 1024

// imageBytes is one image on the wire (u32 index, u64 word).
const imageBytes = 12

// maxImagesFor returns how many images one delta frame may carry under a
// server max payload of maxPayload bytes.
func maxImagesFor(maxPayload int64) int {
	n := int((maxPayload - frameOverheadBytes) / imageBytes)
	return max(1, min(n, relayproto.MaxDeltaImages))
}

// deltaLog is the JetStream delta log of one pool, the FanoutPublisher's
// Sink. Every publish expects the stream's last sequence to be the one this
// relay last wrote, so a second relay writing the same pool is detected
// instead of merged.
type deltaLog struct {
	ctx     context.Context
	js      jetstream.JetStream
	subject string
	timeout time.Duration
	// up reports whether the NATS connection is up: while it is not, a
	// send or a resync fails at once (errNATSDown) instead of waiting out
	// its timeout on the pool's goroutine, which would stall the intake.
	up   func() bool
	last uint64 // stream sequence of the last message this relay knows is in the log
	buf  []byte
	wire *WireStats
	// conflict is set when a publish found another writer's messages.
	conflict bool
}

// WireStats counts what a pool put on NATS by frame type name
// (relayproto.FrameType.String: "delta", "heartbeat", "drain-marker",
// "snapshot" chunks, "load-report"): frames, and their bytes.
type WireStats struct {
	Frames map[string]uint64
	Bytes  map[string]uint64
}

func newWireStats() *WireStats {
	return &WireStats{Frames: map[string]uint64{}, Bytes: map[string]uint64{}}
}

func (w *WireStats) add(t relayproto.FrameType, n int) {
	w.Frames[t.String()]++
	w.Bytes[t.String()] += uint64(n)
}

// clone returns a copy that shares no map with w.
func (w *WireStats) clone() WireStats {
	return WireStats{Frames: maps.Clone(w.Frames), Bytes: maps.Clone(w.Bytes)}
}

// Send publishes m as one frame and waits for the stream's ack.
func (l *deltaLog) Send(m relayproto.Message) error {
	b, err := wire.AppendFrame(l.buf[:0], m)
	if err != nil {
		return err
	}
	l.buf = b
	if !l.up() {
		return fmt.Errorf("publish %v to %s: %w", m.Type(), l.subject, errNATSDown)
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	defer cancel()
	ack, err := l.js.Publish(ctx, l.subject, b, jetstream.WithExpectLastSequence(l.last))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			l.conflict = true
		}
		return fmt.Errorf("publish %v to %s after stream sequence %d: %w", m.Type(), l.subject, l.last, err)
	}
	l.last = ack.Sequence
	l.wire.add(m.Type(), len(b))
	return nil
}

// resync reads the stream's last sequence (after an uncertain publish).
func (l *deltaLog) resync(stream jetstream.Stream) error {
	if !l.up() {
		return fmt.Errorf("stream info: %w", errNATSDown)
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	defer cancel()
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream info: %w", err)
	}
	l.last, l.conflict = info.State.LastSeq, false
	return nil
}

// snapshotStore is the FanoutPublisher's snapshot Sink: it gathers the
// chunk frames of one snapshot and stores them as one object, with the
// snapshot's sequence and the delta log position it reflects as metadata.
type snapshotStore struct {
	ctx      context.Context
	obs      jetstream.ObjectStore
	log      *deltaLog
	timeout  time.Duration
	buckets  uint64
	wire     *WireStats
	buf      []byte
	chunks   uint64 // chunk frames in buf
	stored   uint64 // terminal sequence of the last stored snapshot
	storedAt time.Time
	count    uint64
	bytes    int // size of the last stored object
}

// Send appends one chunk; the last chunk of a snapshot stores the object.
func (s *snapshotStore) Send(m relayproto.Message) error {
	snap, ok := m.(*relayproto.Snapshot)
	if !ok {
		return fmt.Errorf("%w: snapshot store got a %v", ErrMalformed, m.Type())
	}
	if snap.Offset == 0 {
		s.buf, s.chunks = s.buf[:0], 0
	}
	b, err := wire.AppendFrame(s.buf, snap)
	if err != nil {
		return err
	}
	s.buf = b
	s.chunks++
	if snap.Offset+uint64(len(snap.Words)) < s.buckets {
		return nil
	}
	if !s.log.up() {
		return fmt.Errorf("store snapshot %d: %w", snap.Sequence, errNATSDown)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	meta := jetstream.ObjectMeta{Name: SnapshotObject, Metadata: map[string]string{
		MetaSequence:    strconv.FormatUint(snap.Sequence, 10),
		MetaIncarnation: strconv.FormatUint(snap.Identity.Incarnation, 10),
		MetaLogSequence: strconv.FormatUint(s.log.last, 10),
	}}
	if _, err := s.obs.Put(ctx, meta, bytes.NewReader(s.buf)); err != nil {
		return fmt.Errorf("store snapshot %d: %w", snap.Sequence, err)
	}
	s.stored, s.storedAt, s.bytes = snap.Sequence, time.Now(), len(s.buf)
	s.count++
	s.wire.Frames[relayproto.FrameSnapshot.String()] += s.chunks
	s.wire.Bytes[relayproto.FrameSnapshot.String()] += uint64(len(s.buf))
	return nil
}
