package zmqfeed

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/bridge/discovery"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/internal/backoff"
	zmq "github.com/pebbe/zmq4"
)

// PlaneConfig configures a Plane feed.
type PlaneConfig struct {
	// Scope is the pool's endpoint scope (namespace, component, endpoint):
	// what static publishers are checked against, and in broker mode the
	// subjects subscribed (its endpoint and component scopes for KV
	// events, its endpoint and namespace scopes for load). Required.
	Scope dynamo.Scope
	// Publishers are connected for the feed's whole life; optional.
	Publishers []discovery.Publisher
	// PublisherExpiry is how long a fixed publisher's connection may stay
	// down (dropped, no new handshake; a peer that stops answering ZMTP
	// heartbeats counts as dropped) before its worker counts as gone, as
	// a discovery record that goes: the relay drops the blocks it fed. It
	// stays subscribed, and a publisher that comes back continues. 0:
	// never (its blocks stay until the relay restarts). Discovered
	// publishers go with their records instead.
	PublisherExpiry time.Duration
	// Discovery adds and removes publishers; optional.
	Discovery discovery.Source
	// Brokers are the XPUB endpoints of Dynamo's ZMQ brokers (broker mode,
	// DYN_ZMQ_BROKER_URL's xpub part): one SUB socket connects to all.
	// Optional.
	Brokers []string
	// FindBrokers, without Brokers, looks the brokers up
	// (DYN_ZMQ_BROKER_ENABLED: discovery.Etcd's Brokers), again after a
	// backoff until some are registered, and subscribes to them as to
	// Brokers. Optional.
	FindBrokers BrokerLister
	// MaxMessageBytes bounds one inbound part; optional; default:
	// DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// RecvHWM bounds the messages queued per socket; optional; default:
	// DefaultRecvHWM.
	RecvHWM int
	// MaxSockets bounds the libzmq sockets the plane holds (three per
	// publisher); optional; default: DefaultMaxSockets. A publisher past
	// it is subscribed once sockets are free again.
	MaxSockets int
	// Logger receives connection logs; optional; default: discard.
	Logger *slog.Logger
}

// BrokerLister lists the XPUB endpoints of the ZMQ brokers registered in
// discovery (discovery.Etcd implements it).
type BrokerLister interface {
	Brokers(ctx context.Context) ([]string, error)
}

// DefaultPublisherExpiry is the PublisherExpiry goindex relay uses: the
// TTL of the etcd lease Dynamo's runtime keeps its discovery records under
// (its primary lease, 10 s), so that a fixed publisher's worker goes as
// soon after its end as a discovered one's.
const DefaultPublisherExpiry = 10 * time.Second

// Plane is a relay.Feed of Dynamo's ZMQ event plane: one SUB socket per
// publisher (as Dynamo's own KV ingress keeps one validated socket per
// publisher), static or discovered, or one SUB socket on the brokers.
// Messages go to the relay whole; the relay checks their frames and
// identity.
type Plane struct {
	cfg PlaneConfig
}

// NewPlane checks cfg and returns the feed; it does no I/O.
func NewPlane(cfg PlaneConfig) (*Plane, error) {
	if cfg.Scope.Namespace == "" || cfg.Scope.Component == "" || cfg.Scope.Endpoint == "" {
		return nil, fmt.Errorf("%w: the pool's namespace, component and endpoint are required", ErrBadConfig)
	}
	if len(cfg.Publishers) == 0 && cfg.Discovery == nil && len(cfg.Brokers) == 0 && cfg.FindBrokers == nil {
		return nil, fmt.Errorf("%w: no publishers, discovery or brokers", ErrBadConfig)
	}
	for _, ep := range append(endpointsOf(cfg.Publishers), cfg.Brokers...) {
		if err := checkEndpoint(ep); err != nil {
			return nil, err
		}
	}
	cfg.MaxMessageBytes, cfg.RecvHWM, cfg.Logger = socketDefaults(cfg.MaxMessageBytes, cfg.RecvHWM, cfg.Logger)
	if cfg.MaxSockets <= 0 {
		cfg.MaxSockets = DefaultMaxSockets
	}
	return &Plane{cfg: cfg}, nil
}

