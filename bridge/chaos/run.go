package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// maxViolations bounds the violations a report lists (the rest are
// counted).
const maxViolations = 40

// dc is one simulated DC: its frontend, its leaf nats-server behind its
// link to the hub, its relay, and its workers' events.
type dc struct {
	id       relayproto.DCID
	name     string
	frontend *frontend
	link     *toxiproxy.Proxy
	leaf     *natsServer
	nc       *nats.Conn // the workers' (and the run's) connection to the leaf
	relay    *proc
	metrics  atomic.Value // the relay's metrics base URL (string), per start
	feed     *feeder
}

func (d *dc) jsDomain() string { return d.name }

// component is the Dynamo component of the DC's workers: one per DC, since
// the leaf nodes share one account and a subject's interest crosses the hub
// (with one name, a relay would also take the other DCs' events).
func (d *dc) component() string { return "backend-" + d.name }

func (d *dc) names() relay.Names {
	return relay.Names{Prefix: relay.DefaultPrefix, Domain: domain, DC: d.id}
}

// run is one chaos run's state.
type run struct {
	cfg     Config
	dir     string
	replica string
	rng     *rand.Rand

	toxi          *toxiproxy.ApiServer
	hub           *natsServer
	dcs           []*dc
	consumer      *proc
	router        *proc
	routerAddr    string
	routerDown    atomic.Bool
	host          *host
	view          *shm.Reader
	probeClient   *http.Client
	procs         []*proc    // every child, in start order
	hostTotal     hostCounts // the C host's counters, every start's
	hostSeen      hostCounts // the current start's at the last countHost
	hostSeenStart int        // the host start hostSeen belongs to

	cancel context.CancelCauseFunc
	ending atomic.Bool

	mu         sync.Mutex
	rows       []*Row
	counts     []*counters
	phase      atomic.Int32
	violations []string       // distinct messages, in order
	repeats    map[string]int // how often each was reported
	dropped    int
}

// Run starts the whole system as real processes (nats-servers, one relay
// per DC, the consumer, the router, the C host of libgoindex.so) with
// stub DC frontends, a KV event workload and request clients, injects
// cfg's faults in turn, and after each waits until the system converges
// back (checkpoint). It returns the report, and an error wrapping
// ErrViolation when a promise broke (ErrConfig or ErrSetup when the run
// could not start).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0xC4A0)), probeClient: &http.Client{Timeout: 5 * time.Second}}
	r.dir = cfg.Dir
	if r.dir == "" {
		dir, err := os.MkdirTemp("", "goindex-chaos-")
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSetup, err)
		}
		r.dir = dir
	} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	r.replica = filepath.Join(r.dir, "replica")
	ctx, r.cancel = context.WithCancelCause(ctx)
	defer r.cancel(nil)
	start := time.Now()
	rep, err := r.run(ctx)
	rep.Elapsed = time.Since(start)
	r.teardown()
	rep.Violations = r.violationList()
	if err == nil && len(rep.Violations) > 0 {
		err = fmt.Errorf("%w: %d broken promise(s); logs in %s", ErrViolation, len(rep.Violations), r.dir)
	}
	if err == nil && cfg.Dir == "" {
		os.RemoveAll(r.dir)
	}
	return rep, err
}

