package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/syncbuf"
)

const wait = 30 * time.Second

// dcRelay is one DC's relay fed by its own generator on its own component.
type dcRelay struct {
	dc   relayproto.DCID
	r    *relay.Relay
	gen  *relaytest.Generator
	comp string
	stop context.CancelFunc
	done chan error
}

func startRelay(t *testing.T, nc *nats.Conn, dc relayproto.DCID, seed uint64) *dcRelay {
	t.Helper()
	return startRelaySized(t, nc, dc, seed, 4096)
}

// startRelaySized starts a relay whose filter is sized for expected blocks.
func startRelaySized(t *testing.T, nc *nats.Conn, dc relayproto.DCID, seed, expected uint64) *dcRelay {
	t.Helper()
	return startRelayIn(t, nc, dc, seed, expected, "")
}

// startRelayIn starts a relay whose filter is sized for expected blocks and
// whose Info sends consumers to its assets through JetStream domain
// jsDomain (the relay itself uses the server's JetStream).
func startRelayIn(t *testing.T, nc *nats.Conn, dc relayproto.DCID, seed, expected uint64, jsDomain string) *dcRelay {
	t.Helper()
	comp := fmt.Sprintf("backend-%d", dc)
	r, err := relay.New(relay.Config{Conn: nc, DC: dc, JSDomain: jsDomain, HeartbeatEvery: 20 * time.Millisecond, LoadEvery: 50 * time.Millisecond,
		Pools: []relay.PoolConfig{{Domain: 1, Namespace: "dynamo", Component: comp, ExpectedBlocks: expected}}})
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &dcRelay{dc: dc, r: r, gen: relaytest.NewGenerator(seed+uint64(dc), 3), comp: comp, stop: cancel, done: make(chan error, 1)}
	go func() { d.done <- r.Run(ctx) }()
	select {
	case <-r.Ready():
	case err := <-d.done:
		t.Fatalf("relay %d: %v", dc, err)
	case <-time.After(wait):
		t.Fatalf("relay %d not ready", dc)
	}
	t.Cleanup(func() { r.Close(); cancel() })
	return d
}

func (d *dcRelay) feed(t *testing.T, nc *nats.Conn, n int) {
	t.Helper()
	subject := dynamo.EventSubject("dynamo", d.comp)
	for range n {
		if err := nc.Publish(subject, d.gen.Next()); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
}

func startConsumer(t *testing.T, cfg Config) (*Consumer, context.CancelFunc, chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("consume.New: %v", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })
	return c, stop, done
}

// converged reports nil once lane i of the replica file at path holds
// exactly d's producer words and every block d's workers hold is found.
// Each call asks the relay afresh (its own deadline), so a caller's wait
// never ends with a stale context's error in place of what still differs.
func converged(r *shm.Reader, lane int, d *dcRelay) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	want, err := d.r.AppendWords(ctx, nil, 1)
	if err != nil {
		return err
	}
	if r.Ready()&(1<<lane) == 0 {
		return fmt.Errorf("lane %d (dc %d) not ready", lane, d.dc)
	}
	if got := r.Table().AppendLane(nil, lane); !slices.Equal(got, want) {
		diff := 0
		for i := range got {
			if got[i] != want[i] {
				diff++
			}
		}
		return fmt.Errorf("lane %d (dc %d): %d of %d words differ from the producer's", lane, d.dc, diff, len(want))
	}
	f := r.Format()
	for _, c := range d.gen.Tracked() {
		if r.Table().Probe(f.Probe(c), 1<<lane) == 0 {
			return fmt.Errorf("lane %d (dc %d): tracked block %#x not found", lane, d.dc, c)
		}
	}
	return nil
}

