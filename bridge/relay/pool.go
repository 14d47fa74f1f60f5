package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/internal/backoff"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Pending limits of the event subscriptions: generous, because a burst of
// events must queue rather than be dropped by the client (a drop shows up
// as an envelope gap).
const (
	eventPendingMsgs  = 1 << 20
	eventPendingBytes = 512 << 20
)

// inKind says which subject an inbound message came from.
type inKind uint8

const (
	inEnvelope      inKind = iota + 1 // kv-events envelope (NATS, any scope)
	inLegacy                          // G2025 JSON RouterEvent
	inWorkerLoad                      // goindex JSON WorkerLoad
	inActiveLoad                      // kv_metrics envelope, endpoint scope
	inNamespaceLoad                   // kv_metrics envelope, namespace scope (older releases)
	inFeed                            // a Feed's Message
)

type inbound struct {
	kind inKind
	data []byte
	feed *Message
}

// maxOwnedMembers bounds the table of which feed source last fed each
// member (for KindGone and KindResync): one entry per (worker, rank) of
// the pool, so 64k covers 4096 workers of 16 ranks; past it new members
// are not tracked (and not cleared when their source goes).
const maxOwnedMembers = 1 << 16

// engineSource is the pool's state of one engine feed source: Dynamo's
// normalizer (event ids, learned attention groups) and the window of its
// batch sequences, started by its first batch. One socket delivers a
// source's batches in order, so the window acts as a high-water mark.
type engineSource struct {
	norm *dynamo.Normalizer
	win  seqWindow
}

// ownerRecord is the pool's claim in its state bucket: the incarnation of
// the relay that serves it now.
type ownerRecord struct {
	Incarnation uint64 `json:"incarnation"`
	Host        string `json:"host"`
	PID         int    `json:"pid"`
	StartedAt   int64  `json:"started_at_unix_nano"`
}

// PoolStatus is one pool's state and counters.
type PoolStatus struct {
	Domain           uint64
	DC               uint64
	Incarnation      uint64
	LayoutGeneration uint64
	Intake           IntakeStats
	// Rejected counts events the producer refused (missing parent, remap,
	// owner overflow, bad shape); capacity omissions are in Producer.
	Rejected         uint64
	Producer         ckf.Stats
	Publisher        publish.Status
	Snapshots        uint64 // snapshots stored
	SnapshotSequence uint64 // terminal sequence of the stored snapshot
	SnapshotBytes    int    // size of the stored snapshot object
	LogSequence      uint64 // stream sequence of the last log message written
	Rebuilds         uint64 // new layout generations after a fenced producer
	// WatchSequence is the last sequence of the publication the pool's
	// watches follow (Relay.Watch): its own, not the delta log's.
	WatchSequence uint64
	// Wire counts frames and bytes put on NATS by frame type.
	Wire WireStats
	// UntrackedWorkers counts load samples and events of new workers not
	// tracked because the live-worker table was full.
	UntrackedWorkers uint64
	// Checkpoint counts checkpoints written and what the start restored.
	Checkpoint CheckpointStats
	// Running is true while the pool's writer loop serves (set up, not
	// stopped); a stopped pool's last status has it false.
	Running bool
	Err     string // why the pool stopped, if it did
	// FeedErr says why a feed reports it does not work (its discovery has
	// not listed, or its latest request failed: HealthReporter); "" while
	// every feed works.
	FeedErr string
}

// pool is one pool's writer goroutine state: everything here is touched by
// that goroutine only, except info (atomic, read by the ping responder).
type pool struct {
	r      *Relay
	cfg    PoolConfig
	names  Names
	log    *slog.Logger
	format *ckf.Format

	prod  *ckf.Producer
	pub   *publish.Fanout
	id    relayproto.ProducerIdentity
	dlog  *deltaLog
	snaps *snapshotStore

	stream jetstream.Stream
	state  jetstream.KeyValue
	subs   []*nats.Subscription

	in        chan inbound
	req       chan func()
	intake    *intake
	evs       []kv.Event            // scratch: one message's events
	restarted ckf.Step              // the step of clearing a restarted publisher\'s members while its message is handled
	rev       []dynamo.RouterEvent  // scratch: one engine batch's normalized events
	owners    map[kv.Member]*Source // which feed source last fed each member
	engines   map[*Source]*engineSource
	lastPub   map[*Source]uint64 // publisher id of a Restarts source\'s last KV-event message taken
	// natsSrc is the Source standing for each NATS event-plane publisher
	// (by publisher id) in owners, so that a KindGone of its discovery
	// record (a Source with NATS set) clears the members it fed.
	natsSrc map[uint64]*Source
	// envPub is the publisher id of the envelope being handled (0: none,
	// or an unsequenced source); pubOf the one of each member's latest
	// events, which a checkpoint files the member under.
	envPub uint64
	pubOf  map[kv.Member]uint64
	// restored and restoredBy are the restored checkpoint's publishers not
	// heard from yet and their members on probation (recover.go), until
	// restoreUntil; recovered is the step of members dropped while a
	// message is handled.
	restored       map[uint64]*restoredPublisher
	restoredBy     map[kv.Member]uint64
	restoreUntil   time.Time
	recovered      ckf.Step
	ckpt           CheckpointStats
	lastCheckpoint time.Time
	stopFeeds      context.CancelFunc
	feeds          sync.WaitGroup
	istats         IntakeStats
	load           *loadTracker
	wire           *WireStats
	watchers       watchers

	maxImages    int
	images       []relayproto.Image
	frame        []byte
	rejected     uint64
	rebuilds     uint64
	sinceSnap    uint64
	lastLogWrite time.Time
	lastLoad     time.Time
	fenceLogged  bool
	// snapReqs are the snapshot requests waiting for the loop, answered
	// together by one snapshot (snapReqMu guards them: NATS callbacks
	// add to them).
	snapReqMu sync.Mutex
	snapReqs  []*nats.Msg
	// logRetry spaces the pool's writes to JetStream that keep failing
	// (the recovery of a fenced pool, a snapshot refresh, heartbeats):
	// each failed one may have waited PublishTimeout on this goroutine,
	// so retrying on every tick would leave the intake stalled. Its steps
	// double from RetryEvery to maxLogRetry, jittered: a relay's pools
	// whose JetStream went down together do not retry in lockstep.
	logRetry backoff.Backoff
}