// run sets up, warms up, injects and reports.
func (r *run) run(ctx context.Context) (*Report, error) {
	rep := &Report{DCs: r.cfg.DCs, Rounds: r.cfg.Rounds}
	r.addRow("warm-up")
	if err := r.setup(ctx); err != nil {
		return rep, err
	}
	workload, stop := context.WithCancel(ctx)
	for _, d := range r.dcs {
		go d.feed.run(workload)
	}
	cl := newClients(r)
	cl.start(workload, r.cfg.Clients, r.cfg.Seed)
	defer func() {
		stop()
		cl.wait()
		rep.Rows = r.snapshotRows()
		for _, d := range r.dcs {
			d.feed.mu.Lock()
			rep.Events += d.feed.total
			d.feed.mu.Unlock()
		}
		rep.HostProbes, rep.HostDegraded = r.hostTotal.probes, r.hostTotal.degraded
	}()
	r.progress("warm-up: waiting until every lane holds its relay's words")
	if _, err := r.checkpoint(ctx, r.cfg.Recover); err != nil {
		r.violation("warm-up: the system did not converge: %v", err)
		return rep, nil
	}
	rows := map[Kind]int{}
	for round := range r.cfg.Rounds {
		for i, k := range r.cfg.Faults {
			if ctx.Err() != nil {
				return rep, nil
			}
			idx, ok := rows[k]
			if !ok {
				idx = r.addRow(k.String())
				rows[k] = idx
			}
			d := r.dcs[(round*len(r.cfg.Faults)+i)%len(r.dcs)]
			r.phase.Store(int32(idx))
			target := ""
			if k.hasTarget() {
				target = " on " + d.name
			}
			r.countHost(ctx)
			heal, err := r.inject(ctx, k, d)
			r.mu.Lock()
			r.rows[idx].Injected++
			r.mu.Unlock()
			if err != nil {
				r.violation("%v%s: %v", k, target, err)
				return rep, nil
			}
			stages, err := r.checkpoint(ctx, r.cfg.Recover)
			if err != nil {
				r.violation("%v%s: the system did not converge back: %v", k, target, err)
				return rep, nil
			}
			took := time.Since(heal)
			r.mu.Lock()
			r.rows[idx].Recoveries = append(r.rows[idx].Recoveries, took)
			r.mu.Unlock()
			r.progress("round %d: %v%s: recovered in %v (%s)", round+1, k, target, took.Round(10*time.Millisecond), stages)
		}
	}
	r.countHost(ctx)
	return rep, nil
}

// hasTarget reports whether fault k acts on one DC.
func (k Kind) hasTarget() bool {
	switch k {
	case KillRelay, KillDCNATS, Partition, SlowLink, FrontendDown:
		return true
	}
	return false
}

// countHost adds the C host's counters since the last count to the
// totals (a restarted host counts from 0; what a killed one did after the
// last count is lost). Any call that failed is a violation: the library
// answers a host degraded, never with an error, whatever happened to the
// replica.
func (r *run) countHost(ctx context.Context) {
	c, err := r.host.counts(ctx)
	if err != nil {
		return
	}
	if starts := r.host.startCount(); starts != r.hostSeenStart {
		r.hostSeen, r.hostSeenStart = hostCounts{}, starts
	}
	if n := c.errors - r.hostSeen.errors; n > 0 {
		r.violation("libgoindex.so returned %d error(s) to the C host (the last: code %s)", n, c.lastError)
	}
	r.hostTotal.probes += c.probes - r.hostSeen.probes
	r.hostTotal.degraded += c.degraded - r.hostSeen.degraded
	r.hostSeen = c
}

// setup starts everything and waits until each part answers.
func (r *run) setup(ctx context.Context) error {
	r.progress("compiling the C host")
	hostBin, err := compileHost(&r.cfg, r.dir)
	if err != nil {
		return err
	}
	r.toxi = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	hub, leafPort, err := newHub(r)
	if err != nil {
		return err
	}
	r.hub = hub
	r.procs = append(r.procs, hub.proc)
	r.progress("starting nats-server (hub) and %d DCs", r.cfg.DCs)
	if err := hub.up(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrSetup, err)
	}
	perTick := max(1, r.cfg.EventsPerSecond*int(feedTick/time.Millisecond)/1000)
	for i := range r.cfg.DCs {
		d := &dc{id: relayproto.DCID(i + 1), name: "dc" + strconv.Itoa(i+1)}
		r.dcs = append(r.dcs, d)
		if d.frontend, err = newFrontend(d.name); err != nil {
			return fmt.Errorf("%w: %w", ErrSetup, err)
		}
		d.link = toxiproxy.NewProxy(r.toxi, d.name, "127.0.0.1:0", "127.0.0.1:"+strconv.Itoa(leafPort))
		if err := d.link.Start(); err != nil {
			return fmt.Errorf("%w: %s link: %v", ErrSetup, d.name, err)
		}
		if d.leaf, err = newLeaf(r, d, d.link.Listen); err != nil {
			return err
		}
		r.procs = append(r.procs, d.leaf.proc)
		if err := d.leaf.up(ctx); err != nil {
			return fmt.Errorf("%w: %w", ErrSetup, err)
		}
		if d.nc, err = natslink.Connect(d.leaf.url(), "chaos workers "+d.name, nil); err != nil {
			return fmt.Errorf("%w: connect %s: %v", ErrSetup, d.name, err)
		}
		if d.relay, err = newProc(r.dir, "relay-"+d.name, r.bin("goindex"), nil, r.died); err != nil {
			return err
		}
		d.relay.args = r.relayArgs(d)
		r.procs = append(r.procs, d.relay)
		if _, err := r.upRelay(ctx, d); err != nil {
			return fmt.Errorf("%w: %w", ErrSetup, err)
		}
		d.feed = &feeder{d: d, perTick: perTick, gen: relaytest.NewGenerator(r.cfg.Seed+uint64(i), workers)}
	}
	r.progress("starting goindex consume, goindex route and the C host")
	if r.consumer, err = newProc(r.dir, "consume", r.bin("goindex"), r.consumerArgs(), r.died); err != nil {
		return err
	}
	r.procs = append(r.procs, r.consumer)
	if err := r.upConsumer(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrSetup, err)
	}
	if r.router, err = newProc(r.dir, "route", r.bin("goindex"), r.routerArgs("127.0.0.1:0"), r.died); err != nil {
		return err
	}
	r.procs = append(r.procs, r.router)
	if err := r.upRouter(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrSetup, err)
	}
	if err := poll(ctx, startWait, func() error {
		_, err := os.Stat(r.replica)
		return err
	}); err != nil {
		return fmt.Errorf("%w: the consumer wrote no replica: %w", ErrSetup, err)
	}
	if r.host, err = newHost(r, hostBin); err != nil {
		return err
	}
	r.procs = append(r.procs, r.host.proc)
	if err := r.host.up(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrSetup, err)
	}
	return nil
}

