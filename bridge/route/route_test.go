package route

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/syncbuf"
)

// twoDCs is the standard setup: "near" (RTT 5 ms, lane 0) and "far" (RTT
// 100 ms, lane 1), both idle with fresh signals, and a router over them.
type twoDCs struct {
	near, far *stubDC
	fx        *fixture
	rt        *Router
	srv       *httptest.Server
	url       string
	post      func(body []byte, h http.Header) (*http.Response, []byte)
}

func setupTwoDCs(t *testing.T, mutate func(*Config)) *twoDCs {
	t.Helper()
	s := &twoDCs{near: newStubDC(t, "near"), far: newStubDC(t, "far")}
	s.fx = newFixture(t, DCID("near"), DCID("far"))
	s.fx.signals(0, 5*time.Millisecond, 0, shm.Load{})
	s.fx.signals(1, 100*time.Millisecond, 0, shm.Load{})
	cfg := Config{ReplicaPath: s.fx.path, DCs: []DC{s.near.dc(t), s.far.dc(t)}}
	if mutate != nil {
		mutate(&cfg)
	}
	rt, srv := newRouter(t, cfg)
	s.rt, s.srv, s.url = rt, srv, srv.URL
	s.post = func(body []byte, h http.Header) (*http.Response, []byte) {
		return post(t, srv, "/v1/completions", body, h)
	}
	return s
}

func TestRoute_TTFTPicksCacheHolderOnlyWhenPrefillSavingBeatsRTT(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	s := setupTwoDCs(t, nil)
	long := randomTokens(rng, 4096) // 256 blocks: 204.8 ms of prefill at 20 tokens/ms
	short := randomTokens(rng, 512) // 32 blocks: 25.6 ms
	s.fx.cache(1, hasher(t, "", ""), long)
	s.fx.cache(1, hasher(t, "", ""), short)

	cases := []struct {
		name     string
		tokens   []uint32
		wantDC   string
		want     map[string]string
		wantStub *stubDC
	}{
		// far: 100 + 0 + 0 = 100 ms; near: 5 + 0 + 204.8 = 209.8 ms.
		{"long prompt cached far", long, "far", map[string]string{HeaderCostMs: "100.000", HeaderRTTMs: "100.000",
			HeaderQueueMs: "0.000", HeaderPrefillMs: "0.000", HeaderCachedTokens: "4096", HeaderPolicy: "ttft"}, s.far},
		// near: 5 + 25.6 = 30.6 ms beats far's 100 ms although far holds it all.
		{"short prompt cached far", short, "near", map[string]string{HeaderCostMs: "30.600", HeaderRTTMs: "5.000",
			HeaderQueueMs: "0.000", HeaderPrefillMs: "25.600", HeaderCachedTokens: "0", HeaderPolicy: "ttft"}, s.near},
	}
	for _, c := range cases {
		before := len(c.wantStub.requests())
		body := completion(c.tokens, nil)
		resp, got := s.post(body, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderDC) != c.wantDC {
			t.Errorf("%s: status %d, %s %q, want 200 from %s (body %s)", c.name, resp.StatusCode, HeaderDC, resp.Header.Get(HeaderDC), c.wantDC, got)
			continue
		}
		for h, v := range c.want {
			if g := resp.Header.Get(h); g != v {
				t.Errorf("%s: %s = %q, want %q", c.name, h, g, v)
			}
		}
		if want := `{"object":"text_completion","dc":"` + c.wantDC + `"}`; string(got) != want || resp.Header.Get("X-Stub") != c.wantDC {
			t.Errorf("%s: relayed body %s (X-Stub %q), want the DC's %s", c.name, got, resp.Header.Get("X-Stub"), want)
		}
		reqs := c.wantStub.requests()
		if len(reqs) != before+1 {
			t.Errorf("%s: dc %s received %d requests, want %d", c.name, c.wantDC, len(reqs), before+1)
			continue
		}
		r := reqs[len(reqs)-1]
		if r.Method != http.MethodPost || r.Path != "/v1/completions" || !bytes.Equal(r.Body, body) || r.Header.Get(HopHeader) != "1" {
			t.Errorf("%s: dc got %s %s hop %q body equal %v, want POST /v1/completions hop 1 and the client's body",
				c.name, r.Method, r.Path, r.Header.Get(HopHeader), bytes.Equal(r.Body, body))
		}
	}
	if st := s.rt.Stats(); st.Routed["far"] != 1 || st.Routed["near"] != 1 || st.Requests != 2 {
		t.Errorf("Stats() = %+v, want 1 request routed to each DC", st)
	}
}

