package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/nats-io/nats.go"
)

// Limits of a stub frontend's requests.
const (
	// maxRequestBytes bounds a completion body: a 128k-token prompt as JSON
	// digits fits with room to spare.
	maxRequestBytes = 8 << 20
	// maxStreamChunks bounds the completion chunks a stub sends.
	maxStreamChunks = 8
)

// Headers a stub frontend adds to its answers, so the client can check which
// DC and worker served it and what the engine's cache held.
const (
	HeaderServedBy     = "X-Demo-Served-By"     // DC name
	HeaderWorker       = "X-Demo-Worker"        // worker id
	HeaderEngineCached = "X-Demo-Engine-Cached" // prompt tokens the engine had cached
)

// decodeStep is the time a stub takes per streamed chunk after the
// prefill: enough that SSE events visibly arrive one by one.
const decodeStep = 15 * time.Millisecond

// worker is one mock engine of a DC: its cache, its envelope sequence and
// its queue of prefill tokens. serving admits one prefill at a time.
type worker struct {
	id      uint64
	engine  *trace.Engine // guarded by the frontend's mu
	pub     *Publisher    // used only while serving is held
	serving sync.Mutex
	queued  atomic.Int64 // prefill tokens waiting or running
}

// frontend is a stub DC frontend: an OpenAI-compatible completions server
// whose mock engines (bridge/trace, LRU prefix caches) serve each prompt
// after a prefill time proportional to its uncached tokens, publish their
// KV events as Dynamo event-plane envelopes on the DC's leaf server, and
// report their load to the DC's relay.
type frontend struct {
	site      *site
	nc        *nats.Conn
	subject   string // the event-plane subject the relay consumes
	loadSubj  string // the relay's worker-load subject
	hasher    *dynamo.Hasher
	rate      float64 // prefill tokens per ms per worker
	capacity  int     // KV blocks per worker
	workers   []*worker
	mu        sync.Mutex // guards every engine
	srv       *http.Server
	ln        net.Listener
	published atomic.Uint64 // envelopes published
	pubErr    atomic.Pointer[error]
	loadStop  chan struct{}
	loadDone  chan struct{}
}

// frontendConfig sizes a stub frontend.
type frontendConfig struct {
	workers       int
	capacity      int                 // KV blocks per worker
	blockSize     int                 // tokens per KV block
	rate          float64             // prefill tokens per ms per worker
	namespace     string              // Dynamo namespace of the events
	prefix        string              // goindex subject prefix of the relay
	domain        relayproto.DomainID // indexer domain of the relay
	loadEvery     time.Duration       // load sample period
	workerIDStart uint64              // worker ids are workerIDStart+1 …
}

// startFrontend connects to the site's leaf and serves on a free loopback
// port.
func startFrontend(s *site, cfg frontendConfig) (*frontend, error) {
	h, err := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: cfg.blockSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	f := &frontend{site: s, hasher: h, rate: cfg.rate, capacity: cfg.capacity,
		subject:  dynamo.EventSubject(cfg.namespace, s.component),
		loadSubj: relay.Names{Prefix: cfg.prefix, Domain: cfg.domain, DC: s.id}.WorkerLoadSubject(),
		loadStop: make(chan struct{}), loadDone: make(chan struct{})}
	for i := range cfg.workers {
		id := cfg.workerIDStart + uint64(i) + 1
		e, err := trace.NewEngine(trace.EngineConfig{Member: kv.Member{Worker: id}, CapacityBlocks: cfg.capacity})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		// Publisher ids stay within float64's exact range, as Dynamo's do.
		f.workers = append(f.workers, &worker{id: id, engine: e, pub: NewPublisher(uint64(s.id)<<20 | id)})
	}
	if f.nc, err = nats.Connect(s.leaf.ClientURL(), nats.Name("demo workers "+s.name)); err != nil {
		return nil, fmt.Errorf("demo: frontend %s: %w", s.name, err)
	}
	if f.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		f.nc.Close()
		return nil, fmt.Errorf("demo: frontend %s: %w", s.name, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", f.complete)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"demo","object":"model","owned_by":"goindex-demo"}]}`)
	})
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go f.srv.Serve(f.ln)
	go f.reportLoad(cfg.loadEvery)
	return f, nil
}

// url returns the frontend's base URL.
func (f *frontend) url() string { return "http://" + f.ln.Addr().String() }

// close stops serving, reporting and publishing.
func (f *frontend) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
	close(f.loadStop)
	<-f.loadDone
	f.nc.Close()
}

// completionRequest is the part of an OpenAI completion body a stub reads.
type completionRequest struct {
	Model     string   `json:"model"`
	Prompt    []uint32 `json:"prompt"` // token ids
	Stream    bool     `json:"stream"`
	MaxTokens int      `json:"max_tokens"`
}

// served is what serving one prompt did.
type served struct {
	worker       *worker
	promptTokens int
	cachedTokens int
}

