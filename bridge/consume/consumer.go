package consume

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/backoff"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// touchEvery is how often the consumer refreshes the replica file's writer
// heartbeat and checks that the file is still whole (shm.Writer.Check).
const touchEvery = 100 * time.Millisecond

// Consumer is a router-site consumer: one lane per DC of its domain, each
// following its relay's stored snapshot and delta log into the shared-memory
// replica, with a continuous RTT probe and the DCs' load reports. Build it
// with New, then Run it; Status may be called from any goroutine.
type Consumer struct {
	cfg      Config
	manifest relayproto.Manifest
	layout   shm.Layout
	lanes    []*laneRunner

	// reads holds a token per stored snapshot being read (Config.SnapshotReads).
	reads chan struct{}

	jsMu sync.Mutex
	js   map[string]jetstream.JetStream // by JetStream domain

	// mu guards the replica file and the protocol core over it, which a
	// rebuild replaces while no lane goroutine runs; the load
	// subscription's callbacks write the file under it, and only while
	// unmapped is false (a callback may still run after its subscription is
	// dropped).
	mu       sync.Mutex
	w        *shm.Writer
	core     *ingest.Consumer
	unmapped bool

	rebuilds atomic.Uint64
	yielded  bool // the path names another live consumer's file (logged once); epoch goroutine only
	// adding is when the epoch began stopping its lanes to add lanes (the
	// start of the carried lanes' pause, which each logs as it follows
	// on); written before the lanes stop, read after they restart.
	adding time.Time
	cursor uint64 // the next segment verify checks; epoch goroutine only

	// discovering is set when the DCs were discovered: Run keeps asking
	// the domain's relays (Config.DiscoverEvery). refused holds the DCs
	// whose relay answered with another format, logged once each; only
	// the current epoch's rediscover goroutine touches it.
	discovering bool
	refused     map[relayproto.DCID]bool
}

// New waits for the NATS connection to be up, resolves the DC list and
// format (discovering them when cfg does not give them), creates the replica file (a new generation at cfg.Path,
// replacing whatever damaged file is there) and the lanes. Nothing is
// subscribed until Run.
func New(ctx context.Context, cfg Config) (*Consumer, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	discovering := len(cfg.DCs) == 0 && cfg.DiscoverEvery > 0
	// Discovery and pings wait DiscoverFor: wait for the server first, so
	// a consumer may start before it.
	if err := natslink.AwaitConnected(ctx, cfg.Conn, cfg.Logger); err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	refused, err := resolve(ctx, &cfg)
	if err != nil {
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
	c := &Consumer{cfg: cfg, js: map[string]jetstream.JetStream{}, reads: make(chan struct{}, cfg.SnapshotReads),
		discovering: discovering, refused: map[relayproto.DCID]bool{},
		manifest: relayproto.Manifest{ConsumerInstance: cfg.Instance, Domain: cfg.Domain, Format: format},
		layout:   shm.Layout{Seed: cfg.Seed, Buckets: cfg.Buckets, Domain: uint64(cfg.Domain), ConsumerInstance: cfg.Instance}}
	for _, dc := range cfg.DCs {
		c.manifest.Lanes = append(c.manifest.Lanes, relayproto.PoolID{Domain: cfg.Domain, DC: dc})
		c.layout.DCs = append(c.layout.DCs, uint64(dc))
	}
	w, err := shm.Create(cfg.Path, c.layout)
	if err != nil {
		return nil, err
	}
	if err := w.Replaced(); err != nil {
		cfg.Logger.Warn("replaced a damaged replica file", "path", cfg.Path, "err", err)
	}
	if err := c.bind(w); err != nil {
		w.Close()
		return nil, err
	}
	for i, dc := range cfg.DCs {
		c.lanes = append(c.lanes, newLaneRunner(c, i, dc))
	}
	for _, dc := range refused {
		c.refused[dc] = true // logged by resolve
	}
	return c, nil
}

// bind makes w the replica file and builds the protocol core over it.
func (c *Consumer) bind(w *shm.Writer) error {
	core, err := ingest.New(c.manifest, w.Table(), ingest.Config{OrderedHeartbeats: true})
	if err != nil {
		return err
	}
	c.w, c.core = w, core
	return nil
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
func (c *Consumer) Lanes() []relayproto.DCID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]relayproto.DCID, len(c.lanes))
	for i, l := range c.lanes {
		out[i] = l.dc
	}
	return out
}