func TestRoute_StreamsSSEEventsAsTheyArrive(t *testing.T) {
	s := setupTwoDCs(t, nil)
	next := make(chan struct{})
	handler := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select { // the client must see event 1 before event 2 exists
		case <-next:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: {\"n\":2}\n\n")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	s.near.setHandler(handler)
	s.far.setHandler(handler)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard, not a timing check
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/completions",
		bytes.NewReader(completion([]uint32{1, 2, 3}, map[string]any{"stream": true})))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST stream: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream: status %d content type %q, want 200 text/event-stream", resp.StatusCode, ct)
	}
	br := bufio.NewReader(resp.Body)
	readEvent := func() string {
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("read event: %v (so far %q)", err, ev.String())
			}
			if line == "\n" {
				return ev.String()
			}
			ev.WriteString(line)
		}
	}
	if ev := readEvent(); ev != "data: {\"n\":1}\n" {
		t.Errorf("first event %q, want data: {\"n\":1}", ev)
	}
	close(next)
	if ev := readEvent(); ev != "data: {\"n\":2}\n" {
		t.Errorf("second event %q, want data: {\"n\":2}", ev)
	}
	if ev := readEvent(); ev != "data: [DONE]\n" {
		t.Errorf("last event %q, want data: [DONE]", ev)
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Errorf("after [DONE]: %q, want end of stream", rest)
	}
}

func TestRoute_FallsBackToNextDCWhenChosenRefusesConnection(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 2))
	s := setupTwoDCs(t, func(c *Config) { c.DCs[1].URL = mustURL(t, closedURL(t)) }) // far's port is closed
	long := randomTokens(rng, 4096)
	s.fx.cache(1, hasher(t, "", ""), long) // far would win
	resp, body := s.post(completion(long, nil), nil)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "near" || resp.Header.Get(HeaderFallback) != "far" {
		t.Fatalf("refused far: status %d dc %q fallback %q (body %s), want 200 from near after skipping far",
			resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get(HeaderFallback), body)
	}
	// The headers describe the DC that served: near's own cost.
	if got := resp.Header.Get(HeaderCostMs); got != "209.800" {
		t.Errorf("fallback %s = %q, want near's 209.800", HeaderCostMs, got)
	}
	if st := s.rt.Stats(); st.Fallbacks != 1 || st.Routed["near"] != 1 {
		t.Errorf("Stats() = %+v, want 1 fallback and 1 routed to near", st)
	}
}

func TestRoute_AllDCsRefusingIsBadGateway(t *testing.T) {
	s := setupTwoDCs(t, func(c *Config) {
		c.DCs[0].URL = mustURL(t, closedURL(t))
		c.DCs[1].URL = mustURL(t, closedURL(t))
	})
	resp, body := s.post(completion([]uint32{1, 2, 3}, nil), nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "no DC reachable") {
		t.Errorf("every DC closed: status %d body %s, want 502 naming that no DC is reachable", resp.StatusCode, body)
	}
}

