package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/backoff"
	"github.com/nats-io/nats.go/jetstream"
)

// LaneStatus is one lane's state as its ingestor last reported it.
type LaneStatus struct {
	Lane        int
	DC          uint64
	State       string
	Incarnation uint64
	Epoch       uint64
	Installed   uint64
	Latest      uint64 // highest sequence the relay is known to have published
	Lag         uint64 // Latest − Installed
	RTT         time.Duration
	Faults      uint64 // messages that faulted the lane, and bad frames
	Resyncs     uint64 // subscriptions that ended (faults, relay or transport down) and were retried
	Snapshots   uint64 // snapshots installed from the store
	Requests    uint64 // fresh snapshots asked of the relay (deltas gone, store behind)
	Deltas      uint64 // deltas applied
	Drained     bool   // the relay's drain marker was acknowledged at Installed
	// Pending is how many log messages the relay had written beyond the
	// one the lane last applied (JetStream's pending count): the lane's
	// lag in log messages, 0 at the tail.
	Pending uint64
	// CatchUps counts subscriptions that started behind the log's tail
	// (retained messages to replay after the stored snapshot) and reached it.
	CatchUps uint64
	// IntegrityFailures counts the times the lane's words in the replica
	// file were found damaged (and the lane resynced).
	IntegrityFailures uint64
	// FramesReceived and BytesReceived count what the lane received by
	// frame type name (relayproto.FrameType.String: "delta", "heartbeat",
	// "drain-marker", "snapshot" chunks from the store, "load-report";
	// "invalid" for log frames that did not decode).
	FramesReceived map[string]uint64 `json:",omitempty"`
	BytesReceived  map[string]uint64 `json:",omitempty"`
	LastFault      string
	Load           *relayproto.LoadReport // last load report; nil before the first
}

// received counts one frame of kind, n bytes long.
func (st *LaneStatus) received(kind string, n int) {
	if st.FramesReceived == nil {
		st.FramesReceived, st.BytesReceived = map[string]uint64{}, map[string]uint64{}
	}
	st.FramesReceived[kind]++
	st.BytesReceived[kind] += uint64(n)
}

// frameInvalid is the FramesReceived kind of a log frame that did not
// decode.
const frameInvalid = "invalid"

// laneRunner is one lane's ingestor goroutine (the lane's only writer of
// words, ready bit and protocol record), its RTT prober and its load
// receiver.
type laneRunner struct {
	c     *Consumer
	index int
	dc    relayproto.DCID
	names relay.Names
	lane  *ingest.Lane
	base  *slog.Logger // lane and pool attributes
	log   *slog.Logger // base plus the current subscription's lease and incarnation (ingestor only)
	dec   wire.Decoder
	// kick ends the current subscription (damaged); nil between them.
	kick atomic.Pointer[context.CancelCauseFunc]
	// at is where the current subscription follows the log (nil before it
	// does); carry is where it stood when the consumer stopped the lane to
	// add lanes, and the next subscription goes on from there. Both belong
	// to the ingestor, and to Consumer.rebuild while no lane runs.
	at, carry *position
	// retry spaces the lane's subscriptions while they fail (ingestor
	// only: see run); warned is the last failure logged at warning level
	// (see noteResync).
	retry  backoff.Backoff
	warned string

	mu      sync.Mutex // guards st, lastRTT, rttAt and loadAt
	st      LaneStatus
	lastRTT time.Duration
	rttAt   time.Time // when lastRTT was measured; zero before the first
	loadAt  time.Time // when st.Load arrived
}

// rebind points the lane at the consumer's new protocol core and writes its
// last RTT and load report into the new file (Consumer.rebuild, with every
// lane goroutine stopped).
func (l *laneRunner) rebind() {
	l.lane = l.c.core.Lane(l.index)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.rttAt.IsZero() {
		l.c.w.SetRTT(l.index, l.lastRTT, l.rttAt)
	}
	if l.st.Load != nil {
		ld := shm.LoadOf(l.st.Load, l.loadAt)
		l.c.w.SetLoad(l.index, &ld)
	}
}

// position is where a lane follows its relay's log: the subscription's
// JetStream context, relay Info and lease, and the stream sequence of the
// last log message applied. A lane stopped to add lanes is carried into
// the new replica generation with its words, and goes on from its position
// under the same lease instead of installing a snapshot again.
type position struct {
	js    jetstream.JetStream
	info  relay.Info
	lease relayproto.Lease
	seq   uint64
	// paused is when the consumer stopped the lane to add lanes (a
	// carried lane; zero otherwise): follow logs the pause once it
	// follows the log again.
	paused time.Time
	// ready is when the subscription got the lane READY (kept when the
	// lane is carried).
	ready time.Time
}

