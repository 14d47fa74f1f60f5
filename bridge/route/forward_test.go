package route

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestRoute_ClientDisconnectCancelsTheDCStream cuts the client's
// connection mid-stream and checks that the DC's request context ends
// (the router cancelled its upstream request and returned, leaving no
// goroutine behind waiting on the DC).
func TestRoute_ClientDisconnectCancelsTheDCStream(t *testing.T) {
	s := setupTwoDCs(t, nil)
	sent, cancelled := make(chan struct{}), make(chan struct{})
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		close(sent)
		<-r.Context().Done() // a DC that would stream forever
		close(cancelled)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/completions",
		bytes.NewReader(completion([]uint32{1, 2, 3}, map[string]any{"stream": true})))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST stream: %v", err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); n == 0 {
		t.Fatalf("first read of the stream: %d bytes, %v", n, err)
	}
	<-sent
	cancel()                                 // the client goes away
	guard := time.NewTimer(10 * time.Second) // a hang guard, not a timing check
	defer guard.Stop()
	select {
	case <-cancelled:
	case <-guard.C:
		t.Fatal("the DC's request was not cancelled after the client disconnected")
	}
}

// TestRoute_StreamHeadersReachTheClientBeforeTheFirstEvent has the DC send
// its SSE response headers and then hold the first event (a long prefill):
// the client must get the status and the router's headers now, not when the
// first token comes.
func TestRoute_StreamHeadersReachTheClientBeforeTheFirstEvent(t *testing.T) {
	s := setupTwoDCs(t, nil)
	first := make(chan struct{})
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-first:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard, not a timing check
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/completions",
		bytes.NewReader(completion([]uint32{1, 2, 3}, map[string]any{"stream": true})))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST stream with the first event held back: %v, want the response headers at once", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "near" || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("stream headers: status %d dc %q content type %q, want 200 from near, text/event-stream",
			resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get("Content-Type"))
	}
	close(first)
	if got, err := io.ReadAll(resp.Body); err != nil || string(got) != "data: [DONE]\n\n" {
		t.Errorf("stream body %q, %v, want the held event", got, err)
	}
}