func TestRoute_HTTPErrorFromDCIsRelayedNotRetried(t *testing.T) {
	s := setupTwoDCs(t, nil)
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"busy"}`)
	})
	resp, body := s.post(completion([]uint32{1, 2, 3}, nil), nil) // no cache anywhere: near wins on RTT
	if resp.StatusCode != http.StatusTooManyRequests || string(body) != `{"error":"busy"}` || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("near 429: status %d body %s Retry-After %q, want the DC's 429 verbatim", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if n := len(s.far.requests()); n != 0 {
		t.Errorf("far received %d requests after near's HTTP error, want 0 (no retry on HTTP errors)", n)
	}
}

func TestRoute_RefusesRequestThatAlreadyHopped(t *testing.T) {
	s := setupTwoDCs(t, nil)
	resp, body := s.post(completion([]uint32{1, 2, 3}, nil), http.Header{HopHeader: {"1"}})
	if resp.StatusCode != http.StatusLoopDetected || !strings.Contains(string(body), "loop prevention") {
		t.Errorf("hopped request: status %d body %s, want 508 saying loop prevention", resp.StatusCode, body)
	}
	if n := len(s.near.requests()) + len(s.far.requests()); n != 0 {
		t.Errorf("DCs received %d requests, want 0", n)
	}
	req, _ := http.NewRequest(http.MethodGet, s.url+"/v1/models", nil)
	req.Header.Set(HopHeader, "1")
	mr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /v1/models: %v", err)
	}
	mr.Body.Close()
	if mr.StatusCode != http.StatusLoopDetected {
		t.Errorf("hopped /v1/models: status %d, want 508", mr.StatusCode)
	}
	if st := s.rt.Stats(); st.Loops != 2 {
		t.Errorf("Stats().Loops = %d, want 2", st.Loops)
	}
}

func TestRoute_StaleSignalsExcludeDC(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 3))
	long := randomTokens(rng, 4096)
	for _, c := range []struct {
		name          string
		rttAge, ldAge time.Duration
	}{{"stale load", 0, time.Minute}, {"stale rtt", time.Minute, 0}} {
		s := setupTwoDCs(t, func(c *Config) { c.MaxStaleness = 10 * time.Second })
		s.fx.cache(1, hasher(t, "", ""), long)
		s.fx.w.SetRTT(1, 100*time.Millisecond, time.Now().Add(-c.rttAge))
		s.fx.w.SetLoad(1, &shm.Load{ReceivedAt: time.Now().Add(-c.ldAge)})
		resp, body := s.post(completion(long, nil), nil)
		if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "near" {
			t.Errorf("%s on far: status %d dc %q (body %s), want near: far holds the cache but lacks a fresh signal",
				c.name, resp.StatusCode, resp.Header.Get(HeaderDC), body)
		}
		// Both stale: nothing is eligible. Failing open, the request goes
		// on the last known RTT and load (near: 5 ms against 100 ms; the
		// cache no longer counts), says so, and the router stays ready.
		s.fx.w.SetLoad(0, &shm.Load{ReceivedAt: time.Now().Add(-time.Minute)})
		s.fx.w.SetLoad(1, &shm.Load{ReceivedAt: time.Now().Add(-time.Minute)})
		resp, body = s.post(completion(long, nil), nil)
		if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "near" || resp.Header.Get(HeaderDegraded) != "signals-stale" ||
			resp.Header.Get(HeaderCachedTokens) != "0" {
			t.Errorf("%s, both loads stale: status %d dc %q degraded %q cached %q (body %s), want 200 from near, signals-stale, 0 cached",
				c.name, resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get(HeaderDegraded), resp.Header.Get(HeaderCachedTokens), body)
		}
		if rd := s.rt.Ready(); !rd.Ready || len(rd.Eligible) != 0 || rd.Degraded != "signals-stale" {
			t.Errorf("%s, both loads stale: Ready() = %+v, want ready, degraded signals-stale, no eligible DC", c.name, rd)
		}
		if got := s.rt.Stats().Degraded["signals-stale"]; got != 1 {
			t.Errorf("%s: Stats().Degraded[signals-stale] = %d, want 1", c.name, got)
		}
		// --on-stale=fail keeps the old answer: 503, and not ready.
		closed := setupTwoDCs(t, func(c *Config) { c.MaxStaleness = 10 * time.Second; c.FailClosed = true })
		closed.fx.w.SetLoad(0, &shm.Load{ReceivedAt: time.Now().Add(-time.Minute)})
		closed.fx.w.SetLoad(1, &shm.Load{ReceivedAt: time.Now().Add(-time.Minute)})
		resp, body = closed.post(completion(long, nil), nil)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "no eligible DC") {
			t.Errorf("%s, both loads stale, FailClosed: status %d body %s, want 503 no eligible DC", c.name, resp.StatusCode, body)
		}
		if rd := closed.rt.Ready(); rd.Ready || len(rd.Eligible) != 0 || !strings.Contains(rd.Reason, "fresh signals") {
			t.Errorf("%s, both loads stale, FailClosed: Ready() = %+v, want not ready with no eligible DC", c.name, rd)
		}
	}
}

func TestRoute_BadRequestsGetClearClientErrors(t *testing.T) {
	s := setupTwoDCs(t, func(c *Config) { c.MaxBodyBytes = 4096; c.MaxPromptTokens = 100 })
	big := bytes.Repeat([]byte("x"), 5000)
	cases := []struct {
		name, path, method string
		body               []byte
		status             int
		msg                string
	}{
		{"bad json", "/v1/completions", "POST", []byte(`{"prompt": [1,2`), 400, "malformed request"},
		{"not an object", "/v1/completions", "POST", []byte(`[1,2,3]`), 400, "must be a JSON object"},
		{"prompt of the wrong type", "/v1/completions", "POST", []byte(`{"prompt": 7}`), 400, "prompt must be a string"},
		{"negative token id", "/v1/completions", "POST", []byte(`{"prompt": [1,-2]}`), 400, "prompt must be"},
		{"null token id", "/v1/completions", "POST", []byte(`{"prompt": [1,null]}`), 400, "null among the token ids"},
		{"messages not a list", "/v1/chat/completions", "POST", []byte(`{"messages": {"role":"user"}}`), 400, "messages must be an array"},
		{"bad token_data", "/v1/chat/completions", "POST", []byte(`{"messages": [], "nvext": {"token_data": "abc"}}`), 400, "nvext.token_data must be"},
		{"oversize body", "/v1/completions", "POST", append(append([]byte(`{"prompt":"`), big...), '"', '}'), 413, "request body too large"},
		{"too many tokens", "/v1/completions", "POST", completion(make([]uint32, 101), nil), 413, "101 prompt tokens, limit 100"},
		{"wrong method", "/v1/completions", "GET", nil, 405, "method not allowed"},
		{"unknown path", "/embeddings", "POST", []byte(`{}`), 404, "no such endpoint"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, s.url+c.path, bytes.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != c.status || e.Error.Code != c.status || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %s %s = %d %s, want %d with an OpenAI error saying %q", c.name, c.method, c.path, resp.StatusCode, b, c.status, c.msg)
		}
	}
	if n := len(s.near.requests()) + len(s.far.requests()); n != 0 {
		t.Errorf("DCs received %d bad requests, want 0", n)
	}
}

