package e2e

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/goindex/goindex/bridge/consume"
	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// routerSite is where the hub and the consumer run; the DCs are the other
// sites of the grid.
const routerSite = "fra"

// defaultSites are the DCs of the default suite (4–32 ms from fra).
var defaultSites = []string{"ams", "lon", "waw", "ist"}

const (
	// pullMessages is the consumer's pull window: small, so that a stalled
	// lane leaves most of its backlog in the (bounded) log, not in the client.
	pullMessages = 64
	domain       = relayproto.DomainID(1)
	wait         = 60 * time.Second
	pollStep     = 10 * time.Millisecond
)

// rttMatrix reads the grid's RTT matrix (ms) by site name.
func rttMatrix(t *testing.T) (map[string]map[string]int, []string) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "wan", "grid13_rtt_ms.csv"))
	if err != nil {
		t.Fatalf("open RTT matrix: %v", err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("read RTT matrix: %v", err)
	}
	sites := rows[0][1:]
	m := map[string]map[string]int{}
	for _, row := range rows[1:] {
		m[row[0]] = map[string]int{}
		for j, v := range row[1:] {
			ms, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("RTT %s→%s = %q: %v", row[0], sites[j], v, err)
			}
			m[row[0]][sites[j]] = ms
		}
	}
	return m, sites
}

// site is one simulated DC: its leaf server behind a latency proxy, its
// relay and the generator of its workers' events.
type site struct {
	id       relayproto.DCID
	name     string
	rtt      time.Duration
	maxBytes int64
	comp     string
	srv      *natslink.Server
	proxy    *toxiproxy.Proxy
	relayNC  *nats.Conn
	genNC    *nats.Conn
	gen      *relaytest.Generator

	mu     sync.Mutex
	relay  *relay.Relay
	cancel context.CancelFunc
	done   chan error
	fed    uint64 // events published at the site
	since  uint64 // fed when the current relay started
}

type topology struct {
	t     *testing.T
	hub   *natslink.Server
	hubNC *nats.Conn
	toxi  *toxiproxy.ApiServer
	sites []*site
	dir   string
}

// newTopology starts the hub, one leaf per site behind a proxy with the
// site's RTT to the router site, and a relay per site.
func newTopology(t *testing.T, seed uint64, names []string, retention map[string]int64) *topology {
	t.Helper()
	rtt, _ := rttMatrix(t)
	hub, err := natslink.Start(natslink.ServerConfig{Name: "hub", Leaf: true})
	if err != nil {
		t.Fatalf("start hub: %v", err)
	}
	t.Cleanup(hub.Shutdown)
	hubNC, err := natslink.Connect(hub.ClientURL(), "e2e hub", nil)
	if err != nil {
		t.Fatalf("connect hub: %v", err)
	}
	t.Cleanup(hubNC.Close)
	top := &topology{t: t, hub: hub, hubNC: hubNC, dir: t.TempDir(),
		toxi: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())}
	leafAddr := strings.TrimPrefix(hub.LeafURL(), "nats-leaf://")
	for i, name := range names {
		ms, ok := rtt[routerSite][name]
		if !ok {
			t.Fatalf("site %q is not in the RTT matrix", name)
		}
		s := &site{id: relayproto.DCID(i + 1), name: name, rtt: time.Duration(ms) * time.Millisecond,
			maxBytes: retention[name], comp: "backend-" + name}
		s.proxy = toxiproxy.NewProxy(top.toxi, name, "127.0.0.1:0", leafAddr)
		if err := s.proxy.Start(); err != nil {
			t.Fatalf("proxy %s: %v", name, err)
		}
		t.Cleanup(s.proxy.Stop)
		// Half the round trip each way (the odd millisecond downstream).
		for dir, lat := range map[string]int{"upstream": ms / 2, "downstream": ms - ms/2} {
			toxic := fmt.Sprintf(`{"name":"wan_%s","type":"latency","stream":"%s","attributes":{"latency":%d}}`, dir, dir, lat)
			if _, err := s.proxy.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
				t.Fatalf("latency toxic %s: %v", name, err)
			}
		}
		s.srv, err = natslink.Start(natslink.ServerConfig{Name: name, JetStream: true, JSDomain: jsDomain(s.id),
			StoreDir: filepath.Join(top.dir, name), LeafRemotes: []string{"nats-leaf://" + s.proxy.Listen},
			LeafReconnect: 100 * time.Millisecond})
		if err != nil {
			t.Fatalf("start leaf %s: %v", name, err)
		}
		t.Cleanup(s.srv.Shutdown)
		if s.relayNC, err = natslink.Connect(s.srv.ClientURL(), "e2e relay "+name, nil); err != nil {
			t.Fatalf("connect %s: %v", name, err)
		}
		t.Cleanup(s.relayNC.Close)
		if s.genNC, err = natslink.Connect(s.srv.ClientURL(), "e2e workers "+name, nil); err != nil {
			t.Fatalf("connect %s: %v", name, err)
		}
		t.Cleanup(s.genNC.Close)
		s.gen = relaytest.NewGenerator(seed+uint64(i), 3)
		top.sites = append(top.sites, s)
	}
	relaytest.CheckFor(t, wait, pollStep, func() error {
		if n := hub.NATS().NumLeafNodes(); n != len(names) {
			return fmt.Errorf("%d of %d leaf nodes connected", n, len(names))
		}
		return nil
	})
	for _, s := range top.sites {
		top.startRelay(t, s)
	}
	return top
}