func (f *frontend) complete(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(&req); err != nil || len(req.Prompt) == 0 {
		httpError(w, http.StatusBadRequest, "the demo's DC frontends take a prompt of token ids")
		return
	}
	s, err := f.serve(r.Context(), req.Prompt)
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	w.Header().Set(HeaderServedBy, f.site.name)
	w.Header().Set(HeaderWorker, strconv.FormatUint(s.worker.id, 10))
	w.Header().Set(HeaderEngineCached, strconv.Itoa(s.cachedTokens))
	chunks := min(max(req.MaxTokens, 1), maxStreamChunks)
	id := fmt.Sprintf("cmpl-demo-%s-%d", f.site.name, time.Now().UnixNano())
	usage := map[string]any{"prompt_tokens": s.promptTokens, "completion_tokens": chunks, "total_tokens": s.promptTokens + chunks,
		"prompt_tokens_details": map[string]int{"cached_tokens": s.cachedTokens}}
	text := " from " + f.site.name
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "text_completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []map[string]any{{"index": 0, "text": text, "finish_reason": "length"}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	for i := range chunks {
		ch := map[string]any{"id": id, "object": "text_completion", "model": req.Model,
			"choices": []map[string]any{{"index": 0, "text": fmt.Sprintf(" token%d%s", i, text), "finish_reason": nil}}}
		if i == chunks-1 {
			ch["choices"].([]map[string]any)[0]["finish_reason"] = "length"
			ch["usage"] = usage
		}
		b, _ := json.Marshal(ch)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
		time.Sleep(decodeStep)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "demo_error", "code": status}})
}

// serve runs one prompt: the DC's local router picks the worker holding the
// longest prefix (then the shortest queue), the worker waits its turn,
// serves the prompt on its engine, spends the prefill time of the uncached
// tokens and publishes the engine's KV events.
func (f *frontend) serve(ctx context.Context, prompt []uint32) (served, error) {
	locals := f.hasher.AppendLocal(nil, prompt)
	bs := f.hasher.BlockSize()
	f.mu.Lock()
	w, bestHit := f.pick(locals)
	f.mu.Unlock()
	estimate := int64(len(prompt) - min(bestHit*bs, len(prompt)))
	w.queued.Add(estimate)
	defer w.queued.Add(-estimate)

	w.serving.Lock()
	defer w.serving.Unlock()
	f.mu.Lock()
	events, res := w.engine.Serve(nil, locals)
	f.mu.Unlock()
	cached := min(res.CachedBlocks*bs, len(prompt))
	prefill := time.Duration(float64(len(prompt)-cached) / f.rate * float64(time.Millisecond))
	select {
	case <-time.After(prefill):
	case <-ctx.Done():
		// The client left; the engine still computed and cached the
		// prompt, as a real one would, so its events still go out.
	}
	for i := range events {
		ev := RouterEvent(&events[i])
		b, err := w.pub.AppendEnvelope(nil, &ev, time.Now())
		if err == nil {
			err = f.nc.Publish(f.subject, b)
		}
		if err != nil {
			err = fmt.Errorf("demo: %s worker %d: publish event: %w", f.site.name, w.id, err)
			f.pubErr.CompareAndSwap(nil, &err)
			return served{}, err
		}
		f.published.Add(1)
	}
	return served{worker: w, promptTokens: len(prompt), cachedTokens: cached}, nil
}

// pick is the DC's local router: the worker holding the longest prefix of
// locals, then the one with the fewest queued prefill tokens, then the one
// with the fewest cached blocks (an idle, emptier cache). It returns the
// worker and its prefix hit. The caller holds mu.
func (f *frontend) pick(locals []uint64) (*worker, int) {
	var best *worker
	bestHit := -1
	for _, w := range f.workers {
		hit := w.engine.Lookup(locals)
		if best == nil || hit > bestHit || hit == bestHit && less(w, best) {
			best, bestHit = w, hit
		}
	}
	return best, bestHit
}

// less orders workers of equal prefix hit: shorter queue, then fewer
// cached blocks.
func less(a, b *worker) bool {
	qa, qb := a.queued.Load(), b.queued.Load()
	return qa < qb || qa == qb && a.engine.Blocks() < b.engine.Blocks()
}

// reportLoad publishes every worker's load sample every period until
// close.
func (f *frontend) reportLoad(every time.Duration) {
	defer close(f.loadDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, w := range f.workers {
			b, _ := json.Marshal(relay.WorkerLoad{WorkerID: w.id, QueuedPrefillTokens: uint64(max(w.queued.Load(), 0)),
				CapacityBlocks: uint64(f.capacity)})
			_ = f.nc.Publish(f.loadSubj, b) // a lost sample is replaced by the next
		}
		select {
		case <-f.loadStop:
			return
		case <-t.C:
		}
	}
}

// exactDepth returns the longest prefix of locals any worker of the DC
// holds, in blocks.
func (f *frontend) exactDepth(locals []uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := 0
	for _, w := range f.workers {
		d = max(d, w.engine.Lookup(locals))
	}
	return d
}

// publishError returns the first failed publish, if any.
func (f *frontend) publishError() error {
	if p := f.pubErr.Load(); p != nil {
		return *p
	}
	return nil
}