func TestRoute_TextPromptWithoutTokenizerRoutesLoadOnly(t *testing.T) {
	s := setupTwoDCs(t, nil)
	s.fx.signals(0, 5*time.Millisecond, 0, shm.Load{QueuedPrefillTokens: 64_000, ActiveDecodeBlocks: 900})
	s.fx.signals(1, 100*time.Millisecond, 0, shm.Load{ActiveDecodeBlocks: 10})
	resp, body := s.post([]byte(`{"model":"m","prompt":"hello there"}`), nil)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderPolicy) != "load-only" || resp.Header.Get(HeaderDC) != "far" {
		t.Errorf("text without tokenizer: status %d policy %q dc %q (body %s), want load-only to the idle far",
			resp.StatusCode, resp.Header.Get(HeaderPolicy), resp.Header.Get(HeaderDC), body)
	}
	if resp.Header.Get(HeaderCostMs) != "" {
		t.Errorf("load-only answer carries %s %q, want none (not a ttft cost)", HeaderCostMs, resp.Header.Get(HeaderCostMs))
	}
	if st := s.rt.Stats(); st.LoadOnly != 1 {
		t.Errorf("Stats().LoadOnly = %d, want 1", st.LoadOnly)
	}
}

// tokenizerStub is an HTTP tokenizer that maps known texts to tokens and
// records the requests it saw.
type tokenizerStub struct {
	texts map[string][]uint32
	seen  chan TokenizeInput
}

func (ts *tokenizerStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in TokenizeInput
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	ts.seen <- in
	key := string(in.Messages)
	if in.Prompt != nil {
		key = *in.Prompt
	}
	ids, ok := ts.texts[key]
	if !ok {
		http.Error(w, "unknown text", 422)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"count": len(ids), "max_model_len": 8192, "tokens": ids})
}

func TestRoute_TokenizerURLMakesTextPromptsCacheAware(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 4))
	long := randomTokens(rng, 4096)
	messages := `[{"role":"user","content":"long chat"}]`
	ts := &tokenizerStub{texts: map[string][]uint32{"long text": long, messages: long}, seen: make(chan TokenizeInput, 8)}
	tsrv := httptest.NewServer(ts)
	t.Cleanup(tsrv.Close)
	tok, err := NewHTTPTokenizer(tsrv.URL+"/tokenize", 0, 0)
	if err != nil {
		t.Fatalf("NewHTTPTokenizer: %v", err)
	}
	s := setupTwoDCs(t, func(c *Config) { c.Tokenizer = tok })
	s.fx.cache(1, hasher(t, "", ""), long)

	resp, body := s.post([]byte(`{"model":"m","prompt":"long text"}`), nil)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "far" || resp.Header.Get(HeaderCachedTokens) != "4096" {
		t.Errorf("tokenized completion: status %d dc %q cached %q (body %s), want far with 4096 cached",
			resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get(HeaderCachedTokens), body)
	}
	if in := <-ts.seen; in.Model != "m" || in.Prompt == nil || *in.Prompt != "long text" || in.Messages != nil {
		t.Errorf("tokenizer got %+v, want model m and prompt \"long text\"", in)
	}
	resp, body = post(t, s.srv, "/v1/chat/completions", []byte(`{"model":"m","messages":`+messages+`}`), nil)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "far" {
		t.Errorf("tokenized chat: status %d dc %q (body %s), want far", resp.StatusCode, resp.Header.Get(HeaderDC), body)
	}
	if in := <-ts.seen; string(in.Messages) != messages || in.AddGenerationPrompt == nil || !*in.AddGenerationPrompt || in.Prompt != nil {
		t.Errorf("tokenizer got %+v, want the messages verbatim with add_generation_prompt", in)
	}
	// A text the tokenizer refuses is routed load-only, not failed.
	resp, body = s.post([]byte(`{"model":"m","prompt":"unknown"}`), nil)
	<-ts.seen
	if resp.StatusCode != 200 || resp.Header.Get(HeaderPolicy) != "load-only" {
		t.Errorf("tokenizer error: status %d policy %q (body %s), want 200 load-only", resp.StatusCode, resp.Header.Get(HeaderPolicy), body)
	}
	if st := s.rt.Stats(); st.TokenizerErrors != 1 {
		t.Errorf("Stats().TokenizerErrors = %d, want 1", st.TokenizerErrors)
	}
}