func newLaneRunner(c *Consumer, i int, dc relayproto.DCID) *laneRunner {
	base := c.cfg.Logger.With("lane", i, relay.PoolLogKey, relay.PoolLogValue(c.cfg.Domain, dc))
	return &laneRunner{c: c, index: i, dc: dc, lane: c.core.Lane(i), base: base, log: base, retry: c.cfg.retry(),
		names: relay.Names{Prefix: c.cfg.Prefix, Domain: c.cfg.Domain, DC: dc},
		st:    LaneStatus{Lane: i, DC: uint64(dc), State: ingest.StateUnclaimed.String()}}
}

func (l *laneRunner) status() LaneStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.st
	st.RTT = l.lastRTT
	st.FramesReceived, st.BytesReceived = maps.Clone(st.FramesReceived), maps.Clone(st.BytesReceived)
	if st.Load != nil {
		r := *st.Load
		st.Load = &r
	}
	return st
}

// publish copies the lane's protocol state into the status and the
// replica file's record (ingestor goroutine).
func (l *laneRunner) publish(now time.Time) {
	s := l.lane.Status()
	l.mu.Lock()
	st := &l.st
	st.State, st.Incarnation, st.Epoch = s.State.String(), s.Identity.Incarnation, s.Lease.Epoch
	st.Installed, st.Latest, st.Lag = s.Installed, max(s.Latest, s.Installed), s.Lag()
	rec := shm.LaneState{State: uint8(s.State), Incarnation: s.Identity.Incarnation, LayoutGeneration: s.Identity.LayoutGeneration,
		Epoch: s.Lease.Epoch, Installed: s.Installed, Latest: st.Latest, AppliedAt: now,
		Faults: st.Faults, Snapshots: st.Snapshots, Deltas: st.Deltas}
	l.mu.Unlock()
	l.c.w.SetState(l.index, &rec)
}

func (l *laneRunner) count(fn func(st *LaneStatus)) {
	l.mu.Lock()
	fn(&l.st)
	l.mu.Unlock()
}

// run is the lane's ingestor: claim, then sync until ctx ends, resyncing
// after every fault. On return the lane is retired.
//
// The pause before a resync backs off (Config.RetryEvery doubling to
// MaxRetryEvery) while subscriptions fail, and starts over from
// RetryEvery after one that kept the lane READY for at least
// MaxRetryEvery: a lane that served and faulted resyncs at once, a lane
// whose relay or NATS is down costs it one attempt every MaxRetryEvery,
// and one whose every install faults soon after (a relay publishing
// deltas it cannot apply, say) fetches a snapshot as often, not four
// times a second. The counters (Resyncs, LastFault) see every attempt;
// noteResync logs them without flooding the log.
//
// A lane stopped because the consumer adds lanes (errAddingLanes) while it
// follows the log, READY, is not retired: it keeps its claim, lease and
// ready bit and records its position (carry), so Consumer.rebuild carries
// it into the new generation and it goes on from there.
func (l *laneRunner) run(ctx context.Context) {
	if l.carry == nil { // a carried lane is still claimed
		if err := l.lane.Claim(); err != nil {
			l.log.Error("claim", "err", err)
			return
		}
	}
	defer func() {
		if errors.Is(context.Cause(ctx), errAddingLanes) && l.at != nil && l.lane.Status().State == ingest.StateReady {
			l.carry, l.at = l.at, nil
			return
		}
		l.at = nil
		_ = l.lane.Retire()
		l.publish(time.Now())
	}()
	for ctx.Err() == nil {
		err := l.sync(ctx)
		if ctx.Err() != nil {
			return
		}
		l.count(func(st *LaneStatus) { st.Resyncs++; st.LastFault = err.Error() })
		if at := l.at; at != nil {
			l.retry.Served(at.ready, time.Now()) // READY for MaxRetryEvery: this fault is news
		}
		wait := l.retry.Next()
		l.noteResync(ctx, err, l.retry.Failures(), wait)
		l.publish(time.Now())
		backoff.Sleep(ctx, wait)
	}
}

// noteResync logs the end of the lane's subscription, the failing-th in a
// row since its pause started over, and the pause before the next: at
// warning level for the 1st, 2nd, 4th, 8th… and for each whose error says
// something new, at debug level otherwise (the lane's ingestor, or its
// upstream follower: one of them per lane).
func (l *laneRunner) noteResync(ctx context.Context, err error, failing int, wait time.Duration) {
	level := slog.LevelDebug
	if msg := err.Error(); msg != l.warned || failing&(failing-1) == 0 {
		level, l.warned = slog.LevelWarn, msg
	}
	l.log.Log(ctx, level, "lane resync", "err", err, "failing", failing, "retry_in", wait)
}