// Instance returns the consumer instance id its leases carry.
func (c *Consumer) Instance() uint64 { return c.cfg.Instance }

// Rebuilds returns how many times Run found the replica file damaged,
// removed or replaced and wrote it again.
func (c *Consumer) Rebuilds() uint64 { return c.rebuilds.Load() }

// Run serves every lane until ctx is done: each lane syncs from its relay's
// store and log, and resyncs (new lease) after any fault; RTT probes and the
// load subscription run beside them. Every touchEvery it checks the
// replica file: when it finds it truncated, grown, scribbled on, removed
// or replaced (shm.Writer.Check), it stops the lanes, writes a new
// generation at the path (keeping the lanes' RTTs and load reports) and
// resyncs every lane into it; a file another live consumer writes at the
// path is left alone (logged once). When the DCs were discovered it asks
// the domain's relays again every DiscoverEvery and, when new ones answer
// with the consumer's format, writes a new generation with a lane added
// for each (appended, so the other lanes keep their places) into which
// the serving lanes are carried without a resync (see rebuild). On return every lane is retired (its
// ready bit clear) and the replica file is unmapped (it stays in place,
// its heartbeat stopped); no load report writes it after that.
func (c *Consumer) Run(ctx context.Context) error {
	names := relay.Names{Prefix: c.cfg.Prefix, Domain: c.cfg.Domain}
	// Relays send each load sample without the stored-blocks counter on the
	// load subject and, once they count, with it on load-stored;
	// LoadReport.Supersedes keeps the counted one whichever arrives first.
	var subs []*nats.Subscription
	unsubscribe := func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}
	for _, subject := range []string{names.LoadWildcard(), names.LoadStoredWildcard()} {
		sub, err := c.cfg.Conn.Subscribe(subject, c.onLoad)
		if err != nil {
			unsubscribe()
			return fmt.Errorf("consume: subscribe %s: %w", subject, err)
		}
		subs = append(subs, sub)
	}
	for {
		damage, added, err := c.epoch(ctx)
		if err != nil || (damage == nil && len(added) == 0) || !c.rebuild(ctx, damage, added) {
			unsubscribe()
			c.mu.Lock()
			c.unmapped = true
			c.mu.Unlock()
			if cerr := c.w.Close(); err == nil {
				err = cerr
			}
			return err
		}
	}
}

// epoch runs the lanes over the current file until ctx ends (nil, nil,
// nil), the file is found damaged (why), or discovery finds relays of
// new DCs (added); err is an upstream relay that cannot be followed.
func (c *Consumer) epoch(ctx context.Context) (damage error, added []relayproto.DCID, err error) {
	ectx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	defer func() {
		var cause error
		if len(added) > 0 {
			cause = errAddingLanes // the following lanes keep their places
			c.adding = time.Now()
		}
		cancel(cause)
		wg.Wait()
	}()
	found := make(chan []relayproto.DCID, 1)
	if c.discovering && len(c.lanes) < relayproto.MaxLanes {
		wg.Go(func() { c.rediscover(ectx, found) })
	}
	for i, l := range c.lanes {
		if addr, ok := c.cfg.Upstream[l.dc]; ok {
			if err := c.followUpstream(ectx, &wg, i, l.dc, addr); err != nil {
				return nil, nil, err
			}
			continue
		}
		wg.Go(func() { l.run(ectx) })
		wg.Go(func() { l.probe(ectx) })
	}
	tick := time.NewTicker(touchEvery)
	defer tick.Stop()
	c.w.Touch(time.Now())
	for damage == nil && added == nil && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case added = <-found:
		case now := <-tick.C:
			c.w.Touch(now)
			if damage = c.check(); damage == nil {
				c.verify()
			}
		}
	}
	return damage, added, nil
}

// rediscover asks the domain's relays for their Info every DiscoverEvery
// until some DC without a lane answers with the consumer's format; it
// sends those DCs (in DC order, up to relayproto.MaxLanes lanes in all)
// on found and returns. A relay of another format is logged once and
// never added: its lane would hold words no probe can read.
func (c *Consumer) rediscover(ctx context.Context, found chan<- []relayproto.DCID) {
	have := map[relayproto.DCID]bool{}
	for _, l := range c.lanes { // the lanes change only between epochs
		have[l.dc] = true
	}
	tick := time.NewTicker(c.cfg.DiscoverEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		infos, err := discover(ctx, &c.cfg)
		if err != nil {
			if ctx.Err() == nil {
				c.cfg.Logger.Warn("rediscover relays", "err", err)
			}
			continue
		}
		var add []relayproto.DCID
		for _, info := range infos {
			dc := relayproto.DCID(info.DC)
			switch {
			case have[dc]:
			case info.Seed != c.cfg.Seed || info.Buckets != c.cfg.Buckets:
				if !c.refused[dc] {
					c.refused[dc] = true
					logForeignFormat(&c.cfg, info, true)
				}
			case len(have)+len(add) < relayproto.MaxLanes:
				add = append(add, dc)
			}
		}
		if len(add) > 0 {
			found <- add
			return
		}
	}
}

