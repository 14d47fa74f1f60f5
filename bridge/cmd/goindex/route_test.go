package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/bridge/route"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/shm"
)

// routeStub is a DC frontend that answers with its name.
func routeStub(t *testing.T, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, `{"dc":%q,"hop":%q}`, name, r.Header.Get(route.HopHeader))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// routeReplica writes a replica file whose lanes are DCs 1 and 2 (explicit
// ids, as `goindex consume --dcs 1,2` names them) with fresh signals:
// DC 1 is 5 ms away, DC 2 is 100 ms away.
func routeReplica(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replica")
	n, _ := ckf.BucketCount(1 << 12)
	w, err := shm.Create(path, shm.Layout{Seed: ckf.DefaultSeed, Buckets: n, Domain: 1, ConsumerInstance: 1, DCs: []uint64{1, 2}})
	if err != nil {
		t.Fatalf("shm.Create: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	now := time.Now()
	for l, rtt := range []time.Duration{5 * time.Millisecond, 100 * time.Millisecond} {
		_ = w.Table().Install(l, make([]uint64, n))
		w.SetRTT(l, rtt, now.Add(time.Hour)) // stays fresh for the whole test
		w.SetLoad(l, &shm.Load{ReceivedAt: now.Add(time.Hour)})
	}
	return path
}

// routeURLPattern finds the base URL `goindex route` logs.
var routeURLPattern = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// startRoute runs `goindex route` with args in the background and returns
// its base URL, its outputs and a stop function that waits for its result.
func startRoute(t *testing.T, args ...string) (string, *syncBuffer, *syncBuffer, func() error) {
	t.Helper()
	stdout, stderr, cancel, done := background(runRoute, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	base := awaitLogged(t, "goindex route", routeURLPattern, stderr, done)
	return base, stdout, stderr, func() error {
		cancel()
		return <-done
	}
}

func TestRouteCommand_ServesAndPrintsOneJSONObject(t *testing.T) {
	near, far := routeStub(t, "near"), routeStub(t, "far")
	base, stdout, stderr, stop := startRoute(t, "--replica", routeReplica(t), "--dc", "1:near="+near.URL,
		"--dc", "2:far="+far.URL, "--block-size", "16", "--calibrate", "--json")
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	var rd route.Readiness
	json.NewDecoder(resp.Body).Decode(&rd)
	resp.Body.Close()
	if resp.StatusCode != 200 || !rd.Ready || len(rd.Eligible) != 2 {
		t.Errorf("/readyz = %d %+v, want ready with both DCs eligible", resp.StatusCode, rd)
	}
	resp, err = http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"m","prompt":[1,2,3]}`))
	if err != nil {
		t.Fatalf("POST /v1/completions: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(route.HeaderDC) != "near" || string(body) != `{"dc":"near","hop":"1"}` {
		t.Errorf("completion: %d dc %q body %s, want near's answer to a hop-marked request", resp.StatusCode, resp.Header.Get(route.HeaderDC), body)
	}
	if err := stop(); err != nil {
		t.Fatalf("goindex route: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(strings.NewReader(stdout.String()))
	var rep routeReport
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
	if dec.More() {
		t.Errorf("stdout has more than one JSON object: %q", stdout.String())
	}
	if rep.Command != "route" || rep.Policy != "ttft" || len(rep.DCs) != 2 || rep.DCs[1] != (routeDC{ID: 2, Name: "far", URL: far.URL}) ||
		rep.Stats.Requests != 1 || rep.Stats.Routed["near"] != 1 || rep.Stats.Routed["far"] != 0 {
		t.Errorf("report %+v, want route/ttft, DCs near and far, 1 request routed to near", rep)
	}
}

func TestRouteCommand_HumanReportAndConfigFileDCs(t *testing.T) {
	near, far := routeStub(t, "near"), routeStub(t, "far")
	cfg := filepath.Join(t.TempDir(), "route.conf")
	if err := os.WriteFile(cfg, []byte("dc 1:near="+near.URL+"\ndc 2:far="+far.URL+"\npolicy round-robin\n"), 0o644); err != nil {
		t.Fatalf("write config: %v", err)
	}
	base, stdout, stderr, stop := startRoute(t, "--config", cfg, "--replica", "")
	for range 2 {
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi"}`))
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("round-robin without a replica: status %d, want 200", resp.StatusCode)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("goindex route: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"policy round-robin: 2 completion requests", "dc near", "dc far", "routed 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("human report %q lacks %q", out, want)
		}
	}
}

