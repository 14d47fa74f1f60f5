// Package selector is the decision logic of goindex's Dynamo worker-selector
// plugin (Dynamo ≥ 1.3.0, C ABI v1, dynamo-compat §5a): Dynamo hands the
// plugin its already-eligible candidate workers as columns (cached tokens,
// load, capacity) and the plugin picks one. The input carries no block
// hashes, so the plugin cannot probe goindex per request; it applies
// goindex's cost model (package score) to Dynamo's own overlap figures:
// estimated time to first token = queue wait + prefill of the uncached
// prompt (+ KV admission wait when decodes fill the worker), with RTT 0
// inside one DC.
//
// The C side (ffi) decodes the host's structs into Request and Candidate and
// maps the Decision to the ABI's status codes. A candidate column the policy
// needs but the host did not provide makes Select answer UseDefault, so
// Dynamo runs its own selector instead of a decision built on zeros.
//
// Config comes from DYN_ROUTER_WORKER_SELECTOR_CONFIG as JSON (all keys
// optional): {"policy": "ttft"|"credit"|"load-only"|"prefix-then-load",
// "prefill_tokens_per_ms": 20, "queue_tokens_per_ms": 20,
// "decode_blocks_per_ms": 1, "credit": 1}. Unknown keys are rejected.
//
// A Selector is safe for concurrent use (Dynamo serializes select per
// state, and decode and prefill states are separate Selectors).
//
// Files:
//   - selector.go: Config, ParseConfig, Selector, Request, Candidate, Select.
//
// Tests check the config parser, input requirements per policy, the
// USE_DEFAULT fallbacks and the decisions against score's cost arithmetic.
package selector