func endpointsOf(ps []discovery.Publisher) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Endpoint
	}
	return out
}

// String names the feed in logs.
func (p *Plane) String() string {
	switch {
	case len(p.cfg.Brokers) > 0:
		return "zmq event plane via brokers " + strings.Join(p.cfg.Brokers, ",")
	case p.cfg.FindBrokers != nil && p.cfg.Discovery != nil:
		return "zmq event plane via brokers found in " + p.cfg.Discovery.String()
	case p.cfg.Discovery != nil:
		return "zmq event plane via " + p.cfg.Discovery.String()
	}
	return "zmq event plane from " + strings.Join(endpointsOf(p.cfg.Publishers), ",")
}

// Health implements relay.HealthReporter: the discovery's health (nil
// without discovery; fixed publishers and brokers have none to lose).
func (p *Plane) Health() error {
	if p.cfg.Discovery == nil {
		return nil
	}
	return p.cfg.Discovery.Health()
}

// conn is one running publisher subscription.
type conn struct {
	src    *relay.Source
	cancel context.CancelFunc
	done   chan struct{}
}

// Run serves the feed until ctx ends: it connects to the static
// publishers and the brokers, follows discovery, and delivers every
// message; a publisher that leaves gets a KindGone.
func (p *Plane) Run(ctx context.Context, deliver func(relay.Message) bool) error {
	zctx, err := newContext(p.cfg.MaxSockets, p.cfg.Logger)
	if err != nil {
		return err
	}
	conns := map[string]*conn{}
	var wg sync.WaitGroup
	defer func() {
		for _, c := range conns {
			c.cancel()
		}
		wg.Wait()
		_ = zctx.Term()
	}()
	for _, pub := range p.cfg.Publishers {
		if pub.Key == "" {
			pub.Key = pub.Endpoint
		}
		p.start(ctx, zctx, &wg, conns, pub, p.cfg.PublisherExpiry, p.cfg.PublisherExpiry > 0, deliver)
	}
	if len(p.cfg.Brokers) > 0 || p.cfg.FindBrokers != nil {
		p.startBrokers(ctx, zctx, &wg, deliver)
	}
	if p.cfg.Discovery == nil {
		<-ctx.Done()
		return nil
	}
	natsPubs := map[string]*relay.Source{} // NATS channels by key
	kvSources := map[string]kvSourceHold{} // KV event source records by key
	updates := make(chan discovery.Update)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- p.cfg.Discovery.Watch(ctx, func(u discovery.Update) {
			select {
			case updates <- u:
			case <-ctx.Done():
			}
		})
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-watchErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: %w", p.cfg.Discovery, err)
		case u := <-updates:
			if u.Publisher.KVSource {
				p.followKVSource(kvSources, u, deliver)
				continue
			}
			if u.Publisher.Worker {
				p.followWorker(u, deliver)
				continue
			}
			if u.Publisher.NATS {
				p.followNATS(natsPubs, u, deliver)
				continue
			}
			if u.Gone {
				p.stop(conns, u.Publisher.Key, deliver)
				continue
			}
			if old, ok := conns[u.Publisher.Key]; ok {
				if old.src.Name == u.Publisher.Endpoint && old.src.PublisherID == u.Publisher.PublisherID {
					continue // the same record again (a re-list)
				}
				p.stop(conns, u.Publisher.Key, deliver)
			}
			p.start(ctx, zctx, &wg, conns, u.Publisher, 0, true, deliver)
		}
	}
}