// sync is one subscription of the lane: ask the relay who it is, take a new
// lease, install the stored snapshot, and follow the log after it until
// something faults the lane. It returns why it ended.
func (l *laneRunner) sync(ctx context.Context) error {
	cfg := &l.c.cfg
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l.kick.Store(&cancel)
	defer l.kick.Store(nil)
	// A subscription ended by the verifier says so, whatever step it was in.
	fail := func(err error) error {
		if cause := context.Cause(ctx); errors.Is(cause, ErrIntegrity) {
			err = cause
		}
		return l.fail(err)
	}
	if at := l.carry; at != nil {
		l.carry, l.at = nil, at
		at.paused = l.c.adding
		return fail(l.follow(ctx, at))
	}
	l.at = nil
	info, _, err := ping(ctx, cfg.Conn, l.names, cfg.RequestTimeout)
	if err != nil {
		return fail(err)
	}
	id, err := info.Identity()
	if err != nil {
		return fail(err)
	}
	if info.Seed != cfg.Seed || info.Buckets != cfg.Buckets {
		return fail(fmt.Errorf("%w: the relay publishes seed %#x × %d buckets, the replica's lanes are seed %#x × %d "+
			"(the consumer's --seed and --expected-blocks must be the relays')", ErrFormatMismatch,
			info.Seed, info.Buckets, cfg.Seed, cfg.Buckets))
	}
	js, err := l.c.jetStream(info.JSDomain)
	if err != nil {
		return fail(err)
	}
	lease := l.lane.NextLease()
	l.log = l.base.With("lease", lease.Epoch, "incarnation", id.Incarnation)
	if err := l.lane.Assign(id, lease); err != nil {
		return fail(fmt.Errorf("assign %v: %w", lease, err))
	}
	l.publish(time.Now())
	logSeq, err := l.install(ctx, js, &info, lease)
	if err != nil {
		return fail(err)
	}
	l.loadLast(ctx, js, &info)
	l.at = &position{js: js, info: info, lease: lease, seq: logSeq, ready: time.Now()}
	return fail(l.follow(ctx, l.at))
}

// damaged ends the lane's subscription because its words in the replica
// file failed their integrity check (the consumer's verifier); the next
// subscription installs the relay's stored snapshot, which rewrites every
// word and seals the lane's sums afresh.
func (l *laneRunner) damaged(err error) {
	l.count(func(st *LaneStatus) { st.IntegrityFailures++ })
	l.base.Error("lane's words in the replica file are damaged; resyncing it from a snapshot", "err", err)
	if cancel := l.kick.Load(); cancel != nil {
		(*cancel)(err)
	}
}

func (l *laneRunner) fail(err error) error {
	return &SyncError{Lane: l.index, DC: uint64(l.dc), Err: err}
}

// requestSnapshot asks the relay to store a fresh snapshot and waits for
// its answer (or the timeout).
func (l *laneRunner) requestSnapshot(ctx context.Context) {
	cfg := &l.c.cfg
	l.count(func(st *LaneStatus) { st.Requests++ })
	c, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	if _, err := cfg.Conn.RequestWithContext(c, l.names.SnapshotSubject(), nil); err != nil {
		l.log.Warn("snapshot request", "err", err)
	}
}

