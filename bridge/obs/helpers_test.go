package obs

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/obs/obstest"
	"github.com/goindex/goindex/internal/syncbuf"
	"github.com/prometheus/client_golang/prometheus"
)

// wait bounds every condition a test polls for.
const wait = 30 * time.Second

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

func mustScrape(t *testing.T, base string) obstest.Families {
	t.Helper()
	f, err := obstest.Scrape(base)
	if err != nil {
		t.Fatalf("scrape %s: %v", base, err)
	}
	return f
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
type syncBuffer struct{ syncbuf.Buffer }

// lines returns every JSON log line written so far.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(s.String(), "\n") {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}
