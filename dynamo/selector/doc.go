// Package selector is the decision logic of goindex's Dynamo worker-selector
// plugin (C ABI "v1", dynamo-compat §5a; no Dynamo release loads it, the
// loaders were proposed upstream and not merged): Dynamo hands the plugin
// its already-eligible candidate workers (as rows or as columns, the ffi
// reads both) and the plugin picks one. The input carries no block hashes,
// so the plugin cannot probe goindex per request; it applies goindex's cost
// model (package score) to Dynamo's own overlap figures: estimated time to
// first token = queue wait + prefill of the uncached prompt (+ KV admission
// wait when decodes fill the worker), with RTT 0 inside one DC.
//
// The C side (ffi) decodes the host's structs into Request and Candidate and
// maps the Decision to the ABI's status codes. A signal the policy needs
// but the host did not provide makes Select answer UseDefault with the
// reason (Decision.Why), so Dynamo runs its own selector instead of a
// decision built on zeros.
//
// With a Source (a Replica: goindex's shared replica followed through
// goindex/follow, which Open makes when the config names one) the throughput rates are the DC's measured ones from its
// relay's load report: one request's prefill speed per worker, and the
// DC-wide queue and decode rates shared by its live workers. A Source that
// fails (replica missing, lane not ready, report stale) makes Select answer
// UseDefault with the Source's error: stale signals are never used.
//
// Config comes from DYN_ROUTER_WORKER_SELECTOR_CONFIG as JSON (all keys
// optional): {"policy": "ttft"|"credit"|"load-only"|"prefix-then-load",
// "prefill_tokens_per_ms": 20, "queue_tokens_per_ms": 20,
// "decode_blocks_per_ms": 1, "credit": 1, "replica": "/abs/path", "dc": 3,
// "max_staleness_ms": 5000}. Unknown keys are rejected.
//
// A Selector is safe for concurrent use (Dynamo serializes select per
// state, and decode and prefill states are separate Selectors). It caches
// one scorer per block size, at most eight.
//
// Files:
//   - selector.go: Config, ParseConfig, Selector, Request, Candidate,
//     DCRates, Source, Select.
//   - replica.go: Replica, the Source of a config's replica (its DC's
//     load report through goindex/follow, and the follower's verdicts).
//   - errors.go: ErrBadConfig, ErrBadInput, ErrUseDefault, ErrReplicaUnusable.
//
// Tests check the config parser (the replica keys too), input requirements
// per policy, the UseDefault fallbacks and their reasons, the decisions
// against score's cost arithmetic with the config's and a Source's rates,
// the bound on the scorer cache, and a Replica's rates and every one of
// the follower's verdicts on replica files written as the consumer writes
// them.
package selector