// maxLogRetry caps the wait between a failing pool's JetStream writes.
const maxLogRetry = 10 * time.Second

func newPool(r *Relay, cfg PoolConfig) (*pool, error) {
	n, err := ckf.BucketCount(cfg.ExpectedBlocks)
	if err != nil {
		return nil, fmt.Errorf("%w: pool %d: %w", ErrBadConfig, cfg.Domain, err)
	}
	f, err := ckf.NewFormat(cfg.Seed, n)
	if err != nil {
		return nil, fmt.Errorf("%w: pool %d: %w", ErrBadConfig, cfg.Domain, err)
	}
	names := Names{Prefix: r.cfg.Prefix, Domain: cfg.Domain, DC: r.cfg.DC}
	p := &pool{r: r, cfg: cfg, names: names, format: f,
		log: r.cfg.Logger.With(PoolLogKey, PoolLogValue(cfg.Domain, r.cfg.DC)),
		in:  make(chan inbound, eventQueue), req: make(chan func()),
		load: newLoadTracker(r.cfg.LiveWindow, r.cfg.RouterReplicaSync), maxImages: maxImagesFor(r.cfg.Conn.MaxPayload()), wire: newWireStats(),
		owners: map[kv.Member]*Source{}, engines: map[*Source]*engineSource{}, lastPub: map[*Source]uint64{},
		natsSrc: map[uint64]*Source{}, pubOf: map[kv.Member]uint64{},
		logRetry: backoff.Backoff{First: r.cfg.RetryEvery, Max: maxLogRetry}}
	p.intake = newIntake(&p.istats, r.cfg.LiveWindow)
	if err := p.newProducer(); err != nil {
		return nil, err
	}
	return p, nil
}

// newProducer makes an empty producer for the pool's format, its owner
// table sized for the pool's ExpectedBlocks so that ingest does not stop
// to rehash it while the pool fills.
func (p *pool) newProducer() error {
	prod, err := ckf.New(ckf.Config{Format: p.format, MaxKicks: p.cfg.MaxKicks, BatchEvents: p.r.cfg.BatchEvents,
		FlushAfter: p.r.cfg.FlushAfter, ClearWorker: p.cfg.ClearWorker, ExpectedBlocks: int(p.cfg.ExpectedBlocks)})
	if err != nil {
		return fmt.Errorf("%w: pool %d: %w", ErrBadConfig, p.cfg.Domain, err)
	}
	p.prod = prod
	return nil
}

// setup creates or opens the pool's JetStream assets, claims the pool with
// a new incarnation, starts the event inputs (queued until run), restores
// the checkpoint, stores the first snapshot and starts the responders.
func (p *pool) setup(ctx context.Context) error {
	c := &p.r.cfg
	js, err := jetstream.New(c.Conn)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, c.PublishTimeout)
	defer cancel()
	p.stream, err = js.CreateOrUpdateStream(sctx, jetstream.StreamConfig{
		Name: p.names.Stream(), Subjects: []string{p.names.DeltaSubject()},
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
		MaxAge: c.MaxAge, MaxBytes: c.MaxBytes, Storage: c.Storage,
		Description: "goindex delta log of one pool",
	})
	if err != nil {
		return fmt.Errorf("delta stream %s: %w", p.names.Stream(), err)
	}
	obs, err := js.CreateOrUpdateObjectStore(sctx, jetstream.ObjectStoreConfig{Bucket: p.names.SnapshotBucket(), Storage: c.Storage,
		Description: "goindex snapshot of one pool"})
	if err != nil {
		return fmt.Errorf("snapshot store %s: %w", p.names.SnapshotBucket(), err)
	}
	p.state, err = js.CreateOrUpdateKeyValue(sctx, jetstream.KeyValueConfig{Bucket: p.names.StateBucket(), Storage: c.Storage,
		Description: "goindex relay claim and last load report of one pool"})
	if err != nil {
		return fmt.Errorf("state bucket %s: %w", p.names.StateBucket(), err)
	}
	incarnation, err := p.claim(sctx)
	if err != nil {
		return err
	}
	p.log = p.log.With("incarnation", incarnation)
	p.dlog = &deltaLog{ctx: p.r.base, js: js, subject: p.names.DeltaSubject(), timeout: c.PublishTimeout, wire: p.wire,
		up: c.Conn.IsConnected}
	if err := p.dlog.resync(p.stream); err != nil {
		return err
	}
	p.snaps = &snapshotStore{ctx: p.r.base, obs: obs, log: p.dlog, timeout: c.PublishTimeout, buckets: p.format.Buckets(), wire: p.wire}
	p.id = relayproto.ProducerIdentity{Pool: relayproto.PoolID{Domain: p.cfg.Domain, DC: c.DC},
		Incarnation: incarnation, LayoutGeneration: 1, Format: relayproto.FormatOf(p.format)}
	p.watchers.id = p.id
	// The event inputs start first: what workers publish while the
	// checkpoint is restored waits in the queue instead of being lost, so
	// a restored publisher's next envelope can still prove continuity.
	if err := p.subscribe(true); err != nil {
		return err
	}
	p.restore()
	if err := p.newPublisher(0); err != nil {
		return err
	}
	if err := p.snapshot(); err != nil {
		return err
	}
	p.lastCheckpoint = time.Now()
	return p.subscribe(false)
}