// check returns why the replica file needs rebuilding, or nil. A path that
// names another consumer's replica file with a live heartbeat is that
// consumer's now: this one keeps its own (unlinked) file and says so once.
func (c *Consumer) check() error {
	err := c.w.Check()
	if !errors.Is(err, shm.ErrReplaced) {
		return err
	}
	if r, aerr := shm.Attach(c.cfg.Path); aerr == nil {
		info, hb := r.Info(), r.WriterHeartbeat()
		r.Close()
		if info.ConsumerInstance != c.cfg.Instance && time.Since(hb) < 10*touchEvery {
			if !c.yielded {
				c.cfg.Logger.Error("another consumer writes the replica path; leaving it to it", "path", c.cfg.Path,
					"consumer", info.ConsumerInstance, "generation", info.Generation)
				c.yielded = true
			}
			return nil
		}
	}
	return err
}

// verifyBytes bounds the bucket region verify reads per tick: 1 MiB every
// 100 ms, a whole pass of the default 64 MiB file in 6.4 s at about half a
// millisecond of one core per tick (shm's BenchmarkVerify: about 2 GiB/s).
const verifyBytes = 1 << 20

// verify restores the file's ready mask if it was damaged
// (shm.Writer.RepairReady: no sum covers it), checks the next segments of
// every ready lane of the file against the sums the writer kept
// (shm.Writer.VerifySegment), about verifyBytes of them, and resyncs each
// lane found damaged.
func (c *Consumer) verify() {
	if wrong := c.w.RepairReady(); wrong != 0 {
		c.cfg.Logger.Error("the replica file's ready mask was damaged; restored", "path", c.cfg.Path, "lanes", fmt.Sprintf("%#x", wrong))
		for m := wrong; m != 0; m &= m - 1 {
			c.lanes[bits.TrailingZeros64(m)].count(func(st *LaneStatus) { st.IntegrityFailures++ })
		}
	}
	k := c.w.Segments()
	n := max(1, min(k, int(verifyBytes/(c.w.Info().RegionBytes/uint64(k)+1))))
	var bad uint64
	for range n {
		seg := int(c.cursor % uint64(k))
		c.cursor++
		b, _ := c.w.VerifySegment(seg, c.w.Table().Ready())
		bad |= b
	}
	for m := bad; m != 0; m &= m - 1 {
		l := c.lanes[bits.TrailingZeros64(m)]
		l.damaged(fmt.Errorf("%w: verified against the consumer's sums", ErrIntegrity))
	}
}

