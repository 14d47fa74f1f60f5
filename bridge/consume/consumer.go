package consume

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goindex/goindex/bridge/kvrelay"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/shm"
)

// touchEvery is how often the consumer refreshes the replica file's writer
// heartbeat.
const touchEvery = 100 * time.Millisecond

// Consumer is a router-site consumer: one lane per DC of its domain, each
// following its relay's stored snapshot and delta log into the shared-memory
// replica, with a continuous RTT probe and the DCs' load reports. Build it
// with New, then Run it; Status may be called from any goroutine.
type Consumer struct {
	cfg   Config
	core  *relayproto.Consumer
	w     *shm.Writer
	lanes []*laneRunner

	jsMu sync.Mutex
	js   map[string]jetstream.JetStream // by JetStream domain

	// loadMu orders the load subscription's callbacks before the replica
	// file is unmapped: onLoad writes the file only while unmapped is
	// false (a callback may still run after its subscription is dropped).
	loadMu   sync.Mutex
	unmapped bool
}

// New resolves the DC list and format (discovering them when cfg does not
// give them), creates the replica file (a new generation at cfg.Path) and
// the lanes. Nothing is subscribed until Run.
func New(ctx context.Context, cfg Config) (*Consumer, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := resolve(ctx, &cfg); err != nil {
		return nil, err
	}
	if cfg.Instance == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Instance = binary.LittleEndian.Uint64(b[:]) | 1
	}
	format, err := relayproto.NewFormat(cfg.Seed, cfg.Buckets)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	m := relayproto.Manifest{ConsumerInstance: cfg.Instance, Domain: cfg.Domain, Format: format}
	layout := shm.Layout{Seed: cfg.Seed, Buckets: cfg.Buckets, Domain: uint64(cfg.Domain), ConsumerInstance: cfg.Instance}
	for _, dc := range cfg.DCs {
		m.Lanes = append(m.Lanes, relayproto.PoolID{Domain: cfg.Domain, DC: dc})
		layout.DCs = append(layout.DCs, uint64(dc))
	}
	w, err := shm.Create(cfg.Path, layout)
	if err != nil {
		return nil, err
	}
	core, err := relayproto.NewConsumer(m, w.Table(), relayproto.ConsumerConfig{OrderedHeartbeats: true})
	if err != nil {
		w.Close()
		return nil, err
	}
	c := &Consumer{cfg: cfg, core: core, w: w, js: map[string]jetstream.JetStream{}}
	for i, dc := range cfg.DCs {
		c.lanes = append(c.lanes, newLaneRunner(c, i, dc))
	}
	return c, nil
}

// jetStream returns the JetStream context for a relay's domain.
func (c *Consumer) jetStream(domain string) (jetstream.JetStream, error) {
	c.jsMu.Lock()
	defer c.jsMu.Unlock()
	if js, ok := c.js[domain]; ok {
		return js, nil
	}
	var js jetstream.JetStream
	var err error
	if domain == "" {
		js, err = jetstream.New(c.cfg.Conn)
	} else {
		js, err = jetstream.NewWithDomain(c.cfg.Conn, domain)
	}
	if err != nil {
		return nil, err
	}
	c.js[domain] = js
	return js, nil
}

// Path returns the replica file's path.
func (c *Consumer) Path() string { return c.cfg.Path }

// Lanes returns the DC of each lane, in lane order.
func (c *Consumer) Lanes() []relayproto.DCID { return append([]relayproto.DCID(nil), c.cfg.DCs...) }

// Instance returns the consumer instance id its leases carry.
func (c *Consumer) Instance() uint64 { return c.cfg.Instance }

// Run serves every lane until ctx is done: each lane syncs from its relay's
// store and log, and resyncs (new lease) after any fault; RTT probes and the
// load subscription run beside them. On return every lane is retired (its
// ready bit clear) and the replica file is unmapped (it stays in place,
// its heartbeat stopped); no load report writes it after that.
func (c *Consumer) Run(ctx context.Context) error {
	names := relay.Names{Prefix: c.cfg.Prefix, Domain: c.cfg.Domain}
	sub, err := c.cfg.Conn.Subscribe(names.LoadWildcard(), c.onLoad)
	if err != nil {
		return fmt.Errorf("consume: subscribe %s: %w", names.LoadWildcard(), err)
	}
	var wg sync.WaitGroup
	for i, l := range c.lanes {
		if addr, ok := c.cfg.Upstream[l.dc]; ok {
			if err := c.followUpstream(ctx, &wg, i, l.dc, addr); err != nil {
				return err
			}
			continue
		}
		wg.Go(func() { l.run(ctx) })
		wg.Go(func() { l.probe(ctx) })
	}
	tick := time.NewTicker(touchEvery)
	defer tick.Stop()
	c.w.Touch(time.Now())
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case now := <-tick.C:
			c.w.Touch(now)
		}
	}
	wg.Wait()
	_ = sub.Unsubscribe()
	c.loadMu.Lock()
	c.unmapped = true
	c.loadMu.Unlock()
	return c.w.Close()
}

// onLoad records a load report for the lane of its pool (NATS callback).
func (c *Consumer) onLoad(m *nats.Msg) {
	var r relayproto.LoadReport
	if _, err := relayproto.DecodeLoadReport(&r, m.Data); err != nil {
		return
	}
	if i, ok := c.core.LaneOf(r.Identity.Pool); ok {
		c.loadMu.Lock()
		defer c.loadMu.Unlock()
		if c.unmapped {
			return
		}
		c.lanes[i].count(func(st *LaneStatus) { st.received(relayproto.FrameLoadReport.String(), len(m.Data)) })
		c.lanes[i].recordLoad(&r, time.Now())
	}
}

// Status returns every lane's status.
func (c *Consumer) Status() []LaneStatus {
	out := make([]LaneStatus, len(c.lanes))
	for i, l := range c.lanes {
		out[i] = l.status()
	}
	return out
}

// Writer returns the replica file's writer (for tests and tools that read
// the lanes' words).
func (c *Consumer) Writer() *shm.Writer { return c.w }

// followUpstream runs lane i from a Dynamo Pool Relay at addr (hook for
// bridge/kvrelay; the lane's NATS runner does not start).
func (c *Consumer) followUpstream(ctx context.Context, wg *sync.WaitGroup, i int, dc relayproto.DCID, addr string) error {
	lane, err := kvrelay.NewReplicaLane(c.w, i)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("consume: upstream relay of DC %d at %s: %w", dc, addr, err)
	}
	cfg := kvrelay.FollowConfig{SubscriberID: fmt.Sprintf("goindex-consume-%x-%d", c.cfg.Instance, dc), DCID: uint64(dc),
		Lane: lane, Retry: c.cfg.RetryEvery, OnLoad: lane.RecordLoad}
	wg.Go(func() {
		defer conn.Close()
		err := kvrelay.Follow(ctx, conn, cfg)
		c.cfg.Logger.Info("upstream relay lane ended", "dc", dc, "relay", addr, "err", err)
	})
	return nil
}