// claim writes a new owner record: the incarnation is above the previous
// owner's and above the clock, so it differs from every earlier one.
func (p *pool) claim(ctx context.Context) (uint64, error) {
	prev := uint64(0)
	if e, err := p.state.Get(ctx, OwnerKey); err == nil {
		var o ownerRecord
		if json.Unmarshal(e.Value(), &o) == nil {
			prev = o.Incarnation
		}
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, fmt.Errorf("read owner: %w", err)
	}
	now := time.Now()
	inc := max(prev+1, uint64(now.UnixNano()))
	host, _ := os.Hostname()
	b, _ := json.Marshal(ownerRecord{Incarnation: inc, Host: host, PID: os.Getpid(), StartedAt: now.UnixNano()})
	if _, err := p.state.Put(ctx, OwnerKey, b); err != nil {
		return 0, fmt.Errorf("claim pool: %w", err)
	}
	return inc, nil
}

// owner reads the current owner's incarnation.
func (p *pool) owner() (uint64, error) {
	ctx, cancel := context.WithTimeout(p.dlog.ctx, p.r.cfg.PublishTimeout)
	defer cancel()
	e, err := p.state.Get(ctx, OwnerKey)
	if err != nil {
		return 0, err
	}
	var o ownerRecord
	if err := json.Unmarshal(e.Value(), &o); err != nil {
		return 0, fmt.Errorf("%w: owner record: %v", ErrMalformed, err)
	}
	return o.Incarnation, nil
}

// source is what the pool publishes: PoolConfig.Source, else its producer.
func (p *pool) source() publish.Source {
	if p.cfg.Source != nil {
		return p.cfg.Source
	}
	return p.prod
}

func (p *pool) newPublisher(start uint64) error {
	pub, err := publish.NewFanout(publish.FanoutConfig{
		Config:    publish.Config{Identity: p.id, StartSequence: start, Sink: p.dlog, Source: p.source()},
		Snapshots: p.snaps, Encoding: p.r.cfg.Encoding,
	})
	if err != nil {
		return fmt.Errorf("publisher: %w", err)
	}
	p.pub = pub
	return nil
}

// subscription is one NATS subject a pool listens on.
type subscription struct {
	subject string
	handler nats.MsgHandler
	events  bool // an event or load input: generous pending limits, none with a Source
}

// subscriptions lists the pool's NATS subjects: Dynamo's KV events and
// load on the configured scopes, goindex's worker load, and the request
// responders.
func (p *pool) subscriptions() []subscription {
	push := func(kind inKind) nats.MsgHandler {
		return func(m *nats.Msg) {
			select {
			case p.in <- inbound{kind: kind, data: m.Data}:
			case <-p.r.stop:
			}
		}
	}
	ns, comp := p.cfg.Namespace, p.cfg.Component
	endpoint := dynamo.Scope{Namespace: ns, Component: comp, Endpoint: p.cfg.Endpoint}
	var subs []subscription
	add := func(subject string, kind inKind) {
		subs = append(subs, subscription{subject, push(kind), true})
	}
	dynLoad := p.cfg.Loads&LoadDynamo != 0
	if p.cfg.Scopes&ScopeEndpoint != 0 {
		add(endpoint.Subject(dynamo.EventTopic), inEnvelope)
		if dynLoad {
			add(endpoint.Subject(dynamo.MetricsTopic), inActiveLoad)
		}
	}
	if p.cfg.Scopes&ScopeComponent != 0 {
		add(dynamo.EventSubject(ns, comp), inEnvelope)
		add(dynamo.LegacyEventSubject(ns, comp), inLegacy)
		if dynLoad {
			add(dynamo.Scope{Namespace: ns}.Subject(dynamo.MetricsTopic), inNamespaceLoad)
		}
	}
	if p.cfg.Loads&LoadGoindex != 0 {
		add(p.names.WorkerLoadSubject(), inWorkerLoad)
	}
	return append(subs,
		subscription{p.names.PingSubject(), p.respondInfo, false},
		subscription{p.names.DiscoverSubject(), p.respondInfo, false},
		subscription{p.names.SnapshotSubject(), p.requestSnapshot, false})
}

// subscribe starts the NATS event and load inputs and the feeds (events),
// or the request responders (!events).
func (p *pool) subscribe(events bool) error {
	nc := p.r.cfg.Conn
	for _, s := range p.subscriptions() {
		if s.events != events || (s.events && p.cfg.Source != nil) {
			continue // a given Source stands in for the producer the events feed
		}
		sub, err := nc.Subscribe(s.subject, s.handler)
		if err != nil {
			p.unsubscribe()
			return fmt.Errorf("subscribe %s: %w", s.subject, err)
		}
		if s.events {
			if err := sub.SetPendingLimits(eventPendingMsgs, eventPendingBytes); err != nil {
				p.unsubscribe()
				return fmt.Errorf("pending limits of %s: %w", s.subject, err)
			}
		}
		p.subs = append(p.subs, sub)
	}
	if events && p.cfg.Source == nil {
		p.startFeeds()
	}
	return nc.Flush()
}

