// Package route is the global router proxy behind `goindex route`: an
// OpenAI-compatible HTTP front that hashes each request's prompt, scores
// every DC from the router-site consumer's shared-memory replica, and
// forwards the request to the chosen DC's own frontend, falling back to
// the next-best DC when the chosen one refuses the connection or turns
// the request away (502, 503, 529).
//
// # Concepts
//
// DCs. The router knows each DC by an id, a name and a frontend base URL
// (DC, ParseDC). The id is the replica lane's DC id, the one the relay and
// consumer were given: "ID:NAME=URL" states it, "NAME=URL" derives it as
// DCID(NAME) = XXH3-64 of the name, seed 0. A DC whose id has no lane in
// the replica file is still a candidate, but without signals; each
// generation attached that has no lane for some DCs is logged with them
// and the file's lanes, so a mistyped id does not go unnoticed.
//
// Prompts. POST /v1/completions takes prompt as a string, a list of token
// ids, or a batch (a list of either; the first element routes the batch).
// POST /v1/chat/completions takes messages. Token ids may also come as
// nvext.token_data (Dynamo's documented pre-tokenized field) or
// prompt_token_ids [unverified: neither is checked against a live
// frontend; nvext.token_data wins over prompt_token_ids, which wins over a
// token-id prompt]. Text (a text prompt or chat messages) needs the
// Tokenizer hook; without one, or when it fails, the request is routed
// load-only. LoRA and namespace salts come from the body's lora_name and
// cache_salt, else from the configured headers (dynamo-compat §1.3).
//
// Tokenizer hook protocol (HTTPTokenizer, CommandTokenizer): the request
// is one JSON object in vLLM's /tokenize shape, {"model", "prompt"} for a
// completion or {"model", "messages", "add_generation_prompt": true} for a
// chat; the reply is one JSON object whose "token_ids" or "tokens" field
// is the u32 token-id list (vLLM's /tokenize reply has "tokens"), at most
// MaxTokenizerReplyBytes. An HTTP hook is POSTed to and must answer 200; a
// command gets the request on stdin, writes the reply on stdout and exits
// 0, one process per call, at most DefaultTokenizerProcesses at once. The
// hook must tokenize exactly as the engines do, or no hash matches. It sits
// behind a circuit breaker (sony/gobreaker): after 5 failed calls in a row
// it is not called for 10 s (text goes load-only at once, counted as
// skipped), then one call decides; a prompt over the limit and a client
// that left do not count as its failures.
//
// Scoring (Decide). The prompt's full blocks are hashed with
// dynamo.Hasher, chained with kv.AppendChain and searched across the
// lanes of the configured DCs in one replica.Searcher pass. Each DC
// becomes a score.Candidate: cached blocks from its lane if the lane is
// ready; load and RTT only when the consumer received them within
// MaxStaleness (the consumer's clock is this host's; a missing or stale
// signal is absent, never zero). The RTT is the consumer's round trip to
// the DC's relay, taken as the router's to the DC's frontend. The
// configured policy (default ttft) picks a DC; the other eligible DCs
// follow by cost as the fallback order.
//
// Failing open. Losing the index costs cache hits, not availability: when
// no DC has the fresh signals the policy needs (the replica missing,
// damaged or left by a stopped consumer, or every DC's reports stale),
// Decide (through follow.Open) scores the DCs on their last known load and
// RTT with cached blocks ignored, else takes DefaultDC, and the answer
// carries HeaderDegraded with the reason (replica-missing,
// replica-damaged, consumer-stale, signals-stale), counted in
// Stats.Degraded. Every DC the policy found ineligible follows the
// eligible ones in the order (DefaultDC first), so a request fails only
// when no DC can be reached. /readyz stays 200 and names the reason.
// FailClosed (`--on-stale=fail`) restores 503 (ErrNoEligibleDC) and the
// eligible-only order. With PriceOthers the router adds
// the uncached prompt tokens of every request it serves to a score.Demand
// and ttft also prices the wait a request's prefill adds for the requests
// behind it at the fleet utilization that gives. Under ttft every relayed
// stream teaches its DC's score.Calibration (the first event's delay
// against the estimate, the rest of the stream as the KV residence) and
// the router's score.Holding (the hold time: first to last event plus the
// estimated prefill, weighted by the prompt's blocks); ttft's wait for KV
// room at a full DC frees its capacity once per hold time (per residence
// before the hold is known); with Calibrate the learned compute factor
// also scales the DC's estimates. Under ttft the router also prices, as
// the sim does, the cached blocks an uncached prefill evicts at a DC whose
// cache turns over fast (score.EvictionFactor of the DC's capacity and
// insert rate, in the cost's others part): each relay counts the blocks
// its DC stored since it started and sends the count in its load reports;
// the consumer keeps the last one in the lane's record, and
// follow.Turnover differences successive records of one relay incarnation
// into the DC's score.InsertRate, on the reports' own clock. Until a DC's
// rate is known (a relay before the counter, a single report, a relay
// restart or a counter that went down) its charge is 0, as it is for a DC
// without fresh load or capacity.
//
// Slow clients. Every request has a deadline: its headers within
// min(10 s, BodyTimeout), then its body within BodyTimeout, whether the
// handler reads it or refuses the request first (net/http drains up to
// 256 KiB of an unread body to reuse the connection; the drain ends at the
// same deadline, and the connection is closed). A stalled body is answered
// 408 and its connection closed, so a client that stops half-way holds a
// connection and its descriptor for at most that long. Each write of an
// answer must go through within IdleTimeout, so a client that stops
// reading a stream is cut as a silent DC is. Keep-alive connections idle
// for two minutes are closed.
//
// Forwarding. The body is read once, bounded by MaxBodyBytes and
// BodyTimeout, and sent unchanged to each DC tried, with the client's
// headers minus hop-by-hop ones, HopHeader and X-Forwarded-For. A failed
// connect or TLS handshake (*DialError, within ConnectTimeout; Config.TLS
// sets the roots and client certificates for https DCs), or an answer
// saying the DC did not take the request on (502 from its gateway,
// Dynamo's 503 with no usable worker or 529 with every worker busy), moves
// on to the next DC, logged and named in X-Goindex-Fallback; nothing has
// reached the client then. Any other answer, and the last DC's whatever it
// is, is relayed as is (status, headers, body) with the diagnostic headers
// of the DC that served; the headers are flushed at once and the body
// after every read, so SSE events stream through, and a client that goes
// away cancels the DC's request (it carries the client's context). A
// request that carries HopHeader is refused (508), which stops loops
// between routers. /v1/models goes to the DCs with fresh signals first,
// then the others. Other /v1/ paths (embeddings, the responses API, ...)
// are forwarded with their method and body unchanged, routed load-only (no
// prompt is read from them), with the same limits, loop check and
// fallback; other paths are 404. /healthz (and /health, Dynamo's
// frontend's name) answers 200 while the process runs; /readyz answers 200
// with the degraded reason, if any, while failing open, and with FailClosed
// 200 only when the replica is attached and at least one DC is eligible,
// 503 with the reason otherwise.
//
// Observability. Config.Observe sees every served completion's Decision
// and the Choice that answered (bridge/obs counts decisions per DC and
// policy and the ttft cost parts from it); Signals reports, for scrapes,
// the attached generation, the consumer's heartbeat age and every DC's
// lane, readiness, eligibility, RTT and load ages.
//
// Replica lifecycle. The file is followed by goindex/follow, as every
// reader of a replica does: New attaches the file if it exists; Refresh
// (every ReplicaPoll under Serve, and at most that often from searches)
// attaches it when missing and attaches the new generation when the
// consumer replaced it. An old mapping is unmapped only after the searches
// holding it end.
//
// # Invariants
//
//   - A request carrying HopHeader never reaches a DC.
//   - A request reaches at most one DC that did not turn it away (502, 503,
//     529); failing closed, a completion is tried only on DCs eligible
//     under the policy, failing open on every DC at last resort.
//   - Cached tokens never exceed the prompt, and depths come only from
//     ready lanes of the configured DCs.
//   - Bodies over MaxBodyBytes and prompts over MaxPromptTokens are refused
//     before any DC sees them.
//
// # Errors
//
// New returns ErrBadConfig and builds nothing. Request failures answer an
// OpenAI-shaped JSON error ({"error": {"message", "type", "code"}}) with
// StatusOf's status: ErrMalformed 400, ErrSlowBody 408, ErrBodyTooLarge and ErrTooManyTokens
// 413, ErrMethod 405, ErrNotFound 404, ErrLoop 508, ErrNoEligibleDC 503,
// ErrUnreachable 502, ErrUpstream 502 or 504. A failed request changes
// nothing but the counters. A tokenizer error (ErrTokenizer) never fails a
// request. A stream cut by its DC mid-way aborts the client's connection
// instead of ending it cleanly.
//
// # Concurrency
//
// ServeHTTP, Decide, Refresh, Ready, Signals and Stats may run concurrently
// from any number of goroutines; each search takes its own replica.Searcher from a
// pool. Close (and Serve's shutdown, which calls it) must not race with
// Refresh.
//
// Non-goals: no multimodal prompts (mm hashes are not extracted, so
// multimodal blocks hash as text), no per-worker choice inside a DC (the
// DC's own router does that), no retries after a DC took a request on
// (beyond net/http's own: a request sent on a reused connection that the
// DC closed without answering goes again on a fresh one), no HTTP/2 to the
// DCs, no environment proxies, no trailers.
//
// # Files
//
//   - config.go: Config and its defaults, DC, ParseDC, DCID.
//   - request.go: Endpoint, Request, ParseRequest (the OpenAI body forms).
//   - tokenizer.go: the Tokenizer hook, its protocol, HTTPTokenizer, CommandTokenizer, DecodeTokenizerReply, its breaker.
//   - replica.go: the replica's follower, the router DCs' lanes per generation, searching them.
//   - decide.go: Prompt, Choice, Decision, Decide: candidates from lane signals, scoring, fallback order.
//   - forward.go: the transport, outgoing requests, connect fallback, streaming relay, diagnostic headers.
//   - router.go: Router, New, Serve, ServeHTTP, request deadlines, the endpoints, Ready, Stats.
//   - signals.go: Signals (the replica's and every DC's signals as a decision sees them, for metrics), Policy.
//   - errors.go: sentinels, DialError, StatusOf.
//
// # Tests
//
// End to end on loopback, against stub DC frontends that record what they
// receive and a replica file written with shm.Writer and real ckf.Producer
// bucket images, the tests prove: under ttft the cache-holding DC wins
// when its prefill saving beats its extra RTT and loses otherwise, with
// the right diagnostic headers and the body and hop header forwarded
// unchanged; SSE events arrive one by one, a stream's headers arrive
// before its first event, and a client's disconnect cancels the DC's
// request; a closed port falls back to the next DC, and so does a failed
// TLS handshake (an untrusted certificate, a silent listener) while a
// trusted https DC serves; all closed is 502; a DC answering 502, 503 or
// 529 falls back to the next, whose answer is relayed even if it is one of
// those; a DC's other HTTP errors are relayed and not retried, a DC silent
// past ResponseTimeout is 504 and not retried, a keep-alive connection the
// DC closes as a request arrives is replaced, not a 502, and a stream the
// DC cuts, or leaves silent past IdleTimeout, reaches the client as an
// error (the DC's request cancelled, Stats.Cut counted); a client that
// leaves while its request queues is counted apart from upstream errors
// (Stats.ClientGone); 500 clients stalled half-way through their
// request (a body in part on paths that read it and paths that never do,
// chunked, headers cut short) are all released at BodyTimeout, counted by
// the server's listener, while normal requests are served beside them; a
// stalled body gets 408 and a closed connection; a client that stops
// reading an endless stream is cut after IdleTimeout and the DC's request
// cancelled; a hopped request is refused; a
// stale load or RTT excludes a DC (all stale: 200 routed on the last known
// signals with the degraded header, still ready; failing closed, 503 and
// not ready); a replica truncated under requests is answered throughout
// and followed once rebuilt; bad
// JSON, wrong shapes, oversize bodies and prompts, wrong methods and paths
// get clear 4xx; text without a tokenizer routes load-only, and HTTP and
// command tokenizers make text cache-aware, a failing one skipped once its
// breaker opens; chat token-id extensions and
// LoRA/namespace salts are hashed; /v1/models, other /v1/ endpoints,
// /healthz, /health and /readyz behave; a new replica generation is
// followed, and one without a lane for a router DC is logged naming it
// and the file's lanes; and many concurrent requests (under -race) all land while
// signals change and the file is replaced. A relayed stream teaches its
// DC's calibration and hold time, and a full DC's KV wait grows with the
// hold learned from its streams (not the residence) while a DC with room
// waits for nothing. Of two DCs alike but for their caches' turnover (load
// records written from wire-encoded load reports with stored-blocks
// counters), the fast-turning one carries a half of its prefill of
// eviction charge once two reports make its insert rate known, which
// turns ttft's choice to the other, shows in the others header, and goes
// back to 0 when its relay restarts; other policies never see it. A randomized test holds Decide
// against a hand-written ttft model over random DC sets, signals and
// cached prefixes, failing open and closed; another holds the token-id scanner to encoding/json on
// random well- and ill-formed arrays; fuzz targets cover ParseRequest, the
// scanner and DecodeTokenizerReply; a test keeps this file map in step.
// Benchmarks (bench_test.go, BENCHMARKS.md) time Decide, the proxy against
// a direct request, and the scanner against encoding/json.
package route
