package route

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/shm"
)

// testBlockSize is the block size of every test replica and router.
const testBlockSize = 16

// testSeed returns the randomized tests' seed: GOINDEX_SEED or a fixed one,
// printed when the test fails.
func testSeed(t testing.TB) uint64 {
	seed := uint64(20261206)
	if s := os.Getenv("GOINDEX_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("GOINDEX_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (set GOINDEX_SEED to replay)", seed)
		}
	})
	return seed
}

// randomTokens returns n random token ids.
func randomTokens(rng *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = rng.Uint32N(150_000)
	}
	return out
}

// stubDC is a DC frontend on loopback that records what it receives and
// answers with handler (default: 200 and a JSON completion naming the DC).
type stubDC struct {
	name string
	srv  *httptest.Server

	mu       sync.Mutex
	received []received
	handler  http.HandlerFunc
}

// received is one request a stub DC saw.
type received struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

func newStubDC(t testing.TB, name string) *stubDC {
	t.Helper()
	s := &stubDC{name: name}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.received = append(s.received, received{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
		h := s.handler
		s.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Stub", name)
		_, _ = io.WriteString(w, `{"object":"text_completion","dc":"`+name+`"}`)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stubDC) setHandler(h http.HandlerFunc) {
	s.mu.Lock()
	s.handler = h
	s.mu.Unlock()
}

func (s *stubDC) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.received...)
}

// dc returns the router's DC for the stub, with the id its name maps to.
func (s *stubDC) dc(t testing.TB) DC {
	t.Helper()
	dc, err := ParseDC(s.name + "=" + s.srv.URL)
	if err != nil {
		t.Fatalf("ParseDC(%s=%s): %v", s.name, s.srv.URL, err)
	}
	return dc
}

// closedURL returns the URL of a loopback port nobody listens on.
func closedURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// fixture is a replica file written the way `goindex consume` writes it,
// with one ckf.Producer per lane whose words are installed in the file.
type fixture struct {
	t         testing.TB
	path      string
	w         *shm.Writer
	producers []*ckf.Producer
}

// newFixture creates a replica file with one lane per DC id.
func newFixture(t testing.TB, dcs ...uint64) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replica")
	f := &fixture{t: t, path: path}
	f.create(dcs...)
	return f
}

// create writes a new generation of the file for dcs, every lane ready
// with an empty filter and no signals.
func (f *fixture) create(dcs ...uint64) {
	f.t.Helper()
	n, err := ckf.BucketCount(1 << 14)
	if err != nil {
		f.t.Fatalf("BucketCount: %v", err)
	}
	if f.w != nil {
		f.w.Close()
	}
	w, err := shm.Create(f.path, shm.Layout{Seed: ckf.DefaultSeed, Buckets: n, Domain: 1, ConsumerInstance: 7, DCs: dcs})
	if err != nil {
		f.t.Fatalf("shm.Create(%d lanes): %v", len(dcs), err)
	}
	f.w = w
	w.Touch(time.Now()) // a live consumer: the replica is healthy
	f.t.Cleanup(func() { w.Close() })
	f.producers = make([]*ckf.Producer, len(dcs))
	for l := range dcs {
		if f.producers[l], err = ckf.New(ckf.Config{Format: w.Format()}); err != nil {
			f.t.Fatalf("ckf.New: %v", err)
		}
		f.install(l)
	}
}

// install copies lane l's producer words into the file and marks it ready.
func (f *fixture) install(l int) {
	f.t.Helper()
	if err := f.w.Table().Install(l, f.producers[l].AppendWords(nil)); err != nil {
		f.t.Fatalf("Install(lane %d): %v", l, err)
	}
}

// cache stores the full blocks of tokens (hashed with h's salt) in lane l.
func (f *fixture) cache(l int, h *dynamo.Hasher, tokens []uint32) {
	f.t.Helper()
	locals := h.AppendLocal(nil, tokens)
	seqs := kv.AppendChain(nil, false, 0, locals)
	ev := kv.Event{Member: kv.Member{Worker: 1}, Kind: kv.Stored}
	for i := range locals {
		ev.Blocks = append(ev.Blocks, kv.Block{External: seqs[i], Local: locals[i]})
	}
	if _, err := f.producers[l].Apply(&ev); err != nil {
		f.t.Fatalf("lane %d Apply(%d blocks): %v", l, len(ev.Blocks), err)
	}
	if err := f.w.Table().Apply(l, f.producers[l].Drain(nil)); err != nil {
		f.t.Fatalf("lane %d table Apply: %v", l, err)
	}
}

// signals sets lane l's RTT and load report, both measured age ago.
func (f *fixture) signals(l int, rtt time.Duration, age time.Duration, load shm.Load) {
	at := time.Now().Add(-age)
	f.w.SetRTT(l, rtt, at)
	load.ReceivedAt, load.At = at, at
	f.w.SetLoad(l, &load)
}

// hasher returns a Hasher of the test block size salted with lora and ns.
func hasher(t testing.TB, lora, ns string) *dynamo.Hasher {
	t.Helper()
	h, err := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: testBlockSize, LoRA: lora, Namespace: ns})
	if err != nil {
		t.Fatalf("NewHasher: %v", err)
	}
	return h
}

// newRouter builds a Router for cfg (block size and replica filled in when
// zero) and serves it on loopback.
func newRouter(t testing.TB, cfg Config) (*Router, *httptest.Server) {
	t.Helper()
	if cfg.BlockSize == 0 {
		cfg.BlockSize = testBlockSize
	}
	rt, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(rt)
	t.Cleanup(func() {
		srv.Close()
		rt.Close()
	})
	return rt, srv
}

// completion returns a /v1/completions body with a token-id prompt.
func completion(tokens []uint32, extra map[string]any) []byte {
	m := map[string]any{"model": "m", "prompt": tokens, "max_tokens": 8}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

// post sends body to the router's path and returns the response with its
// body read.
func post(t testing.TB, srv *httptest.Server, path string, body []byte, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read body: %v", path, err)
	}
	return resp, b
}

// mustURL parses a URL in a test.
func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", s, err)
	}
	return u
}
