package route

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/shm"
)

// TestRoute_ClientDisconnectCancelsTheDCStream cuts the client's
// connection mid-stream and checks that the DC's request context ends
// (the router cancelled its upstream request) and that the router's
// handler returned (no goroutine left behind on the stream).
func TestRoute_ClientDisconnectCancelsTheDCStream(t *testing.T) {
	s := setupTwoDCs(t, nil)
	sent, cancelled, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		close(sent)
		<-r.Context().Done() // a DC that would stream forever
		close(cancelled)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned) // runs through the handler's abort panic too
		s.rt.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/completions",
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
	for what, ch := range map[string]chan struct{}{"the DC's request was not cancelled": cancelled, "the router's handler did not return": returned} {
		select {
		case <-ch:
		case <-guard.C:
			t.Fatalf("%s after the client disconnected", what)
		}
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

// TestRoute_DCTurningTheRequestAwayFallsBackToTheNext has the chosen DC
// answer the statuses that say it did not take the request on (its
// gateway's 502, Dynamo's 503 with no usable worker and 529 with every
// worker busy): the next DC serves it and X-Goindex-Fallback names the
// skipped one. Other errors (500, 504, 429) are relayed, not retried, and
// the last DC's answer is relayed whatever it is.
func TestRoute_DCTurningTheRequestAwayFallsBackToTheNext(t *testing.T) {
	for _, c := range []struct {
		status int
		retry  bool
	}{{502, true}, {503, true}, {529, true}, {500, false}, {504, false}, {429, false}} {
		s := setupTwoDCs(t, nil) // no cache anywhere: near wins on RTT
		s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			fmt.Fprintf(w, `{"error":{"message":"near says %d"}}`, c.status)
		})
		resp, body := s.post(completion([]uint32{1, 2, 3}, nil), nil)
		st := s.rt.Stats()
		if c.retry {
			if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "far" || resp.Header.Get(HeaderFallback) != "near" ||
				len(s.far.requests()) != 1 || st.Fallbacks != 1 || st.Routed["far"] != 1 {
				t.Errorf("near %d: status %d dc %q fallback %q body %s, far got %d requests, %+v; want 200 from far after skipping near",
					c.status, resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get(HeaderFallback), body, len(s.far.requests()), st)
			}
			continue
		}
		if resp.StatusCode != c.status || resp.Header.Get(HeaderDC) != "near" || len(s.far.requests()) != 0 || st.Fallbacks != 0 {
			t.Errorf("near %d: status %d dc %q body %s, far got %d requests; want near's %d relayed and no retry",
				c.status, resp.StatusCode, resp.Header.Get(HeaderDC), body, len(s.far.requests()), c.status)
		}
	}
	// Both busy: the last DC's answer is the client's, naming who was skipped.
	s := setupTwoDCs(t, nil)
	busy := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"All workers busy"}}`)
	}
	s.near.setHandler(busy)
	s.far.setHandler(busy)
	resp, body := s.post(completion([]uint32{1, 2, 3}, nil), nil)
	if resp.StatusCode != 503 || string(body) != `{"error":{"message":"All workers busy"}}` || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get(HeaderDC) != "far" || resp.Header.Get(HeaderFallback) != "near" {
		t.Errorf("both 503: status %d dc %q fallback %q body %s, want far's 503 verbatim after skipping near",
			resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get(HeaderFallback), body)
	}
}

// TestRoute_FailedTLSHandshakeFallsBackToTheNextDC points near at an https
// frontend the router cannot complete a handshake with (a certificate it
// does not trust; a listener that never answers the handshake): nothing
// was sent, so like a refused connect the next DC serves the request.
func TestRoute_FailedTLSHandshakeFallsBackToTheNextDC(t *testing.T) {
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("untrusted DC got %s %s, want no request", r.Method, r.URL)
	}))
	t.Cleanup(untrusted.Close)
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the router's refused handshakes
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() { // accepts and holds connections without a word
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	for _, c := range []struct{ name, url string }{
		{"untrusted certificate", untrusted.URL},
		{"silent handshake", "https://" + silent.Addr().String()},
	} {
		s := setupTwoDCs(t, func(cfg *Config) {
			cfg.DCs[0].URL = mustURL(t, c.url)
			cfg.ConnectTimeout = 200 * time.Millisecond // the silent handshake's end, not an assertion
		})
		resp, body := s.post(completion([]uint32{1, 2, 3}, nil), nil) // no cache anywhere: near wins on RTT
		if st := s.rt.Stats(); resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "far" || resp.Header.Get(HeaderFallback) != "near" || st.Fallbacks != 1 {
			t.Errorf("%s on near: status %d dc %q fallback %q body %s, %+v; want 200 from far after skipping near",
				c.name, resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get(HeaderFallback), body, st)
		}
	}
}

// TestRoute_HTTPSDCServesWithConfiguredRoots forwards to an https frontend
// whose certificate Config.TLS trusts: the handshake holds and the DC
// answers over HTTP/1.1.
func TestRoute_HTTPSDCServesWithConfiguredRoots(t *testing.T) {
	dc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"proto":%q,"tls":%v}`, r.Proto, r.TLS != nil)
	}))
	t.Cleanup(dc.Close)
	roots := x509.NewCertPool()
	roots.AddCert(dc.Certificate())
	s := setupTwoDCs(t, func(cfg *Config) {
		cfg.DCs[0].URL = mustURL(t, dc.URL)
		cfg.TLS = &tls.Config{RootCAs: roots}
	})
	resp, body := s.post(completion([]uint32{1, 2, 3}, nil), nil)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "near" || string(body) != `{"proto":"HTTP/1.1","tls":true}` {
		t.Errorf("https near: status %d dc %q fallback %q body %s, want near's answer over TLS and HTTP/1.1",
			resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get(HeaderFallback), body)
	}
}