func TestConsumer_DiscoveredLanesConvergeAndCarryRTTAndLoad(t *testing.T) {
	seed := relaytest.Seed(t, 11)
	_, nc := natstest.Start(t)
	relays := []*dcRelay{startRelay(t, nc, 7, seed), startRelay(t, nc, 3, seed)}
	path := filepath.Join(t.TempDir(), "replica")
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, Path: path, DiscoverFor: 300 * time.Millisecond, PingEvery: 20 * time.Millisecond})
	if got := c.Lanes(); !slices.Equal(got, []relayproto.DCID{3, 7}) {
		t.Fatalf("discovered lanes %v, want [3 7] (DC order)", got)
	}
	reader, err := shm.Attach(path)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer reader.Close()
	byLane := []*dcRelay{relays[1], relays[0]}
	for round := range 3 {
		for _, d := range relays {
			d.feed(t, nc, 300)
		}
		relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
			for i, d := range byLane {
				if err := converged(reader, i, d); err != nil {
					return fmt.Errorf("round %d: %w", round, err)
				}
			}
			return nil
		})
	}
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		for i, d := range byLane {
			li := reader.Lane(i)
			if li.RTT <= 0 || li.Load.LiveWorkers != 3 || li.Load.ActiveBlocks == 0 || li.State != uint8(ingest.StateReady) {
				return fmt.Errorf("lane %d record %+v: want an RTT, 3 live workers, active blocks, READY", i, li)
			}
			// The stored-blocks counter crosses the wire (load-stored
			// subject) into the record with the incarnation that counted
			// it; no events arrive any more, so it settles on the relay's.
			pl, _ := d.r.Load(1)
			if li.Load.StoredBlocks == 0 || li.Load.StoredBlocks != pl.Report.StoredBlocks || li.Load.Incarnation != pl.Report.Identity.Incarnation {
				return fmt.Errorf("lane %d load record counts %d stored blocks of incarnation %d, relay %d of %d",
					i, li.Load.StoredBlocks, li.Load.Incarnation, pl.Report.StoredBlocks, pl.Report.Identity.Incarnation)
			}
		}
		return nil
	})
	for _, st := range c.Status() {
		if st.Snapshots != 1 || st.Faults != 0 || st.Deltas == 0 {
			t.Errorf("lane %d status %+v: want 1 snapshot, 0 faults, deltas applied", st.Lane, st)
		}
	}
}

func TestConsumer_LateLaneCatchesUpOnceAndCountsWhatItReceived(t *testing.T) {
	seed := relaytest.Seed(t, 12)
	_, nc := natstest.Start(t)
	d := startRelay(t, nc, 4, seed)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	// Two rounds, each taken and flushed before the next: at least two
	// deltas (a relay publishes what is queued in one).
	for round := 1; round <= 2; round++ {
		d.feed(t, nc, 200)
		relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
			st, err := d.r.Status(ctx)
			if err != nil {
				return err
			}
			if st[0].Intake.Events != uint64(200*round) {
				return fmt.Errorf("relay status: %d events, want %d", st[0].Intake.Events, 200*round)
			}
			return nil
		})
		if err := d.r.Flush(ctx, 1); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
	if st, err := d.r.Status(ctx); err != nil || st[0].Publisher.Deltas < 2 {
		t.Fatalf("relay status %+v (err %v): want at least 2 deltas", st, err)
	}
	// The stored snapshot is the relay's first (empty) one: the lane starts
	// behind the log by every delta published so far.
	path := filepath.Join(t.TempDir(), "replica")
	var observed struct {
		sync.Mutex
		calls, images int
		bad           bool
	}
	observe := func(lane, images int, took time.Duration) {
		observed.Lock()
		defer observed.Unlock()
		observed.calls++
		observed.images += images
		observed.bad = observed.bad || took < 0 || lane != 0
	}
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{4}, Path: path, PingEvery: 20 * time.Millisecond,
		ObserveDelta: observe})
	reader, err := shm.Attach(path)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer reader.Close()
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error { return converged(reader, 0, d) })
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		if st := c.Status()[0]; st.CatchUps != 1 || st.Pending != 0 {
			return fmt.Errorf("lane status: %d catch-ups, %d pending; want 1 catch-up and none pending", st.CatchUps, st.Pending)
		}
		return nil
	})
	st := c.Status()[0]
	rst, err := d.r.Status(ctx)
	if err != nil {
		t.Fatalf("relay Status: %v", err)
	}
	wire := rst[0].Wire
	if st.FramesReceived["delta"] != st.Deltas || st.Deltas != wire.Frames["delta"] || st.BytesReceived["delta"] != wire.Bytes["delta"] {
		t.Errorf("lane received %d delta frames (%d bytes), applied %d; relay published %d (%d bytes); want all equal",
			st.FramesReceived["delta"], st.BytesReceived["delta"], st.Deltas, wire.Frames["delta"], wire.Bytes["delta"])
	}
	observed.Lock()
	if uint64(observed.calls) != st.Deltas || uint64(observed.images) != rst[0].Producer.EmittedImages || observed.bad {
		t.Errorf("ObserveDelta saw %d deltas of %d images (a negative time or another lane: %v); lane applied %d deltas, relay emitted %d images",
			observed.calls, observed.images, observed.bad, st.Deltas, rst[0].Producer.EmittedImages)
	}
	observed.Unlock()
	if st.FramesReceived["snapshot"] == 0 || st.BytesReceived["snapshot"] == 0 || st.FramesReceived["invalid"] != 0 {
		t.Errorf("lane received %v frames (%v bytes): want snapshot chunks and no invalid frame", st.FramesReceived, st.BytesReceived)
	}
}