// startFeeds runs every feed until the pool stops; their messages join the
// NATS ones on the writer goroutine.
func (p *pool) startFeeds() {
	ctx, cancel := context.WithCancel(p.r.base)
	p.stopFeeds = cancel
	for _, f := range p.cfg.Feeds {
		deliver := func(m Message) bool {
			select {
			case p.in <- inbound{kind: inFeed, feed: &m}:
				return true
			case <-ctx.Done():
				return false
			}
		}
		p.feeds.Go(func() {
			if err := f.Run(ctx, deliver); err != nil && ctx.Err() == nil {
				p.log.Error("feed stopped", "feed", f.String(), "err", err)
			}
		})
	}
}

func (p *pool) unsubscribe() {
	for _, s := range p.subs {
		_ = s.Unsubscribe()
	}
	p.subs = nil
	if p.stopFeeds != nil {
		p.stopFeeds()
		p.feeds.Wait()
		p.stopFeeds = nil
	}
}

// info returns the pool's current Info; the loop keeps a copy in the relay
// for the responders.
func (p *pool) info() Info {
	st := p.pub.Status()
	return Info{Domain: uint64(p.cfg.Domain), DC: uint64(p.r.cfg.DC), Name: p.r.cfg.Name,
		Incarnation: p.id.Incarnation, LayoutGeneration: p.id.LayoutGeneration,
		Seed: p.format.Seed(), Buckets: p.format.Buckets(), JSDomain: p.r.cfg.JSDomain,
		Stream: p.names.Stream(), SnapshotBucket: p.names.SnapshotBucket(), StateBucket: p.names.StateBucket(),
		LastSequence: st.LastSequence, SnapshotSequence: p.snaps.stored}
}

func (p *pool) publishInfo() { p.r.setInfo(p.cfg.Domain, p.info()) }

// respondInfo answers a ping or discover request (NATS callback goroutine).
func (p *pool) respondInfo(m *nats.Msg) {
	info, ok := p.r.getInfo(p.cfg.Domain)
	if !ok || m.Reply == "" {
		return
	}
	info.SentAtUnixNano = time.Now().UnixNano()
	b, _ := json.Marshal(info)
	_ = m.Respond(b)
}

// maxSnapshotRequests bounds the snapshot requests waiting for one
// snapshot; past it a request gets no answer (its requester times out and
// asks again).
const maxSnapshotRequests = 4096

// requestSnapshot hands a snapshot request to the loop, which stores a
// fresh snapshot and replies with the new Info. The requests that arrive
// before the loop takes them are answered by one snapshot, taken after all
// of them arrived: a burst (every router site's lane asking after a relay
// restart) costs the pool one snapshot's stall, not one each.
func (p *pool) requestSnapshot(m *nats.Msg) {
	p.snapReqMu.Lock()
	if len(p.snapReqs) >= maxSnapshotRequests {
		p.snapReqMu.Unlock()
		return
	}
	p.snapReqs = append(p.snapReqs, m)
	first := len(p.snapReqs) == 1
	p.snapReqMu.Unlock()
	if !first {
		return // the loop's next snapshot answers it too
	}
	fn := func() {
		p.snapReqMu.Lock()
		reqs := p.snapReqs
		p.snapReqs = nil
		p.snapReqMu.Unlock()
		p.passForeignWrites()
		if err := p.snapshot(); err != nil {
			p.log.Warn("requested snapshot failed", "err", err, "requests", len(reqs))
			return
		}
		for _, m := range reqs {
			p.respondInfo(m)
		}
	}
	// Not from this callback: NATS runs a subscription's callbacks one
	// at a time, and the requests behind this one must join the batch
	// while the loop is busy.
	go func() {
		select {
		case p.req <- fn:
		case <-p.r.stop:
		}
	}()
}

// passForeignWrites moves the log position the next snapshot reflects past
// messages someone else appended after the relay's last one. A consumer
// asks for a snapshot when a log message ended its subscription; if that
// message was not the relay's (a poison message from a client allowed to
// publish on the delta subject), a snapshot at the relay's own last
// position would make every resync replay it. A newer owner of the pool is
// left to the owner checks, which stop this relay.
func (p *pool) passForeignWrites() {
	ctx, cancel := context.WithTimeout(context.Background(), p.r.cfg.PublishTimeout)
	defer cancel()
	info, err := p.stream.Info(ctx)
	if err != nil || info.State.LastSeq == p.dlog.last {
		return
	}
	if owner, err := p.owner(); err != nil || owner != p.id.Incarnation {
		return
	}
	p.log.Warn("foreign messages in the delta log; the snapshot skips them",
		"relay_last", p.dlog.last, "log_last", info.State.LastSeq)
	p.dlog.last = info.State.LastSeq
}

// run is the pool's writer loop. It returns nil after a graceful drain
// (ctx done), at once when the relay is killed, and an error when the pool
// cannot go on (superseded).
func (p *pool) run(ctx context.Context) error {
	defer p.watchers.stop() // after shutdown's tail and drain marker
	defer p.unsubscribe()
	c := &p.r.cfg
	tickEvery := min(c.RetryEvery, c.LoadEvery, c.HeartbeatEvery, c.SnapshotEvery)
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var timerC <-chan time.Time
	p.lastLogWrite, p.lastLoad = time.Now(), time.Time{}
	for {
		select {
		case <-p.r.stop:
			return nil
		case <-ctx.Done():
			return p.shutdown()
		case m := <-p.in:
			switch p.handle(m) {
			case ckf.StepArmTimer:
				timer.Reset(c.FlushAfter)
				timerC = timer.C
			case ckf.StepPublish:
				timer.Stop()
				timerC = nil
				p.takeBacklog()
				if err := p.publish(); err != nil {
					return err
				}
			}
		case <-timerC:
			timerC = nil
			p.takeBacklog()
			if err := p.publish(); err != nil {
				return err
			}
		case fn := <-p.req:
			fn()
		case now := <-tick.C:
			if err := p.periodic(now); err != nil {
				return err
			}
		}
	}
}