// TestRoute_OtherOpenAIEndpointsAreForwardedLoadOnly sends what an OpenAI
// client sends besides completions (embeddings, the responses API) and
// Dynamo's health path: the /v1/ requests reach a DC unchanged, chosen by
// load (their body is not a prompt the router reads), with the fallback
// and loop rules of completions; /health answers like /healthz; anything
// else is still 404.
func TestRoute_OtherOpenAIEndpointsAreForwardedLoadOnly(t *testing.T) {
	s := setupTwoDCs(t, nil)
	s.fx.signals(1, 100*time.Millisecond, 0, shm.Load{QueuedPrefillTokens: 64_000, ActiveDecodeBlocks: 900}) // far busy: load-only picks near
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","path":%q}`, r.URL.RequestURI())
	})
	body := []byte(`{"model":"e","input":["a","b"]}`)
	resp, got := post(t, s.srv, "/v1/embeddings", body, nil)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "near" || resp.Header.Get(HeaderPolicy) != "load-only" ||
		string(got) != `{"object":"list","path":"/v1/embeddings"}` {
		t.Errorf("POST /v1/embeddings: status %d dc %q policy %q body %s, want near's answer, routed load-only",
			resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get(HeaderPolicy), got)
	}
	if r := s.near.requests(); len(r) != 1 || r[0].Method != "POST" || r[0].Path != "/v1/embeddings" || !bytes.Equal(r[0].Body, body) || r[0].Header.Get(HopHeader) != "1" {
		t.Errorf("near received %+v, want the embeddings request unchanged with the hop header", r)
	}
	// The chosen DC refusing the connection falls back, as for completions.
	s.near.srv.Close()
	resp, got = post(t, s.srv, "/v1/responses", []byte(`{"model":"m","input":"hi"}`), nil)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "far" || resp.Header.Get(HeaderFallback) != "near" {
		t.Errorf("POST /v1/responses with near down: status %d dc %q fallback %q body %s, want far after skipping near",
			resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get(HeaderFallback), got)
	}
	if resp, got := post(t, s.srv, "/v1/embeddings", body, http.Header{HopHeader: {"1"}}); resp.StatusCode != http.StatusLoopDetected {
		t.Errorf("hopped /v1/embeddings: status %d body %s, want 508", resp.StatusCode, got)
	}
	if st := s.rt.Stats(); st.Other != 2 || st.Requests != 0 || st.Loops != 1 {
		t.Errorf("Stats() = %+v, want 2 other requests forwarded, no completion, 1 loop", st)
	}
	for path, want := range map[string]int{"/health": 200, "/embeddings": 404, "/v2/models": 404} {
		resp, err := http.Get(s.url + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: status %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// TestRoute_ForwardsThePathAsTheClientEncodedIt asks for a model whose id
// has a slash, escaped in the path as OpenAI clients escape it, behind a
// DC URL with a prefix: the DC must see the same escaped path under its
// prefix (and the query), not a path with one more segment.
func TestRoute_ForwardsThePathAsTheClientEncodedIt(t *testing.T) {
	s := setupTwoDCs(t, func(c *Config) {
		for i := range c.DCs {
			c.DCs[i].URL = mustURL(t, c.DCs[i].URL.String()+"/dc%20a")
		}
	})
	resp, err := http.Get(s.url + "/v1/models/meta-llama%2FLlama-3.1-8B?x=1")
	if err != nil {
		t.Fatalf("GET /v1/models/meta-llama%%2FLlama-3.1-8B: %v", err)
	}
	resp.Body.Close()
	r := append(s.near.requests(), s.far.requests()...) // load-only: either may serve
	if resp.StatusCode != 200 || len(r) != 1 || r[0].Path != "/dc%20a/v1/models/meta-llama%2FLlama-3.1-8B?x=1" {
		t.Errorf("GET an escaped model path: status %d, the DCs received %+v, want one /dc%%20a/v1/models/meta-llama%%2FLlama-3.1-8B?x=1", resp.StatusCode, r)
	}
}

// TestRoute_HopByHopHeadersStayOnTheirHop sends hop-by-hop headers (named
// by RFC 9110 and by Connection) both ways: neither side sees the other
// hop's, end-to-end headers pass, and X-Forwarded-For gains the client.
func TestRoute_HopByHopHeadersStayOnTheirHop(t *testing.T) {
	s := setupTwoDCs(t, nil)
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Dc-Private")
		w.Header().Set("X-Dc-Private", "1")
		w.Header().Set("Proxy-Authenticate", "Basic")
		w.Header().Set("X-Dc-Public", "1")
		io.WriteString(w, "{}")
	})
	resp, _ := s.post(completion([]uint32{1, 2, 3}, nil), http.Header{
		"Connection": {"X-Client-Private"}, "X-Client-Private": {"1"}, "Proxy-Authorization": {"Basic eA=="},
		"Keep-Alive": {"timeout=5"}, "X-Forwarded-For": {"203.0.113.7"}, "Authorization": {"Bearer sk-1"}})
	got := s.near.requests()
	if len(got) != 1 {
		t.Fatalf("near received %d requests, want 1", len(got))
	}
	h := got[0].Header
	for _, k := range []string{"X-Client-Private", "Proxy-Authorization", "Keep-Alive"} {
		if v := h.Values(k); len(v) != 0 {
			t.Errorf("DC got hop-by-hop %s: %q, want none", k, v)
		}
	}
	if v, ok := h["Idempotency-Key"]; ok {
		t.Errorf("DC got Idempotency-Key %q, which the client never sent", v)
	}
	if h.Get("Authorization") != "Bearer sk-1" || h.Get("X-Forwarded-For") != "203.0.113.7, 127.0.0.1" {
		t.Errorf("DC got Authorization %q X-Forwarded-For %q, want the client's and 203.0.113.7, 127.0.0.1",
			h.Get("Authorization"), h.Get("X-Forwarded-For"))
	}
	for _, k := range []string{"X-Dc-Private", "Proxy-Authenticate"} {
		if v := resp.Header.Values(k); len(v) != 0 {
			t.Errorf("client got hop-by-hop %s: %q, want none", k, v)
		}
	}
	if resp.Header.Get("X-Dc-Public") != "1" {
		t.Errorf("client got X-Dc-Public %q, want the DC's 1", resp.Header.Get("X-Dc-Public"))
	}
}