// dropper drops, duplicates or reorders delta frames of one DC on demand.
type dropper struct {
	mu   sync.Mutex
	dc   relayproto.DCID
	mode string // "drop", "dup", "swap" or ""
	held []byte
	hits atomic.Int64
}

func (d *dropper) filter(dc relayproto.DCID, frame []byte) [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, _, err := wire.Decode(frame); dc != d.dc || err != nil || m.Type() != relayproto.FrameDelta || d.mode == "" {
		return [][]byte{frame}
	}
	mode := d.mode
	switch mode {
	case "drop":
		d.mode = ""
		d.hits.Add(1)
		return nil
	case "dup":
		d.mode = ""
		d.hits.Add(1)
		return [][]byte{frame, frame}
	case "swap":
		if d.held == nil {
			d.held = slices.Clone(frame)
			return nil
		}
		held := d.held
		d.held, d.mode = nil, ""
		d.hits.Add(1)
		return [][]byte{frame, held}
	}
	return [][]byte{frame}
}

func TestConsumer_TransportFaultsRecoverOnlyTheirLane(t *testing.T) {
	seed := relaytest.Seed(t, 12)
	_, nc := natstest.Start(t)
	a, b := startRelay(t, nc, 1, seed), startRelay(t, nc, 2, seed)
	inject := &dropper{dc: 2}
	path := filepath.Join(t.TempDir(), "replica")
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{1, 2}, Path: path, Filter: inject.filter, RetryEvery: 10 * time.Millisecond})
	reader, err := shm.Attach(path)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer reader.Close()
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		if err := converged(reader, 0, a); err != nil {
			return err
		}
		return converged(reader, 1, b)
	})
	for _, mode := range []string{"drop", "dup", "swap", "drop"} {
		before := c.Status()
		inject.mu.Lock()
		inject.mode = mode
		inject.mu.Unlock()
		hits := inject.hits.Load()
		for inject.hits.Load() == hits {
			a.feed(t, nc, 20)
			b.feed(t, nc, 20)
			relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
				if err := converged(reader, 0, a); err != nil {
					return err
				}
				if inject.hits.Load() != hits {
					return nil
				}
				return converged(reader, 1, b)
			})
		}
		relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
			if err := converged(reader, 0, a); err != nil {
				return err
			}
			return converged(reader, 1, b)
		})
		after := c.Status()
		if after[0].Snapshots != before[0].Snapshots || after[0].Faults != 0 {
			t.Errorf("%s on lane 1 disturbed lane 0: %+v", mode, after[0])
		}
		faulted := after[1].Faults > before[1].Faults
		if want := mode != "dup"; faulted != want {
			t.Errorf("%s: lane 1 faults %d → %d, want a fault: %v", mode, before[1].Faults, after[1].Faults, want)
		}
	}
}