// start subscribes to one publisher; with expiry > 0, an outage that long
// is answered by a KindGone (see PlaneConfig.PublisherExpiry). reportsGone
// says the publisher's departure will be delivered (it is discovered, or
// has an expiry), so the relay may hold its workers live while it is
// present (relay.Source.ReportsGone).
func (p *Plane) start(ctx context.Context, zctx *zmq.Context, wg *sync.WaitGroup, conns map[string]*conn, pub discovery.Publisher,
	expiry time.Duration, reportsGone bool, deliver func(relay.Message) bool) {
	scope := pub.Scope
	if scope.Namespace == "" {
		scope = p.cfg.Scope
	}
	src := &relay.Source{Scope: scope, PublisherID: pub.PublisherID, Restarts: pub.PublisherID == 0,
		NamespaceLoad: scope.Component == "", ReportsGone: reportsGone, Name: pub.Endpoint}
	topics := []string{pub.Topic}
	if pub.Topic == "" {
		topics = []string{dynamo.EventTopic, dynamo.MetricsTopic}
	}
	// Frame 0 is the bare topic in direct mode; the scoped subject is
	// subscribed too, since which one older direct publishers sent is
	// [unverified] (the relay's identity check takes both).
	var prefixes []string
	for _, t := range topics {
		prefixes = append(prefixes, t, scope.Subject(t))
	}
	cctx, cancel := context.WithCancel(ctx)
	c := &conn{src: src, cancel: cancel, done: make(chan struct{})}
	conns[pub.Key] = c
	log := p.cfg.Logger.With("publisher", pub.Endpoint, "publisher_id", pub.PublisherID)
	wg.Go(func() {
		defer close(c.done)
		subscribe(cctx, log, func() (*socket, error) {
			return newSocket(zctx, socketConfig{kind: zmq.SUB, endpoints: []string{pub.Endpoint}, subscribe: prefixes,
				maxMessageBytes: p.cfg.MaxMessageBytes, recvHWM: p.cfg.RecvHWM, expiry: expiry,
				gone: func(down time.Duration) bool {
					log.Warn("zmq publisher down past its expiry; its worker's blocks are dropped", "down", down.Round(time.Millisecond))
					return deliver(relay.Message{Kind: relay.KindGone, Source: src})
				}})
		}, func(parts [][]byte) bool {
			return deliver(relay.Message{Kind: relay.KindPlane, Frames: parts, Source: src})
		})
	})
}

// subscribe reads the socket open makes until ctx ends or fn refuses a
// message. A socket that cannot be made (descriptors or the socket limit
// exhausted for a while) or a read loop that fails is made again after a
// backoff: giving the subscription up would lose its events until the
// relay restarts, and discovery reports a publisher once.
func subscribe(ctx context.Context, log *slog.Logger, open func() (*socket, error), fn func(parts [][]byte) bool) {
	retry := resubscribeBackoff()
	for ctx.Err() == nil {
		s, err := open()
		if err != nil {
			wait := retry.Next()
			log.Error("zmq subscription not made; trying again", "err", err, "in", wait)
			backoff.Sleep(ctx, wait)
			continue
		}
		log.Info("zmq subscription made")
		if err = s.readLoop(ctx, fn); err == nil || ctx.Err() != nil {
			return // stopped, or the relay takes no more
		}
		retry.Reset() // it was subscribed: start the backoff over
		wait := retry.Next()
		log.Error("zmq subscription failed; subscribing again", "err", err, "in", wait)
		backoff.Sleep(ctx, wait)
	}
}

// followNATS keeps the NATS channels discovered (nothing to connect to:
// the relay reads their envelopes on NATS), tells the relay when one
// appears (KindPresent: it holds the workers of its envelopes live) and
// when one goes (KindGone: it drops the blocks its worker stored and ends
// the hold).
func (p *Plane) followNATS(pubs map[string]*relay.Source, u discovery.Update, deliver func(relay.Message) bool) {
	key := u.Publisher.Key
	if !u.Gone {
		if _, ok := pubs[key]; !ok {
			scope := u.Publisher.Scope
			if scope.Namespace == "" {
				scope = p.cfg.Scope
			}
			src := &relay.Source{Scope: scope, PublisherID: u.Publisher.PublisherID, NATS: true, ReportsGone: true,
				Name: fmt.Sprintf("nats publisher %#x", u.Publisher.PublisherID)}
			pubs[key] = src
			deliver(relay.Message{Kind: relay.KindPresent, Source: src})
		}
		return
	}
	src, ok := pubs[key]
	if !ok {
		return
	}
	delete(pubs, key)
	p.cfg.Logger.Info("nats publisher gone", "publisher_id", src.PublisherID)
	deliver(relay.Message{Kind: relay.KindGone, Source: src})
}

