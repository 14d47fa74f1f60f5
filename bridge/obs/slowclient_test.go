package obs

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/internal/slowclient"
)

// TestServer_StalledClientsAreReleasedAtTheReadTimeout holds 500 clients
// that stop half-way through a request to the metrics endpoint (headers
// cut short, a body in part, plain and chunked, on paths whose handlers
// never read it) while scrapes keep being served, and waits for the
// server to close every one. Before, the endpoint had no read deadline
// for the body: net/http's drain of an unread body after the handler
// waited for as long as the client stayed connected.
func TestServer_StalledClientsAreReleasedAtTheReadTimeout(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	cl := slowclient.Count(ln)
	lim := serverLimits()
	lim.readHeader, lim.read = 500*time.Millisecond, time.Second
	srv := serve(cl, Handler(reg, nil), nil, lim)
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addr().String()

	flood, err := slowclient.Open(addr, 500,
		slowclient.Stall{Stage: slowclient.Body, Path: "/healthz", Sent: 1 << 10, Declared: 64 << 10},
		slowclient.Stall{Stage: slowclient.Body, Method: "GET", Path: "/metrics", Sent: 10},
		slowclient.Stall{Stage: slowclient.Chunked, Path: "/readyz", Sent: 100},
		slowclient.Stall{Stage: slowclient.Headers, Method: "GET", Path: "/metrics"})
	if err != nil {
		t.Fatalf("open the stalled clients: %v", err)
	}
	defer flood.Close()

	client := &http.Client{Transport: &http.Transport{}}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Errorf("scrape %d beside %d stalled clients: %v", i, flood.Len(), err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || len(body) == 0 {
				t.Errorf("scrape %d beside %d stalled clients: status %d, %d bytes; want 200 with metrics", i, flood.Len(), resp.StatusCode, len(body))
			}
		}()
	}
	wg.Wait()
	if err := flood.AwaitReleased(wait); err != nil {
		t.Errorf("read timeout 1s: %v", err)
	}
	client.CloseIdleConnections()
	for deadline := time.Now().Add(wait); cl.Open() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d connections %v after every stalled client was released, want 0", cl.Open(), wait)
		}
	}
}