func TestNew_RejectsBadConfigAndMissingRelays(t *testing.T) {
	_, nc := natstest.Start(t)
	dir := t.TempDir()
	ctx := context.Background()
	bad := []Config{
		{Path: filepath.Join(dir, "x")},
		{Conn: nc},
		{Conn: nc, Path: filepath.Join(dir, "x"), DCs: []relayproto.DCID{1, 1}},
		{Conn: nc, Path: filepath.Join(dir, "x"), DCs: []relayproto.DCID{0}},
		{Conn: nc, Path: filepath.Join(dir, "x"), Seed: 1},
		// A wildcard prefix would subscribe to other tenants' subjects.
		{Conn: nc, Path: filepath.Join(dir, "x"), DCs: []relayproto.DCID{1}, Prefix: "goindex.*"},
		{Conn: nc, Path: filepath.Join(dir, "x"), DCs: []relayproto.DCID{1}, Prefix: ">"},
		{Conn: nc, Path: filepath.Join(dir, "x"), DCs: []relayproto.DCID{1}, Prefix: "a..b"},
		// nats.go refuses a heartbeat under 500 ms, or over half the expiry.
		{Conn: nc, Path: filepath.Join(dir, "x"), DCs: []relayproto.DCID{1}, PullHeartbeat: 100 * time.Millisecond},
		{Conn: nc, Path: filepath.Join(dir, "x"), DCs: []relayproto.DCID{1}, PullHeartbeat: 20 * time.Second},
	}
	for i, cfg := range bad {
		if _, err := New(ctx, cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(bad config %d) = %v, want ErrBadConfig", i, err)
		}
	}
	if _, err := New(ctx, Config{Conn: nc, Path: filepath.Join(dir, "x"), DiscoverFor: 50 * time.Millisecond}); !errors.Is(err, ErrNoRelays) {
		t.Errorf("New with no relays = %v, want ErrNoRelays", err)
	}
	if _, err := New(ctx, Config{Conn: nc, Path: filepath.Join(dir, "x"), DCs: []relayproto.DCID{4}, DiscoverFor: 50 * time.Millisecond}); !errors.Is(err, ErrNoRelays) {
		t.Errorf("New with a silent DC and no format = %v, want ErrNoRelays", err)
	}
}

// TestConsumer_DiscoveryFollowsARelayThatAnswersLater starts a consumer
// that discovers its DCs while one relay of the domain is not up yet (a
// restart, a DC that joins later): once that relay answers, the consumer
// adds its lane in a new generation of the replica file and the lanes
// already there converge again, where it used to serve the DCs of its
// start for ever and leave the late DC to be routed without its cache.
// A relay of another format is refused, and said so, not added.
func TestConsumer_DiscoveryFollowsARelayThatAnswersLater(t *testing.T) {
	seed := relaytest.Seed(t, 13)
	_, nc := natstest.Start(t)
	first := startRelay(t, nc, 3, seed)
	path := filepath.Join(t.TempDir(), "replica")
	logs := &syncbuf.Buffer{}
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, Path: path, DiscoverFor: 200 * time.Millisecond,
		DiscoverEvery: 20 * time.Millisecond, PingEvery: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if got := c.Lanes(); !slices.Equal(got, []relayproto.DCID{3}) {
		t.Fatalf("discovered lanes %v, want [3]", got)
	}
	other := startRelaySized(t, nc, 9, seed, 1<<16) // another bucket count: not the consumer's format
	late := startRelay(t, nc, 7, seed)
	for _, d := range []*dcRelay{first, late, other} {
		d.feed(t, nc, 200)
	}
	relaytest.CheckFor(t, wait, 10*time.Millisecond, func() error {
		if got := c.Lanes(); !slices.Equal(got, []relayproto.DCID{3, 7}) {
			return fmt.Errorf("lanes %v, want [3 7]", got)
		}
		reader, err := shm.Attach(path)
		if err != nil {
			return err
		}
		defer reader.Close()
		if got := reader.Info().DCs; !slices.Equal(got, []uint64{3, 7}) {
			return fmt.Errorf("replica file lanes %v, want [3 7]", got)
		}
		for i, d := range []*dcRelay{first, late} {
			if err := converged(reader, i, d); err != nil {
				return err
			}
		}
		return nil
	})
	if st := c.Status(); len(st) != 2 || st[1].DC != 7 || st[1].Snapshots == 0 {
		t.Errorf("Status() = %+v, want lanes of DCs 3 and 7, 7 with a snapshot installed", st)
	}
	if !strings.Contains(logs.String(), "dc=9") {
		t.Errorf("the relay of DC 9 (another format) was not reported in the logs:\n%s", logs.String())
	}
}