// teardown stops every child (the last started first), the links and
// the frontends.
func (r *run) teardown() {
	r.ending.Store(true)
	r.closeView()
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].close(stopGrace)
	}
	for _, d := range r.dcs {
		if d.nc != nil {
			d.nc.Close()
		}
		if d.link != nil {
			d.link.Stop()
		}
		if d.frontend != nil {
			d.frontend.down()
		}
	}
}

// bin returns the path of a built binary.
func (r *run) bin(name string) string { return filepath.Join(r.cfg.Build, name) }

// died reports a child that exited on its own: a violation that ends the
// run (the system it tested is not whole any more).
func (r *run) died(name string, err error) {
	if r.ending.Load() {
		return
	}
	r.violation("%v", err)
	r.cancel(fmt.Errorf("%s exited", name))
}

// violation records a broken promise; the same message again only counts.
func (r *run) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.repeats == nil {
		r.repeats = map[string]int{}
	}
	if r.repeats[msg]++; r.repeats[msg] > 1 {
		return
	}
	if len(r.violations) >= maxViolations {
		r.dropped++
		return
	}
	r.violations = append(r.violations, msg)
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "VIOLATION: %s\n", strings.SplitN(msg, "\n", 2)[0])
	}
}

func (r *run) violationList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.violations))
	for i, v := range r.violations {
		out[i] = v
		if n := r.repeats[v]; n > 1 {
			out[i] = fmt.Sprintf("%s (%d times)", v, n)
		}
	}
	if r.dropped > 0 {
		out = append(out, fmt.Sprintf("and %d more", r.dropped))
	}
	return out
}

// record counts one request's outcome in the current row (served, and
// degraded when the router said so); a failure while the router was up is
// a violation.
func (r *run) record(err error, degraded, routerDown bool) {
	idx := int(r.phase.Load())
	r.mu.Lock()
	c, name := r.counts[idx], r.rows[idx].Fault
	r.mu.Unlock()
	switch {
	case err == nil:
		c.served.Add(1)
		if degraded {
			c.degraded.Add(1)
		}
	case routerDown:
		c.routerDown.Add(1)
	default:
		c.failed.Add(1)
		r.violation("a request failed during %s with every DC's frontend but at most one up: %v", name, err)
	}
}

// addRow adds a report row and returns its index.
func (r *run) addRow(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, &Row{Fault: name})
	r.counts = append(r.counts, &counters{})
	return len(r.rows) - 1
}

// snapshotRows returns the rows with their request counts.
func (r *run) snapshotRows() []Row {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Row, len(r.rows))
	for i, row := range r.rows {
		out[i] = *row
		c := r.counts[i]
		out[i].Served, out[i].Degraded, out[i].Failed, out[i].RouterDown = c.served.Load(), c.degraded.Load(), c.failed.Load(), c.routerDown.Load()
	}
	return out
}

// progress writes one progress line.
func (r *run) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "chaos: "+format+"\n", args...)
	}
}
