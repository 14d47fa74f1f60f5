package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/consume"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/obs/obstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/bridge/route"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	testDC        = 3
	testComponent = "backend-3"
	pollEvery     = 10 * time.Millisecond
)

// The whole path on one embedded NATS server: a relay fed by generated
// events, a consumer writing the replica, a router over it, each with its
// endpoint; scrapes follow the events through all three.
func TestEndpoints_MetricsFollowEventsThroughRelayConsumerAndRouter(t *testing.T) {
	seed := relaytest.Seed(t, 8)
	_, nc := natstest.Start(t)
	var logs syncBuffer
	log, err := NewLogger(&logs, LogJSON, "debug")
	if err != nil {
		t.Fatalf("NewLogger: %v", err)
	}

	// Relay: not ready before Run, ready once its pool is set up; it
	// checkpoints on its graceful stop (the periodic one is a minute off).
	ckptDir := t.TempDir()
	r, err := relay.New(relay.Config{Conn: nc, DC: testDC, HeartbeatEvery: 20 * time.Millisecond, LoadEvery: 50 * time.Millisecond,
		Pools: []relay.PoolConfig{{Domain: 1, Namespace: "dynamo", Component: testComponent, ExpectedBlocks: 4096}}, Logger: log,
		CheckpointDir: ckptDir, CheckpointEvery: time.Hour})
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	relayURL := endpoint(t, RelayReady(r), NewRelayCollector(r))
	if code, rd := probe(t, relayURL, "/readyz"); code != http.StatusServiceUnavailable || rd.Ready {
		t.Errorf("relay /readyz before Run = %d %+v, want 503 not ready", code, rd)
	}
	if code, _ := probe(t, relayURL, "/healthz"); code != http.StatusOK {
		t.Errorf("relay /healthz before Run = %d, want 200", code)
	}
	if err := obstest.Want(relayURL, 0, "goindex_relay_ready"); err != nil {
		t.Error(err)
	}
	rctx, stopRelay := context.WithCancel(context.Background())
	relayDone := make(chan error, 1)
	go func() { relayDone <- r.Run(rctx) }()
	t.Cleanup(func() { stopRelay(); <-relayDone })
	select {
	case <-r.Ready():
	case err := <-relayDone:
		t.Fatalf("relay Run: %v", err)
	case <-time.After(wait):
		t.Fatal("relay not ready")
	}
	if code, rd := probe(t, relayURL, "/readyz"); code != http.StatusOK || !rd.Ready {
		t.Errorf("relay /readyz after set-up = %d %+v, want 200 ready", code, rd)
	}

	// Consumer: not ready before its lane installs a snapshot.
	path := filepath.Join(t.TempDir(), "replica")
	cctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := consume.New(cctx, consume.Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{testDC}, Path: path,
		PingEvery: 20 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatalf("consume.New: %v", err)
	}
	ready, err := ConsumeReady(c, ReadyAllLanes)
	if err != nil {
		t.Fatalf("ConsumeReady: %v", err)
	}
	consumeURL := endpoint(t, ready, NewConsumeCollector(c))
	if code, rd := probe(t, consumeURL, "/readyz"); code != http.StatusServiceUnavailable || rd.Reason == "" {
		t.Errorf("consume /readyz before Run = %d %+v, want 503 with a reason", code, rd)
	}
	if err := obstest.Want(consumeURL, 0, "goindex_consume_lane_ready", "lane=0", "dc=3"); err != nil {
		t.Error(err)
	}

	// Router over the replica file: not ready until the lane has signals.
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"text_completion"}`)
	}))
	t.Cleanup(stub.Close)
	u, err := url.Parse(stub.URL)
	if err != nil {
		t.Fatal(err)
	}
	metrics := NewRouteMetrics()
	rt, err := route.New(route.Config{ReplicaPath: path, DCs: []route.DC{{ID: testDC, Name: "fra", URL: u}},
		BlockSize: 4, Logger: log, Observe: metrics.Observe})
	if err != nil {
		t.Fatalf("route.New: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	metrics.Attach(rt)
	routeURL := endpoint(t, RouteReady(rt), metrics)
	front := httptest.NewServer(rt)
	t.Cleanup(front.Close)
	// The router fails open: ready before any lane signal, its replica
	// (created, not yet beating) reported as the reason.
	if code, _ := probe(t, routeURL, "/readyz"); code != http.StatusOK {
		t.Errorf("route /readyz before any lane signal = %d, want 200 (failing open)", code)
	}
	if err := obstest.Want(routeURL, 1, "goindex_route_replica_state", "state=consumer-stale"); err != nil {
		t.Errorf("replica state before the consumer runs: %v", err)
	}
	if err := obstest.Want(routeURL, 0, "goindex_route_decisions_total", "dc=fra", "policy=ttft"); err != nil {
		t.Errorf("decision series before any request: %v", err)
	}

	runCtx, stopConsumer := context.WithCancel(context.Background())
	consumeDone := make(chan error, 1)
	go func() { consumeDone <- c.Run(runCtx) }()
	t.Cleanup(func() { stopConsumer(); <-consumeDone })
	relaytest.CheckFor(t, wait, pollEvery, func() error {
		if code, rd := probe(t, consumeURL, "/readyz"); code != http.StatusOK {
			return fmt.Errorf("consume /readyz %d: %s", code, rd.Reason)
		}
		return nil
	})
	for _, w := range []struct {
		v      float64
		name   string
		labels []string
	}{{1, "goindex_consume_lane_ready", []string{"lane=0", "dc=3"}},
		{1, "goindex_consume_lane_state", []string{"lane=0", "state=READY"}},
		{0, "goindex_consume_lane_state", []string{"lane=0", "state=FAULTED"}},
		{1, "goindex_consume_lanes_ready", nil},
		{1, "goindex_consume_lane_snapshots_installed_total", []string{"lane=0"}},
		{1, "goindex_consume_lane_frames_received_total", []string{"lane=0", "type=snapshot"}},
	} {
		if err := obstest.Want(consumeURL, w.v, w.name, w.labels...); err != nil {
			t.Error(err)
		}
	}

	// Events: every one sent is applied; one duplicate and one malformed
	// message are counted by reason and change nothing else.
	const events = 300
	gen := relaytest.NewGenerator(seed, 3)
	subject := dynamo.EventSubject("dynamo", testComponent)
	var first []byte
	for i := range events {
		msg := gen.Next()
		if i == 0 {
			first = msg
		}
		if err := nc.Publish(subject, msg); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	for _, msg := range [][]byte{first, []byte("not msgpack")} {
		if err := nc.Publish(subject, msg); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	pool := []string{"domain=1", "dc=3"}
	relaytest.CheckFor(t, wait, pollEvery, func() error {
		return obstest.Want(relayURL, events+2, "goindex_relay_messages_total", pool...)
	})
	if err := r.Flush(context.Background(), 1); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	f := mustScrape(t, relayURL)
	for _, w := range []struct {
		v      float64
		name   string
		labels []string
	}{{events, "goindex_relay_events_total", nil},
		{events, "goindex_relay_events_applied_total", nil},
		{1, "goindex_relay_rejected_total", []string{"reason=duplicate"}},
		{1, "goindex_relay_rejected_total", []string{"reason=malformed"}},
		{0, "goindex_relay_rejected_total", []string{"reason=producer"}},
		{0, "goindex_relay_envelope_gaps_total", nil},
		{0, "goindex_relay_checkpoints_total", []string{"result=written"}},
		{0, "goindex_relay_restored_members_total", []string{"outcome=restored"}},
		{1, "goindex_relay_pool_running", nil},
	} {
		got, err := f.Value(w.name, append(w.labels, pool...)...)
		if err != nil || got != w.v {
			t.Errorf("relay %s%v = %g (%v), want %g", w.name, w.labels, got, err, w.v)
		}
	}
	if got, err := f.Value("goindex_relay_ready"); err != nil || got != 1 {
		t.Errorf("relay goindex_relay_ready = %g (%v), want 1", got, err)
	}
	st, err := r.Status(context.Background())
	if err != nil || len(st) != 1 {
		t.Fatalf("relay Status = %v, %v", st, err)
	}
	if got, _ := f.Value("goindex_relay_tracked_blocks", pool...); got != float64(st[0].Producer.TrackedBlocks) || got == 0 {
		t.Errorf("relay tracked blocks scraped %g, status %d, want equal and non-zero", got, st[0].Producer.TrackedBlocks)
	}
	if got, _ := f.Value("goindex_relay_load_factor", pool...); got <= 0 || got > 1 {
		t.Errorf("relay load factor %g, want in (0, 1]", got)
	}

	// The consumer applies every delta frame the relay published: its
	// received delta frames and bytes equal the relay's published ones
	// once its installed sequence reaches the relay's.
	relaytest.CheckFor(t, wait, pollEvery, func() error {
		rf, err := obstest.Scrape(relayURL)
		if err != nil {
			return err
		}
		cf, err := obstest.Scrape(consumeURL)
		if err != nil {
			return err
		}
		for _, pair := range [][2]string{{"goindex_relay_sequence", "goindex_consume_lane_installed_sequence"},
			{"goindex_relay_frames_published_total", "goindex_consume_lane_frames_received_total"},
			{"goindex_relay_published_bytes_total", "goindex_consume_lane_received_bytes_total"}} {
			rv, err := rf.Value(pair[0], "type=delta")
			if pair[0] == "goindex_relay_sequence" {
				rv, err = rf.Value(pair[0])
			}
			if err != nil {
				return err
			}
			cv, err := cf.Value(pair[1], "lane=0", "type=delta")
			if pair[0] == "goindex_relay_sequence" {
				cv, err = cf.Value(pair[1], "lane=0")
			}
			if err != nil {
				return err
			}
			if rv == 0 || rv != cv {
				return fmt.Errorf("relay %s = %g, consumer %s = %g; want equal and non-zero", pair[0], rv, pair[1], cv)
			}
		}
		return nil
	})
	cf := mustScrape(t, consumeURL)
	deltas, _ := cf.Value("goindex_consume_lane_deltas_applied_total", "lane=0")
	frames, _ := cf.Value("goindex_consume_lane_frames_received_total", "lane=0", "type=delta")
	if deltas != frames {
		t.Errorf("consumer deltas applied %g, delta frames received %g; want equal", deltas, frames)
	}
	for _, name := range []string{"goindex_consume_lane_faults_total", "goindex_consume_lane_resyncs_total", "goindex_consume_lane_sequence_lag"} {
		if got, err := cf.Value(name, "lane=0"); err != nil || got != 0 {
			t.Errorf("consumer %s = %g (%v), want 0", name, got, err)
		}
	}
	relaytest.CheckFor(t, wait, pollEvery, func() error {
		f, err := obstest.Scrape(consumeURL)
		if err != nil {
			return err
		}
		if v, err := f.Value("goindex_consume_lane_rtt_seconds", "lane=0"); err != nil || v <= 0 {
			return fmt.Errorf("lane rtt %g (%v), want > 0", v, err)
		}
		if v, err := f.Value("goindex_consume_lane_frames_received_total", "lane=0", "type=load-report"); err != nil || v == 0 {
			return fmt.Errorf("load reports received %g (%v), want > 0", v, err)
		}
		return nil
	})

	// Router: ready once the replica is attached and the DC has fresh
	// load and RTT; each served request is one ttft decision with its
	// three cost parts.
	relaytest.CheckFor(t, wait, pollEvery, func() error {
		if _, err := rt.Refresh(); err != nil {
			return err
		}
		if code, rd := probe(t, routeURL, "/readyz"); code != http.StatusOK {
			return fmt.Errorf("route /readyz %d: %s", code, rd.Reason)
		}
		return nil
	})
	const requests = 5
	prompt := 0
	for i := range requests {
		tokens := make([]int, 8+4*i)
		prompt += len(tokens)
		body, _ := json.Marshal(map[string]any{"model": "m", "prompt": tokens})
		resp, err := http.Post(front.URL+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST /v1/completions: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/completions = %s, want 200", resp.Status)
		}
	}
	rf := mustScrape(t, routeURL)
	for _, w := range []struct {
		v      float64
		name   string
		labels []string
	}{{requests, "goindex_route_decisions_total", []string{"dc=fra", "policy=ttft"}},
		{0, "goindex_route_decisions_total", []string{"dc=fra", "policy=load-only"}},
		{requests, "goindex_route_requests_total", nil},
		{float64(prompt), "goindex_route_prompt_tokens_total", []string{"dc=fra"}},
		{requests, "goindex_route_cost_part_ms", []string{"dc=fra", "part=rtt"}},
		{requests, "goindex_route_cost_part_ms", []string{"dc=fra", "part=prefill"}},
		{requests, "goindex_route_cost_part_ms", []string{"dc=fra", "part=queue"}},
		{1, "goindex_route_replica_attached", nil},
		{1, "goindex_route_dc_lane_ready", []string{"dc=fra"}},
		{1, "goindex_route_dc_eligible", []string{"dc=fra"}},
		{1, "goindex_route_eligible_dcs", nil},
		{0, "goindex_route_failures_total", []string{"reason=unroutable"}},
	} {
		if got, err := rf.Value(w.name, w.labels...); err != nil || got != w.v {
			t.Errorf("route %s%v = %g (%v), want %g", w.name, w.labels, got, err, w.v)
		}
	}
	if v, err := rf.Value("goindex_route_dc_rtt_seconds", "dc=fra"); err != nil || v <= 0 {
		t.Errorf("route dc rtt = %g (%v), want > 0", v, err)
	}
	if v, err := rf.Value("goindex_route_replica_age_seconds"); err != nil || v < 0 || v > 10 {
		t.Errorf("route replica age = %g (%v), want within [0, 10] s of the consumer's heartbeat", v, err)
	}

	// Logs: relay pool lines carry the pool and incarnation, lane lines
	// carry lane, pool, and inside a subscription the lease.
	var sawPoolUp, sawInstall bool
	for _, l := range logs.lines(t) {
		switch l["msg"] {
		case "relay pool up":
			sawPoolUp = true
			if l[relay.PoolLogKey] != "1/3" || l["incarnation"] == nil {
				t.Errorf("relay pool up line %v: want pool 1/3 and an incarnation", l)
			}
		case "snapshot installed":
			sawInstall = true
			if l["lane"] != 0.0 || l[relay.PoolLogKey] != "1/3" || l["lease"] == nil || l["incarnation"] == nil {
				t.Errorf("snapshot installed line %v: want lane 0, pool 1/3, a lease and an incarnation", l)
			}
		}
	}
	if !sawPoolUp || !sawInstall {
		t.Errorf("logs lack the relay pool up (%v) or snapshot installed (%v) line", sawPoolUp, sawInstall)
	}

	// A stopped relay is not ready, and its pool reports not running.
	stopRelay()
	if err := <-relayDone; err != nil {
		t.Fatalf("relay Run: %v", err)
	}
	relayDone <- nil
	if code, rd := probe(t, relayURL, "/readyz"); code != http.StatusServiceUnavailable || rd.Reason == "" {
		t.Errorf("relay /readyz after stop = %d %+v, want 503 with a reason", code, rd)
	}
	if err := obstest.Want(relayURL, 0, "goindex_relay_pool_running", pool...); err != nil {
		t.Error(err)
	}
	// The stop wrote the pool's checkpoint: counted, and its size is the
	// file's.
	if err := obstest.Want(relayURL, 1, "goindex_relay_checkpoints_total", append([]string{"result=written"}, pool...)...); err != nil {
		t.Error(err)
	}
	files, err := filepath.Glob(filepath.Join(ckptDir, "*checkpoint"))
	if err != nil || len(files) != 1 {
		t.Fatalf("checkpoint files in %s = %v (%v), want the pool's one", ckptDir, files, err)
	}
	fi, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := obstest.Want(relayURL, float64(fi.Size()), "goindex_relay_checkpoint_bytes", pool...); err != nil {
		t.Error(err)
	}
}

func TestNewLogger_FormatsAndLevels(t *testing.T) {
	var b bytes.Buffer
	log, err := NewLogger(&b, LogJSON, "warn")
	if err != nil {
		t.Fatalf("NewLogger(json, warn): %v", err)
	}
	log.Info("hidden")
	log.Warn("shown", relay.PoolLogKey, relay.PoolLogValue(2, 7))
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil || m["msg"] != "shown" || m["pool"] != "2/7" {
		t.Errorf("json warn logger wrote %q (%v), want one line with msg shown and pool 2/7", b.String(), err)
	}
	b.Reset()
	if log, err = NewLogger(&b, LogText, "debug"); err != nil {
		t.Fatalf("NewLogger(text, debug): %v", err)
	}
	log.Debug("dbg", "lane", 1)
	if got := b.String(); !bytes.Contains([]byte(got), []byte("msg=dbg lane=1")) {
		t.Errorf("text debug logger wrote %q, want msg=dbg lane=1", got)
	}
	for _, bad := range [][2]string{{"xml", "info"}, {LogJSON, "loud"}, {"", "info"}} {
		if _, err := NewLogger(&b, bad[0], bad[1]); !errors.Is(err, ErrBadConfig) {
			t.Errorf("NewLogger(%q, %q) = %v, want ErrBadConfig", bad[0], bad[1], err)
		}
	}
}

func TestConsumeReady_RefusesAnUnknownPolicy(t *testing.T) {
	if _, err := ConsumeReady(nil, "most"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("ConsumeReady(most) = %v, want ErrBadConfig", err)
	}
}

func TestListen_RefusesABadAddress(t *testing.T) {
	if _, err := Listen("127.0.0.1:99999", Handler(nil, nil), nil); !errors.Is(err, ErrBadConfig) {
		t.Errorf("Listen(port 99999) = %v, want ErrBadConfig", err)
	}
}

func TestServer_CloseTwiceAndHealthz(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", Handler(prometheusRegistry(t), func() error { return fmt.Errorf("x: %w", ErrNotReady) }), nil)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	base := "http://" + srv.Addr().String()
	if code, _ := probe(t, base, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, rd := probe(t, base, "/readyz"); code != http.StatusServiceUnavailable || rd.Reason != "x: not ready" {
		t.Errorf("/readyz = %d %+v, want 503 with reason %q", code, rd, "x: not ready")
	}
	if _, err := obstest.Scrape(base); err != nil {
		t.Errorf("scrape with only runtime collectors: %v", err)
	}
	for i := range 2 {
		if err := srv.Close(); err != nil {
			t.Errorf("Close #%d = %v, want nil", i+1, err)
		}
	}
}

func prometheusRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg, err := NewRegistry()
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	return reg
}