// TestConsumer_StartsBeforeItsNATSServer starts a consumer whose NATS
// server is out of reach for longer than discovery waits: New waits for
// the connection, then discovers the relay, where it used to report that
// no relay answered and give up although the connection was still trying.
// The consumer reaches the server through a proxy started only once the
// relay is up, so the relay always answers its discovery.
func TestConsumer_StartsBeforeItsNATSServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	nc, err := natslink.Connect("nats://"+addr, "consumer", nil, nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatalf("Connect(no server yet) = %v, want a reconnecting connection", err)
	}
	t.Cleanup(nc.Close)
	type result struct {
		c   *Consumer
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	const discoverFor = 100 * time.Millisecond
	go func() {
		c, err := New(ctx, Config{Conn: nc, Domain: 1, Path: filepath.Join(t.TempDir(), "replica"), DiscoverFor: discoverFor})
		done <- result{c, err}
	}()
	srv, rnc := natstest.Start(t)
	startRelay(t, rnc, 5, 1)
	time.Sleep(5 * discoverFor) // the server stays out of reach past discovery's wait
	select {
	case r := <-done:
		t.Fatalf("New while its NATS server is out of reach returned %v, want it to wait", r.err)
	default:
	}
	proxy := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()), "nats", addr,
		strings.TrimPrefix(srv.ClientURL(), "nats://"))
	if err := proxy.Start(); err != nil {
		t.Fatalf("proxy on %s: %v", addr, err)
	}
	t.Cleanup(proxy.Stop)
	r := <-done
	if r.err != nil {
		t.Fatalf("New once its server was reachable: %v", r.err)
	}
	if got := r.c.Lanes(); !slices.Equal(got, []relayproto.DCID{5}) {
		t.Errorf("lanes %v, want [5]", got)
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	_ = r.c.Run(stopped) // closes the replica file
}

// TestConsumer_LaneOfAnotherFormatSaysWhich gives a consumer a format
// (seed and bucket count) its relay does not publish: the lane never
// installs, and its fault names both formats and the flags to fix, where it
// used to say only that the format differs from the manifest.
func TestConsumer_LaneOfAnotherFormatSaysWhich(t *testing.T) {
	_, nc := natstest.Start(t)
	startRelay(t, nc, 3, 1)
	buckets, err := ckf.BucketCount(1 << 16)
	if err != nil {
		t.Fatalf("BucketCount: %v", err)
	}
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, Path: filepath.Join(t.TempDir(), "replica"), DCs: []relayproto.DCID{3},
		Seed: ckf.DefaultSeed, Buckets: buckets, RetryEvery: 10 * time.Millisecond})
	relaytest.CheckFor(t, wait, 10*time.Millisecond, func() error {
		st := c.Status()[0]
		if st.Snapshots != 0 {
			t.Fatalf("lane of another format installed %d snapshots", st.Snapshots)
		}
		if want := fmt.Sprintf("the replica's lanes are seed %#x × %d", ckf.DefaultSeed, buckets); !strings.Contains(st.LastFault, want) ||
			!strings.Contains(st.LastFault, "--expected-blocks") {
			return fmt.Errorf("lane fault %q, want it to name %q and the flags", st.LastFault, want)
		}
		return nil
	})
}

// TestConsumer_DiscoveryLeavesOutARelayOfAnotherFormat discovers three
// relays of which one was started with another --expected-blocks: the
// consumer follows the two that agree, and reports the third, where it
// used to refuse to start at all, so one misconfigured DC took routing away
// from every DC of the router site. Given a format no relay publishes, it
// refuses with ErrFormatMismatch.
func TestConsumer_DiscoveryLeavesOutARelayOfAnotherFormat(t *testing.T) {
	seed := relaytest.Seed(t, 17)
	_, nc := natstest.Start(t)
	relays := []*dcRelay{startRelay(t, nc, 3, seed), startRelaySized(t, nc, 5, seed, 1<<16), startRelay(t, nc, 7, seed)}
	path := filepath.Join(t.TempDir(), "replica")
	logs := &syncbuf.Buffer{}
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, Path: path, DiscoverFor: 300 * time.Millisecond,
		PingEvery: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if got := c.Lanes(); !slices.Equal(got, []relayproto.DCID{3, 7}) {
		t.Fatalf("lanes %v, want [3 7] (DC 5 publishes another format)", got)
	}
	if !strings.Contains(logs.String(), "dc=5") {
		t.Errorf("DC 5's relay (another format) was not reported; logs:\n%s", logs.String())
	}
	reader, err := shm.Attach(path)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer reader.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, d := range relays {
		d.feed(t, nc, 100)
	}
	relaytest.CheckFor(t, wait, 10*time.Millisecond, func() error {
		for i, d := range []*dcRelay{relays[0], relays[2]} {
			if err := converged(reader, i, d); err != nil {
				return err
			}
		}
		return nil
	})
	buckets, err := ckf.BucketCount(1 << 20)
	if err != nil {
		t.Fatalf("BucketCount: %v", err)
	}
	if _, err := New(ctx, Config{Conn: nc, Domain: 1, Path: filepath.Join(t.TempDir(), "x"), DiscoverFor: 300 * time.Millisecond,
		Seed: ckf.DefaultSeed, Buckets: buckets}); !errors.Is(err, ErrFormatMismatch) {
		t.Errorf("New(a format no relay publishes) = %v, want ErrFormatMismatch", err)
	}
}