func TestRoute_TokenIDExtensionsOfChatAreHashed(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 5))
	long := randomTokens(rng, 4096)
	s := setupTwoDCs(t, nil)
	s.fx.cache(1, hasher(t, "", ""), long)
	ids, _ := json.Marshal(long)
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"x"}],"nvext":{"token_data":` + string(ids) + `}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"prompt_token_ids":` + string(ids) + `}`,
	} {
		resp, got := post(t, s.srv, "/v1/chat/completions", []byte(body), nil)
		if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "far" || resp.Header.Get(HeaderCachedTokens) != "4096" {
			t.Errorf("chat with %.60s…: status %d dc %q cached %q (%s), want far with 4096 cached", body, resp.StatusCode,
				resp.Header.Get(HeaderDC), resp.Header.Get(HeaderCachedTokens), got)
		}
	}
}

func TestRoute_LoRAAndNamespaceSaltTheHashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 6))
	long := randomTokens(rng, 4096)
	s := setupTwoDCs(t, func(c *Config) { c.LoRAHeader, c.NamespaceHeader = "X-Lora", "X-Tenant" })
	s.fx.cache(1, hasher(t, "adapter-a", "tenant-a"), long) // far holds the salted blocks only
	cases := []struct {
		name   string
		extra  map[string]any
		header http.Header
		wantDC string
	}{
		{"unsalted request misses", nil, nil, "near"},
		{"lora alone misses", map[string]any{"lora_name": "adapter-a"}, nil, "near"},
		{"body salts hit", map[string]any{"lora_name": "adapter-a", "cache_salt": "tenant-a"}, nil, "far"},
		{"header salts hit", nil, http.Header{"X-Lora": {"adapter-a"}, "X-Tenant": {"tenant-a"}}, "far"},
		{"body wins over header", map[string]any{"cache_salt": "tenant-b"}, http.Header{"X-Lora": {"adapter-a"}, "X-Tenant": {"tenant-a"}}, "near"},
	}
	for _, c := range cases {
		resp, body := s.post(completion(long, c.extra), c.header)
		if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != c.wantDC {
			t.Errorf("%s: status %d dc %q (body %s), want %s", c.name, resp.StatusCode, resp.Header.Get(HeaderDC), body, c.wantDC)
		}
	}
}

func TestRoute_ModelsPassThroughToAHealthyDC(t *testing.T) {
	s := setupTwoDCs(t, func(c *Config) { c.DCs[0].URL = mustURL(t, closedURL(t)) })
	s.far.setHandler(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"m"}]}`)
	})
	s.fx.w.SetLoad(1, &shm.Load{}) // far: no fresh signal, so tried after the healthy near
	s.fx.w.SetRTT(1, 0, time.Time{})
	resp, err := http.Get(s.url + "/v1/models")
	if err != nil {
		t.Fatalf("GET /v1/models: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"object":"list","data":[{"id":"m"}]}` || resp.Header.Get(HeaderDC) != "far" {
		t.Errorf("/v1/models with near closed: status %d dc %q body %s, want far's list", resp.StatusCode, resp.Header.Get(HeaderDC), body)
	}
	if r := s.far.requests(); len(r) != 1 || r[0].Method != "GET" || r[0].Path != "/v1/models" || r[0].Header.Get(HopHeader) != "1" {
		t.Errorf("far received %+v, want one GET /v1/models with the hop header", r)
	}
	if st := s.rt.Stats(); st.Models != 1 || st.Fallbacks != 1 {
		t.Errorf("Stats() = %+v, want 1 models request after 1 fallback", st)
	}
}

func TestRoute_HealthAndReadinessFollowTheReplica(t *testing.T) {
	for _, failClosed := range []bool{false, true} {
		near := newStubDC(t, "near")
		fx := &fixture{t: t, path: t.TempDir() + "/replica"} // no file yet
		rt, srv := newRouter(t, Config{ReplicaPath: fx.path, DCs: []DC{near.dc(t)}, FailClosed: failClosed})
		get := func(path string) (int, Readiness) {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			defer resp.Body.Close()
			var rd Readiness
			json.NewDecoder(resp.Body).Decode(&rd)
			return resp.StatusCode, rd
		}
		// Failing open the router is ready whatever the replica, and says
		// how degraded; failing closed it is not ready without signals.
		notReady, mode := 200, "open"
		if failClosed {
			notReady, mode = 503, "closed"
		}
		if code, _ := get("/healthz"); code != 200 {
			t.Errorf("%s: /healthz = %d, want 200", mode, code)
		}
		if code, rd := get("/readyz"); code != notReady || rd.Ready != !failClosed || !strings.Contains(rd.Reason, "not attached") ||
			rd.Degraded != "replica-missing" {
			t.Errorf("%s: /readyz without a replica = %d %+v, want %d not attached, replica-missing", mode, code, rd, notReady)
		}
		fx.create(DCID("near"))
		if code, rd := get("/readyz"); code != notReady || rd.Generation != 0 {
			t.Errorf("%s: /readyz before Refresh = %d %+v, want %d with no generation", mode, code, rd, notReady)
		}
		if changed, err := rt.Refresh(); !changed || err != nil {
			t.Fatalf("Refresh() = %v, %v, want attached", changed, err)
		}
		if code, rd := get("/readyz"); code != notReady || rd.Generation != 1 || !strings.Contains(rd.Reason, "fresh signals") ||
			rd.Degraded != "signals-stale" {
			t.Errorf("%s: /readyz attached without signals = %d %+v, want %d for lack of fresh signals", mode, code, rd, notReady)
		}
		fx.signals(0, time.Millisecond, 0, shm.Load{})
		if code, rd := get("/readyz"); code != 200 || !rd.Ready || len(rd.Eligible) != 1 || rd.Eligible[0] != "near" || rd.Degraded != "" {
			t.Errorf("%s: /readyz with signals = %d %+v, want 200 with near eligible, not degraded", mode, code, rd)
		}
	}
}