// followWorker tells the relay when a worker's instance record appears
// (KindWorkerPresent: the worker counts as live however long it is
// silent) and when it goes (KindWorkerGone: every member of the worker is
// dropped, and its load) — discovery following workers, for broker mode.
// A record listed again is delivered again; the relay's hold is the same.
func (p *Plane) followWorker(u discovery.Update, deliver func(relay.Message) bool) {
	id := u.Publisher.WorkerID
	src := &relay.Source{Scope: p.cfg.Scope, Name: fmt.Sprintf("worker %#x", id)}
	if !u.Gone {
		deliver(relay.Message{Kind: relay.KindWorkerPresent, Worker: id, Source: src})
		return
	}
	p.cfg.Logger.Info("worker gone", "worker", id)
	deliver(relay.Message{Kind: relay.KindWorkerGone, Worker: id, Source: src})
}

// followKVSource tells the relay when a KV event source record appears
// (KindWorkerPresent from a source of its own that reports its going: its
// worker counts as live however long it is silent, so that a relay
// started after a worker's last event knows of it) and when it goes
// (KindGone of that source: the hold ends; the members the worker's
// publisher fed are cleared by its channel's going, not the record's).
func (p *Plane) followKVSource(holds map[string]kvSourceHold, u discovery.Update, deliver func(relay.Message) bool) {
	key, pub := u.Publisher.Key, u.Publisher
	if old, ok := holds[key]; ok {
		if !u.Gone && old.record == pub {
			return // the same record again (a re-list)
		}
		delete(holds, key)
		deliver(relay.Message{Kind: relay.KindGone, Source: old.src})
	}
	if u.Gone {
		return
	}
	src := &relay.Source{Scope: p.cfg.Scope, ReportsGone: true,
		Name: fmt.Sprintf("kv source of worker %#x rank %d (publisher %#x)", pub.WorkerID, pub.DPRank, pub.PublisherID)}
	holds[key] = kvSourceHold{record: pub, src: src}
	deliver(relay.Message{Kind: relay.KindWorkerPresent, Worker: pub.WorkerID, Source: src})
}

// kvSourceHold is a KV event source record followed and the relay Source
// standing for its hold.
type kvSourceHold struct {
	record discovery.Publisher
	src    *relay.Source
}

// stop ends one publisher's subscription and tells the relay it is gone.
func (p *Plane) stop(conns map[string]*conn, key string, deliver func(relay.Message) bool) {
	c, ok := conns[key]
	if !ok {
		return
	}
	delete(conns, key)
	c.cancel()
	<-c.done
	p.cfg.Logger.Info("zmq publisher gone", "publisher", c.src.Name, "publisher_id", c.src.PublisherID)
	deliver(relay.Message{Kind: relay.KindGone, Source: c.src})
}