// TestConsumer_StopsSafelyWhileLoadReportsArrive stops consumers while a
// DC's load reports stream in: a report's callback must never write the
// replica file after Run has unmapped it (seen: SIGSEGV in shm.storeLoad
// from onLoad at the end of `goindex bench relay`, the load subscription
// being dropped only after the file was closed).
func TestConsumer_StopsSafelyWhileLoadReportsArrive(t *testing.T) {
	_, nc := natstest.Start(t)
	f, err := ckf.NewFormat(ckf.DefaultSeed, 1024)
	if err != nil {
		t.Fatalf("NewFormat: %v", err)
	}
	pool := relayproto.PoolID{Domain: 1, DC: 5}
	subject := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 5}.LoadSubject()
	pub, err := natslink.Connect(nc.ConnectedUrl(), "load reports", nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer pub.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		r := relayproto.LoadReport{Identity: relayproto.ProducerIdentity{Pool: pool, Incarnation: 1, LayoutGeneration: 1,
			Format: relayproto.FormatOf(f)}, IntervalMs: 1000, LiveWorkers: 1}
		var buf []byte
		for {
			select {
			case <-stop:
				return
			default:
			}
			r.TimestampUnixNano = uint64(time.Now().UnixNano())
			buf, _ = wire.AppendFrame(buf[:0], &r)
			if pub.Publish(subject, buf) != nil {
				return
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for i := range 10 {
		path := filepath.Join(t.TempDir(), "replica")
		c, cancel, done := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{5}, Seed: ckf.DefaultSeed,
			Buckets: 1024, Path: path, RetryEvery: time.Millisecond})
		relaytest.CheckFor(t, wait, time.Millisecond, func() error {
			if c.Status()[0].Load == nil {
				return fmt.Errorf("round %d: no load report recorded yet", i)
			}
			return nil
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("round %d: Run = %v", i, err)
		}
		done <- nil // for startConsumer's cleanup
	}
}

// TestConsumer_KeepsTheCountedLayoutOfASample sends one sample in both
// layouts, as a relay does on its two load subjects, in either order: the
// record keeps the stored-blocks counter, a later sample replaces it, and
// a repeat changes nothing. Reports of DC 6 on the same subject mark how
// far the consumer has read (a subscription delivers in order).
func TestConsumer_KeepsTheCountedLayoutOfASample(t *testing.T) {
	_, nc := natstest.Start(t)
	f, err := ckf.NewFormat(ckf.DefaultSeed, 1024)
	if err != nil {
		t.Fatalf("NewFormat: %v", err)
	}
	path := filepath.Join(t.TempDir(), "replica")
	startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{5, 6}, Seed: ckf.DefaultSeed, Buckets: 1024, Path: path, RetryEvery: time.Millisecond})
	reader, err := shm.Attach(path)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer reader.Close()
	report := func(dc relayproto.DCID, at, stored uint64) relayproto.LoadReport {
		return relayproto.LoadReport{Identity: relayproto.ProducerIdentity{Pool: relayproto.PoolID{Domain: 1, DC: dc}, Incarnation: 40 + uint64(dc),
			LayoutGeneration: 1, Format: relayproto.FormatOf(f)}, TimestampUnixNano: at, LiveWorkers: 1, StoredBlocks: stored}
	}
	names := func(dc relayproto.DCID) relay.Names {
		return relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: dc}
	}
	marks := uint64(0)
	// send publishes r on its layout's subject, then a new DC 6 report on
	// the same subject, and waits until the consumer recorded that one.
	send := func(r relayproto.LoadReport) {
		t.Helper()
		subject, mark := names(5).LoadSubject(), names(6).LoadSubject()
		if r.StoredBlocks != 0 {
			subject, mark = names(5).LoadStoredSubject(), names(6).LoadStoredSubject()
		}
		marks++
		m := report(6, marks, marks)
		publish := func() {
			for _, p := range []struct {
				subject string
				r       *relayproto.LoadReport
			}{{subject, &r}, {mark, &m}} {
				b, err := wire.AppendFrame(nil, p.r)
				if err != nil {
					t.Fatalf("AppendFrame: %v", err)
				}
				if err := nc.Publish(p.subject, b); err != nil {
					t.Fatalf("publish: %v", err)
				}
			}
		}
		publish()
		sent := time.Now()
		relaytest.CheckFor(t, wait, time.Millisecond, func() error {
			if got := reader.Lane(1).Load.StoredBlocks; got != marks {
				// The consumer may not have subscribed yet when the first
				// pair went out (NATS drops what no one listens to): send
				// the pair again; each step's sample is a repeat of itself.
				if time.Since(sent) > 200*time.Millisecond {
					publish()
					sent = time.Now()
				}
				return fmt.Errorf("DC 6 record counts %d, want mark %d", got, marks)
			}
			return nil
		})
	}
	for _, st := range []struct {
		step               string
		at, stored         uint64 // the report sent
		wantAt, wantStored uint64 // DC 5's record after it
	}{
		{"plain sample", 1000, 0, 1000, 0},
		{"the same sample counted, after it", 1000, 700, 1000, 700},
		{"the plain sample again", 1000, 0, 1000, 700},
		{"a later counted sample", 2000, 900, 2000, 900},
		{"its plain layout after it", 2000, 0, 2000, 900},
		{"a later plain sample (a relay before the counter)", 3000, 0, 3000, 0},
	} {
		send(report(5, st.at, st.stored))
		if ld := reader.Lane(0).Load; uint64(ld.At.UnixNano()) != st.wantAt || ld.StoredBlocks != st.wantStored || (st.wantStored != 0 && ld.Incarnation != 45) {
			t.Errorf("%s: DC 5 record sampled at %d counts %d (incarnation %d); want %d, %d (45)",
				st.step, ld.At.UnixNano(), ld.StoredBlocks, ld.Incarnation, st.wantAt, st.wantStored)
		}
	}
}

