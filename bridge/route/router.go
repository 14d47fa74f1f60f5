package route

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/score"
)

// Server limits of Serve. Request headers must arrive within
// min(serverReadHeaderTimeout, BodyTimeout), the body then within
// BodyTimeout (bound), so a whole request has a deadline.
const (
	serverReadHeaderTimeout = 10 * time.Second
	serverIdleTimeout       = 2 * time.Minute
	serverMaxHeaderBytes    = 1 << 20
)

// Router is the global router proxy: an http.Handler serving the
// OpenAI-compatible completion endpoints, /v1/models and the other /v1/
// endpoints (forwarded load-only), /healthz (and Dynamo's /health) and
// /readyz.
// Build it with New; ServeHTTP, Decide, Refresh, Ready and Stats may run
// concurrently. Close must not race with Refresh.
type Router struct {
	cfg    Config
	scorer *score.Scorer
	// tokenizer is Config.Tokenizer behind its circuit breaker; nil
	// without one.
	tokenizer *guardedTokenizer
	// loadOnly routes prompts that could not be hashed; nil when the
	// policy does not read the prompt anyway.
	loadOnly *score.Scorer
	// demand measures the fleet's utilization from the prefill work sent;
	// nil unless Config.PriceOthers.
	demand *score.Demand
	// cal learns per DC (Config.DCs index) from the streams it relays: the
	// first token's time against the ttft estimate, the stream's end; nil
	// unless the policy is ttft.
	cal []*score.Calibration
	// hold learns per DC how long the streams it relays held their KV
	// blocks (score.Holding), for ttft's wait for KV room; nil unless the
	// policy is ttft.
	hold *score.Holding
	// turn measures per DC the rate its cache stores blocks, from the
	// stored-blocks counters of its load reports, for ttft's eviction
	// charge; nil unless the policy is ttft.
	turn      *follow.Turnover
	hasher    *dynamo.Hasher // unsalted
	replica   *replicaHolder
	defaultDC int // Config.DefaultDC's index

	healthMu   sync.Mutex
	lastHealth follow.Health // as Refresh last logged it
	transport  *http.Transport
	rngs       sync.Pool // *rand.Rand
	rngSeq     atomic.Uint64
	rngBase    uint64
	stats      counters
}

// counters are the router's atomic statistics; routed is per DC index.
type counters struct {
	requests, loadOnly, tokenizerErrors, rejected, loops   atomic.Uint64
	tokenizerSkipped                                       atomic.Uint64
	unroutable, upstreamErrors, fallbacks, modelsForwarded atomic.Uint64
	otherForwarded, clientGone, cut                        atomic.Uint64
	routed                                                 []atomic.Uint64
	degraded                                               [follow.SignalsStale + 1]atomic.Uint64 // by follow.Reason
}

// Stats are the router's counters since New.
type Stats struct {
	Requests        uint64            `json:"requests"`         // completion requests received
	Routed          map[string]uint64 `json:"routed"`           // completion requests answered by each DC
	LoadOnly        uint64            `json:"load_only"`        // routed without a hashed prompt
	TokenizerErrors uint64            `json:"tokenizer_errors"` // tokenizer calls that failed (then load-only)
	// TokenizerSkipped counts text requests routed load-only without
	// calling the tokenizer: its breaker was open after failures in a row.
	TokenizerSkipped uint64 `json:"tokenizer_skipped"`
	Rejected         uint64 `json:"rejected"`        // answered 4xx by the router
	Loops            uint64 `json:"loops"`           // refused for carrying HopHeader
	Unroutable       uint64 `json:"unroutable"`      // no eligible DC (503)
	UpstreamErrors   uint64 `json:"upstream_errors"` // every DC unreachable, or a DC failed (502/504)
	ClientGone       uint64 `json:"client_gone"`     // clients that left before a DC answered (499)
	Cut              uint64 `json:"cut"`             // answers cut mid-body: the DC's body failed or went silent (IdleTimeout)
	Fallbacks        uint64 `json:"fallbacks"`       // DCs skipped after a refused connect or a 502/503/529
	Models           uint64 `json:"models"`          // /v1/models requests forwarded
	Other            uint64 `json:"other"`           // other /v1/ requests forwarded (embeddings, responses, ...)
	// Degraded counts decisions made without fresh signals (fail-open), by
	// follow.Reason name: replica-missing, replica-damaged, consumer-stale,
	// signals-stale.
	Degraded map[string]uint64 `json:"degraded"`
}

