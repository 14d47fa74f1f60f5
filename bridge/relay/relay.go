package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/goindex/relayproto"
)

// Relay is a DC's relay: one ckf.Producer per pool, fed by the DC's Dynamo
// KV events, publishing a delta log, stored snapshots and load reports over
// NATS JetStream, and answering RTT pings. Build it with New, then Run it;
// Status, Words and Flush may be called from any goroutine while it runs.
type Relay struct {
	cfg   Config
	pools []*pool
	base  context.Context // canceled by Close: aborts in-flight JetStream calls
	kill  context.CancelFunc
	stop  <-chan struct{} // closed by Close
	ready chan struct{}

	mu      sync.Mutex
	infos   map[relayproto.DomainID]Info
	final   map[relayproto.DomainID]PoolStatus
	loads   map[relayproto.DomainID]PoolLoad
	catalog uint64        // revision of the set of live pool identities
	changed chan struct{} // closed when catalog moves
	closed  bool
}

// New validates cfg and builds the relay's producers; it does no I/O.
func New(cfg Config) (*Relay, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	base, kill := context.WithCancel(context.Background())
	r := &Relay{cfg: cfg, base: base, kill: kill, stop: base.Done(), ready: make(chan struct{}),
		infos: map[relayproto.DomainID]Info{}, final: map[relayproto.DomainID]PoolStatus{},
		loads: map[relayproto.DomainID]PoolLoad{}, changed: make(chan struct{})}
	for _, pc := range cfg.Pools {
		p, err := newPool(r, pc)
		if err != nil {
			kill()
			return nil, err
		}
		r.pools = append(r.pools, p)
	}
	return r, nil
}

// Run waits for the NATS connection to be up (a relay may start before
// its server), sets up every pool (JetStream assets, a new incarnation, the first
// snapshot, the subscriptions), then serves until ctx is done, when each
// pool drains gracefully (tail, drain marker), or until Close. A pool that
// fails stops alone; Run returns when every pool has stopped, with their
// errors joined. Run may be called once.
func (r *Relay) Run(ctx context.Context) error {
	// A pool's setup is bounded by PublishTimeout: wait for the server
	// first, so a relay may start before it.
	wctx, cancel := context.WithCancel(ctx)
	stopWait := context.AfterFunc(r.base, cancel) // Close stops the wait
	err := natslink.AwaitConnected(wctx, r.cfg.Conn, r.cfg.Logger)
	stopWait()
	cancel()
	if err != nil {
		r.Close()
		if wctx.Err() != nil {
			return nil // stopped before anything was set up
		}
		return fmt.Errorf("relay: %w", err)
	}
	for _, p := range r.pools {
		if err := p.setup(ctx); err != nil {
			for _, q := range r.pools {
				q.unsubscribe()
			}
			r.Close()
			return &PoolError{Domain: uint64(p.cfg.Domain), DC: uint64(r.cfg.DC), Err: err}
		}
		p.log.Info("relay pool up", "buckets", p.format.Buckets(),
			"stream", p.names.Stream(), "events", p.cfg.Namespace+"/"+p.cfg.Component)
	}
	close(r.ready)
	errs := make([]error, len(r.pools))
	var wg sync.WaitGroup
	for i, p := range r.pools {
		wg.Go(func() {
			errs[i] = p.run(ctx)
			st := p.status()
			st.Running = false
			if errs[i] != nil {
				st.Err = errs[i].Error()
			}
			r.mu.Lock()
			r.final[p.cfg.Domain] = st
			r.moveCatalog()
			r.mu.Unlock()
		})
	}
	wg.Wait()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.kill()
	return errors.Join(errs...)
}

// Ready is closed once every pool is up and has stored its first snapshot.
func (r *Relay) Ready() <-chan struct{} { return r.ready }

// Close stops the relay at once, without a drain marker: to consumers it
// looks like a crash. It is safe to call more than once.
func (r *Relay) Close() { r.kill() }

func (r *Relay) setInfo(d relayproto.DomainID, info Info) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.infos[d]; !ok || prev.Incarnation != info.Incarnation || prev.LayoutGeneration != info.LayoutGeneration {
		r.moveCatalog()
	}
	r.infos[d] = info
}