// A consumer starts over a damaged file at its path, and when its live file
// is truncated, grown, scribbled on, removed or replaced by garbage it
// rebuilds a new generation at the path and its lanes converge into it
// again, with their RTTs and load reports carried over.
func TestConsumer_RebuildsADamagedReplicaFile(t *testing.T) {
	seed := relaytest.Seed(t, 13)
	_, nc := natstest.Start(t)
	d := startRelay(t, nc, 4, seed)
	path := filepath.Join(t.TempDir(), "replica")
	if err := os.WriteFile(path, []byte("GOIXREPL but then garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{4}, Path: path, PingEvery: 20 * time.Millisecond,
		RetryEvery: 10 * time.Millisecond})
	d.feed(t, nc, 200)
	// convergedAt waits for the file at the path (generation > after) to hold
	// the producer's words with an RTT and a load report, and returns its
	// generation.
	convergedAt := func(step string, after uint64) uint64 {
		t.Helper()
		var gen uint64
		start := time.Now()
		defer func() { t.Logf("%s: generation %d converged in %v", step, gen, time.Since(start)) }()
		relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
			r, err := shm.Attach(path)
			if err != nil {
				return fmt.Errorf("%s: %w", step, err)
			}
			defer r.Close()
			if gen = r.Info().Generation; gen <= after {
				return fmt.Errorf("%s: generation %d, want above %d", step, gen, after)
			}
			if li := r.Lane(0); li.RTTAt.IsZero() || li.Load.ReceivedAt.IsZero() {
				return fmt.Errorf("%s: lane record %+v without an RTT or load report", step, li)
			}
			return converged(r, 0, d)
		})
		return gen
	}
	gen := convergedAt("started over a damaged file", 0)
	for i, damage := range []struct {
		name string
		do   func() error
	}{
		{"truncated", func() error { return os.Truncate(path, 4096) }},
		{"grown", func() error {
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, st.Size()+1)
		}},
		{"header scribbled", func() error {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte{0xff, 0xff}, 30)
			return err
		}},
		{"removed", func() error { return os.Remove(path) }},
		{"replaced by garbage", func() error {
			if err := os.WriteFile(path+".x", make([]byte, 100), 0o644); err != nil {
				return err
			}
			return os.Rename(path+".x", path)
		}},
	} {
		if err := damage.do(); err != nil {
			t.Fatalf("%s: %v", damage.name, err)
		}
		d.feed(t, nc, 50)
		gen = convergedAt(damage.name, gen)
		if got := c.Rebuilds(); got != uint64(i+1) {
			t.Errorf("%s: Rebuilds() = %d, want %d", damage.name, got, i+1)
		}
	}
}