// New validates cfg, fills its defaults and returns a Router. It attaches
// the replica file once if it exists; a missing or unreadable file is not
// an error (Refresh and Serve keep trying, and /readyz says why).
func New(cfg Config) (*Router, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	sc := cfg.Score
	sc.BlockSize = cfg.BlockSize
	scorer, err := score.New(sc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	rt := &Router{cfg: cfg, scorer: scorer, replica: newReplicaHolder(&cfg), transport: newTransport(&cfg)}
	if cfg.Tokenizer != nil {
		rt.tokenizer = newGuardedTokenizer(cfg.Tokenizer, cfg.Logger)
	}
	switch scorer.Config().Policy {
	case score.TTFT, score.PrefixThenLoad, score.Credit:
		lo := scorer.Config()
		lo.Policy = score.LoadOnly
		if rt.loadOnly, err = score.New(lo); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
	}
	if cfg.PriceOthers {
		rt.demand = score.NewDemand(0)
	}
	if scorer.Config().Policy == score.TTFT {
		for range cfg.DCs {
			rt.cal = append(rt.cal, score.NewCalibration(0))
		}
		rt.hold = score.NewHolding(len(cfg.DCs), 0)
		rt.turn = follow.NewTurnover(len(cfg.DCs))
	}
	if rt.hasher, err = dynamo.NewHasher(dynamo.HasherConfig{BlockSize: cfg.BlockSize}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	var seed [8]byte
	_, _ = crand.Read(seed[:])
	rt.rngBase = binary.LittleEndian.Uint64(seed[:])
	rt.rngs.New = func() any { return rand.New(rand.NewPCG(rt.rngBase, rt.rngSeq.Add(1))) }
	rt.stats.routed = make([]atomic.Uint64, len(cfg.DCs))
	for i, dc := range cfg.DCs {
		if dc.Name == cfg.DefaultDC {
			rt.defaultDC = i
		}
	}
	if _, err := rt.Refresh(); err != nil {
		cfg.Logger.Info("replica not attached yet", "path", cfg.ReplicaPath, "err", err)
	}
	return rt, nil
}

// Refresh attaches the replica file if none is attached, or its newer
// generation if the attached one was replaced; it reports whether the
// attachment changed. It logs each change of the replica's health and each
// lane newly found failing its integrity check, once. Serve calls it every
// ReplicaPoll.
func (rt *Router) Refresh() (bool, error) {
	changed, err := rt.replica.refresh()
	h := rt.replica.health()
	if changed {
		rt.cfg.Logger.Info("replica attached", "path", rt.cfg.ReplicaPath, "generation", h.Generation)
		rt.logUnmatched()
	}
	rt.healthMu.Lock()
	defer rt.healthMu.Unlock()
	if h.State != rt.lastHealth.State {
		if h.State == follow.Healthy {
			rt.cfg.Logger.Info("replica healthy again", "path", rt.cfg.ReplicaPath, "generation", h.Generation)
		} else {
			rt.cfg.Logger.Warn("replica degraded; routing fails open on the last known signals", "path", rt.cfg.ReplicaPath,
				"state", h.State, "err", h.Err)
		}
	}
	if bad := h.BadLanes &^ rt.lastHealth.BadLanes; bad != 0 {
		rt.cfg.Logger.Error("replica lanes failed their integrity check; left out until their consumer heals them",
			"path", rt.cfg.ReplicaPath, "lanes", fmt.Sprintf("%#x", bad))
	}
	rt.lastHealth = h
	return changed, err
}

// logUnmatched warns about router DCs the attached replica has no lane for
// (a wrong id in --dc, or a DC whose relay the consumer does not follow):
// such a DC is routed to without its cache, load or RTT, so only as a
// last resort. Lanes no router DC names are logged too: with a mistyped
// id, they say which id was meant.
func (rt *Router) logUnmatched() {
	missing, lanes, ok := rt.replica.unmatched()
	if !ok {
		return
	}
	named := map[uint64]bool{}
	for _, dc := range rt.cfg.DCs {
		named[dc.ID] = true
	}
	var unnamed []uint64
	for _, id := range lanes {
		if !named[id] {
			unnamed = append(unnamed, id)
		}
	}
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, dc := range missing {
			names[i] = fmt.Sprintf("%d:%s", dc.ID, dc.Name)
		}
		rt.cfg.Logger.Warn("the replica has no lane for some DCs: without cache, load or RTT signals they are "+
			"chosen only as a fallback; check their ids against the relays' --dc",
			"path", rt.cfg.ReplicaPath, "dcs", strings.Join(names, ","), "replica_dcs", fmt.Sprint(lanes))
	}
	if len(unnamed) > 0 {
		rt.cfg.Logger.Info("replica lanes that no --dc names are not routed to", "path", rt.cfg.ReplicaPath,
			"dcs", fmt.Sprint(unnamed))
	}
}

// Close unmaps the replica and closes idle DC connections. Requests served
// afterwards see no replica.
func (rt *Router) Close() error {
	rt.replica.close()
	rt.transport.CloseIdleConnections()
	return nil
}

// Stats returns the router's counters.
func (rt *Router) Stats() Stats {
	s := &rt.stats
	out := Stats{Requests: s.requests.Load(), Routed: map[string]uint64{}, LoadOnly: s.loadOnly.Load(),
		TokenizerErrors: s.tokenizerErrors.Load(), TokenizerSkipped: s.tokenizerSkipped.Load(), Rejected: s.rejected.Load(), Loops: s.loops.Load(),
		Unroutable: s.unroutable.Load(), UpstreamErrors: s.upstreamErrors.Load(), Fallbacks: s.fallbacks.Load(),
		ClientGone: s.clientGone.Load(), Cut: s.cut.Load(), Models: s.modelsForwarded.Load(), Other: s.otherForwarded.Load()}
	for i, dc := range rt.cfg.DCs {
		out.Routed[dc.Name] = s.routed[i].Load()
	}
	out.Degraded = map[string]uint64{}
	for r := follow.ReplicaMissing; r <= follow.SignalsStale; r++ {
		out.Degraded[r.String()] = s.degraded[r].Load()
	}
	return out
}

// Serve serves HTTP on ln and follows the replica file (Refresh every
// ReplicaPoll) until ctx ends, then shuts down gracefully (in-flight
// requests get ShutdownGrace, then their connections are closed) and
// Closes the router. It returns nil after a shutdown caused by ctx.
func (rt *Router) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           rt,
		ReadHeaderTimeout: min(serverReadHeaderTimeout, rt.cfg.BodyTimeout),
		IdleTimeout:       serverIdleTimeout,
		MaxHeaderBytes:    serverMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(rt.cfg.Logger.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tick := time.NewTicker(rt.cfg.ReplicaPoll)
	defer tick.Stop()
	defer rt.Close()
	for {
		select {
		case err := <-done:
			return fmt.Errorf("route: serve: %w", err)
		case <-tick.C:
			if _, err := rt.Refresh(); err != nil {
				rt.cfg.Logger.Debug("replica refresh", "err", err)
			}
		case <-ctx.Done():
			grace, cancel := context.WithTimeout(context.Background(), rt.cfg.ShutdownGrace)
			err := srv.Shutdown(grace)
			cancel()
			if err != nil {
				srv.Close()
			}
			<-done
			return nil
		}
	}
}

// ServeHTTP implements http.Handler.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt.bound(w, r)
	switch r.URL.Path {
	case "/healthz", "/health":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case "/readyz":
		rd := rt.Ready()
		status := http.StatusOK
		if !rd.Ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, rd)
	case "/v1/models":
		rt.serveModels(w, r)
	case "/v1/completions":
		rt.serveCompletion(w, r, Completions)
	case "/v1/chat/completions":
		rt.serveCompletion(w, r, ChatCompletions)
	default:
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			rt.serveOther(w, r)
			return
		}
		rt.fail(w, nil, fmt.Errorf("%w: %s (serving /v1/..., /healthz, /health, /readyz)", ErrNotFound, r.URL.Path))
	}
}