func TestRoute_FollowsANewReplicaGeneration(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 7))
	long := randomTokens(rng, 4096)
	s := setupTwoDCs(t, nil)
	s.fx.cache(1, hasher(t, "", ""), long)
	if resp, _ := s.post(completion(long, nil), nil); resp.Header.Get(HeaderDC) != "far" {
		t.Fatalf("generation 1: dc %q, want far", resp.Header.Get(HeaderDC))
	}
	// The consumer restarts with the lanes swapped and only near caching.
	s.fx.create(DCID("far"), DCID("near"))
	s.fx.signals(0, 100*time.Millisecond, 0, shm.Load{})
	s.fx.signals(1, 5*time.Millisecond, 0, shm.Load{})
	s.fx.cache(1, hasher(t, "", ""), long[:2048])
	if changed, err := s.rt.Refresh(); !changed || err != nil {
		t.Fatalf("Refresh() after a new generation = %v, %v, want changed", changed, err)
	}
	resp, body := s.post(completion(long, nil), nil)
	if resp.Header.Get(HeaderDC) != "near" || resp.Header.Get(HeaderCachedTokens) != "2048" {
		t.Errorf("generation 2: dc %q cached %q (%s), want near with 2048 cached", resp.Header.Get(HeaderDC), resp.Header.Get(HeaderCachedTokens), body)
	}
	if changed, err := s.rt.Refresh(); changed || err != nil {
		t.Errorf("second Refresh() = %v, %v, want unchanged", changed, err)
	}
}