// follow applies the log after at.seq until the lane faults, a frame is
// bad or the transport fails, advancing at.seq past every message it
// applies whole.
func (l *laneRunner) follow(ctx context.Context, at *position) error {
	cfg := &l.c.cfg
	info, lease := &at.info, at.lease
	cons, err := at.js.OrderedConsumer(ctx, info.Stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: at.seq + 1})
	if err != nil {
		return fmt.Errorf("follow %s from %d: %w", info.Stream, at.seq+1, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(cfg.PullMessages), jetstream.PullHeartbeat(cfg.PullHeartbeat))
	if err != nil {
		return fmt.Errorf("follow %s: %w", info.Stream, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	if !at.paused.IsZero() {
		l.log.Info("lane carried into the new replica generation; following on", "log", at.seq,
			"paused", time.Since(at.paused))
		at.paused = time.Time{}
	}
	// A subscription starts behind when its first message has others
	// pending after it; it counts one catch-up when it reaches the tail.
	first, behind := true, false
	for {
		msg, err := it.Next()
		if err != nil {
			return fmt.Errorf("follow %s: %w", info.Stream, err)
		}
		var pending, seq uint64
		if md, err := msg.Metadata(); err == nil {
			pending, seq = md.NumPending, md.Sequence.Stream
		}
		caughtUp := behind && pending == 0
		if first {
			first, behind = false, pending > 0
		}
		if caughtUp {
			behind = false
		}
		l.count(func(st *LaneStatus) {
			st.Pending = pending
			if caughtUp {
				st.CatchUps++
			}
		})
		frames := [][]byte{msg.Data()}
		if cfg.Filter != nil {
			frames = cfg.Filter(l.dc, msg.Data())
		}
		for _, f := range frames {
			if err := l.apply(f, lease); err != nil {
				// The message that ended this subscription stays in the log
				// after the stored snapshot: without a fresh snapshot every
				// resync would replay it and fault again (a poison message).
				l.requestSnapshot(ctx)
				return err
			}
		}
		if seq != 0 {
			at.seq = seq
		}
	}
}

// apply handles one log frame under lease.
func (l *laneRunner) apply(frame []byte, lease relayproto.Lease) error {
	var start time.Time
	observe := l.c.cfg.ObserveDelta
	if observe != nil {
		start = time.Now()
	}
	m, _, err := l.dec.Decode(frame)
	if err != nil {
		// A bad frame retires the lane at once; the resync takes a new lease.
		_ = l.lane.Retire()
		l.count(func(st *LaneStatus) { st.Faults++; st.received(frameInvalid, len(frame)) })
		return fmt.Errorf("bad log frame: %w", err)
	}
	l.count(func(st *LaneStatus) { st.received(m.Type().String(), len(frame)) })
	var o ingest.Outcome
	images := -1 // a delta's images once applied
	switch m := m.(type) {
	case *relayproto.Delta:
		m.Lease = lease
		if o = l.lane.Delta(m); o == ingest.Applied {
			images = len(m.Images)
			l.count(func(st *LaneStatus) { st.Deltas++; st.Drained = false })
		}
	case *relayproto.Heartbeat:
		m.Lease = lease
		o = l.lane.Heartbeat(m)
	case *relayproto.DrainMarker:
		m.Lease = lease
		if o = l.lane.DrainMarker(m); o == ingest.Acknowledged {
			l.count(func(st *LaneStatus) { st.Drained = true })
			l.log.Info("relay drained", "sequence", m.Expected)
		}
	default:
		_ = l.lane.Retire()
		return fmt.Errorf("unexpected %v frame in the delta log", m.Type())
	}
	if o.Faults() {
		l.count(func(st *LaneStatus) { st.Faults++ })
	}
	now := time.Now()
	l.publish(now)
	if observe != nil && images >= 0 {
		observe(l.index, images, now.Sub(start))
	}
	if o.Faults() {
		return &ingest.LaneError{Lane: l.index, Outcome: o, Installed: l.lane.Status().Disposition.Installed,
			Sequence: l.lane.Status().Disposition.Sequence}
	}
	return nil
}

// probe measures the RTT to the DC's relay every PingEvery until ctx ends.
func (l *laneRunner) probe(ctx context.Context) {
	cfg := &l.c.cfg
	tick := time.NewTicker(cfg.PingEvery)
	defer tick.Stop()
	for {
		if _, rtt, err := ping(ctx, cfg.Conn, l.names, cfg.RequestTimeout); err == nil {
			l.recordRTT(rtt, time.Now())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// recordRTT keeps a round trip measured at now and writes it to the
// replica file's record.
func (l *laneRunner) recordRTT(rtt time.Duration, now time.Time) {
	l.c.w.SetRTT(l.index, rtt, now)
	l.mu.Lock()
	l.lastRTT, l.rttAt = rtt, now
	l.mu.Unlock()
}

// loadLast reads the relay's last load report from its state bucket, so a
// fresh lane has one before the next report arrives.
func (l *laneRunner) loadLast(ctx context.Context, js jetstream.JetStream, info *relay.Info) {
	c, cancel := context.WithTimeout(ctx, l.c.cfg.RequestTimeout)
	defer cancel()
	kv, err := js.KeyValue(c, info.StateBucket)
	if err != nil {
		return
	}
	e, err := kv.Get(c, relay.LoadKey)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			l.log.Warn("last load report", "err", err)
		}
		return
	}
	var r relayproto.LoadReport
	if _, err := wire.DecodeLoadReport(&r, e.Value()); err == nil && r.Identity.Pool == (relayproto.PoolID{Domain: l.c.cfg.Domain, DC: l.dc}) {
		l.recordLoad(&r, time.Now())
	}
}

// recordLoad keeps r if it supersedes the lane's last report (a later
// sample, or the same one with the stored-blocks counter) and writes it to
// the replica file's record.
func (l *laneRunner) recordLoad(r *relayproto.LoadReport, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.Load != nil && !r.Supersedes(l.st.Load) {
		return
	}
	kept := *r
	l.st.Load, l.loadAt = &kept, now
	ld := shm.LoadOf(r, now)
	l.c.w.SetLoad(l.index, &ld)
}