// rebuild writes a new generation of the replica file at the path, with a
// lane appended for each DC of added, and binds the lanes to it, retrying
// (RetryEvery doubling to MaxRetryEvery) until it succeeds (true) or ctx
// ends (false). The lanes' last RTTs and load reports are written into
// the new file, so routers keep their signals across the rebuild. When it
// only adds lanes, the lanes that were following their logs are carried
// (carry): their words, records and ready bits are copied into the new
// generation before it replaces the old (shm.Writer.ResizeCarrying) and
// their protocol state moves with them (ingest.Consumer.Extend), so they
// stay ready throughout and go on from their log positions; only the
// added lanes (and any lane that was not following) sync from a snapshot.
func (c *Consumer) rebuild(ctx context.Context, damage error, added []relayproto.DCID) bool {
	if damage != nil {
		c.cfg.Logger.Warn("replica file damaged; rebuilding it", "path", c.cfg.Path, "err", damage)
	}
	if len(added) > 0 {
		c.cfg.Logger.Info("relays discovered; adding their lanes", "path", c.cfg.Path, "dcs", fmt.Sprint(added))
		for _, dc := range added {
			c.manifest.Lanes = append(c.manifest.Lanes, relayproto.PoolID{Domain: c.cfg.Domain, DC: dc})
			c.layout.DCs = append(c.layout.DCs, uint64(dc))
		}
	}
	if damage == nil && c.carry(added) {
		return true
	}
	for _, l := range c.lanes {
		l.carry = nil // every lane resyncs into a fresh core
	}
	retry := c.cfg.retry()
	for {
		c.mu.Lock()
		nw, err := c.w.Resize(c.layout)
		if err == nil {
			// The manifest and layout have the same lanes (at most
			// relayproto.MaxLanes, distinct DCs of one domain) and format:
			// bind cannot fail.
			if err := c.bind(nw); err != nil {
				panic(fmt.Sprintf("consume: core over a rebuilt replica: %v", err))
			}
			for _, l := range c.lanes {
				l.rebind()
			}
			for _, dc := range added {
				c.lanes = append(c.lanes, newLaneRunner(c, len(c.lanes), dc))
				c.cfg.DCs = append(c.cfg.DCs, dc)
			}
		}
		c.mu.Unlock()
		if err == nil {
			if damage != nil {
				c.rebuilds.Add(1)
			}
			c.yielded = false
			c.cfg.Logger.Info("replica file rebuilt", "path", c.cfg.Path, "generation", nw.Info().Generation,
				"dcs", fmt.Sprint(c.cfg.DCs))
			return true
		}
		wait := retry.Next()
		c.cfg.Logger.Error("rebuild replica file", "path", c.cfg.Path, "err", err, "retry_in", wait)
		if !backoff.Sleep(ctx, wait) {
			return false
		}
	}
}

// carry writes the new generation for the lanes added (already in
// c.layout and c.manifest) with the lanes that kept their places carried
// into it, moves the protocol core and the lanes onto it and appends the
// added lanes. It reports false, changing nothing, when the file could not
// be written that way (rebuild then resyncs every lane).
func (c *Consumer) carry(added []relayproto.DCID) bool {
	var mask uint64
	for i, l := range c.lanes {
		if l.carry != nil {
			mask |= 1 << uint(i)
		} else {
			// Its next run claims it afresh in the moved core (a lane
			// followed from a Pool Relay never claimed it).
			l.lane.Release()
		}
	}
	pools := make([]relayproto.PoolID, len(added))
	for i, dc := range added {
		pools[i] = relayproto.PoolID{Domain: c.cfg.Domain, DC: dc}
	}
	stopped := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	nw, err := c.w.ResizeCarrying(c.layout, mask)
	written := time.Now()
	if err != nil {
		c.cfg.Logger.Error("add lanes carrying the others; resyncing every lane instead", "path", c.cfg.Path, "err", err)
		return false
	}
	core, err := c.core.Extend(nw.Table(), pools)
	if err != nil {
		// The manifest and layout have the same lanes (at most
		// relayproto.MaxLanes, distinct DCs of one domain) and format.
		panic(fmt.Sprintf("consume: core over a grown replica: %v", err))
	}
	c.w, c.core = nw, core
	for _, l := range c.lanes {
		l.rebind()
	}
	for _, dc := range added {
		c.lanes = append(c.lanes, newLaneRunner(c, len(c.lanes), dc))
		c.cfg.DCs = append(c.cfg.DCs, dc)
	}
	c.yielded = false
	c.cfg.Logger.Info("lanes added to the replica file", "path", c.cfg.Path, "generation", nw.Info().Generation,
		"dcs", fmt.Sprint(c.cfg.DCs), "carried", bits.OnesCount64(mask), "lanes_stopped_in", stopped.Sub(c.adding),
		"file_written_in", written.Sub(stopped), "moved_in", time.Since(written))
	return true
}

// onLoad records a load report for the lane of its pool (NATS callback).
func (c *Consumer) onLoad(m *nats.Msg) {
	var r relayproto.LoadReport
	if _, err := wire.DecodeLoadReport(&r, m.Data); err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.core.LaneOf(r.Identity.Pool); ok && !c.unmapped {
		c.lanes[i].count(func(st *LaneStatus) { st.received(relayproto.FrameLoadReport.String(), len(m.Data)) })
		c.lanes[i].recordLoad(&r, time.Now())
	}
}

// Status returns every lane's status.
func (c *Consumer) Status() []LaneStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]LaneStatus, len(c.lanes))
	for i, l := range c.lanes {
		out[i] = l.status()
	}
	return out
}

// Writer returns the replica file's current writer (for tests and tools
// that read the lanes' words; a rebuild replaces it).
func (c *Consumer) Writer() *shm.Writer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w
}
