package follow

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/shm"
)

// FeedConfig is a Feed's manifest.
type FeedConfig struct {
	DCs              []uint64 // DC id of lane l at DCs[l]; 1..64 distinct ids
	Domain           uint64   // the domain whose frames the lanes take
	ConsumerInstance uint64   // this consumer's instance id in leases
	Seed, Buckets    uint64   // the frames' addressing format
}

// Feed is a set of lanes fed relay frames in this process, for a host with
// its own transport: relayproto's Consumer over an in-process replica image
// (shm.NewMemory), so its lanes, load reports and RTTs read exactly as an
// attached file's do (Acquire). The Feed is every lane's one ingestor:
// Apply and SetRTT must be serialized by the caller; Acquire and Counts may
// run concurrently with them.
type Feed struct {
	w        *shm.Writer
	view     *View
	consumer *ingest.Consumer
	dcs      []uint64
	dec      wire.Decoder
	buf      []byte // the frame being decoded, copied out of the caller's memory

	applied, rejected, ignored atomic.Uint64
}

// maxKeptFrameBytes bounds the frame copy a Feed keeps between calls:
// deltas and load reports are far smaller; snapshot chunks (up to 4 MiB at
// the relay's default) get a fresh copy each.
const maxKeptFrameBytes = 1 << 20

// NewFeed builds the lanes of cfg, each claimed and awaiting its DC's
// snapshot. A bad manifest is ErrBadConfig.
func NewFeed(cfg FeedConfig) (*Feed, error) {
	format, err := relayproto.NewFormat(cfg.Seed, cfg.Buckets)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	w, err := shm.NewMemory(shm.Layout{Seed: cfg.Seed, Buckets: cfg.Buckets, Domain: cfg.Domain,
		ConsumerInstance: cfg.ConsumerInstance, DCs: cfg.DCs})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	m := relayproto.Manifest{ConsumerInstance: cfg.ConsumerInstance, Domain: relayproto.DomainID(cfg.Domain), Format: format}
	for _, dc := range cfg.DCs {
		m.Lanes = append(m.Lanes, relayproto.PoolID{Domain: m.Domain, DC: relayproto.DCID(dc)})
	}
	f := &Feed{w: w, view: newView(w.Reader(), false), dcs: append([]uint64(nil), cfg.DCs...)}
	if f.consumer, err = ingest.New(m, w.Table(), ingest.Config{}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	for i := range f.dcs {
		if err := f.consumer.Lane(i).Claim(); err != nil {
			return nil, fmt.Errorf("follow: claim lane %d: %w", i, err)
		}
	}
	return f, nil
}

// Acquire returns the Feed's lanes as searches read them (Release is a
// no-op for them, but keeps callers uniform).
func (f *Feed) Acquire() *View { return f.view }

// FeedCounts are a Feed's frame counters since NewFeed.
type FeedCounts struct {
	Applied  uint64 // frames that changed a lane: chunk stored, snapshot installed, delta applied, drain acknowledged, load recorded
	Rejected uint64 // frames Apply returned an error for
	Ignored  uint64 // frames accepted but ignored: stale, duplicate, foreign, for a faulted lane
}

// Counts returns the Feed's frame counters.
func (f *Feed) Counts() FeedCounts {
	return FeedCounts{Applied: f.applied.Load(), Rejected: f.rejected.Load(), Ignored: f.ignored.Load()}
}

// Apply decodes one frame (a copy of it: the caller's memory is not kept)
// and runs it through its lane's state machine. Frames without a lease
// (what `goindex relay` publishes on its fan-out log) get the lane's
// consumer-local lease: a snapshot's first chunk takes a new one (a new
// subscription) unless it continues or repeats the lane's current
// snapshot, and every other frame gets the lane's current lease. Frames
// with a lease (leased transports) are checked against it as they are. A
// load report of the lane's producer is recorded with now as its arrival.
// The error is a *wire.FrameError for bytes that do not decode, a
// *ingest.LaneError for a frame that faulted its lane, or
// ErrFrameRejected; ignored frames (stale, duplicate, foreign) are not
// errors.
func (f *Feed) Apply(frame []byte, now time.Time) error {
	// The decoder keeps its last frame's bytes until the next call (its
	// reader, its reused messages). A copy over maxKeptFrameBytes (a large
	// snapshot chunk) is not kept for reuse.
	f.buf = append(f.buf[:0], frame...)
	defer func() {
		if cap(f.buf) > maxKeptFrameBytes {
			f.buf = nil
		}
	}()
	m, rest, err := f.dec.Decode(f.buf)
	if err == nil && len(rest) > 0 {
		err = &wire.FrameError{Lane: -1, Offset: len(frame) - len(rest), Reason: fmt.Sprintf("%d bytes after the %v frame (one frame per call)", len(rest), m.Type()), Err: wire.ErrMalformed}
	}
	if err == nil {
		err = f.handle(m, now)
	}
	if err != nil {
		f.rejected.Add(1)
	}
	return err
}

func (f *Feed) handle(m relayproto.Message, now time.Time) error {
	if err := f.stamp(m); err != nil {
		return err
	}
	lane, _ := f.consumer.Route(m) // a frame no lane takes is ignored by Handle
	o, err := f.consumer.Handle(m)
	switch {
	case err != nil:
		return fmt.Errorf("%v frame of DC %d: %w", m.Type(), f.dcs[lane], err)
	case o == ingest.RetrySnapshot:
		s := m.(*relayproto.Snapshot)
		return fmt.Errorf("%w: lane %d (DC %d): snapshot %d chunk at bucket %d of %d refused (out of order or the wrong size); the lane awaits the snapshot from bucket 0",
			ErrFrameRejected, lane, f.dcs[lane], s.Sequence, s.Offset, s.Total)
	case o.Ignored():
		f.ignored.Add(1)
		return nil
	case o == ingest.LoadRecorded:
		r, _ := f.consumer.Lane(lane).LastLoad()
		ld := shm.LoadOf(&r, now)
		f.w.SetLoad(lane, &ld)
	}
	f.applied.Add(1)
	return nil
}

// stamp gives a frame without a lease the consumer-local lease of its
// pool's lane (see Apply); frames of pools without a lane keep none, so the
// consumer ignores them. A new subscription drops the lane's load report:
// reports of the previous producer no longer apply.
func (f *Feed) stamp(m relayproto.Message) error {
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
			return fmt.Errorf("%w: lane %d (DC %d): producer incarnation %d cannot take the lane: %w", ErrFrameRejected, i, f.dcs[i], s.Identity.Incarnation, err)
		}
		f.w.SetLoad(i, &shm.Load{})
		st = l.Status()
	}
	*lease = st.Lease
	return nil
}

// continues reports whether snapshot chunk s (at bucket 0) belongs to the
// lane's current subscription: its producer's snapshot being installed, or
// one the lane already holds (a repeat, which the lane ignores). Any other
// first chunk starts a new subscription.
func continues(st *ingest.LaneStatus, s *relayproto.Snapshot) bool {
	if st.Identity != s.Identity {
		return false
	}
	return st.State == ingest.StateAwaiting || (st.State == ingest.StateReady && s.Sequence <= st.Installed)
}

// SetRTT records a round trip to dc measured at now; ErrUnknownDC when dc
// has no lane.
func (f *Feed) SetRTT(dc uint64, rtt time.Duration, now time.Time) error {
	for i, d := range f.dcs {
		if d == dc {
			f.w.SetRTT(i, rtt, now)
			return nil
		}
	}
	return fmt.Errorf("%w: DC %d has no lane (dcs %v)", ErrUnknownDC, dc, f.dcs)
}