// startBrokers subscribes one socket to every broker's XPUB side for the
// pool's subjects. A publisher's messages arrive once through each broker,
// each broker's copy in order but not in step with the others': a broker
// that dropped one (its HWM, a restart) forwards the next one first, and a
// slower broker's copy of the dropped one comes later. The relay keeps,
// per publisher, which sequences of a window below the highest it took
// (relay windowSeqs): a copy already taken is a duplicate, a later copy of
// one never taken fills its gap (IntakeStats.Late), and one older than
// the window is dropped. Dynamo's subscriber drops copies with an LRU of
// 100,000 (publisher id, sequence) pairs instead; the two agree while no
// broker lags another by more than the window.
func (p *Plane) startBrokers(ctx context.Context, zctx *zmq.Context, wg *sync.WaitGroup, deliver func(relay.Message) bool) {
	sc := p.cfg.Scope
	component := dynamo.Scope{Namespace: sc.Namespace, Component: sc.Component}
	namespace := dynamo.Scope{Namespace: sc.Namespace}
	subjects := map[string]*relay.Source{
		sc.Subject(dynamo.EventTopic):          {Scope: sc, Name: "brokers"},
		component.Subject(dynamo.EventTopic):   {Scope: component, Name: "brokers"},
		sc.Subject(dynamo.MetricsTopic):        {Scope: sc, Name: "brokers"},
		namespace.Subject(dynamo.MetricsTopic): {Scope: namespace, NamespaceLoad: true, Name: "brokers"},
	}
	var prefixes []string
	for s := range subjects {
		prefixes = append(prefixes, s)
	}
	fallback := subjects[sc.Subject(dynamo.EventTopic)]
	wg.Go(func() {
		brokers := p.cfg.Brokers
		if len(brokers) == 0 {
			if brokers = p.findBrokers(ctx); len(brokers) == 0 {
				return // stopped before any was found
			}
		}
		subscribe(ctx, p.cfg.Logger.With("brokers", brokers), func() (*socket, error) {
			return newSocket(zctx, socketConfig{kind: zmq.SUB, endpoints: brokers, subscribe: prefixes,
				maxMessageBytes: p.cfg.MaxMessageBytes, recvHWM: p.cfg.RecvHWM})
		}, func(parts [][]byte) bool {
			src := subjects[string(parts[0])]
			if src == nil {
				src = fallback // a longer subject under a prefix: the identity check refuses it
			}
			return deliver(relay.Message{Kind: relay.KindPlane, Frames: parts, Source: src})
		})
	})
}

// findBrokers asks FindBrokers for the brokers until it names some with a
// usable endpoint (one checkEndpoint accepts; others are logged and left
// out), after a backoff between attempts, or ctx ends
// (nil).
func (p *Plane) findBrokers(ctx context.Context) []string {
	retry := resubscribeBackoff()
	for ctx.Err() == nil {
		found, err := p.cfg.FindBrokers.Brokers(ctx)
		var usable []string
		for _, ep := range found {
			if err := checkEndpoint(ep); err != nil {
				p.cfg.Logger.Warn("zmq broker endpoint left out", "err", err)
				continue
			}
			usable = append(usable, ep)
		}
		if len(usable) > 0 {
			p.cfg.Logger.Info("zmq brokers found", "xpub", usable)
			return usable
		}
		wait := retry.Next()
		p.cfg.Logger.Warn("no zmq broker found in discovery; looking again", "err", err, "in", wait)
		backoff.Sleep(ctx, wait)
	}
	return nil
}

// ParseBrokerURL parses Dynamo's DYN_ZMQ_BROKER_URL value,
// "xsub=<url>[;<url>…],xpub=<url>[;<url>…]" (exactly two comma-separated
// parts, in either order), into its XSUB and XPUB endpoints.
func ParseBrokerURL(v string) (xsub, xpub []string, err error) {
	parts := strings.Split(v, ",")
	if len(parts) != 2 {
		return nil, nil, fmt.Errorf("%w: broker url %q: want xsub=<url>[;<url>…],xpub=<url>[;<url>…]", ErrBadConfig, v)
	}
	for _, part := range parts {
		k, urls, ok := strings.Cut(strings.TrimSpace(part), "=")
		var dst *[]string
		switch {
		case ok && k == "xsub" && xsub == nil:
			dst = &xsub
		case ok && k == "xpub" && xpub == nil:
			dst = &xpub
		default:
			return nil, nil, fmt.Errorf("%w: broker url %q: part %q is not xsub=… or xpub=…", ErrBadConfig, v, part)
		}
		for _, u := range strings.Split(urls, ";") {
			u = strings.TrimSpace(u)
			if err := checkEndpoint(u); err != nil {
				return nil, nil, err
			}
			*dst = append(*dst, u)
		}
	}
	return xsub, xpub, nil
}

// socketDefaults returns a feed's socket bounds and logger with the unset
// ones at their defaults.
func socketDefaults(maxBytes int64, recvHWM int, log *slog.Logger) (int64, int, *slog.Logger) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxMessageBytes
	}
	if recvHWM <= 0 {
		recvHWM = DefaultRecvHWM
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return maxBytes, recvHWM, log
}
