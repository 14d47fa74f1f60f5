package route

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/internal/slowclient"
)

// released bounds every wait for the server to let go of a connection: a
// hang guard far above the timeouts under test, not a timing check.
const released = 60 * time.Second

// serveCounted runs rt.Serve on a loopback listener that counts the
// connections the server holds, until the test ends.
func serveCounted(t *testing.T, rt *Router) (*slowclient.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	cl := slowclient.Count(ln)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Serve(ctx, cl) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return cl, ln.Addr().String()
}

// awaitOpen polls until the server holds at most n connections.
func awaitOpen(t *testing.T, cl *slowclient.Listener, n int, what string) {
	t.Helper()
	for deadline := time.Now().Add(released); cl.Open() > n; {
		if time.Now().After(deadline) {
			t.Errorf("%s: the server holds %d connections after %v, want at most %d", what, cl.Open(), released, n)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServe_StalledClientsAreReleasedAtTheBodyTimeout holds 500 clients
// that stop half-way through their request (bodies well under net/http's
// 256 KiB post-handler drain, on paths that read the body and on paths
// that never do, chunked ones, and headers cut short) while normal
// requests keep flowing. Before, a body read that timed out cleared its
// deadline and the server drained the rest of the body without one, so
// every stalled body held its connection for good.
func TestServe_StalledClientsAreReleasedAtTheBodyTimeout(t *testing.T) {
	dc := newStubDC(t, "only")
	rt, err := New(Config{DCs: []DC{dc.dc(t)}, BlockSize: testBlockSize, BodyTimeout: time.Second,
		Score: score.Config{Policy: score.RoundRobin}}) // no replica: the DC needs no signals
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	cl, addr := serveCounted(t, rt)
	stalls := []slowclient.Stall{
		{Stage: slowclient.Body, Path: "/v1/completions", Sent: 1 << 10, Declared: 64 << 10},
		{Stage: slowclient.Chunked, Path: "/v1/chat/completions", Sent: 1 << 10},
		{Stage: slowclient.Body, Path: "/v1/embeddings", Sent: 100},
		{Stage: slowclient.Body, Path: "/healthz", Sent: 10},                                             // never read by its handler
		{Stage: slowclient.Body, Path: "/v1/completions", Header: []string{HopHeader + ": 1"}, Sent: 10}, // refused before reading
		{Stage: slowclient.Body, Method: "GET", Path: "/v1/models", Sent: 10},
		{Stage: slowclient.Headers, Path: "/v1/completions"},
	}
	flood, err := slowclient.Open(addr, 500, stalls...)
	if err != nil {
		t.Fatalf("open the stalled clients: %v", err)
	}
	defer flood.Close()

	// Normal requests keep flowing while the stalled clients are held.
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post("http://"+addr+"/v1/completions", "application/json", bytes.NewReader(completion([]uint32{uint32(i)}, nil)))
			if err != nil {
				errs <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("request %d: status %d, want 200", i, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("normal request beside %d stalled clients: %v", flood.Len(), err)
	}
	if err := flood.AwaitReleased(released); err != nil {
		t.Errorf("BodyTimeout 1s: %v", err)
	}
	client.CloseIdleConnections()
	awaitOpen(t, cl, 0, "after every stalled client was released")
}

// TestServe_ClientThatStopsReadingIsCutAfterTheIdleTimeout streams an
// endless answer to a client that never reads it: once the socket buffers
// fill, the router's writes must give up after IdleTimeout, release the
// client's connection and cancel the DC's request. Before, the write
// blocked for as long as the client stayed connected.
func TestServe_ClientThatStopsReadingIsCutAfterTheIdleTimeout(t *testing.T) {
	dc := newStubDC(t, "only")
	cancelled := make(chan struct{})
	dc.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := bytes.Repeat([]byte("data: {\"n\":1}\n\n"), 4096)
		for {
			if _, err := w.Write(chunk); err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
		close(cancelled)
	})
	rt, err := New(Config{DCs: []DC{dc.dc(t)}, BlockSize: testBlockSize, IdleTimeout: time.Second,
		Score: score.Config{Policy: score.RoundRobin}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	cl, addr := serveCounted(t, rt)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	body := completion([]uint32{1}, map[string]any{"stream": true})
	if _, err := fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		t.Fatalf("write request: %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(released):
		t.Fatalf("the DC's request was not cancelled %v after its client stopped reading", released)
	}
	awaitOpen(t, cl, 0, "client not reading its stream")
}

// TestServe_SlowBodyIsAnsweredRequestTimeoutAndClosed sends part of a
// body and stops: the answer is 408 naming the body timeout, then the
// connection ends. Before, the answer was 400 and the connection stayed
// open while the server drained the body without a deadline.
func TestServe_SlowBodyIsAnsweredRequestTimeoutAndClosed(t *testing.T) {
	dc := newStubDC(t, "only")
	rt, err := New(Config{DCs: []DC{dc.dc(t)}, BlockSize: testBlockSize, BodyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, addr := serveCounted(t, rt)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if _, err := c.Write(slowclient.Stall{Stage: slowclient.Body, Path: "/v1/completions", Sent: 100}.Prefix()); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(released)) // a hang guard
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "not in full within 200ms") {
		t.Errorf("stalled body: status %d body %s, want 408 naming the body timeout", resp.StatusCode, body)
	}
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the 408: read %d bytes, err %v; want the connection closed (EOF)", n, err)
	}
	if n := len(dc.requests()); n != 0 {
		t.Errorf("the DC received %d requests, want 0", n)
	}
}