func TestRouteCommand_UsageErrorsAndHelp(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--dc", "near"},
		{"--dc", "near=http://x", "--policy", "fastest"},
		{"--dc", "near=http://x", "--policy", "single-dc", "--home", "far"},
		{"--dc", "near=http://x", "--tokenizer-url", "http://t", "--tokenizer-cmd", "tok"},
		{"--dc", "near=http://x", "--tokenizer-url", "not a url"},
		{"--dc", "near=http://x", "--block-size", "-1"},
		{"--dc", "near=http://x,near=http://y"},
		{"--dc", "near=http://x", "--policy", "load-only", "--calibrate"},
	} {
		var stderr bytes.Buffer
		if err := runRoute(t.Context(), args, io.Discard, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("route %q = %v, want a usage error", args, err)
		}
	}
	var stderr bytes.Buffer
	if err := runRoute(t.Context(), []string{"--help"}, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("route --help = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: goindex route", "DCs and signals:", "Routing:", "Prompts:", "Network:", "-tokenizer-cmd", "X-Goindex-Hop", "--calibrate"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("route --help lacks %q", want)
		}
	}
}

// TestRouteCommand_FollowsRelayAndConsumer runs the whole chain: a relay for
// DC 5 takes a Dynamo KV event, the consumer puts DC 5's lane in the
// replica, and the router, given the same id (--dc 5:ams=…), sees the
// cached prefix, the RTT and the load of that lane and forwards there;
// DC 6, which no relay serves, has no lane and so no signals.
func TestRouteCommand_FollowsRelayAndConsumer(t *testing.T) {
	srv, nc := natstest.Start(t)
	_, relayErr, stopRelay, relayDone := background(runRelay, "--nats", srv.ClientURL(), "--dc", "5", "--name", "ams",
		"--component", "route", "--expected-blocks", "4096", "--heartbeat-every", "20ms", "--load-every", "50ms")
	defer func() {
		stopRelay()
		if err := <-relayDone; err != nil {
			t.Errorf("relay: %v\n%s", err, relayErr.String())
		}
	}()
	names := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 5}
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		_, err := nc.Request(names.PingSubject(), nil, 200*time.Millisecond)
		return err
	})
	tokens := make([]uint32, 64*16)
	for i := range tokens {
		tokens[i] = uint32(1000 + i)
	}
	h, _ := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: 16})
	ev := dynamo.RouterEvent{WorkerID: 1, Event: dynamo.CacheEvent{Kind: kv.Stored}}
	for i, local := range h.AppendLocal(nil, tokens) {
		ev.Event.Stored.Blocks = append(ev.Event.Stored.Blocks, dynamo.StoredBlock{BlockHash: uint64(1 + i), TokensHash: local})
	}
	msg, err := dynamo.AppendJSON(nil, &ev)
	if err != nil {
		t.Fatalf("AppendJSON: %v", err)
	}
	if err := nc.Publish(dynamo.LegacyEventSubject("dynamo", "route"), msg); err != nil {
		t.Fatalf("publish: %v", err)
	}
	path := filepath.Join(t.TempDir(), "replica")
	_, consumeErr, stopConsume, consumeDone := background(runConsume, "--nats", srv.ClientURL(), "--shm", path,
		"--dcs", "5", "--ping-every", "20ms")
	defer func() {
		stopConsume()
		if err := <-consumeDone; err != nil {
			t.Errorf("consume: %v\n%s", err, consumeErr.String())
		}
	}()
	ams, lon := routeStub(t, "ams"), routeStub(t, "lon")
	base, _, routeErr, stopRoute := startRoute(t, "--replica", path, "--replica-poll", "20ms", "--dc", "5:ams="+ams.URL,
		"--dc", "6:lon="+lon.URL, "--block-size", "16")
	body, _ := json.Marshal(map[string]any{"model": "m", "prompt": tokens})
	relaytest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if got := resp.Header.Get(route.HeaderCachedTokens); resp.StatusCode != 200 || got != "1024" || resp.Header.Get(route.HeaderDC) != "ams" {
			return fmt.Errorf("status %d dc %q cached %q, want 200 from ams with 1024 cached", resp.StatusCode, resp.Header.Get(route.HeaderDC), got)
		}
		if resp.Header.Get(route.HeaderRTTMs) == "" {
			return errors.New("no RTT header")
		}
		return nil
	})
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	var rd route.Readiness
	json.NewDecoder(resp.Body).Decode(&rd)
	resp.Body.Close()
	if !rd.Ready || len(rd.Eligible) != 1 || rd.Eligible[0] != "ams" {
		t.Errorf("/readyz = %+v, want ready with only ams eligible (lon has no lane)", rd)
	}
	if err := stopRoute(); err != nil {
		t.Errorf("route: %v\n%s", err, routeErr.String())
	}
}

