package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/goindex/goindex/bridge/obs"
	"github.com/goindex/goindex/bridge/route"
	"github.com/goindex/goindex/goindex/score"
)

const routeSynopsis = `Usage: goindex route --dc [ID:]NAME=URL ... [--replica PATH] [--listen ADDR] [--policy ttft] [--json]

Runs the global router: an OpenAI-compatible HTTP proxy. For every
POST /v1/completions and /v1/chat/completions (streaming included) it hashes
the prompt's KV blocks as Dynamo does, probes every DC's lane of the shared
replica that ` + "`goindex consume`" + ` writes, scores the DCs (default ttft: RTT +
queue wait + uncached prefill) and forwards the request unchanged to the
chosen DC's frontend, or to the next-best DC if that one refuses the
connection or turns the request away (502, 503, or Dynamo's 529 when every
worker is busy; the last DC's answer is relayed whatever it is). Responses
(and SSE streams, event by event) are relayed as the DC sent them, plus
X-Goindex-DC, -Policy, -Cached-Tokens, -RTT-Ms and, under ttft, -Cost-Ms,
-Queue-Ms, -Prefill-Ms (-Others-Ms with --price-others), and -Fallback
naming the DCs skipped, in order.
The router fails open: when no DC has fresh signals (the replica missing,
damaged or left by a stopped consumer, or the DCs' reports stale) it routes
on the DCs' last known load and RTT, else to --default-dc, and says why in
X-Goindex-Degraded (replica-missing, replica-damaged, consumer-stale,
signals-stale); every DC is a last-resort fallback, so a request fails only
when no DC can be reached. --on-stale=fail restores 503 instead.
Forwarded requests carry X-Goindex-Hop: 1; a request that already has it is
refused with 508. Also serves GET /v1/models (passed to a healthy DC), other
/v1/ endpoints such as /v1/embeddings (forwarded as they are, routed
load-only), /healthz or /health, and /readyz (200 with its "degraded"
reason while failing open; with --on-stale=fail, 200 only once the replica
is attached and a DC is eligible);
--metrics-addr ADDR serves them too, with Prometheus /metrics (decisions per DC
and policy, cost-part histograms, each DC's RTT, lane and eligibility).

DCs and signals:
  --dc [ID:]NAME=URL   a DC frontend, repeated or comma-separated. ID is the DC id
                       the relay runs with (goindex relay --dc ID) and the
                       consumer's lane names; without it the id is XXH3-64 of NAME
                       (seed 0). URL is http(s)://host[:port][/prefix].
  --replica PATH       the consumer's replica file (reattached when replaced)
  --max-staleness D    a load report or RTT older than this counts as missing
  --on-stale MODE      open (default): without fresh signals route degraded on
                       the last known ones, else --default-dc; fail: answer 503
  --default-dc NAME    where a degraded request goes when nothing is known of any
                       DC, and the first of the last-resort fallbacks (default:
                       the first --dc)
Routing:
  --policy P           ttft, prefix-then-load, load-only, credit, gorgo,
                       round-robin, single-dc (with --home NAME); prompts that cannot be
                       hashed are routed load-only
  --block-size N       the engines' KV block size in tokens (must match them)
  --temperature T      0: minimum cost; > 0: softmax over costs
  --price-others       ttft also prices the wait a request's prefill adds for the
                       requests behind it: prefill × ρ/(1−ρ), ρ the fleet's
                       prefill utilization this router measures from what it
                       sends over 10 s (with several routers, each sees its share)
  --calibrate          ttft also scales each DC's queue and prefill estimates by a
                       compute factor learned from the first-token times of the
                       streams it relays (a DC faster or slower than its reports
                       say); off by default: learned only from the requests this
                       router chose, the factor is biased where every DC is as
                       configured (BENCHMARKS.md, Routing). Needs --policy ttft.
                       How long requests hold a DC's KV, from the streams' ends,
                       is learned and used either way
  --prefill-tokens-per-ms, --queue-tokens-per-ms, --decode-blocks-per-ms,
  --credit             the cost model's rates (a DC's load report overrides them)
Prompts:
  Token ids come from prompt (a list), nvext.token_data or prompt_token_ids;
  text needs a tokenizer hook. The hook gets one JSON object, vLLM's /tokenize
  request ({"model","prompt"} or {"model","messages","add_generation_prompt"})
  and answers one JSON object with "tokens" or "token_ids" (u32 list):
  --tokenizer-url URL  POST the request there (a vLLM server's /tokenize works)
  --tokenizer-cmd CMD  run CMD (split on spaces) per request: request on stdin,
                       reply on stdout, exit 0
  A failed call routes the request load-only; after 5 failures in a row the
  hook is not called for 10 s (goindex_route_tokenizer_skipped_total).
  --lora-header H, --namespace-header H  headers carrying the LoRA name and
                       cache namespace when the body has no lora_name / cache_salt
  --max-body-bytes N, --max-prompt-tokens N  larger requests get 413
Network:
  --listen ADDR        address to serve HTTP on
  --connect-timeout, --response-timeout, --idle-timeout, --body-timeout,
  --shutdown-grace
Output: the listening address and logs on stderr; when stopped (SIGINT/SIGTERM),
the request counters on stdout (one JSON object with --json).`