// moveCatalog starts a new catalog revision (r.mu held).
func (r *Relay) moveCatalog() {
	r.catalog++
	close(r.changed)
	r.changed = make(chan struct{})
}

// Catalog returns the revision of the relay's set of live pools, the Info
// of each (in domain order), and a channel closed at the next revision: a
// pool set up, a new producer identity (a layout generation after a
// rebuild), or a pool stopped. A stopped pool is not in it.
func (r *Relay) Catalog() (revision uint64, pools []Info, changed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for d, info := range r.infos {
		if _, stopped := r.final[d]; !stopped {
			pools = append(pools, info)
		}
	}
	slices.SortFunc(pools, func(a, b Info) int { return cmp.Compare(a.Domain, b.Domain) })
	return r.catalog, pools, r.changed
}

// PoolLoad is a pool's last load report (with its stored-blocks counter)
// and how much of it its workers' own samples make.
type PoolLoad struct {
	Report   relayproto.LoadReport
	Coverage Coverage
}

func (r *Relay) setLoad(d relayproto.DomainID, pl PoolLoad) {
	r.mu.Lock()
	r.loads[d] = pl
	r.mu.Unlock()
}

// Load returns domain d's last load, and false before the first report.
func (r *Relay) Load(d relayproto.DomainID) (PoolLoad, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lr, ok := r.loads[d]
	return lr, ok
}

func (r *Relay) getInfo(d relayproto.DomainID) (Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	info, ok := r.infos[d]
	return info, ok
}

// Info returns the pool of domain d's current Info (what a ping answers).
func (r *Relay) Info(d relayproto.DomainID) (Info, bool) { return r.getInfo(d) }

// do runs fn on the writer goroutine of domain d's pool and waits for it.
func (r *Relay) do(ctx context.Context, d relayproto.DomainID, fn func(p *pool)) error {
	for _, p := range r.pools {
		if p.cfg.Domain != d {
			continue
		}
		done := make(chan struct{})
		select {
		case p.req <- func() { fn(p); close(done) }:
		case <-ctx.Done():
			return ctx.Err()
		case <-r.stop:
			return ErrClosed
		}
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("%w: domain %d", ErrUnknownPool, d)
}

// Status returns every pool's status; a stopped pool reports its last one.
func (r *Relay) Status(ctx context.Context) ([]PoolStatus, error) {
	var out []PoolStatus
	for _, p := range r.pools {
		r.mu.Lock()
		st, stopped := r.final[p.cfg.Domain]
		r.mu.Unlock()
		if !stopped {
			if err := r.do(ctx, p.cfg.Domain, func(p *pool) { st = p.status() }); err != nil {
				return nil, err
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// AppendWords appends a copy of domain d's producer filter words (its
// PoolConfig.Source's, when given) to dst (taken between two events, so it
// reflects every event applied so far; after the pool stopped, its final
// words).
func (r *Relay) AppendWords(ctx context.Context, dst []uint64, d relayproto.DomainID) ([]uint64, error) {
	r.mu.Lock()
	_, stopped := r.final[d]
	r.mu.Unlock()
	if stopped {
		// The writer goroutine has returned: nothing else touches the producer.
		for _, p := range r.pools {
			if p.cfg.Domain == d {
				return p.source().AppendWords(dst), nil
			}
		}
	}
	err := r.do(ctx, d, func(p *pool) { dst = p.source().AppendWords(dst) })
	return dst, err
}

// Flush forces a publication boundary on domain d's pool: the pending
// window goes out as deltas now instead of at the cadence timer.
func (r *Relay) Flush(ctx context.Context, d relayproto.DomainID) error {
	var perr error
	if err := r.do(ctx, d, func(p *pool) { perr = p.publish() }); err != nil {
		return err
	}
	return perr
}

// Snapshot stores a fresh snapshot of domain d's pool now.
func (r *Relay) Snapshot(ctx context.Context, d relayproto.DomainID) error {
	var serr error
	if err := r.do(ctx, d, func(p *pool) { serr = p.snapshot() }); err != nil {
		return err
	}
	return serr
}