// Readiness is /readyz's answer.
type Readiness struct {
	Ready      bool     `json:"ready"`
	Generation uint64   `json:"replica_generation"` // 0: no replica attached
	Eligible   []string `json:"eligible"`           // DCs with every signal the policy needs
	// Degraded names why requests are routed degraded now (a
	// follow.Reason: replica-missing, replica-damaged, consumer-stale,
	// signals-stale); empty when they are not.
	Degraded string `json:"degraded,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Ready reports whether the router is ready. Failing open it is ready
// whatever the replica's state, since it routes every request (Degraded
// and Reason say how well); with FailClosed it is ready only while the
// replica is attached and at least one DC is eligible under the policy.
func (rt *Router) Ready() Readiness {
	obs := make([]laneObs, len(rt.cfg.DCs))
	gen := rt.replica.observe(obs, nil)
	rd := Readiness{Generation: gen, Eligible: []string{}}
	for i, c := range rt.candidates(obs, time.Now(), rt.cfg.MaxStaleness) {
		if _, ok := rt.scorer.Cost(score.Request{}, c); ok {
			rd.Eligible = append(rd.Eligible, rt.cfg.DCs[i].Name)
		}
	}
	h := rt.replica.health()
	switch {
	case gen == 0 && rt.cfg.ReplicaPath == "":
		rd.Reason = "no replica file configured"
	case gen == 0:
		rd.Reason = fmt.Sprintf("replica %s not attached: %v", rt.cfg.ReplicaPath, h.Err)
	case len(rd.Eligible) == 0:
		rd.Reason = fmt.Sprintf("no DC has fresh signals for %v (max staleness %v)", rt.scorer.Config().Policy, rt.cfg.MaxStaleness)
	}
	if rd.Reason != "" && len(rd.Eligible) == 0 {
		rd.Degraded = follow.ReasonOf(h).String()
	}
	rd.Ready = rd.Reason == "" || !rt.cfg.FailClosed
	return rd
}

// serveCompletion routes one completion request: read and parse the body,
// hash the prompt (tokenizing text when a tokenizer is set), decide, and
// forward with fallback.
func (rt *Router) serveCompletion(w http.ResponseWriter, r *http.Request, ep Endpoint) {
	rt.stats.requests.Add(1)
	if err := checkForwardable(w, r, http.MethodPost); err != nil {
		rt.fail(w, nil, err)
		return
	}
	body, err := rt.readBody(w, r)
	if err != nil {
		rt.fail(w, nil, err)
		return
	}
	req, err := ParseRequest(ep, body, rt.cfg.MaxPromptTokens)
	if err != nil {
		rt.fail(w, nil, err)
		return
	}
	p, err := rt.prompt(r, req)
	if err != nil {
		rt.fail(w, nil, err)
		return
	}
	d, err := rt.Decide(p)
	if err != nil {
		rt.fail(w, d, err)
		return
	}
	if !p.HasTokens {
		rt.stats.loadOnly.Add(1)
	}
	start := time.Now()
	a, err := rt.send(r, d.Order, body)
	if err != nil {
		rt.fail(w, d, err)
		return
	}
	c := &d.Order[a.served]
	rt.stats.routed[c.Index].Add(1)
	if rt.demand != nil {
		rt.demand.Add(unixMs(time.Now()), float64(d.PromptTokens-c.CachedTokens))
	}
	if rt.cfg.Observe != nil {
		rt.cfg.Observe(d, c)
	}
	stream := a.resp.StatusCode == http.StatusOK && strings.HasPrefix(a.resp.Header.Get("Content-Type"), "text/event-stream")
	first, end := rt.relay(w, a, c.DC.Name, diagnostics(d, c, a.skipped))
	if stream {
		rt.learn(d, c, start, first, end)
	}
}

// learn feeds DC c's calibration with what a relayed stream showed: its
// first event's delay since the request left (the time to first token as
// the client sees it, up to the client's own hop) against the estimate's
// terms, unscaled, and how long the stream ran after it (the request's KV
// residence, give or take the last events' trip). A whole stream also
// teaches the DC's hold time (score.Holding.ObserveStream, as the sim
// does): the time from its first to its last event, both a one-way trip
// after the DC sent them, plus the estimated prefill, weighted by the
// prompt's blocks (the generated tokens' are not counted: the router does
// not parse the stream). A stream cut before its first event teaches
// nothing.
func (rt *Router) learn(d *Decision, c *Choice, start, first, end time.Time) {
	if rt.cal == nil || d.Policy != score.TTFT || first.IsZero() {
		return
	}
	raw := c.Parts
	raw.QueueMs /= orOne(c.weights.Queue)
	raw.PrefillMs /= orOne(c.weights.Prefill)
	raw.RTTms /= orOne(c.weights.RTT)
	cal := rt.cal[c.Index]
	cal.ObserveTTFT(raw, float64(first.Sub(start))/float64(time.Millisecond))
	if !end.IsZero() {
		streamMs := float64(end.Sub(first)) / float64(time.Millisecond)
		cal.ObserveResidence(unixMs(end), streamMs)
		blocks := (d.PromptTokens + rt.cfg.BlockSize - 1) / rt.cfg.BlockSize
		rt.hold.ObserveStream(c.Index, streamMs, raw.PrefillMs, float64(blocks))
	}
}

// orOne is w, or 1 for an unset (zero) weight.
func orOne(w float64) float64 {
	if w == 0 {
		return 1
	}
	return w
}

// prompt returns what routing knows of req's prompt: its token ids, or
// the tokenizer's for its text; salts from the body, else the headers. A
// tokenizer failure leaves the prompt unknown (load-only); only a text of
// more than MaxPromptTokens tokens is an error (ErrTooManyTokens), as a
// token-id prompt of that length is.
func (rt *Router) prompt(r *http.Request, req *Request) (*Prompt, error) {
	p := &Prompt{Tokens: req.Tokens, HasTokens: req.HasTokens, LoRA: req.LoRA, Namespace: req.Namespace}
	if p.LoRA == "" && rt.cfg.LoRAHeader != "" {
		p.LoRA = r.Header.Get(rt.cfg.LoRAHeader)
	}
	if p.Namespace == "" && rt.cfg.NamespaceHeader != "" {
		p.Namespace = r.Header.Get(rt.cfg.NamespaceHeader)
	}
	if p.HasTokens || rt.tokenizer == nil {
		return p, nil
	}
	in := tokenizeInput(req)
	if in == nil {
		return p, nil
	}
	ids, err := rt.tokenizer.Tokenize(r.Context(), in)
	if err == nil && len(ids) > rt.cfg.MaxPromptTokens {
		err = fmt.Errorf("%w: the text is %d prompt tokens, limit %d", ErrTooManyTokens, len(ids), rt.cfg.MaxPromptTokens)
	}
	if errors.Is(err, ErrTooManyTokens) {
		return nil, err
	}
	if errors.Is(err, errTokenizerSkipped) {
		rt.stats.tokenizerSkipped.Add(1)
		return p, nil
	}
	if err != nil {
		rt.stats.tokenizerErrors.Add(1)
		rt.cfg.Logger.Warn("tokenizer failed; routing load-only", "err", err)
		return p, nil
	}
	p.Tokens, p.HasTokens = ids, true
	return p, nil
}

// bound sets the connection deadlines a request starts with. A request
// with a body must deliver all of it within BodyTimeout: readBody lifts
// the read deadline once the body is read in full, and a body read in part
// or not at all (a refused request, an endpoint that reads none) keeps it,
// so the server's drain of the rest after the handler (up to 256 KiB, to
// reuse the connection) ends at it too and the connection is closed. A
// request without a body gets none: its connection's background read
// (net/http's watch for a client leaving) must not time out under a long
// answer. The write deadline a previous answer on the connection left
// (relay sets one per write) is lifted.
func (rt *Router) bound(w http.ResponseWriter, r *http.Request) {
	// Not every ResponseWriter supports deadlines (HTTP/2, recorders);
	// the size limits still hold there.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	if r.Body != nil && r.Body != http.NoBody {
		_ = rc.SetReadDeadline(time.Now().Add(rt.cfg.BodyTimeout))
	}
}

// readBody reads r's body within MaxBodyBytes and the deadline bound set.
func (rt *Router) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rt.cfg.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, rt.cfg.MaxBodyBytes)
	case isTimeout(err):
		return nil, fmt.Errorf("%w: not in full within %v", ErrSlowBody, rt.cfg.BodyTimeout)
	case err != nil:
		return nil, fmt.Errorf("%w: reading the body: %v", ErrMalformed, err)
	}
	// Read in full: lift the deadline (see bound).
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return body, nil
}

// serveModels forwards /v1/models to the DCs with fresh signals first (in
// configuration order), then the others, moving on after a refused
// connect or a 502, 503 or 529 (send).
func (rt *Router) serveModels(w http.ResponseWriter, r *http.Request) {
	if err := checkForwardable(w, r, http.MethodGet); err != nil {
		rt.fail(w, nil, err)
		return
	}
	obs := make([]laneObs, len(rt.cfg.DCs))
	rt.replica.observe(obs, nil)
	var healthy, rest []Choice
	for i, c := range rt.candidates(obs, time.Now(), rt.cfg.MaxStaleness) {
		if c.HasLoad || c.HasRTT {
			healthy = append(healthy, Choice{DC: rt.cfg.DCs[i], Index: i})
		} else {
			rest = append(rest, Choice{DC: rt.cfg.DCs[i], Index: i})
		}
	}
	order := append(healthy, rest...)
	a, err := rt.send(r, order, nil)
	if err != nil {
		rt.fail(w, nil, err)
		return
	}
	rt.stats.modelsForwarded.Add(1)
	h := http.Header{}
	h.Set(HeaderDC, order[a.served].DC.Name)
	rt.relay(w, a, order[a.served].DC.Name, h)
}

// serveOther forwards a request for another /v1/ endpoint (embeddings,
// the responses API, ...) with its method and body unchanged, routed
// load-only since the router does not read a prompt from it, with the
// completions' body limits, loop check and fallback.
func (rt *Router) serveOther(w http.ResponseWriter, r *http.Request) {
	if err := checkForwardable(w, r, r.Method); err != nil { // any method: the DC's endpoint judges it
		rt.fail(w, nil, err)
		return
	}
	body, err := rt.readBody(w, r)
	if err != nil {
		rt.fail(w, nil, err)
		return
	}
	d, err := rt.Decide(&Prompt{})
	if err != nil {
		rt.fail(w, d, err)
		return
	}
	a, err := rt.send(r, d.Order, body)
	if err != nil {
		rt.fail(w, d, err)
		return
	}
	rt.stats.otherForwarded.Add(1)
	c := &d.Order[a.served]
	rt.relay(w, a, c.DC.Name, diagnostics(d, c, a.skipped))
}

// checkForwardable refuses a request that already passed a goindex router
// or uses another method than the endpoint's (setting Allow).
func checkForwardable(w http.ResponseWriter, r *http.Request, method string) error {
	if r.Header.Get(HopHeader) != "" {
		return fmt.Errorf("%w: it carries %s", ErrLoop, HopHeader)
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		return fmt.Errorf("%w: %s %s (want %s)", ErrMethod, r.Method, r.URL.Path, method)
	}
	return nil
}

// fail answers err as an OpenAI-shaped JSON error and counts it.
func (rt *Router) fail(w http.ResponseWriter, d *Decision, err error) {
	status := StatusOf(err)
	switch {
	case errors.Is(err, ErrLoop):
		rt.stats.loops.Add(1)
	case errors.Is(err, ErrNoEligibleDC):
		rt.stats.unroutable.Add(1)
	case errors.Is(err, ErrClientGone):
		rt.stats.clientGone.Add(1)
	case status >= 500:
		rt.stats.upstreamErrors.Add(1)
	default:
		rt.stats.rejected.Add(1)
	}
	if d != nil {
		w.Header().Set(HeaderPolicy, d.Policy.String())
		if d.Degraded != follow.NotDegraded {
			w.Header().Set(HeaderDegraded, d.Degraded.String())
		}
	}
	kind := "invalid_request_error"
	if status >= 500 {
		kind = "server_error"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": err.Error(), "type": kind, "code": status}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