// maxBacklogTake bounds the queued messages takeBacklog handles before a
// publication: the queue's length, so a backlog goes out in a few deltas
// while a publication is never put off for long.
const maxBacklogTake = eventQueue

// takeBacklog handles the messages already queued, up to maxBacklogTake,
// before a due publication, so that they go out in its batch. Each
// publication waits for JetStream's acknowledgement on this goroutine: a
// relay behind its inputs that published every BatchEvents events would
// take no more than BatchEvents events per round trip to JetStream (729
// events/s at 20 ms), and its workers' sockets would overflow. Boundaries
// move only while messages queue, when the publication lags anyway; a
// boundary a message forces (a clear, a worker gone) lands in the larger
// batch, whose images are the net change either way.
func (p *pool) takeBacklog() {
	for range maxBacklogTake {
		select {
		case m := <-p.in:
			p.handle(m)
		default:
			return
		}
	}
}

// handle applies one inbound message and returns the cadence step.
func (p *pool) handle(m inbound) ckf.Step {
	p.envPub, p.recovered = 0, ckf.StepContinue
	s := p.take(m)
	return max(s, p.recovered)
}

// take is handle's work.
func (p *pool) take(m inbound) ckf.Step {
	now := time.Now()
	p.evs = p.evs[:0]
	var src *Source
	switch m.kind {
	case inWorkerLoad:
		p.istats.Messages++
		if s, err := DecodeWorkerLoad(m.data); err == nil {
			p.istats.LoadSamples++
			p.load.sample(s, now)
		} else {
			p.istats.Malformed++
		}
		return ckf.StepContinue
	case inActiveLoad, inNamespaceLoad:
		p.istats.Messages++
		env, err := dynamo.DecodeEnvelope(m.data)
		if err != nil {
			p.intake.decodeFailed(err)
			return ckf.StepContinue
		}
		// A NATS publisher whose record a feed follows (KindPresent) holds
		// the workers of its samples; an unknown one is not looked up
		// into the table (natsSource would add it).
		p.activeLoad(&env, now, m.kind == inNamespaceLoad, p.natsSrc[env.PublisherID])
		return ckf.StepContinue
	case inLegacy:
		p.evs, _ = p.intake.legacy(m.data, now, p.evs)
	case inEnvelope:
		var pub uint64
		var ok bool
		if p.evs, pub, ok = p.intake.envelopeOf(m.data, now, p.evs); ok && len(p.evs) > 0 {
			src, p.envPub = p.natsSource(pub), pub
		}
	case inFeed:
		src = m.feed.Source
		switch m.feed.Kind {
		case KindPlane:
			p.restarted = ckf.StepContinue
			p.plane(m.feed, now)
			return max(p.restarted, p.apply(src, now))
		case KindEngine:
			p.engine(m.feed, now)
		case KindResync, KindGone:
			return p.clearSource(m.feed)
		case KindWorkerGone:
			return p.clearWorker(m.feed.Worker)
		case KindWorkerPresent:
			p.load.present(m.feed.Worker, m.feed.Source, now)
			return ckf.StepContinue
		case KindPresent:
			p.present(m.feed.Source)
			return ckf.StepContinue
		}
	}
	return p.apply(src, now)
}

// activeLoad takes a kv_metrics envelope's ActiveLoad sample, heard from
// src (nil: a source the pool does not follow).
func (p *pool) activeLoad(env *dynamo.Envelope, now time.Time, namespaceScope bool, src *Source) {
	if env.Topic != dynamo.MetricsTopic {
		p.istats.WrongTopic++
		return
	}
	l, err := dynamo.DecodeActiveLoad(env.Payload)
	if err != nil {
		p.intake.decodeFailed(err)
		return
	}
	p.istats.LoadSamples++
	p.load.active(l, env.PublisherID, now, namespaceScope, src)
}

// plane checks and decodes a ZMQ event-plane message into p.evs (KV
// events) or a load sample (kv_metrics).
func (p *pool) plane(m *Message, now time.Time) {
	p.istats.Messages++
	pm, err := dynamo.DecodePlane(m.Frames)
	if err != nil {
		p.intake.decodeFailed(err)
		return
	}
	topic := dynamo.PlaneTopic(pm.Topic)
	if err := pm.CheckIdentity(m.Source.Scope, topic, m.Source.PublisherID); err != nil {
		p.intake.decodeFailed(err)
		return
	}
	switch {
	case topic == dynamo.EventTopic:
		if m.Source.Restarts {
			if last, ok := p.lastPub[m.Source]; ok && last != pm.PublisherID {
				p.log.Info("publisher restarted with a new id", "source", m.Source.Name, "publisher_id", pm.PublisherID)
				p.restarted = p.clearSource(&Message{Kind: KindGone, Source: m.Source})
			}
			p.lastPub[m.Source] = pm.PublisherID
		}
		p.envPub = pm.PublisherID
		p.evs, _ = p.intake.sequenced(&pm.Envelope, now, p.evs)
	case topic == dynamo.MetricsTopic && p.cfg.Loads&LoadDynamo != 0:
		p.activeLoad(&pm.Envelope, now, m.Source.NamespaceLoad, m.Source)
	default:
		p.istats.WrongTopic++
	}
}