// dcList is the repeatable --dc flag.
type dcList []route.DC

func (l *dcList) String() string {
	parts := make([]string, len(*l))
	for i, dc := range *l {
		parts[i] = dc.String()
	}
	return strings.Join(parts, ",")
}

// Set parses one or more comma-separated DC specs.
func (l *dcList) Set(s string) error {
	for _, spec := range strings.Split(s, ",") {
		dc, err := route.ParseDC(strings.TrimSpace(spec))
		if err != nil {
			return err
		}
		*l = append(*l, dc)
	}
	return nil
}

// routeReport is the output when the router stops.
type routeReport struct {
	Command string      `json:"command"`
	Listen  string      `json:"listen"`
	Replica string      `json:"replica"`
	Policy  string      `json:"policy"`
	DCs     []routeDC   `json:"dcs"`
	Stats   route.Stats `json:"stats"`
}

// routeDC is one DC of the report.
type routeDC struct {
	ID   uint64 `json:"id"`
	Name string `json:"name"`
	URL  string `json:"url"`
}

func runRoute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("route", routeSynopsis, stderr)
	var dcs dcList
	fs.Var(&dcs, "dc", "a DC frontend `[ID:]NAME=URL` (repeated, or comma-separated)")
	replicaPath := fs.String("replica", "/dev/shm/goindex-1.replica", "the consumer's shared-memory replica file (empty: none)")
	maxStaleness := fs.Duration("max-staleness", route.DefaultMaxStaleness, "oldest load report or RTT sample still used")
	onStale := fs.String("on-stale", "open", "without fresh signals: open (route degraded) or fail (503)")
	defaultDC := fs.String("default-dc", "", "the NAME of the DC degraded requests go to when nothing is known (default: the first --dc)")
	replicaPoll := fs.Duration("replica-poll", route.DefaultReplicaPoll, "how often to reattach a missing or replaced replica file")
	policyName := fs.String("policy", "ttft", "ttft, prefix-then-load, load-only, credit, gorgo, round-robin or single-dc")
	home := fs.String("home", "", "single-dc: the NAME of the DC every request goes to")
	blockSize := fs.Int("block-size", route.DefaultBlockSize, "KV block size in tokens the engines hash with")
	temperature := fs.Float64("temperature", 0, "routing temperature (0: minimum cost, ties at random)")
	priceOthers := fs.Bool("price-others", false, "ttft also prices the wait a request's prefill adds for the requests behind it")
	calibrate := fs.Bool("calibrate", false, "ttft also scales each DC's estimates by a compute factor learned from first-token times")
	prefillRate := fs.Float64("prefill-tokens-per-ms", 0, "one request's prefill speed (0: the scorer's default, 20)")
	queueRate := fs.Float64("queue-tokens-per-ms", 0, "a DC's queued-prefill drain rate (0: the prefill rate)")
	decodeRate := fs.Float64("decode-blocks-per-ms", 0, "KV blocks a full DC's decodes release per ms (0: 1)")
	credit := fs.Float64("credit", 0, "credit policy's overlap credit (0: 1)")
	tokenizerURL := fs.String("tokenizer-url", "", "tokenizer hook URL (POST, vLLM /tokenize shape)")
	tokenizerCmd := fs.String("tokenizer-cmd", "", "tokenizer hook command, split on spaces")
	tokenizerTimeout := fs.Duration("tokenizer-timeout", route.DefaultTokenizerTimeout, "bound on one tokenizer call")
	loraHeader := fs.String("lora-header", "", "request header naming the LoRA adapter (when the body has no lora_name)")
	namespaceHeader := fs.String("namespace-header", "", "request header naming the cache namespace (when the body has no cache_salt)")
	maxBody := fs.Int64("max-body-bytes", route.DefaultMaxBodyBytes, "largest request body accepted")
	maxTokens := fs.Int("max-prompt-tokens", route.DefaultMaxPromptTokens, "most prompt token ids accepted")
	listen := fs.String("listen", "127.0.0.1:8080", "TCP address to serve HTTP on")
	connectTimeout := fs.Duration("connect-timeout", route.DefaultConnectTimeout, "bound on one connect to a DC, TLS handshake included (then the next DC)")
	responseTimeout := fs.Duration("response-timeout", route.DefaultResponseTimeout, "bound on a DC's wait before response headers: a stream's first event, a non-streamed request's whole generation")
	idleTimeout := fs.Duration("idle-timeout", route.DefaultIdleTimeout, "bound on a DC's silence mid-response (a stream's gap between events), and on each write to a client that stops reading; past it the stream is cut")
	bodyTimeout := fs.Duration("body-timeout", route.DefaultBodyTimeout, "bound on reading a request: its headers within min(10s, this), then its whole body; past it 408 and the connection closed")
	shutdownGrace := fs.Duration("shutdown-grace", route.DefaultShutdownGrace, "how long in-flight requests may finish on shutdown")
	of := addObsFlags(fs)
	verbose := fs.Bool("verbose", false, "debug logs (same as --log-level debug)")
	asJSON := fs.Bool("json", false, "print the final counters as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(dcs) == 0 {
		return fmt.Errorf("route: at least one --dc is needed: %w", errUsage)
	}
	if *onStale != "open" && *onStale != "fail" {
		return fmt.Errorf("route: --on-stale %q: want open or fail: %w", *onStale, errUsage)
	}
	policy, err := score.ParsePolicy(*policyName)
	if err != nil {
		return fmt.Errorf("route: --policy: %v: %w", err, errUsage)
	}
	if *calibrate && policy != score.TTFT {
		return fmt.Errorf("route: --calibrate applies to --policy ttft only, not %v: %w", policy, errUsage)
	}
	sc := score.Config{Policy: policy, PrefillTokensPerMs: *prefillRate, QueueTokensPerMs: *queueRate,
		DecodeBlocksPerMs: *decodeRate, Credit: *credit}
	if policy == score.SingleDC {
		i := slices.IndexFunc(dcs, func(d route.DC) bool { return d.Name == *home })
		if i < 0 {
			return fmt.Errorf("route: --policy single-dc needs --home naming one of the --dc names: %w", errUsage)
		}
		sc.Home = dcs[i].ID
	}
	if *verbose {
		*of.logLevel = "debug"
	}
	log, err := of.logger(stderr)
	if err != nil {
		return err
	}
	metrics := obs.NewRouteMetrics()
	cfg := route.Config{ReplicaPath: *replicaPath, DCs: dcs, Score: sc, Temperature: *temperature, PriceOthers: *priceOthers, Calibrate: *calibrate, BlockSize: *blockSize,
		LoRAHeader: *loraHeader, NamespaceHeader: *namespaceHeader, MaxStaleness: *maxStaleness,
		MaxBodyBytes: *maxBody, MaxPromptTokens: *maxTokens, ConnectTimeout: *connectTimeout,
		ResponseTimeout: *responseTimeout, IdleTimeout: *idleTimeout, BodyTimeout: *bodyTimeout, ReplicaPoll: *replicaPoll,
		ShutdownGrace: *shutdownGrace, Logger: log, Observe: metrics.Observe, FailClosed: *onStale == "fail", DefaultDC: *defaultDC}
	switch {
	case *tokenizerURL != "" && *tokenizerCmd != "":
		return fmt.Errorf("route: give --tokenizer-url or --tokenizer-cmd, not both: %w", errUsage)
	case *tokenizerURL != "":
		if cfg.Tokenizer, err = route.NewHTTPTokenizer(*tokenizerURL, *tokenizerTimeout, *maxTokens); err != nil {
			return fmt.Errorf("route: %v: %w", err, errUsage)
		}
	case *tokenizerCmd != "":
		if cfg.Tokenizer, err = route.NewCommandTokenizer(strings.Fields(*tokenizerCmd), *tokenizerTimeout, 0, *maxTokens); err != nil {
			return fmt.Errorf("route: %v: %w", err, errUsage)
		}
	}
	rt, err := route.New(cfg)
	if err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		rt.Close()
		return fmt.Errorf("route: listen: %w", err)
	}
	stopMetrics, err := of.serveRoute(log, rt, metrics)
	if err != nil {
		ln.Close()
		rt.Close()
		return fmt.Errorf("route: %w", err)
	}
	defer stopMetrics()
	fmt.Fprintf(stderr, "goindex route: listening on http://%s (policy %v, replica %s, dcs %s)\n",
		ln.Addr(), policy, orNone(*replicaPath), dcs.String())
	if err := rt.Serve(ctx, ln); err != nil {
		return err
	}
	rep := routeReport{Command: "route", Listen: ln.Addr().String(), Replica: *replicaPath, Policy: policy.String(), Stats: rt.Stats()}
	for _, dc := range dcs {
		rep.DCs = append(rep.DCs, routeDC{ID: dc.ID, Name: dc.Name, URL: dc.URL.String()})
	}
	return printRouteReport(stdout, *asJSON, &rep)
}

