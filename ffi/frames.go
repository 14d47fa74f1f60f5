package main

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/goindex/shm"
)

// fedLanes are a global handle's lanes fed by goindex_apply_frame: the
// manifest from the config ("dcs" in lane order, "domain",
// "consumer_instance", the format of "seed" and "buckets"), relayproto's
// Consumer over an in-process replica.Table, and what each lane's last load
// report and goindex_set_rtt left for the scorer. The handle is every
// lane's one ingestor: apply and setRTT run under its event lock.
type fedLanes struct {
	consumer *relayproto.Consumer
	table    *replica.Table
	format   *ckf.Format
	dcs      []uint64
	dec      relayproto.Decoder
	buf      []byte // the frame being decoded, copied out of host memory

	loads []atomic.Pointer[shm.Load]  // per lane, the last kept load report
	rtts  []atomic.Pointer[rttSample] // per lane, the last goindex_set_rtt

	applied, rejected, ignored atomic.Uint64
}

// maxKeptFrameBytes bounds the frame copy a fed handle keeps between
// calls: deltas and load reports are far smaller; snapshot chunks (up to
// 4 MiB at the relay's default) get a fresh copy each.
const maxKeptFrameBytes = 1 << 20

// rttSample is a round trip the host measured.
type rttSample struct {
	rtt time.Duration
	at  time.Time
}

func newFed(cfg *config) (*fedLanes, error) {
	n := cfg.buckets()
	format, err := ckf.NewFormat(cfg.Seed, n)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	f := &fedLanes{format: format, dcs: append([]uint64(nil), cfg.DCs...),
		loads: make([]atomic.Pointer[shm.Load], len(cfg.DCs)), rtts: make([]atomic.Pointer[rttSample], len(cfg.DCs))}
	if f.table, err = replica.New(replica.Config{Lanes: len(f.dcs), Buckets: n}); err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	m := relayproto.Manifest{ConsumerInstance: cfg.ConsumerInstance, Domain: relayproto.DomainID(cfg.Domain),
		Format: relayproto.FormatOf(format)}
	for _, dc := range f.dcs {
		m.Lanes = append(m.Lanes, relayproto.PoolID{Domain: m.Domain, DC: relayproto.DCID(dc)})
	}
	if f.consumer, err = relayproto.NewConsumer(m, f.table, relayproto.ConsumerConfig{}); err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	for i := range f.dcs {
		if err := f.consumer.Lane(i).Claim(); err != nil {
			return nil, fmt.Errorf("%w: claim lane %d: %w", errInternal, i, err)
		}
	}
	return f, nil
}

// apply decodes one frame and runs it through its lane's state machine.
// Frames without a lease (what `goindex relay` publishes on its fan-out
// log) get the lane's consumer-local lease: a snapshot's first chunk takes
// a new one (a new subscription) unless it continues or repeats the lane's
// current snapshot, and every other frame gets the lane's current lease.
// Frames with a lease (leased transports) are checked against it as they
// are. The error is a *relayproto.FrameError for bytes that do not decode,
// a *relayproto.LaneError for a frame that faulted its lane, or errFrame;
// ignored frames (stale, duplicate, foreign) are not errors.
func (f *fedLanes) apply(frame []byte, now time.Time) error {
	// The decoder keeps its last frame's bytes until the next call (its
	// reader, its reused messages); decoding a Go copy keeps the ABI's
	// promise that no host pointer outlives a call. A copy over
	// maxKeptFrameBytes (a large snapshot chunk) is not kept for reuse.
	f.buf = append(f.buf[:0], frame...)
	defer func() {
		if cap(f.buf) > maxKeptFrameBytes {
			f.buf = nil
		}
	}()
	m, rest, err := f.dec.Decode(f.buf)
	if err == nil && len(rest) > 0 {
		err = &relayproto.FrameError{Lane: -1, Offset: len(frame) - len(rest), Reason: fmt.Sprintf("%d bytes after the %v frame (one frame per call)", len(rest), m.Type()), Err: relayproto.ErrMalformed}
	}
	if err == nil {
		err = f.handle(m, now)
	}
	if err != nil {
		f.rejected.Add(1)
	}
	return err
}