// engine decodes an engine KVEventBatch, drops a repeated sequence, counts
// a gap (intake.order), and normalizes its events into p.evs.
func (p *pool) engine(m *Message, now time.Time) {
	p.istats.Messages++
	b, err := dynamo.DecodeZMQ(m.Frames, dynamo.ZMQConfig{})
	if err != nil {
		p.intake.decodeFailed(err)
		return
	}
	st := p.engines[m.Source]
	if st == nil {
		norm, err := dynamo.NewNormalizer(dynamo.NormalizerConfig{WorkerID: m.Source.WorkerID, DpRank: m.Source.DpRank,
			BlockSize: m.Source.BlockSize})
		if err != nil {
			p.log.Error("engine source refused", "source", m.Source.Name, "err", err)
			p.istats.Malformed++
			return
		}
		st = &engineSource{norm: norm, win: newSeqWindow(b.Sequence)}
		p.engines[m.Source] = st
	} else if !p.intake.order(&st.win, b.Sequence) {
		return
	}
	p.istats.EngineBatches++
	if m.Replayed {
		p.istats.Replayed++
	}
	p.rev = st.norm.Append(p.rev[:0], &b)
	for i := range p.rev {
		p.evs = p.intake.event(&p.rev[i], p.evs)
	}
}

// apply hands p.evs to the producer, marks their workers live and, for a
// feed's events, their members as fed by src; it returns the strongest
// cadence step of the events.
func (p *pool) apply(src *Source, now time.Time) ckf.Step {
	step, fenced := ckf.StepContinue, false
	if len(p.restoredBy) > 0 {
		p.unproven()
	}
	// One batch call lets the producer prefetch the lines of the events
	// ahead while it applies the current ones (ckf.Producer.ApplyBatch);
	// the results are Apply's, event by event.
	p.prod.ApplyBatch(p.evs, func(i int, s ckf.Step, err error) {
		if fenced {
			return // the events after a fence are dropped, as before the batch
		}
		k := &p.evs[i]
		p.load.sawEvent(k, now, src)
		if err != nil && !errors.Is(err, ckf.ErrCapacityExhausted) {
			p.rejected++
			if p.rejected&(p.rejected-1) == 0 {
				p.log.Warn("event rejected", "count", p.rejected, "err", err)
			}
		}
		if p.prod.Fenced() != nil {
			fenced = true
			return
		}
		step = max(step, s)
		if src != nil {
			if _, ok := p.owners[k.Member]; ok || len(p.owners) < maxOwnedMembers {
				p.owners[k.Member] = src
			}
		}
		if _, ok := p.pubOf[k.Member]; p.envPub != 0 && (ok || len(p.pubOf) < maxOwnedMembers) {
			p.pubOf[k.Member] = p.envPub
		} else {
			delete(p.pubOf, k.Member)
		}
	})
	if fenced {
		p.rebuild()
		return ckf.StepContinue
	}
	return step
}

// natsSource returns the Source standing for NATS publisher pub in
// owners. The table is bounded: past maxPublishers entries, those no
// member is owned by any more are forgotten, publishers no feed follows
// first; a followed one (KindPresent) is forgotten only when those leave
// no room, and its holds of workers end with it, since its KindGone would
// not find it.
func (p *pool) natsSource(pub uint64) *Source {
	if src, ok := p.natsSrc[pub]; ok {
		return src
	}
	if len(p.natsSrc) >= maxPublishers {
		used := map[*Source]bool{}
		for _, src := range p.owners {
			used[src] = true
		}
		for _, followed := range []bool{false, true} {
			for id, src := range p.natsSrc {
				if !used[src] && src.ReportsGone == followed {
					delete(p.natsSrc, id)
					p.load.release(src)
				}
			}
			if len(p.natsSrc) < maxPublishers {
				break
			}
		}
	}
	src := &Source{PublisherID: pub, NATS: true, Name: fmt.Sprintf("nats publisher %#x", pub)}
	p.natsSrc[pub] = src
	return src
}

// clearSource drops every member whose latest events came from m.Source
// (KindGone: the publisher left; KindResync: its stream lost batches). A
// NATS publisher's KindGone stands for the envelopes of its id.
func (p *pool) clearSource(m *Message) ckf.Step {
	if m.Source.NATS {
		src, ok := p.natsSrc[m.Source.PublisherID]
		if !ok {
			return ckf.StepContinue // it fed no member
		}
		delete(p.natsSrc, m.Source.PublisherID)
		m = &Message{Kind: m.Kind, Source: src}
	}
	switch m.Kind {
	case KindResync:
		p.istats.Resyncs++
		p.istats.Gaps += m.Lost
		delete(p.engines, m.Source) // the next batch starts a new sequence
	case KindGone:
		delete(p.lastPub, m.Source)
		p.load.release(m.Source)
		if m.Source.PublisherID != 0 {
			p.load.forgetViews(m.Source.PublisherID) // a router's publisher gone
		}
	}
	step, _ := p.dropOwned(func(_ kv.Member, src *Source) bool { return src == m.Source })
	p.log.Info("feed source cleared", "source", m.Source.Name, "kind", m.Kind)
	return step
}

// dropOwned drops every member whose owner entry matches (restored members
// have theirs too) and returns the cadence step and how many it dropped; a
// producer fenced meanwhile is rebuilt, empty, which ends it.
func (p *pool) dropOwned(match func(kv.Member, *Source) bool) (ckf.Step, int) {
	step, rebuilds, n := ckf.StepContinue, p.rebuilds, 0
	for member, src := range p.owners {
		if !match(member, src) {
			continue
		}
		delete(p.restoredBy, member)
		step = max(step, p.dropMember(member))
		n++
		if p.rebuilds != rebuilds {
			return ckf.StepContinue, n // a new, empty producer
		}
	}
	return step, n
}