// printRouteReport writes the counters of a stopped router.
func printRouteReport(w io.Writer, asJSON bool, rep *routeReport) error {
	if asJSON {
		return json.NewEncoder(w).Encode(rep)
	}
	st := &rep.Stats
	fmt.Fprintf(w, "goindex route on %s, policy %s: %d completion requests, %d load-only, %d models, %d other\n",
		rep.Listen, rep.Policy, st.Requests, st.LoadOnly, st.Models, st.Other)
	for _, dc := range rep.DCs {
		fmt.Fprintf(w, "  dc %-12s id %-20d %s: routed %d\n", dc.Name, dc.ID, dc.URL, st.Routed[dc.Name])
	}
	fmt.Fprintf(w, "  fallbacks %d, rejected %d, loops %d, unroutable %d, upstream errors %d, tokenizer errors %d\n",
		st.Fallbacks, st.Rejected, st.Loops, st.Unroutable, st.UpstreamErrors, st.TokenizerErrors)
	fmt.Fprintf(w, "  clients gone before an answer %d, answers cut mid-body %d\n", st.ClientGone, st.Cut)
	fmt.Fprintf(w, "  degraded decisions: replica missing %d, replica damaged %d, consumer stale %d, signals stale %d\n",
		st.Degraded["replica-missing"], st.Degraded["replica-damaged"], st.Degraded["consumer-stale"], st.Degraded["signals-stale"])
	return nil
}