// tokenizeFunc is a Tokenizer from a function.
type tokenizeFunc func(ctx context.Context, in *TokenizeInput) ([]uint32, error)

func (f tokenizeFunc) Tokenize(ctx context.Context, in *TokenizeInput) ([]uint32, error) {
	return f(ctx, in)
}

// TestRoute_TextOverThePromptLimitIsRefused has the tokenizer turn a text
// prompt into more tokens than MaxPromptTokens: the request is refused
// with 413 as a token-id prompt of that length is (ErrTooManyTokens), not
// routed load-only, whether the tokenizer enforces the limit itself (the
// HTTP and command hooks) or not.
func TestRoute_TextOverThePromptLimitIsRefused(t *testing.T) {
	for _, enforces := range []bool{true, false} {
		tok := tokenizeFunc(func(ctx context.Context, in *TokenizeInput) ([]uint32, error) {
			if enforces {
				return nil, fmt.Errorf("%w: 101 tokens, limit 100", ErrTooManyTokens)
			}
			return make([]uint32, 101), nil
		})
		s := setupTwoDCs(t, func(c *Config) { c.MaxPromptTokens, c.Tokenizer = 100, tok })
		resp, body := s.post([]byte(`{"model":"m","prompt":"a long text"}`), nil)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(body, []byte("too many tokens")) {
			t.Errorf("tokenizer enforcing the limit %v: status %d body %s, want 413 too many tokens", enforces, resp.StatusCode, body)
		}
		if n := len(s.near.requests()) + len(s.far.requests()); n != 0 {
			t.Errorf("tokenizer enforcing the limit %v: the DCs received %d requests, want 0", enforces, n)
		}
	}
}