// present takes a KindPresent: the NATS publisher src stands for is
// followed, so its envelopes' workers are held live until its KindGone,
// those it already fed included.
func (p *pool) present(m *Source) {
	if !m.NATS || !m.ReportsGone {
		return
	}
	src := p.natsSource(m.PublisherID)
	src.ReportsGone = true
	for member, s := range p.owners {
		if s == src {
			p.load.holdWorker(member.Worker, src)
		}
	}
}

// clearWorker drops every member of worker w, fed or restored, whichever
// source fed it, and its load (KindWorkerGone).
func (p *pool) clearWorker(w uint64) ckf.Step {
	p.load.drop(w)
	step, n := p.dropOwned(func(m kv.Member, _ *Source) bool { return m.Worker == w })
	if n > 0 {
		p.log.Info("worker gone; its members cleared", "worker", w, "members", n)
	}
	return step
}

// rebuild replaces a fenced producer (its exact state is suspect) with an
// empty one of the next layout generation and stores its snapshot; every
// consumer lane re-snapshots on the new identity.
func (p *pool) rebuild() {
	p.log.Error("producer fenced; rebuilding a new layout generation", "err", p.prod.Fenced(), "generation", p.id.LayoutGeneration+1)
	last := p.pub.Status().LastSequence
	if err := p.newProducer(); err != nil {
		p.log.Error("rebuild", "err", err)
		return
	}
	p.id.LayoutGeneration++
	p.rebuilds++
	clear(p.owners)
	clear(p.pubOf)
	clear(p.restoredBy)
	clear(p.restored)
	if err := p.newPublisher(last); err != nil {
		p.log.Error("rebuild", "err", err)
		return
	}
	p.watchers.rebuilt(p.id, func() []uint64 { return p.source().AppendWords(make([]uint64, 0, p.format.Buckets())) })
	if err := p.snapshot(); err != nil {
		p.log.Warn("snapshot after rebuild", "err", err)
	}
}

// publish drains the producer and sends the batch to the watches, then to
// the delta log as deltas of at most maxImages images each. A fenced
// publisher drops it from the log: the snapshot that lifts the fence
// covers it.
func (p *pool) publish() error {
	p.images = p.source().Drain(p.images[:0])
	if len(p.images) == 0 {
		return nil
	}
	now := time.Now()
	p.watchers.deltas(p.images, now)
	if p.pub.Status().Fence != publish.FenceNone {
		return nil
	}
	for imgs := p.images; len(imgs) > 0; {
		part := imgs[:min(len(imgs), p.maxImages)]
		imgs = imgs[len(part):]
		if _, err := p.pub.Publish(part); err != nil {
			return p.fenced(err)
		}
		p.sinceSnap++
		p.lastLogWrite = now
	}
	return nil
}

// fenced handles a failed send: another writer means the pool was taken
// over (the loop stops); anything else waits for periodic's recovery.
func (p *pool) fenced(err error) error {
	if p.dlog.conflict {
		if owner, oerr := p.owner(); oerr == nil && owner != p.id.Incarnation {
			p.log.Error("another relay owns the pool; stopping", "owner", owner, "self", p.id.Incarnation)
			return &PoolError{Domain: uint64(p.cfg.Domain), DC: uint64(p.r.cfg.DC), Err: ErrSuperseded}
		}
	}
	if !p.fenceLogged {
		p.log.Warn("delta delivery uncertain; recovering with a snapshot", "err", err)
		p.fenceLogged = true
	}
	return nil
}

// snapshot stores a barrier snapshot. The pending window is published
// first (to the watches, and to the log unless it is fenced), so that the
// snapshot's barrier finds nothing left that the watches did not get.
func (p *pool) snapshot() error {
	if err := p.publish(); err != nil {
		return err
	}
	if _, err := p.pub.Snapshot(); err != nil {
		return err
	}
	p.sinceSnap, p.lastLogWrite, p.fenceLogged = 0, time.Now(), false
	p.publishInfo()
	return nil
}

// periodic runs on every tick: fence recovery, heartbeats, load reports,
// expiry, checkpoints and the snapshot refresh. While the publication is
// fenced only the delta log's writes wait for the recovery: the rest does
// not need JetStream (load reports go out on core NATS, checkpoints to
// disk), and routers and a restarting relay need them most then.
func (p *pool) periodic(now time.Time) error {
	c := &p.r.cfg
	logOK, err := p.recover(now)
	if err != nil {
		return err
	}
	p.watchers.heartbeat(now, c.HeartbeatEvery)
	if logOK && now.Sub(p.lastLogWrite) >= c.HeartbeatEvery && p.logRetry.Ready(now) {
		err := p.dlog.Send(p.pub.Heartbeat())
		switch {
		case err == nil:
			p.lastLogWrite = now
			p.logRetry.Reset()
		case !p.dlog.conflict:
			p.logRetry.Failed(now)
		default:
			// Someone else wrote the log: a newer relay (stop), or our own
			// uncertain publish that landed late (resync and go on).
			if err := p.fenced(err); err != nil {
				return err
			}
			_ = p.dlog.resync(p.stream)
		}
	}
	if p.expire(now) == ckf.StepPublish {
		if err := p.publish(); err != nil {
			return err
		}
	}
	if c.CheckpointDir != "" && now.Sub(p.lastCheckpoint) >= c.CheckpointEvery {
		p.checkpoint(now)
	}
	if now.Sub(p.lastLoad) >= c.LoadEvery {
		p.lastLoad = now
		p.reportLoad(now)
	}
	if logOK && p.sinceSnap > 0 && now.Sub(p.snaps.storedAt) >= c.SnapshotEvery && p.logRetry.Ready(now) {
		if err := p.snapshot(); err != nil {
			p.log.Warn("snapshot refresh failed", "err", err)
			p.logRetry.Failed(now)
		}
	}
	p.publishInfo()
	return nil
}