// TestRouteAndConsume_ConsumerKilledRouteKeepsAnswering runs two relays, a
// consumer and a router as the commands run them. With the consumer
// stopped its replica goes stale: every request still gets 200, routed on
// the DCs' last known RTT and load and marked X-Goindex-Degraded; once a
// new consumer starts, routing is fresh again within seconds (no degraded
// header), and the router never answered anything but 200.
func TestRouteAndConsume_ConsumerKilledRouteKeepsAnswering(t *testing.T) {
	seed := relaytest.Seed(t, 41)
	srv, nc := natstest.Start(t)
	for _, dc := range []string{"1", "2"} {
		_, _, stop, _ := background(runRelay, "--nats", srv.ClientURL(), "--dc", dc, "--component", "b"+dc,
			"--expected-blocks", "4096", "--heartbeat-every", "20ms", "--load-every", "50ms", "--status-every", "0")
		defer stop()
		names := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: relayproto.DCID(dc[0] - '0')}
		relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
			_, err := nc.Request(names.PingSubject(), nil, 200*time.Millisecond)
			return err
		})
		gen := relaytest.NewGenerator(seed, 2)
		for range 50 {
			if err := nc.Publish(dynamo.EventSubject("dynamo", "b"+dc), gen.Next()); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "replica")
	consume := func() func() {
		_, _, stop, done := background(runConsume, "--nats", srv.ClientURL(), "--shm", path, "--dcs", "1,2", "--ping-every", "20ms")
		return func() { stop(); <-done }
	}
	stopConsume := consume()
	near, far := routeStub(t, "near"), routeStub(t, "far")
	base, _, _, stopRoute := startRoute(t, "--replica", path, "--dc", "1:near="+near.URL, "--dc", "2:far="+far.URL,
		"--block-size", "16", "--max-staleness", "300ms", "--replica-poll", "50ms")
	defer stopRoute()
	body := `{"model":"m","prompt":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17],"max_tokens":1}`
	var answered int
	ask := func() (degraded string) {
		t.Helper()
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST after %d answers: status %d, want 200 (degraded %q)", answered, resp.StatusCode, resp.Header.Get(route.HeaderDegraded))
		}
		answered++
		return resp.Header.Get(route.HeaderDegraded)
	}
	fresh := func(step string) {
		t.Helper()
		start := time.Now()
		relaytest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			if d := ask(); d != "" {
				return fmt.Errorf("%s: still degraded (%s)", step, d)
			}
			return nil
		})
		t.Logf("%s: fresh routing after %v", step, time.Since(start).Round(time.Millisecond))
	}
	fresh("consumer running")
	stopConsume()
	relaytest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if d := ask(); d != "consumer-stale" {
			return fmt.Errorf("consumer stopped: degraded %q, want consumer-stale", d)
		}
		return nil
	})
	for range 20 {
		if d := ask(); d != "consumer-stale" {
			t.Errorf("consumer stopped: degraded %q, want consumer-stale", d)
		}
	}
	stopConsume = consume()
	defer stopConsume()
	fresh("consumer restarted")
}
