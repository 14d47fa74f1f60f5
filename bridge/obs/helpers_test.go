package obs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natsutil"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// wait bounds every condition a test polls for.
const wait = 30 * time.Second

func startNATS(t *testing.T) *nats.Conn {
	t.Helper()
	s, err := natsutil.Start(natsutil.ServerConfig{JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := natsutil.Connect(s.ClientURL(), "test", nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// endpoint serves cs and ready on a loopback port for the test's lifetime
// and returns its base URL.
func endpoint(t *testing.T, ready ReadyFunc, cs ...prometheus.Collector) string {
	t.Helper()
	reg, err := NewRegistry(cs...)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	srv, err := Listen("127.0.0.1:0", Handler(reg, ready), nil)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return "http://" + srv.Addr().String()
}

// families is one scrape of /metrics, parsed by the text parser.
type families map[string]*dto.MetricFamily

func scrape(base string) (families, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return fams, nil
}

func mustScrape(t *testing.T, base string) families {
	t.Helper()
	f, err := scrape(base)
	if err != nil {
		t.Fatalf("scrape %s: %v", base, err)
	}
	return f
}

// metric returns the sample of name whose labels include every k=v pair
// of labels (a counter's or gauge's value, a histogram's sample count).
func (f families) metric(name string, labels ...string) (float64, error) {
	fam, ok := f[name]
	if !ok {
		return 0, fmt.Errorf("%s not scraped", name)
	}
next:
	for _, m := range fam.GetMetric() {
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), nil
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), nil
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), nil
		}
	}
	return 0, fmt.Errorf("%s%v not scraped", name, labels)
}

// want returns nil when name{labels} equals v in a fresh scrape of base.
func want(base string, v float64, name string, labels ...string) error {
	f, err := scrape(base)
	if err != nil {
		return err
	}
	got, err := f.metric(name, labels...)
	if err != nil {
		return err
	}
	if got != v {
		return fmt.Errorf("%s%v = %g, want %g", name, labels, got, v)
	}
	return nil
}

// probe returns the status code and Readiness of GET base+path.
func probe(t *testing.T, base, path string) (int, Readiness) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var rd Readiness
	if err := json.Unmarshal(b, &rd); err != nil {
		t.Fatalf("GET %s body %q: %v", path, b, err)
	}
	return resp.StatusCode, rd
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns every JSON log line written so far.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(s.b.Bytes(), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}