// recover tries, when the publication is fenced and the backoff allows,
// to re-read the log position and store a snapshot that lifts the fence.
// It reports whether the delta log may be written (not fenced, or
// recovered), and an error only when another relay took the pool over.
func (p *pool) recover(now time.Time) (bool, error) {
	if p.pub.Status().Fence == publish.FenceNone {
		return true, nil
	}
	if !p.logRetry.Ready(now) {
		return false, nil
	}
	if p.dlog.conflict {
		if owner, err := p.owner(); err == nil && owner != p.id.Incarnation {
			return false, p.fenced(ErrSuperseded)
		}
	}
	if err := p.dlog.resync(p.stream); err != nil {
		p.logRetry.Failed(now)
		return false, nil
	}
	if err := p.snapshot(); err != nil {
		p.logRetry.Failed(now)
		return false, nil
	}
	p.logRetry.Reset()
	p.log.Info("recovered with a snapshot", "sequence", p.snaps.stored)
	return true, nil
}

// reportLoad publishes a load report: with its stored-blocks counter on
// the load-stored subject (once there is one to send), and without it on
// the load subject and as the state bucket's last value, where consumers
// that decode only the 12-field layout read it.
func (p *pool) reportLoad(now time.Time) {
	c := &p.r.cfg
	st := p.prod.Stats()
	r := relayproto.LoadReport{Identity: p.id, Sequence: p.pub.Status().LastSequence,
		TimestampUnixNano: uint64(now.UnixNano()), IntervalMs: uint32(c.LoadEvery / time.Millisecond),
		ActiveBlocks: st.TrackedBlocks, PrefillTokensPerMs: c.PrefillTokensPerMs,
		QueueTokensPerMs: c.QueueTokensPerMs, DecodeBlocksPerMs: c.DecodeBlocksPerMs}
	cov := p.load.fill(&r, now, c.WorkerCapacityBlocks)
	p.r.setLoad(p.cfg.Domain, PoolLoad{Report: r, Coverage: cov})
	publish := func(subject string, r *relayproto.LoadReport) []byte {
		b, err := wire.AppendFrame(p.frame[:0], r)
		if err != nil {
			p.log.Warn("load report", "err", err)
			return nil
		}
		p.frame = b
		if c.Conn.Publish(subject, b) == nil {
			p.wire.add(relayproto.FrameLoadReport, len(b))
		}
		return b
	}
	if r.StoredBlocks != 0 {
		publish(p.names.LoadStoredSubject(), &r)
	}
	r.StoredBlocks = 0
	b := publish(p.names.LoadSubject(), &r)
	if b == nil {
		return
	}
	// The state bucket is JetStream: a write waits for its answer on this
	// goroutine, so it follows the delta log's backoff.
	if !p.dlog.up() || !p.logRetry.Ready(now) {
		return
	}
	ctx, cancel := context.WithTimeout(p.dlog.ctx, c.PublishTimeout)
	defer cancel()
	if _, err := p.state.Put(ctx, LoadKey, b); err != nil {
		p.logRetry.Failed(now)
	}
}

// shutdown is the graceful end: stop the intake, apply what is queued,
// publish the tail and the drain marker.
func (p *pool) shutdown() error {
	p.unsubscribe()
queued:
	for {
		select {
		case m := <-p.in:
			p.handle(m)
		default:
			break queued
		}
	}
	if err := p.publish(); err != nil {
		return err
	}
	p.watchers.drained()
	// The exact state is whole whatever the publication's state.
	p.checkpoint(time.Now())
	if p.pub.Status().Fence != publish.FenceNone {
		p.log.Warn("shutdown while fenced: no drain marker")
		return nil
	}
	if err := p.dlog.Send(p.pub.DrainMarker()); err != nil {
		p.log.Warn("drain marker", "err", err)
		return nil
	}
	p.log.Info("drained", "sequence", p.pub.Status().LastSequence)
	return nil
}

// status returns the pool's status (loop goroutine).
func (p *pool) status() PoolStatus {
	return PoolStatus{Domain: uint64(p.cfg.Domain), DC: uint64(p.r.cfg.DC), Incarnation: p.id.Incarnation,
		LayoutGeneration: p.id.LayoutGeneration, Intake: p.istats, Rejected: p.rejected, Producer: p.prod.Stats(),
		Publisher: p.pub.Status(), Snapshots: p.snaps.count, SnapshotSequence: p.snaps.stored,
		SnapshotBytes: p.snaps.bytes, LogSequence: p.dlog.last, Rebuilds: p.rebuilds, WatchSequence: p.watchers.seq,
		Wire: p.wire.clone(), UntrackedWorkers: p.load.refused, Checkpoint: p.ckpt, Running: true, FeedErr: p.feedHealth()}
}

// feedHealth joins the reasons of the pool's feeds that report they do
// not work.
func (p *pool) feedHealth() string {
	var why []string
	for _, f := range p.cfg.Feeds {
		if h, ok := f.(HealthReporter); ok {
			if err := h.Health(); err != nil {
				why = append(why, f.String()+": "+err.Error())
			}
		}
	}
	return strings.Join(why, "; ")
}
