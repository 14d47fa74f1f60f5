package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type running struct {
	r    *Relay
	stop context.CancelFunc
	done chan error
}

func startRelay(t testing.TB, cfg Config) *running {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{r: r, stop: cancel, done: make(chan error, 1)}
	go func() { run.done <- r.Run(ctx) }()
	select {
	case <-r.Ready():
	case err := <-run.done:
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("relay not ready")
	}
	t.Cleanup(func() { r.Close(); cancel() })
	return run
}

func testLogger() *slog.Logger {
	if os.Getenv("GOINDEX_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

func testConfig(nc *nats.Conn) Config {
	return Config{Conn: nc, Logger: testLogger(), DC: 3, Name: "fra", HeartbeatEvery: 50 * time.Millisecond, LoadEvery: 50 * time.Millisecond,
		Pools: []PoolConfig{{Domain: 1, Namespace: "dynamo", Component: "backend", ExpectedBlocks: 4096}}}
}

// replay rebuilds a pool's words the way a cold consumer does: the stored
// snapshot, then the log's deltas after it.
func replay(ctx context.Context, nc *nats.Conn, names Names) ([]uint64, relayproto.ProducerIdentity, error) {
	js, _ := jetstream.New(nc)
	obs, err := js.ObjectStore(ctx, names.SnapshotBucket())
	if err != nil {
		return nil, relayproto.ProducerIdentity{}, err
	}
	res, err := obs.Get(ctx, SnapshotObject)
	if err != nil {
		return nil, relayproto.ProducerIdentity{}, err
	}
	info, _ := res.Info()
	body, err := io.ReadAll(res)
	res.Close()
	if err != nil {
		return nil, relayproto.ProducerIdentity{}, err
	}
	var words []uint64
	var id relayproto.ProducerIdentity
	seq := uint64(0)
	for len(body) > 0 {
		m, rest, err := wire.Decode(body)
		if err != nil {
			return nil, id, err
		}
		s := m.(*relayproto.Snapshot)
		words = append(words, s.Words...)
		id, seq, body = s.Identity, s.Sequence, rest
	}
	from, _ := strconv.ParseUint(info.Metadata[MetaLogSequence], 10, 64)
	stream, err := js.Stream(ctx, names.Stream())
	if err != nil {
		return nil, id, err
	}
	last := uint64(0)
	if st, err := stream.Info(ctx); err == nil {
		last = st.State.LastSeq
	}
	for s := from + 1; s <= last; s++ {
		raw, err := stream.GetMsg(ctx, s)
		if err != nil {
			return nil, id, err
		}
		m, _, err := wire.Decode(raw.Data)
		if err != nil {
			return nil, id, err
		}
		if d, ok := m.(*relayproto.Delta); ok && d.Identity == id && d.Sequence > seq {
			if d.Base != seq {
				return nil, id, fmt.Errorf("delta %d→%d after %d", d.Base, d.Sequence, seq)
			}
			for _, im := range d.Images {
				words[im.Bucket] = im.Word
			}
			seq = d.Sequence
		}
	}
	return words, id, nil
}

// A pool's producer is built for its ExpectedBlocks: its owner table is
// allocated for them before the first event (about 32 bytes a block), so
// ingest never stops to rehash it while the pool fills.
func TestRelay_PresizesTheProducerForExpectedBlocks(t *testing.T) {
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	const expected = 1 << 18
	cfg.Pools = append(cfg.Pools, PoolConfig{Domain: 2, Namespace: "dynamo", Component: "other", ExpectedBlocks: expected})
	run := startRelay(t, cfg)
	st, err := run.r.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	small, large := st[0].Producer, st[1].Producer
	filter := large.Buckets * 8
	if large.Canonicals != 0 || large.MemoryBytes < filter+expected*16 || small.MemoryBytes >= large.MemoryBytes/8 {
		t.Errorf("empty pools of 4,096 and %d expected blocks hold %d and %d bytes (filter %d): want the larger's owner table presized",
			expected, small.MemoryBytes, large.MemoryBytes, filter)
	}
}

func TestRelay_LogAndSnapshotReproduceProducerWords(t *testing.T) {
	seed := relaytest.Seed(t, 5)
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	run := startRelay(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := relaytest.NewGenerator(seed, 4)
	subject := dynamo.EventSubject("dynamo", "backend")
	for i := range 600 {
		if err := nc.Publish(subject, g.Next()); err != nil {
			t.Fatalf("publish event: %v", err)
		}
		if i == 300 {
			if err := run.r.Snapshot(ctx, 1); err != nil {
				t.Fatalf("Snapshot: %v", err)
			}
		}
	}
	// One event on the legacy JSON subject too.
	legacy, _ := dynamo.AppendJSON(nil, &dynamo.RouterEvent{WorkerID: 9, Event: dynamo.CacheEvent{Kind: kv.Stored,
		Stored: dynamo.StoreData{Blocks: []dynamo.StoredBlock{{BlockHash: 1, TokensHash: 77}}}}})
	if err := nc.Publish(dynamo.LegacyEventSubject("dynamo", "backend"), legacy); err != nil {
		t.Fatalf("publish legacy: %v", err)
	}
	names := Names{Prefix: DefaultPrefix, Domain: 1, DC: 3}
	relaytest.CheckFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		st, err := run.r.Status(ctx)
		if err != nil {
			return err
		}
		if got := st[0].Intake.Events; got != 601 {
			return fmt.Errorf("intake events = %d, want 601", got)
		}
		want, err := run.r.AppendWords(ctx, nil, 1)
		if err != nil {
			return err
		}
		got, id, err := replay(ctx, nc, names)
		if err != nil {
			return err
		}
		if id.Incarnation != st[0].Incarnation {
			return fmt.Errorf("snapshot incarnation %d, relay %d", id.Incarnation, st[0].Incarnation)
		}
		if !slices.Equal(got, want) {
			return errors.New("snapshot + log words differ from the producer's")
		}
		return nil
	})

	// Ping: an Info with the identity and the assets.
	reply, err := nc.Request(names.PingSubject(), nil, 5*time.Second)
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	info, err := DecodeInfo(reply.Data)
	if err != nil {
		t.Fatalf("DecodeInfo: %v", err)
	}
	if info.DC != 3 || info.Domain != 1 || info.Stream != names.Stream() || info.Buckets != 2048 || info.Name != "fra" {
		t.Errorf("ping Info = %+v, want dc 3, domain 1, stream %s, 2048 buckets", info, names.Stream())
	}

	// Load reports: on the subject and in the state bucket.
	sub, err := nc.SubscribeSync(names.LoadSubject())
	if err != nil {
		t.Fatalf("subscribe load: %v", err)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("load report: %v", err)
	}
	m, _, err := wire.Decode(msg.Data)
	if err != nil {
		t.Fatalf("decode load report: %v", err)
	}
	if lr := m.(*relayproto.LoadReport); lr.LiveWorkers != 5 || lr.ActiveBlocks == 0 || lr.Identity.Incarnation != info.Incarnation {
		t.Errorf("load report = %+v, want 5 live workers (4 generated and the legacy one), active blocks, incarnation %d", lr, info.Incarnation)
	}

	// Graceful shutdown ends the log with a drain marker at the last sequence.
	run.stop()
	if err := <-run.done; err != nil {
		t.Fatalf("Run after graceful stop: %v", err)
	}
	js, _ := jetstream.New(nc)
	stream, _ := js.Stream(ctx, names.Stream())
	last, err := stream.GetLastMsgForSubject(ctx, names.DeltaSubject())
	if err != nil {
		t.Fatalf("last log message: %v", err)
	}
	lm, _, err := wire.Decode(last.Data)
	if err != nil {
		t.Fatalf("decode last: %v", err)
	}
	dm, ok := lm.(*relayproto.DrainMarker)
	if !ok || dm.Expected == 0 || dm.Identity.Incarnation != info.Incarnation {
		t.Errorf("last log message = %v %+v, want a drain marker of incarnation %d", lm.Type(), lm, info.Incarnation)
	}

	// A restarted relay takes a newer incarnation and starts from an empty
	// snapshot.
	run2 := startRelay(t, cfg)
	st2, err := run2.r.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st2[0].Incarnation <= info.Incarnation {
		t.Errorf("restarted incarnation %d, want > %d", st2[0].Incarnation, info.Incarnation)
	}
	got, id, err := replay(ctx, nc, names)
	if err != nil || id.Incarnation != st2[0].Incarnation || slices.ContainsFunc(got, func(w uint64) bool { return w != 0 }) {
		t.Errorf("restarted relay's stored snapshot: incarnation %d (want %d), err %v, want all-zero words", id.Incarnation, st2[0].Incarnation, err)
	}
}

func TestRelay_SecondRelayOfPoolSupersedesFirst(t *testing.T) {
	seed := relaytest.Seed(t, 5)
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	first := startRelay(t, cfg)
	second := startRelay(t, cfg)
	// Both relays receive every event; whichever publishes second finds the
	// log moved. The first relay must find the second one's claim and stop.
	g := relaytest.NewGenerator(seed, 4)
	subject := dynamo.EventSubject("dynamo", "backend")
	deadline := time.After(30 * time.Second)
	for stopped := false; !stopped; {
		if err := nc.Publish(subject, g.Next()); err != nil {
			t.Fatalf("publish: %v", err)
		}
		select {
		case err := <-first.done:
			if !errors.Is(err, ErrSuperseded) {
				t.Errorf("first relay's Run = %v, want ErrSuperseded", err)
			}
			stopped = true
		case <-deadline:
			t.Fatalf("first relay kept running beside a second one")
		case <-time.After(2 * time.Millisecond):
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := second.r.Status(ctx); err != nil {
		t.Errorf("second relay Status: %v", err)
	}
}

// staticSource is a PoolConfig.Source: fixed words, and images the test
// queues for the next Drain.
type staticSource struct {
	mu      sync.Mutex
	words   []uint64
	pending []relayproto.Image
}

// staticConfig returns testConfig(nc) with its pool publishing a
// staticSource of the pool's bucket count, every word zero, instead of a
// producer.
func staticConfig(t testing.TB, nc *nats.Conn) (Config, *staticSource) {
	t.Helper()
	cfg := testConfig(nc)
	n, err := ckf.BucketCount(cfg.Pools[0].ExpectedBlocks)
	if err != nil {
		t.Fatalf("BucketCount: %v", err)
	}
	src := &staticSource{words: make([]uint64, n)}
	cfg.Pools[0].Source = src
	return cfg, src
}

// queueRandom queues k images of distinct random buckets, as a producer's
// drain would hand them over, for the next publication.
func (s *staticSource) queueRandom(rng *rand.Rand, k int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range rng.Perm(len(s.words))[:k] {
		s.pending = append(s.pending, relayproto.Image{Bucket: uint32(b), Word: rng.Uint64()})
	}
}

func (s *staticSource) AppendWords(dst []uint64) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(dst, s.words...)
}

func (s *staticSource) Drain(dst []relayproto.Image) []relayproto.Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, im := range s.pending {
		s.words[im.Bucket] = im.Word
	}
	dst = append(dst, s.pending...)
	s.pending = nil
	return dst
}

func TestRelay_SourceStandsInForTheProducer(t *testing.T) {
	seed := relaytest.Seed(t, 6)
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	n, err := ckf.BucketCount(cfg.Pools[0].ExpectedBlocks)
	if err != nil {
		t.Fatalf("BucketCount: %v", err)
	}
	rng := rand.New(rand.NewPCG(seed, 6))
	src := &staticSource{words: make([]uint64, n)}
	for i := range src.words {
		if rng.IntN(2) == 0 {
			src.words[i] = rng.Uint64()
		}
	}
	want := slices.Clone(src.words)
	cfg.Pools[0].Source = src
	run := startRelay(t, cfg)
	for _, sub := range run.r.pools[0].subs {
		if subj := sub.Subject; subj == dynamo.EventSubject("dynamo", "backend") || subj == dynamo.LegacyEventSubject("dynamo", "backend") {
			t.Errorf("a pool with a Source subscribed to KV events on %s", subj)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := Names{Prefix: DefaultPrefix, Domain: 1, DC: 3}
	got, _, err := replay(ctx, nc, names)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("replay of the stored snapshot: %d words (err %v), want the Source's %d words", len(got), err, len(want))
	}
	// A Drain's images go to the delta log like a producer's.
	src.mu.Lock()
	src.pending = []relayproto.Image{{Bucket: 5, Word: 0x1234}, {Bucket: uint32(n - 1), Word: 0x5678}}
	src.mu.Unlock()
	want[5], want[n-1] = 0x1234, 0x5678
	if err := run.r.Flush(ctx, 1); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got, _, err = replay(ctx, nc, names); err != nil || !slices.Equal(got, want) {
		t.Errorf("replay after a drained batch: err %v, equal %v; want the Source's words with its two images", err, slices.Equal(got, want))
	}
	if words, err := run.r.AppendWords(ctx, nil, 1); err != nil || !slices.Equal(words, want) {
		t.Errorf("AppendWords: err %v, equal %v; want the Source's words", err, slices.Equal(words, want))
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	_, nc := natstest.Start(t)
	good := testConfig(nc)
	cases := map[string]func(c *Config){
		"no conn":                 func(c *Config) { c.Conn = nil },
		"dc zero":                 func(c *Config) { c.DC = 0 },
		"no pools":                func(c *Config) { c.Pools = nil },
		"bad prefix":              func(c *Config) { c.Prefix = "a..b" },
		"prefix wildcard":         func(c *Config) { c.Prefix = "a.*" },
		"no component":            func(c *Config) { c.Pools[0].Component = "" },
		"namespace wildcard":      func(c *Config) { c.Pools[0].Namespace = "*" },
		"component tail wildcard": func(c *Config) { c.Pools[0].Component = ">" },
		"namespace empty token":   func(c *Config) { c.Pools[0].Namespace = "a..b" },
		"component with a space":  func(c *Config) { c.Pools[0].Component = "back end" },
		"duplicate domain": func(c *Config) {
			c.Pools = append(c.Pools, c.Pools[0])
		},
		"bad encoding": func(c *Config) { c.Encoding = 9 },
		"too many blocks": func(c *Config) {
			c.Pools[0].ExpectedBlocks = 1 << 40
		},
	}
	for name, mutate := range cases {
		c := good
		c.Pools = slices.Clone(good.Pools)
		mutate(&c)
		if _, err := New(c); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(%s) = %v, want ErrBadConfig", name, err)
		}
	}
}

// storeEnvelope is an endpoint-scope envelope of publisher pub at seq in
// which worker w stores blocks (chained from the root) or removes them.
func storeEnvelope(t testing.TB, w, pub, seq uint64, kind kv.Kind, blocks ...uint64) []byte {
	t.Helper()
	ev := dynamo.RouterEvent{WorkerID: w, Event: dynamo.CacheEvent{EventID: seq, Kind: kind}}
	if kind == kv.Removed {
		ev.Event.Removed = blocks
	}
	for _, h := range blocks {
		if kind == kv.Stored {
			ev.Event.Stored.Blocks = append(ev.Event.Stored.Blocks, dynamo.StoredBlock{BlockHash: h, TokensHash: h ^ 0x5a5a})
		}
	}
	payload, err := dynamo.AppendMsgpack(nil, &ev)
	if err != nil {
		t.Fatalf("AppendMsgpack: %v", err)
	}
	return dynamo.AppendEnvelope(nil, &dynamo.Envelope{Topic: dynamo.EventTopic, PublisherID: pub, Sequence: seq, PublishedAtMs: 1, Payload: payload})
}

// TestRelay_LoadReportsCountStoredBlocks sends stores, a transport
// duplicate, re-stores of cached blocks (by the same worker and another
// one) and a removal: the counter is every block of every store event, as
// the simulator counts a DC's inserts (re-stores included, the duplicate
// envelope and the removal not). The counted report goes on the
// load-stored subject; the load subject and the state bucket carry the
// same sample in the 12-field layout, byte for byte what the relay wrote
// before the counter existed.
func TestRelay_LoadReportsCountStoredBlocks(t *testing.T) {
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	run := startRelay(t, cfg)
	names := Names{Prefix: DefaultPrefix, Domain: 1, DC: 3}
	stored, err := nc.SubscribeSync(names.LoadStoredSubject())
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	plain, err := nc.SubscribeSync(names.LoadSubject())
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	subject := dynamo.Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"}.Subject(dynamo.EventTopic)
	first := storeEnvelope(t, 1, 9, 1, kv.Stored, 0x101, 0x102)
	for _, b := range [][]byte{
		first,
		storeEnvelope(t, 1, 9, 2, kv.Stored, 0x101, 0x102), // worker 1 stores its cached blocks again: 2
		storeEnvelope(t, 2, 8, 1, kv.Stored, 0x101),        // worker 2 stores a block worker 1 holds: 1
		storeEnvelope(t, 1, 9, 3, kv.Removed, 0x102),       // a removal counts nothing
	} {
		publishAndWait(t, nc, run.r, subject, b)
	}
	if err := nc.Publish(subject, first); err != nil { // a transport duplicate: dropped, not counted
		t.Fatalf("publish: %v", err)
	}
	relaytest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if d := poolStatus(t, run.r).Intake.Duplicates; d != 1 {
			return fmt.Errorf("duplicates = %d, want 1", d)
		}
		return nil
	})
	const want = 5
	var counted relayproto.LoadReport
	relaytest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		m, err := stored.NextMsg(time.Second)
		if err != nil {
			return err
		}
		if _, err := wire.DecodeLoadReport(&counted, m.Data); err != nil {
			return err
		}
		if counted.StoredBlocks != want {
			return fmt.Errorf("load-stored report counts %d stored blocks, want %d", counted.StoredBlocks, want)
		}
		return nil
	})
	if pl, ok := run.r.Load(1); !ok || pl.Report.StoredBlocks < want {
		t.Errorf("Relay.Load = %+v, %v; want a report counting ≥ %d stored blocks", pl.Report, ok, want)
	}
	// The plain subject carries the same sample without the counter.
	relaytest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		m, err := plain.NextMsg(time.Second)
		if err != nil {
			return err
		}
		var r relayproto.LoadReport
		if _, err := wire.DecodeLoadReport(&r, m.Data); err != nil {
			return err
		}
		if r.TimestampUnixNano < counted.TimestampUnixNano {
			return errors.New("an older sample")
		}
		if m.Data[16] != 0x9c || r.StoredBlocks != 0 {
			return fmt.Errorf("load subject frame opens a body of %#x with StoredBlocks %d, want a 12-field array (0x9c) without the counter", m.Data[16], r.StoredBlocks)
		}
		again, err := wire.AppendFrame(nil, &r)
		if err != nil || !slices.Equal(again, m.Data) {
			return fmt.Errorf("load subject frame is not the canonical 12-field encoding of its report: %v", err)
		}
		return nil
	})
	js, _ := jetstream.New(nc)
	kvb, err := js.KeyValue(context.Background(), names.StateBucket())
	if err != nil {
		t.Fatalf("state bucket: %v", err)
	}
	relaytest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		e, err := kvb.Get(context.Background(), LoadKey)
		if err != nil {
			return fmt.Errorf("last load: %w", err)
		}
		if v := e.Value(); len(v) <= 16 || v[16] != 0x9c {
			return fmt.Errorf("state bucket's last load is not a 12-field report: % x", v[:min(len(v), 17)])
		}
		return nil
	})
}

// TestRelay_StartsBeforeItsNATSServer starts a relay whose NATS server
// comes up only after longer than a pool's setup may take: the relay
// waits for the connection and then sets its pools up, where it used to
// give up after PublishTimeout ("delta stream …: context deadline
// exceeded") and exit although the connection was still trying.
func TestRelay_StartsBeforeItsNATSServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	nc, err := natslink.Connect("nats://127.0.0.1:"+strconv.Itoa(port), "relay", nil, nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatalf("Connect(no server yet) = %v, want a reconnecting connection", err)
	}
	t.Cleanup(nc.Close)
	cfg := testConfig(nc)
	cfg.PublishTimeout = 100 * time.Millisecond
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { r.Close(); cancel() })
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	time.Sleep(5 * cfg.PublishTimeout) // the server stays away past a setup's bound
	select {
	case err := <-done:
		t.Fatalf("Run before the NATS server is up returned %v, want it to wait", err)
	default:
	}
	s, err := natslink.Start(natslink.ServerConfig{Port: port, JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start nats on port %d: %v", port, err)
	}
	t.Cleanup(s.Shutdown)
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("relay not ready 30 s after its NATS server came up")
	}
}