// TestRoute_IdleConnectionClosedByTheDCIsRetriedOnAFreshOne plays the
// keep-alive race every proxy meets: the DC (uvicorn, node: 5 s idle
// timeouts) closes an idle connection just as the router sends the next
// request on it, so the request gets no answer at all. The router must
// send it again on a fresh connection rather than answer 502.
func TestRoute_IdleConnectionClosedByTheDCIsRetriedOnAFreshOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	served := make(chan int, 4) // requests answered, by connection number
	go func() {
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 1; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if n == 1 && i == 2 {
						return // the idle timeout fired as the request came in: no answer
					}
					served <- n
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
				}
			}()
		}
	}()
	s := setupTwoDCs(t, func(c *Config) { c.DCs[0].URL = mustURL(t, "http://"+ln.Addr().String()) })
	for i := 1; i <= 2; i++ {
		resp, body := s.post(completion([]uint32{1, 2, 3}, nil), nil) // no cache anywhere: near wins on RTT
		if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "near" || string(body) != "{}" {
			t.Errorf("request %d: status %d dc %q body %s, want near's 200", i, resp.StatusCode, resp.Header.Get(HeaderDC), body)
		}
	}
	if n := len(s.far.requests()); n != 0 {
		t.Errorf("far received %d requests, want 0 (near's answer on a fresh connection)", n)
	}
}

// serveTracked serves s's router on a new server whose handler closes
// returned when the router's handler is done (its abort panic included).
func serveTracked(t *testing.T, s *twoDCs) (url string, returned <-chan struct{}) {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		s.rt.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, done
}

// waitFor fails t unless ch closes within a hang guard (not a timing check).
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s", what)
	}
}