func jsDomain(id relayproto.DCID) string { return "dc" + strconv.FormatUint(uint64(id), 10) }

// startRelay starts (or restarts) a site's relay and waits until the hub
// reaches its ping responder; it fails t, and the relay lives as long as
// the topology.
func (top *topology) startRelay(t *testing.T, s *site) {
	t.Helper()
	// Load reports every second (the default): each one is a synchronous
	// KV write on the relay's writer goroutine, and at 10 a second they
	// held a relay on a CPU-starved machine to a fifth of its event pace
	// (warm-up's 300 events in 56-103 s against 11-13 s, 25% of one core).
	r, err := relay.New(relay.Config{Conn: s.relayNC, DC: s.id, Name: s.name, JSDomain: jsDomain(s.id),
		Pools:          []relay.PoolConfig{{Domain: domain, Namespace: "dynamo", Component: s.comp, ExpectedBlocks: 1 << 14}},
		HeartbeatEvery: 50 * time.Millisecond, LoadEvery: time.Second, SnapshotEvery: 2 * time.Second,
		RetryEvery: 50 * time.Millisecond, MaxBytes: s.maxBytes})
	if err != nil {
		t.Fatalf("relay.New(%s): %v", s.name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatalf("relay %s: %v", s.name, err)
	case <-time.After(wait):
		t.Fatalf("relay %s not ready", s.name)
	}
	s.mu.Lock()
	s.relay, s.cancel, s.done, s.since = r, cancel, done, s.fed
	s.mu.Unlock()
	top.t.Cleanup(func() { r.Close(); cancel() })
	top.waitPing(t, s)
}

// waitPing waits until the hub reaches the site's relay (and so its leaf).
func (top *topology) waitPing(t *testing.T, s *site) {
	t.Helper()
	names := relay.Names{Prefix: relay.DefaultPrefix, Domain: domain, DC: s.id}
	relaytest.CheckFor(t, wait, pollStep, func() error {
		_, err := top.hubNC.Request(names.PingSubject(), nil, s.rtt+time.Second)
		return err
	})
}

// feed publishes n generated events at the site.
func (top *topology) feed(s *site, n int) {
	subject := dynamo.EventSubject("dynamo", s.comp)
	for range n {
		if err := s.genNC.Publish(subject, s.gen.Next()); err != nil {
			top.t.Fatalf("publish at %s: %v", s.name, err)
		}
	}
	if err := s.genNC.Flush(); err != nil {
		top.t.Fatalf("flush at %s: %v", s.name, err)
	}
	s.mu.Lock()
	s.fed += uint64(n)
	s.mu.Unlock()
}

// ingested waits until the site's relay has handed every event published
// since it started to its producer. The relay's pace is the machine's (it
// writes the log, load reports and snapshots through synchronous JetStream
// requests): on a loaded 2-core machine under -race one took fewer than
// 300 events a minute. So the wait lasts as long as the relay keeps taking
// events, and fails when it takes none for a whole wait.
func (top *topology) ingested(t *testing.T, s *site) {
	t.Helper()
	s.mu.Lock()
	want := s.fed - s.since
	s.mu.Unlock()
	var took uint64
	progress := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := s.current().Status(ctx)
		cancel()
		if err == nil && len(st) == 1 && st[0].Intake.Events > took {
			took, progress = st[0].Intake.Events, time.Now()
		}
		switch {
		case took == want:
			return
		case took > want:
			t.Fatalf("relay %s took %d events, %d were published at its site", s.name, took, want)
		case time.Since(progress) > wait:
			t.Fatalf("relay %s took %d of %d events, none in the last %v (status: %v)", s.name, took, want, wait, err)
		}
		time.Sleep(pollStep)
	}
}