func TestRoute_ConcurrentRequestsWhileReplicaAndSignalsChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 8))
	workers, perWorker := 8, 40
	if testing.Short() {
		perWorker = 10
	}
	prompts := make([][]uint32, 16)
	for i := range prompts {
		prompts[i] = randomTokens(rng, 256+rng.IntN(4096))
	}
	s := setupTwoDCs(t, nil)
	for _, p := range prompts[:8] {
		s.fx.cache(1, hasher(t, "", ""), p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		// The consumer side: fresh signals, new blocks, and two new
		// generations of the file while the router serves.
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			s.fx.signals(i%2, time.Duration(1+i%50)*time.Millisecond, 0, shm.Load{QueuedPrefillTokens: uint64(i % 7 * 100)})
			if i == 50 || i == 150 {
				s.fx.create(DCID("near"), DCID("far"))
				s.fx.signals(0, 5*time.Millisecond, 0, shm.Load{})
				s.fx.signals(1, 100*time.Millisecond, 0, shm.Load{})
			}
			if _, err := s.rt.Refresh(); err != nil {
				t.Errorf("Refresh: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range perWorker {
				p := prompts[(w*perWorker+i)%len(prompts)]
				resp, err := http.Post(s.url+"/v1/completions", "application/json", bytes.NewReader(completion(p, nil)))
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if dc := resp.Header.Get(HeaderDC); resp.StatusCode != 200 || (dc != "near" && dc != "far") {
					errs <- fmt.Errorf("worker %d request %d: status %d dc %q", w, i, resp.StatusCode, dc)
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	cancel()
	<-done
	total := workers * perWorker
	if got := len(s.near.requests()) + len(s.far.requests()); got != total {
		t.Errorf("DCs received %d requests, want %d", got, total)
	}
	if st := s.rt.Stats(); st.Routed["near"]+st.Routed["far"] != uint64(total) {
		t.Errorf("Stats() = %+v, want %d routed", st, total)
	}
}

func TestRoute_SingleDCAndRoundRobinNeedNoSignals(t *testing.T) {
	a, b := newStubDC(t, "a"), newStubDC(t, "b")
	dcs := []DC{a.dc(t), b.dc(t)}
	_, srv := newRouter(t, Config{DCs: dcs, Score: score.Config{Policy: score.RoundRobin}})
	var got []string
	for range 4 {
		resp, body := post(t, srv, "/v1/completions", completion([]uint32{1}, nil), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("round-robin without a replica: status %d (%s), want 200", resp.StatusCode, body)
		}
		got = append(got, resp.Header.Get(HeaderDC))
	}
	if strings.Join(got, ",") != "a,b,a,b" {
		t.Errorf("round-robin order %v, want a,b,a,b", got)
	}
	_, srv = newRouter(t, Config{DCs: dcs, Score: score.Config{Policy: score.SingleDC, Home: dcs[1].ID}})
	if resp, body := post(t, srv, "/v1/completions", completion([]uint32{1}, nil), nil); resp.Header.Get(HeaderDC) != "b" {
		t.Errorf("single-dc home b: dc %q (%s), want b", resp.Header.Get(HeaderDC), body)
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	u := mustURL(t, "http://127.0.0.1:1")
	good := DC{ID: 1, Name: "a", URL: u}
	cases := map[string]Config{
		"no DCs":               {},
		"duplicate id":         {DCs: []DC{good, {ID: 1, Name: "b", URL: u}}},
		"duplicate name":       {DCs: []DC{good, {ID: 2, Name: "a", URL: u}}},
		"zero id":              {DCs: []DC{{Name: "a", URL: u}}},
		"no url":               {DCs: []DC{{ID: 1, Name: "a"}}},
		"huge block size":      {DCs: []DC{good}, BlockSize: 1 << 20},
		"negative staleness":   {DCs: []DC{good}, MaxStaleness: -time.Second},
		"single-dc w/o home":   {DCs: []DC{good}, Score: score.Config{Policy: score.SingleDC, Home: 9}},
		"negative rate":        {DCs: []DC{good}, Score: score.Config{PrefillTokensPerMs: -1}},
		"negative temperature": {DCs: []DC{good}, Temperature: -1},
	}
	for name, cfg := range cases {
		if _, err := New(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(%s) = %v, want ErrBadConfig", name, err)
		}
	}
}

func TestRoute_StreamCutByTheDCAbortsTheClient(t *testing.T) {
	s := setupTwoDCs(t, nil)
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the DC dies mid-stream
	})
	resp, err := http.Post(s.url+"/v1/completions", "application/json", bytes.NewReader(completion([]uint32{1}, map[string]any{"stream": true})))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("cut stream read cleanly (%q), want an error so the cut is visible", got)
	}
	if !strings.HasPrefix(string(got), "data: {\"n\":1}\n\n") {
		t.Errorf("cut stream delivered %q, want the event sent before the cut", got)
	}
}

func TestRoute_SilentDCTimesOutWithoutRetry(t *testing.T) {
	s := setupTwoDCs(t, func(c *Config) { c.ResponseTimeout = 100 * time.Millisecond })
	s.near.setHandler(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	resp, body := s.post(completion([]uint32{1}, nil), nil)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "DC failed before responding") {
		t.Errorf("silent near: status %d body %s, want 504 naming the DC failure", resp.StatusCode, body)
	}
	if n := len(s.far.requests()); n != 0 {
		t.Errorf("far received %d requests after near accepted and went silent, want 0", n)
	}
}

// TestRoute_PriceOthersPullsTowardsTheCacheOnABusyFleet sends the same
// short prompt, cached only on the far DC, before and after an uncached
// prompt loads a small fleet (1,000 tokens of capacity in the 10 s window:
// 0.05 tokens/ms per DC). Before, nothing was sent and the near DC's 30.6
// ms beat the far one's 100 ms; after, ρ is capped at 0.95 and the near
// DC's 25.6 ms of prefill also cost the others 19 × 25.6 = 486.4 ms, so the
// far DC's cache wins. Without PriceOthers the same sends stay near.
func TestRoute_PriceOthersPullsTowardsTheCacheOnABusyFleet(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 9))
	short, filler := randomTokens(rng, 512), randomTokens(rng, 4096)
	for _, priced := range []bool{false, true} {
		s := setupTwoDCs(t, func(c *Config) { c.PriceOthers = priced })
		slow := shm.Load{QueueTokensPerMs: 0.05}
		s.fx.signals(0, 5*time.Millisecond, 0, slow)
		s.fx.signals(1, 100*time.Millisecond, 0, slow)
		s.fx.cache(1, hasher(t, "", ""), short)
		var got []string
		for _, tokens := range [][]uint32{short, filler, short} {
			resp, body := s.post(completion(tokens, nil), nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("priced %v: status %d (%s)", priced, resp.StatusCode, body)
			}
			got = append(got, resp.Header.Get(HeaderDC))
			if others := resp.Header.Get(HeaderOthersMs); !priced && others != "" {
				t.Errorf("unpriced: %s = %q, want none", HeaderOthersMs, others)
			}
			if priced && len(got) == 3 && resp.Header.Get(HeaderOthersMs) != "0.000" {
				t.Errorf("priced, cached far: %s = %q, want 0.000 (nothing left to prefill)", HeaderOthersMs, resp.Header.Get(HeaderOthersMs))
			}
		}
		want := []string{"near", "near", "near"}
		if priced {
			want[2] = "far"
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("priced %v: served by %v, want %v", priced, got, want)
		}
	}
	// The decision itself reports ρ and the near DC's price for the others.
	s := setupTwoDCs(t, func(c *Config) { c.PriceOthers = true })
	s.fx.signals(0, 5*time.Millisecond, 0, shm.Load{QueueTokensPerMs: 0.05})
	s.fx.signals(1, 100*time.Millisecond, 0, shm.Load{QueueTokensPerMs: 0.05})
	s.post(completion(filler, nil), nil)
	d, err := s.rt.Decide(&Prompt{Tokens: short, HasTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	near := d.Order[0]
	if d.FleetUtilization < 4 || near.DC.Name != "near" || math.Abs(near.Parts.OthersMs-19*25.6) > 1e-9 {
		t.Errorf("Decide: ρ %v, first %s with others %v; want ≥ 4 (4,096 tokens over 1,000), near, 486.4", d.FleetUtilization, near.DC.Name, near.Parts.OthersMs)
	}
}

// The replica file truncated in place while requests are being routed (the
// router's searches and lane reads fault on the lost pages) never takes
// the router down: every request is answered 200 (degraded, replica-damaged,
// while the file is bad), and once the consumer writes a new generation the
// router routes on its cache again.
func TestRoute_ReplicaTruncatedUnderRequestsNeverCrashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 9))
	long := randomTokens(rng, 4096)
	s := setupTwoDCs(t, nil)
	s.fx.cache(1, hasher(t, "", ""), long)
	var answered, failed, damaged atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Post(s.url+"/v1/completions", "application/json", bytes.NewReader(completion(long, nil)))
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
				if resp.Header.Get(HeaderDegraded) == "replica-damaged" {
					damaged.Add(1)
				}
				answered.Add(1)
			}
		})
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 30s: %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitUntil("requests before the truncation", func() bool { return answered.Load() > 20 })
	if err := os.Truncate(s.fx.path, 4096); err != nil {
		t.Fatal(err)
	}
	mark := answered.Load()
	waitUntil("requests after the truncation", func() bool { return answered.Load() > mark+50 && damaged.Load() > 0 })
	s.fx.create(DCID("near"), DCID("far"))
	s.fx.signals(0, 5*time.Millisecond, 0, shm.Load{})
	s.fx.signals(1, 100*time.Millisecond, 0, shm.Load{})
	s.fx.cache(1, hasher(t, "", ""), long)
	waitUntil("cache-aware routing after the rebuild", func() bool {
		resp, _ := s.post(completion(long, nil), nil)
		return resp.Header.Get(HeaderDC) == "far" && resp.Header.Get(HeaderCachedTokens) == "4096"
	})
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d requests got no answer or not 200 (of %d answered)", n, answered.Load())
	}
}