// Bytes written over a lane's buckets and over the ready mask behind the
// consumer's back are found by its verification: the mask is restored and
// the lane resynced from its relay's snapshot, converging back to the
// producer's words (also in readers' integrity checks), and its status
// counts both failures.
func TestConsumer_CorruptLaneIsResyncedFromASnapshot(t *testing.T) {
	seed := relaytest.Seed(t, 14)
	_, nc := natstest.Start(t)
	d := startRelay(t, nc, 6, seed)
	path := filepath.Join(t.TempDir(), "replica")
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{6}, Path: path, RetryEvery: 10 * time.Millisecond})
	d.feed(t, nc, 300)
	r, err := shm.Attach(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error { return converged(r, 0, d) })
	words := r.Table().AppendLane(nil, 0)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := r.Info()
	flipped := 0
	for b, w := range words {
		if w != 0 && flipped < 5 {
			if _, err := f.WriteAt([]byte{byte(w) ^ 0x5a}, int64(info.HeaderBytes)+64+int64(8*b*8)); err != nil {
				t.Fatal(err)
			}
			flipped++
		}
	}
	// And junk over the ready mask (no sum covers it): the lane loses its
	// bit, which the consumer restores.
	if _, err := f.WriteAt(make([]byte, 8), int64(info.HeaderBytes)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if flipped == 0 {
		t.Fatal("the lane holds no words to damage")
	}
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		st := c.Status()[0]
		if st.IntegrityFailures < 2 || st.Snapshots < 2 {
			return fmt.Errorf("status %+v: want the mask's and the words' integrity failures and a second snapshot", st)
		}
		if err := converged(r, 0, d); err != nil {
			return err
		}
		for seg := range r.Segments() {
			if bad, _ := r.VerifySegment(seg, 1); bad != 0 {
				return fmt.Errorf("segment %d still fails a reader's check", seg)
			}
		}
		return nil
	})
}

// TestConsumer_StoredSnapshotsAreReadInTurn: a lane reads its stored
// snapshot only in one of the consumer's read slots (Config.SnapshotReads)
// and gives it back after the read: while the only slot is taken no lane
// installs a snapshot, and once it is free every lane does, in turn.
func TestConsumer_StoredSnapshotsAreReadInTurn(t *testing.T) {
	seed := relaytest.Seed(t, 13)
	_, nc := natstest.Start(t)
	relays := []*dcRelay{startRelay(t, nc, 1, seed), startRelay(t, nc, 2, seed), startRelay(t, nc, 3, seed)}
	for _, d := range relays {
		d.feed(t, nc, 200)
	}
	path := filepath.Join(t.TempDir(), "replica")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := New(ctx, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{1, 2, 3}, Path: path, SnapshotReads: 1})
	if err != nil {
		t.Fatalf("consume.New: %v", err)
	}
	c.reads <- struct{}{} // the only slot, taken
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		for _, st := range c.Status() {
			if st.State != ingest.StateAwaiting.String() && st.State != ingest.StateReady.String() {
				return fmt.Errorf("lane %d is %s, want a lease", st.Lane, st.State)
			}
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // room for a read that the slot does not hold back
	reader, err := shm.Attach(path)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer reader.Close()
	for _, st := range c.Status() {
		if st.Snapshots != 0 || reader.Ready()&(1<<st.Lane) != 0 {
			t.Fatalf("lane %d installed a snapshot (%d, ready mask %#x) while no read slot was free", st.Lane, st.Snapshots, reader.Ready())
		}
	}
	<-c.reads
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		for i, d := range relays {
			if err := converged(reader, i, d); err != nil {
				return err
			}
		}
		return nil
	})
	for _, st := range c.Status() {
		if st.Snapshots != 1 || st.Resyncs != 0 {
			t.Errorf("lane %d: %d snapshots, %d resyncs; want 1 and 0", st.Lane, st.Snapshots, st.Resyncs)
		}
	}
}
