// Package kvrelay speaks Dynamo's Pool Relay contract,
// dynamo.kvrelay.v1.KvEventRelay (dynamo-llm 1.6.x "KV DC Relay", 1.7.0
// "Pool Relay"): a Server publishes a Source's pools in it, and Follow
// keeps one of goindex's lanes in step with an upstream relay's pool, so
// that either side can be goindex's.
//
// # The contract
//
// Every top-level message carries contract_marker (field 127) =
// 0x4B565231; every response protocol_version 1 and the relay's identity.
// A mismatch is FAILED_PRECONDITION with reason CONTRACT_MISMATCH in the
// "kv-relay-error-reason" trailer, and Follow stops rather than retry.
// WatchKvPoolCatalog sends complete catalogs (a pool absent from one is
// withdrawn). SubscribeKvPool names an exact producer generation from the
// catalog (another one is FAILED_PRECONDITION / PRODUCER_CHANGED, an
// unknown pool NOT_FOUND / POOL_NOT_FOUND) and streams the CBI1 chunks of
// one snapshot (package cbi1), then contiguous deltas (base = the
// installed sequence, sequence = base + 1), heartbeats between that do not
// advance the sequence. SubscribeKvPoolLoad sends complete load windows.
// SubscribeServingReadiness sends a complete topology projection (per
// namespace and model: READY, UNAVAILABLE or UNKNOWN, the roles present
// and missing, the member endpoints with their pool ids) now and again
// every ReadinessInterval, with a revision that moves when it changes;
// SubscribeServingLoad (additive to v1) complete windows of pool and model
// load, each with a data status (COMPLETE sets the gauges, DEGRADED and
// UNAVAILABLE leave them unset). A Source that is not a ReadinessSource or
// a ServingLoadSource answers those UNIMPLEMENTED / UNSUPPORTED_FEATURE.
// Subscriber ids are 1..128 bytes. Messages are bounded at 8 MiB.
//
// # Following
//
// Follow checks the relay, watches the catalog, subscribes to the current
// producer of its DC, assembles and installs the snapshot into its Lane and
// applies deltas. A gap (a delta off the installed sequence, a heartbeat
// ahead of it), a frame of another producer or format, a CBI1 error, a
// broken stream or a new producer generation retires the lane and starts
// over from a snapshot after Retry; other lanes are untouched (spec §5.3's
// rule: a fault is local to its lane). So does a relay that stops answering: a
// GetRelayInfo every PingEvery, each bounded by CallTimeout, of which
// MaxMissedProbes failing in a row end the session (a hung relay behind a
// connection that stays up would leave its stream open and silent, and
// the lane served as current, for as long as TCP lets it). The wait
// doubles, up to MaxRetry, with each session that ends (a relay down or
// refusing, or failing soon after each install), and starts over after one
// that served its snapshot for MaxRetry (internal/backoff, jittered).
// Optional hooks see every FilterUpdate (OnUpdate), the load windows
// (OnLoad), each probe's round trip (OnRTT) and each session's end with
// the wait after it (OnRetry); Resync ends the session so the lane
// starts over from a snapshot (a consumer found its words damaged); every
// goroutine of a session, and so every Lane call and hook, has returned
// when Follow does.
//
// # Serving goindex's relay
//
// RelaySource is the Source of a bridge/relay.Relay (goindex relay
// --kvrelay-listen): its live pools make the catalog (ProducerOf maps a
// goindex identity: dc_id the DC, the domain id in both 16-byte indexer
// domain digests, the relay's incarnation and layout generation), a
// subscription is a relay.Watch (the pool's words at its last sequence,
// copied in the pool's writer loop after the pending window is published,
// then its deltas and heartbeats, in a publication of their own beside the
// NATS delta log, so that subscribers are served through the relay's NATS
// or JetStream outage), and its load reports make the load windows, the
// readiness projection (READY while a worker is live) and the serving load
// (COMPLETE once every live worker sent load samples). What a stream
// cannot carry (a rebuilt pool's new layout generation, the drain marker,
// a subscriber that fell behind) ends it with the contract's reason, and
// the subscriber starts over.
//
// Non-goals: TLS (the contract is plaintext HTTP/2, behind a
// TLS-terminating proxy); model load from frontends (goindex's relay sees
// none).
//
// Files:
//   - contract.go: the envelope constants and the checks of markers,
//     versions, subscriber ids, producers and catalog entries.
//   - server.go: Source, Update, Server and its RPCs.
//   - relaysource.go: RelaySource, ProducerOf, CheckPool: goindex's relay
//     as a Source, with its readiness projection and serving load.
//   - follow.go: Lane, FollowConfig, Follow and the stream rules.
//   - replica.go: ReplicaLane, the Lane of one lane of goindex's replica
//     file (what `goindex consume --upstream-relay` follows into).
//   - errors.go: sentinels, the reason trailer, Reason.
//   - generate.sh (not Go): regenerates kvrelaypb from kvrelaypb/relay.proto.
//
// The tests run a Server and Follow against each other over loopback gRPC
// (a chunked snapshot, random deltas, heartbeats, a lost delta, a new
// producer generation, load windows: the lane ends byte-identical to the
// pool), check every refusal's code and reason, a relay of another
// protocol version, and every stream rule one frame at a time; sessions
// that install nothing or fail right after their install back off (a
// logarithmic number in a window, doubling waits) and one that served
// starts the backoff over. Over
// goindex's own relay (embedded NATS, real events) a followed lane ends
// byte-identical to the relay's words and sequence through deltas, a
// fenced NATS log (an uncertain publish there leaves the stream
// undisturbed), and a restart behind the same address; a raw subscriber sees chunks, then contiguous deltas and
// heartbeats, and upstream-valid identities; a subscriber that does not
// read ends SUBSCRIBER_LAGGED; its readiness turns READY with a new
// revision when a worker is live, and its serving load goes UNAVAILABLE,
// DEGRADED, COMPLETE as workers send load samples. tests/kvrelay checks a `goindex relay
// --kvrelay-listen` process from Python, apart from this package: Debian's
// python3-grpcio, messages protoc generates from relay.proto at test time,
// the marker read from the wire bytes, CBI1 decoded and its checksums
// verified with python3-xxhash, the stream order, a follower equal to a
// fresh snapshot at the same sequence, and a restart.
package kvrelay