func (s *site) current() *relay.Relay {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.relay
}

// running is a consumer under test.
type running struct {
	c    *consume.Consumer
	stop context.CancelFunc
	done chan error
	once sync.Once
	err  error
}

// wait returns Run's result (any number of times).
func (r *running) wait() error {
	r.once.Do(func() { r.err = <-r.done })
	return r.err
}

func (top *topology) startConsumer(path string, filter func(relayproto.DCID, []byte) [][]byte) *running {
	t := top.t
	t.Helper()
	var dcs []relayproto.DCID
	for _, s := range top.sites {
		dcs = append(dcs, s.id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := consume.New(ctx, consume.Config{Conn: top.hubNC, Domain: domain, DCs: dcs, Path: path, DiscoverFor: 10 * time.Second,
		PingEvery: 50 * time.Millisecond, RetryEvery: 20 * time.Millisecond, PullMessages: pullMessages, Filter: filter})
	if err != nil {
		t.Fatalf("consume.New: %v", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	r := &running{c: c, stop: stop, done: make(chan error, 1)}
	go func() { r.done <- c.Run(rctx) }()
	t.Cleanup(func() { stop(); r.wait() })
	return r
}

// replica is a read-only view of the replica file that follows new
// generations.
type replica struct {
	path string
	r    *shm.Reader
}

func (rp *replica) reader() (*shm.Reader, error) {
	if rp.r != nil {
		if stale, err := rp.r.Stale(); err == nil && !stale {
			return rp.r, nil
		}
		rp.r.Close()
		rp.r = nil
	}
	r, err := shm.Attach(rp.path)
	if err != nil {
		return nil, err
	}
	rp.r = r
	return r, nil
}

// settle waits until every relay has taken every event published at its
// site (ingested), then until rp has converged (converged), failing t with
// step named if it has not within wait of the relays' last event: the
// producers' words no longer change, so a lane that still differs is not
// following its relay. It logs how long each part took.
func (top *topology) settle(t *testing.T, rp *replica, step string) {
	t.Helper()
	start := time.Now()
	for _, s := range top.sites {
		top.ingested(t, s)
	}
	took := time.Since(start)
	relaytest.CheckFor(t, wait, pollStep, func() error {
		if err := top.converged(rp); err != nil {
			return fmt.Errorf("%s: %w", step, err)
		}
		return nil
	})
	t.Logf("%s: relays took their events in %v, lanes converged %v later", step, took.Round(time.Millisecond),
		(time.Since(start) - took).Round(time.Millisecond))
}

// converged returns nil once every lane holds its producer's exact words,
// is ready, and finds every block its DC's workers hold.
func (top *topology) converged(rp *replica) error {
	r, err := rp.reader()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f := r.Format()
	for lane, s := range top.sites {
		want, err := s.current().AppendWords(ctx, nil, domain)
		if err != nil {
			return fmt.Errorf("%s producer words: %w", s.name, err)
		}
		if r.Ready()&(1<<lane) == 0 {
			return fmt.Errorf("lane %d (%s) not ready", lane, s.name)
		}
		got := r.Table().AppendLane(nil, lane)
		if !slices.Equal(got, want) {
			diff := 0
			for i := range got {
				if got[i] != want[i] {
					diff++
				}
			}
			return fmt.Errorf("lane %d (%s): %d of %d words differ from the producer's", lane, s.name, diff, len(want))
		}
		for _, c := range s.gen.Tracked() {
			if r.Table().Probe(f.Probe(c), 1<<lane) == 0 {
				return fmt.Errorf("lane %d (%s): tracked block %#x is missing", lane, s.name, c)
			}
		}
	}
	return nil
}
