package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/obs/obstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
)

// metricsURLPattern finds the metrics endpoint a command logged, in text
// or JSON logs.
var metricsURLPattern = regexp.MustCompile(`metrics listening"?[ ,]"?url"?[=:]"?(http://[0-9.:]+)/metrics`)

// metricsBase waits for a command to log its metrics endpoint and returns
// the endpoint's base URL.
func metricsBase(t *testing.T, stderr *syncBuffer, done chan error) string {
	t.Helper()
	return awaitLogged(t, "the command", metricsURLPattern, stderr, done)
}

func readyz(base string) error {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz %s", resp.Status)
	}
	return nil
}

func TestObsFlags_RelayConsumeAndRouteServeMetricsAndLogJSON(t *testing.T) {
	seed := relaytest.Seed(t, 5)
	srv, nc := natstest.Start(t)
	_, relayErr, stopRelay, relayDone := background(runRelay, "--nats", srv.ClientURL(), "--dc", "5", "--component", "obs5",
		"--expected-blocks", "4096", "--heartbeat-every", "20ms", "--load-every", "50ms",
		"--metrics-addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug")
	defer func() {
		stopRelay()
		if err := <-relayDone; err != nil {
			t.Errorf("relay: %v\n%s", err, relayErr.String())
		}
	}()
	relayURL := metricsBase(t, relayErr, relayDone)
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error { return readyz(relayURL) })
	const events = 50
	gen := relaytest.NewGenerator(seed, 2)
	for range events {
		if err := nc.Publish(dynamo.EventSubject("dynamo", "obs5"), gen.Next()); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		return obstest.Want(relayURL, events, "goindex_relay_events_applied_total", "domain=1", "dc=5")
	})

	path := filepath.Join(t.TempDir(), "replica")
	_, consumeErr, stopConsume, consumeDone := background(runConsume, "--nats", srv.ClientURL(), "--shm", path, "--dcs", "5",
		"--ping-every", "20ms", "--metrics-addr", "127.0.0.1:0", "--log-format", "json", "--ready-lanes", "all")
	defer func() {
		stopConsume()
		if err := <-consumeDone; err != nil {
			t.Errorf("consume: %v\n%s", err, consumeErr.String())
		}
	}()
	consumeURL := metricsBase(t, consumeErr, consumeDone)
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error { return readyz(consumeURL) })
	if err := obstest.Want(consumeURL, 1, "goindex_consume_lane_ready", "lane=0", "dc=5"); err != nil {
		t.Error(err)
	}

	ams := routeStub(t, "ams")
	base, _, routeErr, stopRoute := startRoute(t, "--replica", path, "--replica-poll", "20ms", "--dc", "5:ams="+ams.URL,
		"--block-size", "16", "--metrics-addr", "127.0.0.1:0")
	routeURL := metricsBase(t, routeErr, make(chan error))
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error { return readyz(routeURL) })
	body, _ := json.Marshal(map[string]any{"model": "m", "prompt": make([]int, 40)})
	resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST /v1/completions: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /v1/completions = %s, want 200", resp.Status)
	}
	if err := obstest.Want(routeURL, 1, "goindex_route_decisions_total", "dc=ams", "policy=ttft"); err != nil {
		t.Error(err)
	}
	if err := stopRoute(); err != nil {
		t.Errorf("route: %v\n%s", err, routeErr.String())
	}

	// --log-format json: every stderr line of the relay and the consumer is
	// one JSON object, and lines about a pool or a lane name it.
	for name, out := range map[string]string{"relay": relayErr.String(), "consume": consumeErr.String()} {
		pooled := 0
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Errorf("%s stderr line %q is not JSON: %v", name, l, err)
				continue
			}
			if m[relay.PoolLogKey] != nil {
				pooled++
				if m[relay.PoolLogKey] != "1/5" {
					t.Errorf("%s line %q: pool %v, want 1/5", name, l, m[relay.PoolLogKey])
				}
			}
			if m["lane"] != nil && m[relay.PoolLogKey] == nil {
				t.Errorf("%s lane line %q has no pool", name, l)
			}
		}
		if pooled == 0 {
			t.Errorf("%s logged no line with a pool:\n%s", name, out)
		}
	}
}

func TestObsFlags_BadValuesAreUsageErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"relay --log-format xml", func() error {
			return runRelay(t.Context(), []string{"--dc", "1", "--log-format", "xml"}, &bytes.Buffer{}, &bytes.Buffer{})
		}},
		{"consume --ready-lanes most", func() error {
			return runConsume(t.Context(), []string{"--ready-lanes", "most"}, &bytes.Buffer{}, &bytes.Buffer{})
		}},
		{"route --log-level loud", func() error {
			return runRoute(t.Context(), []string{"--dc", "a=http://127.0.0.1:1", "--log-level", "loud"}, &bytes.Buffer{}, &bytes.Buffer{})
		}},
		{"route --metrics-addr bad", func() error {
			return runRoute(t.Context(), []string{"--dc", "a=http://127.0.0.1:1", "--listen", "127.0.0.1:0",
				"--metrics-addr", "127.0.0.1:99999", "--replica", ""}, &bytes.Buffer{}, &bytes.Buffer{})
		}},
	} {
		if err := c.run(); !errors.Is(err, errUsage) {
			t.Errorf("%s = %v, want a usage error", c.name, err)
		}
	}
}