// TestRoute_SilentDCStreamIsCutAfterTheIdleTimeout has the DC send one
// event and then nothing: past IdleTimeout the router must cancel the DC's
// request and abort the client's connection (a cut stream must not read as
// complete), and count it in Stats.Cut.
func TestRoute_SilentDCStreamIsCutAfterTheIdleTimeout(t *testing.T) {
	s := setupTwoDCs(t, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond })
	cancelled := make(chan struct{})
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // silent until the router gives up
		close(cancelled)
	})
	url, returned := serveTracked(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions",
		bytes.NewReader(completion([]uint32{1, 2, 3}, map[string]any{"stream": true})))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST stream: %v", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("stream read to %q with err %v (guard %v), want the connection aborted", got, err, ctx.Err())
	}
	if !strings.Contains(string(got), `data: {"n":1}`) {
		t.Errorf("client got %q before the cut, want the first event", got)
	}
	waitFor(t, cancelled, "the DC's request was not cancelled after the idle timeout")
	waitFor(t, returned, "the router's handler did not return")
	if st := s.rt.Stats(); st.Cut != 1 || st.UpstreamErrors != 0 || st.ClientGone != 0 {
		t.Errorf("stats cut %d upstream errors %d client gone %d, want 1 0 0", st.Cut, st.UpstreamErrors, st.ClientGone)
	}
}

// TestRoute_ClientLeavingBeforeTheAnswerIsCountedApart has the client give
// up while the DC is still queueing its request: the DC's request is
// cancelled and the router counts a departed client, not an upstream error.
func TestRoute_ClientLeavingBeforeTheAnswerIsCountedApart(t *testing.T) {
	s := setupTwoDCs(t, nil)
	arrived, cancelled := make(chan struct{}), make(chan struct{})
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done() // a long queue
		close(cancelled)
	})
	url, returned := serveTracked(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-arrived
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions",
		bytes.NewReader(completion([]uint32{1, 2, 3}, nil)))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("POST answered %d after the client cancelled", resp.StatusCode)
	}
	waitFor(t, cancelled, "the DC's request was not cancelled when the client left")
	waitFor(t, returned, "the router's handler did not return")
	if st := s.rt.Stats(); st.ClientGone != 1 || st.UpstreamErrors != 0 || st.Cut != 0 || st.Fallbacks != 0 {
		t.Errorf("stats client gone %d upstream errors %d cut %d fallbacks %d, want 1 0 0 0",
			st.ClientGone, st.UpstreamErrors, st.Cut, st.Fallbacks)
	}
}

// TestRoute_StreamsTeachTheDCsCalibration: under ttft, a relayed stream
// feeds its DC's calibration once (the first event's delay against the
// estimate, the rest of the stream as the KV residence); a response that
// is not a stream teaches nothing.
func TestRoute_StreamsTeachTheDCsCalibration(t *testing.T) {
	s := setupTwoDCs(t, nil)
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(5 * time.Millisecond) // the decode: a residence that is not zero
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	resp, body := s.post(completion([]uint32{1, 2, 3}, map[string]any{"stream": true}), nil)
	near := s.rt.cal[0]
	if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "near" || near.Observations() != 1 || !(near.ResidenceMs() > 0) {
		t.Fatalf("stream from %q (%d, %s): near's calibration has %d TTFTs, residence %v ms; want 1 and > 0",
			resp.Header.Get(HeaderDC), resp.StatusCode, body, near.Observations(), near.ResidenceMs())
	}
	// The hold: at least the residence the router saw between the events
	// (the estimated prefill of 3 tokens adds a little; how much of the
	// handler's 5 ms the router sees depends on scheduling, so the bound is
	// the observation, not the sleep); far saw nothing of its own and
	// reads the fleet's mean, near's (near's own estimate shrinks toward
	// that same mean, so the two agree up to rounding).
	res := near.ResidenceMs()
	if hold := s.rt.hold.HoldMs(0); !(hold >= res*(1-1e-9)) || math.Abs(s.rt.hold.HoldMs(1)-hold) > 1e-9*hold {
		t.Fatalf("after a stream with a %v ms residence near's hold = %v ms, far's %v; want ≥ the residence and equal", res, hold, s.rt.hold.HoldMs(1))
	}
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[]}`)
	})
	s.post(completion([]uint32{1, 2, 3}, nil), nil)
	if got := near.Observations(); got != 1 {
		t.Errorf("after a non-streamed answer near's calibration has %d TTFTs, want still 1", got)
	}
}