func (f *fedLanes) handle(m relayproto.Message, now time.Time) error {
	if err := f.stamp(m); err != nil {
		return err
	}
	lane, _ := f.consumer.Route(m) // a frame no lane takes is ignored by Handle
	o, err := f.consumer.Handle(m)
	switch {
	case err != nil:
		return fmt.Errorf("%v frame of DC %d: %w", m.Type(), f.dcs[lane], err)
	case o == relayproto.RetrySnapshot:
		s := m.(*relayproto.Snapshot)
		return fmt.Errorf("%w: lane %d (DC %d): snapshot %d chunk at bucket %d of %d refused (out of order or the wrong size); the lane awaits the snapshot from bucket 0",
			errFrame, lane, f.dcs[lane], s.Sequence, s.Offset, s.Total)
	case o.Ignored():
		f.ignored.Add(1)
		return nil
	case o == relayproto.LoadRecorded:
		r, _ := f.consumer.Lane(lane).LastLoad()
		f.loads[lane].Store(&shm.Load{At: time.Unix(0, int64(r.TimestampUnixNano)), ReceivedAt: now,
			ActiveBlocks: r.ActiveBlocks, QueuedPrefillTokens: r.QueuedPrefillTokens, ActiveDecodeBlocks: r.ActiveDecodeBlocks,
			LiveWorkers: uint64(r.LiveWorkers), CapacityBlocks: r.CapacityBlocks, PrefillTokensPerMs: r.PrefillTokensPerMs,
			QueueTokensPerMs: r.QueueTokensPerMs, DecodeBlocksPerMs: r.DecodeBlocksPerMs})
	}
	f.applied.Add(1)
	return nil
}

// stamp gives a frame without a lease the consumer-local lease of its
// pool's lane (see apply); frames of pools without a lane keep none, so the
// consumer ignores them. A new subscription drops the lane's load report:
// reports of the previous producer no longer apply.
func (f *fedLanes) stamp(m relayproto.Message) error {
	var id relayproto.ProducerIdentity
	var lease *relayproto.Lease
	switch m := m.(type) {
	case *relayproto.Snapshot:
		id, lease = m.Identity, &m.Lease
	case *relayproto.Delta:
		id, lease = m.Identity, &m.Lease
	case *relayproto.DrainMarker:
		id, lease = m.Identity, &m.Lease
	case *relayproto.Heartbeat:
		id, lease = m.Identity, &m.Lease
	case *relayproto.LoadReport:
		id = m.Identity
	}
	i, ok := f.consumer.LaneOf(id.Pool)
	if !ok || lease == nil || !lease.IsZero() {
		return nil
	}
	l := f.consumer.Lane(i)
	st := l.Status()
	if s, ok := m.(*relayproto.Snapshot); ok && s.Offset == 0 && !continues(&st, s) {
		if err := l.Assign(s.Identity, l.NextLease()); err != nil {
			return fmt.Errorf("%w: lane %d (DC %d): producer incarnation %d cannot take the lane: %w", errFrame, i, f.dcs[i], s.Identity.Incarnation, err)
		}
		f.loads[i].Store(nil)
		st = l.Status()
	}
	*lease = st.Lease
	return nil
}

// continues reports whether snapshot chunk s (at bucket 0) belongs to the
// lane's current subscription: its producer's snapshot being installed, or
// one the lane already holds (a repeat, which the lane ignores). Any other
// first chunk starts a new subscription.
func continues(st *relayproto.LaneStatus, s *relayproto.Snapshot) bool {
	if st.Identity != s.Identity {
		return false
	}
	return st.State == relayproto.StateAwaiting || (st.State == relayproto.StateReady && s.Sequence <= st.Installed)
}

// setRTT records the host's round trip to dc.
func (f *fedLanes) setRTT(dc uint64, rtt time.Duration, now time.Time) error {
	for i, d := range f.dcs {
		if d == dc {
			f.rtts[i].Store(&rttSample{rtt: rtt, at: now})
			return nil
		}
	}
	return fmt.Errorf("%w: DC %d has no lane (dcs %v)", errInvalid, dc, f.dcs)
}