// TestRoute_WarnsOfDCsWithoutALane gives the router a DC id the replica has
// no lane for (a typo in --dc, or a DC whose relay the consumer does not
// follow): that DC would silently never get its cache's traffic, so the
// router says which DCs lack a lane and which lanes no DC names, once per
// generation, and nothing once they match.
func TestRoute_WarnsOfDCsWithoutALane(t *testing.T) {
	near, far := newStubDC(t, "near"), newStubDC(t, "far")
	fx := newFixture(t, 3, 9)
	logs := &syncbuf.Buffer{}
	farDC := far.dc(t)
	farDC.ID = 4 // the relay runs with --dc 9
	nearDC := near.dc(t)
	nearDC.ID = 3
	rt, _ := newRouter(t, Config{DCs: []DC{nearDC, farDC}, ReplicaPath: fx.path, ReplicaPoll: time.Hour,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	const warning = "the replica has no lane for some DCs"
	if got := logs.String(); !strings.Contains(got, warning) || !strings.Contains(got, "dcs=4:far") ||
		!strings.Contains(got, "dcs=[9]") {
		t.Fatalf("after attaching lanes [3 9] for DCs 3:near and 4:far, logs:\n%s\nwant %q naming 4:far and the unnamed lane 9", got, warning)
	}
	fx.create(3, 4)
	if changed, err := rt.Refresh(); !changed || err != nil {
		t.Fatalf("Refresh() after a new generation = %v, %v, want changed", changed, err)
	}
	if n := strings.Count(logs.String(), warning); n != 1 {
		t.Errorf("%d warnings after the lanes matched the DCs, want the first one only:\n%s", n, logs.String())
	}
}

// TestRoute_FailingTokenizerIsSkippedAfterFailuresInARow has the tokenizer
// fail every call: after tokenizerTrip failures in a row the router stops
// calling it (each call would cost a text request its timeout) and routes
// text load-only at once, every request served; a too-long prompt, the
// request's fault, does not count towards the breaker.
func TestRoute_FailingTokenizerIsSkippedAfterFailuresInARow(t *testing.T) {
	var calls atomic.Int64
	var long atomic.Bool
	tok := tokenizeFunc(func(ctx context.Context, in *TokenizeInput) ([]uint32, error) {
		calls.Add(1)
		if long.Load() {
			return nil, fmt.Errorf("%w: 9999999 tokens", ErrTooManyTokens)
		}
		return nil, fmt.Errorf("%w: connection refused", ErrTokenizer)
	})
	s := setupTwoDCs(t, func(c *Config) { c.Tokenizer = tok })
	// Refusals for the prompt's length, then the tokenizer's own failures.
	long.Store(true)
	for range tokenizerTrip + 1 {
		if resp, body := s.post([]byte(`{"model":"m","prompt":"a text"}`), nil); resp.StatusCode == 200 {
			t.Fatalf("a prompt over the limit: status 200 (body %s), want a refusal", body)
		}
	}
	long.Store(false)
	const requests = 2*tokenizerTrip + 3
	for i := range requests {
		resp, body := s.post([]byte(`{"model":"m","prompt":"a text"}`), nil)
		if resp.StatusCode != 200 || resp.Header.Get(HeaderPolicy) != "load-only" {
			t.Fatalf("request %d with the tokenizer failing: status %d policy %q (body %s), want 200 load-only",
				i, resp.StatusCode, resp.Header.Get(HeaderPolicy), body)
		}
	}
	st := s.rt.Stats()
	if got := calls.Load(); got != tokenizerTrip+1+tokenizerTrip {
		t.Errorf("tokenizer called %d times, want %d (the refusals, then failures until the breaker opened)", got, 2*tokenizerTrip+1)
	}
	if st.TokenizerErrors != tokenizerTrip || st.TokenizerSkipped != requests-tokenizerTrip {
		t.Errorf("Stats(): %d tokenizer errors, %d skipped; want %d and %d", st.TokenizerErrors, st.TokenizerSkipped,
			tokenizerTrip, requests-tokenizerTrip)
	}
}
