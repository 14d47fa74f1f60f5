// Package obs is the observability of `goindex relay`, `goindex consume`
// and `goindex route`: Prometheus collectors that read each one's status
// snapshots at scrape time, the HTTP endpoint that serves them with
// /healthz and /readyz, the readiness checks, and the structured stderr
// logger.
//
// # Concepts
//
// Collectors read, they do not count: NewRelayCollector takes one
// relay.Relay.Status per scrape (answered by each pool's writer goroutine
// between two events), NewConsumeCollector one consume.Consumer.Status, and
// RouteMetrics the router's Stats and Signals, so the hot paths carry no
// metric code. The one exception is what only exists per request: the
// router's decisions per DC and policy and the ttft cost parts, which
// RouteMetrics.Observe records (route.Config.Observe calls it once per
// served completion). Counters are the components' own monotonic counters
// since start, exported as Prometheus counters; the producer's own
// (capacity omissions, refusals, unknown removals) restart at 0 when a
// fenced producer is rebuilt, which Prometheus reads as a counter reset.
//
// Endpoint (Handler, Listen; `--metrics-addr host:port`, off by default):
// /metrics in the text or protobuf exposition format, /healthz 200 while
// the process serves, /readyz 200 or 503 with {"ready", "reason"}:
//
//   - relay: every pool set up (its first snapshot stored), none stopped,
//     and every pool's feeds working: a discovery source (etcd,
//     Kubernetes) that has not listed yet, or whose latest request (a
//     list, or the check every 5 s while watching, each bounded by 10 s)
//     failed, makes the relay not ready, with the source and its error as
//     the reason, until a list succeeds;
//   - consume: ReadyAnyLane (default; `--ready-lanes any`) at least one
//     lane READY, ReadyAllLanes (`--ready-lanes all`) every configured
//     lane READY. "any" suits a sidecar: a router with one DC's cache
//     signals routes better than none, and the other DCs still take load
//     and RTT into account;
//   - route: the replica attached and at least one DC eligible under the
//     policy (route.Router.Ready; also on route's own listener).
//
// The endpoint bounds its clients: a whole request, headers and any body,
// must arrive within 10 s (headers within 5 s), an answer must be written
// within 30 s, and an idle keep-alive connection is closed after 2 min, so
// a client that stops half-way holds a connection at most that long.
//
// Logs (NewLogger; `--log-format text|json`, `--log-level`): every line
// about one pool carries pool="domain/dc" (relay.PoolLogKey) and, once
// claimed, the relay's incarnation; every line about a consumer lane
// carries lane, pool and, inside a subscription, lease (the lease epoch)
// and the relay incarnation it follows; route lines about a DC carry dc
// (name) and dc_id.
//
// # Metrics
//
// Names start with goindex_; relay series carry labels domain and dc,
// consume lane series lane and dc, route DC series dc (the DC's name).
//
//	metric                                   type       labels           meaning
//	relay_ready                              gauge                       1: every pool set up, running, feeds working
//	relay_pool_running                       gauge                       1 while the pool's writer loop serves
//	relay_feeds_ready                        gauge                       1 while the pool's feeds work (discovery listed, answering)
//	relay_pool_info                          gauge      incarnation, layout_generation   producer identity (1)
//	relay_messages_total                     counter                     messages on the event subjects
//	relay_events_total                       counter                     primary-index events handed to the producer
//	relay_events_applied_total               counter                     events applied (handed over, not refused)
//	relay_rejected_total                     counter    reason           not applied: non_primary, unsupported, malformed,
//	                                                                     too_large, wrong_topic, duplicate, untracked_publisher,
//	                                                                     bad_frames, identity, producer
//	relay_intake_total                       counter    kind             load_samples, engine_batches, replayed_batches, resyncs,
//	                                                                     late (below the highest sequence, filling a gap)
//	relay_envelope_gaps_total                counter                     sequences a publisher skipped (gaps − late: missing)
//	relay_untracked_workers_total            counter                     samples/events of workers not tracked (table full)
//	relay_producer_refusals_total            counter    reason           missing_parent, remap, invalid_sequence, ownership_overflow
//	relay_unknown_removals_total             counter                     removals of blocks the member did not map
//	relay_capacity_omissions_total           counter                     blocks tracked but not admitted to the filter
//	relay_load_factor                        gauge                       resident fingerprints / (4 · buckets)
//	relay_tracked_blocks                     gauge                       (member, block) mappings
//	relay_resident_fingerprints              gauge                       canonical blocks in the filter
//	relay_canonical_blocks                   gauge                       canonical blocks with an owner
//	relay_members                            gauge                       members mapping a block
//	relay_buckets                            gauge                       filter buckets
//	relay_producer_memory_bytes              gauge                       producer memory estimate
//	relay_pending_events                     gauge                       events in the open publication window
//	relay_frames_published_total             counter    type             frames put on NATS by frame type
//	relay_published_bytes_total              counter    type             their bytes
//	relay_sequence                           gauge                       last sequence assigned
//	relay_deltas_total                       counter                     delta frames delivered
//	relay_fenced                             gauge                       1 while the publisher is fenced
//	relay_snapshots_total                    counter                     snapshots stored
//	relay_snapshot_bytes                     gauge                       stored snapshot size
//	relay_snapshot_sequence                  gauge                       stored snapshot's terminal sequence
//	relay_log_stream_sequence                gauge                       stream sequence of the last log write
//	relay_rebuilds_total                     counter                     new layout generations after a fence
//	relay_checkpoints_total                  counter    result           checkpoints written, failed
//	relay_checkpoint_bytes                   gauge                       last checkpoint's size
//	relay_restored_members_total             counter    outcome          checkpoint members restored, kept, cleared
//	relay_restored_blocks_total              counter                     blocks restored at start
//	consume_lanes                            gauge                       lanes of the replica
//	consume_lanes_ready                      gauge                       lanes READY
//	consume_replica_rebuilds_total           counter                     replica files rewritten after damage
//	consume_lane_ready                       gauge                       1 while READY
//	consume_lane_state                       gauge      state            1 for the current state
//	consume_lane_lease_epoch                 gauge                       current lease epoch
//	consume_lane_identity_info               gauge      incarnation      relay incarnation assigned (1)
//	consume_lane_installed_sequence          gauge                       last sequence installed
//	consume_lane_latest_sequence             gauge                       highest sequence known published
//	consume_lane_sequence_lag                gauge                       latest − installed
//	consume_lane_pending_messages            gauge                       log messages beyond the last applied
//	consume_lane_drained                     gauge                       1: the relay's drain marker acknowledged
//	consume_lane_frames_received_total       counter    type             frames received (invalid: undecodable)
//	consume_lane_received_bytes_total        counter    type             their bytes
//	consume_lane_deltas_applied_total        counter                     deltas applied
//	consume_lane_snapshots_installed_total   counter                     snapshots installed
//	consume_lane_snapshot_requests_total     counter                     fresh snapshots asked of the relay
//	consume_lane_faults_total                counter                     faulting messages and bad frames
//	consume_lane_resyncs_total               counter                     subscriptions ended and retried
//	consume_lane_catchups_total              counter                     subscriptions that replayed the log to its tail
//	consume_lane_integrity_failures_total    counter                     lane words found damaged in the file (resynced)
//	consume_lane_rtt_seconds                 gauge                       last RTT to the DC's relay
//	consume_lane_load_active_blocks          gauge                       last load report: tracked blocks
//	consume_lane_load_queued_prefill_tokens  gauge                       last load report: queued prefill tokens
//	consume_lane_load_active_decode_blocks   gauge                       last load report: decode blocks
//	consume_lane_load_live_workers           gauge                       last load report: live workers
//	consume_lane_load_capacity_blocks        gauge                       last load report: capacity (0: unknown)
//	route_decisions_total                    counter    dc, policy       completions served, by DC and deciding policy
//	route_cached_tokens_total                counter    dc               cached prompt tokens at the serving DC
//	route_prompt_tokens_total                counter    dc               prompt tokens served
//	route_cost_part_ms                       histogram  dc, part         ttft terms of the serving DC: rtt, queue, prefill (others with --price-others)
//	route_requests_total                     counter                     completion requests received
//	route_load_only_total                    counter                     routed without a hashed prompt
//	route_tokenizer_errors_total             counter                     tokenizer failures
//	route_tokenizer_skipped_total            counter                     tokenizer calls skipped, its breaker open
//	route_failures_total                     counter    reason           rejected, loop, unroutable, upstream, client_gone
//	route_fallbacks_total                    counter                     DCs skipped after a refused connect or a 502/503/529
//	route_models_requests_total              counter                     /v1/models forwarded
//	route_other_requests_total               counter                     other /v1/ requests forwarded
//	route_cut_total                          counter                     answers cut mid-body (DC failed or went silent)
//	route_degraded_total                     counter    reason           decisions without fresh signals (fail-open), by why
//	route_replica_state                      gauge      state            1 for the replica's health: healthy, replica-missing, replica-damaged, consumer-stale
//	route_replica_bad_lanes                  gauge                       lanes failing their integrity check
//	route_replica_integrity_failures_total   counter                     lanes found failing it
//	route_replica_faults_total               counter                     searches of the mapping that faulted
//	route_replica_attached                   gauge                       1 while a replica is attached
//	route_replica_generation                 gauge                       attached generation (0: none)
//	route_replica_age_seconds                gauge                       since the consumer last touched the replica
//	route_eligible_dcs                       gauge                       DCs eligible under the policy
//	route_dc_lane                            gauge      dc               1: the replica has the DC's lane
//	route_dc_lane_ready                      gauge      dc               1: that lane is ready
//	route_dc_eligible                        gauge      dc               1: eligible under the policy
//	route_dc_rtt_seconds                     gauge      dc               last RTT (absent before the first)
//	route_dc_rtt_age_seconds                 gauge      dc               since it was measured
//	route_dc_load_age_seconds                gauge      dc               since the last load report arrived
//
// Besides these, every endpoint serves the Go runtime's go_* and the
// process's process_* metrics.
//
// # Errors
//
// NewLogger, Listen and ConsumeReady return ErrBadConfig and build
// nothing. A readiness check's error wraps ErrNotReady and says why. A
// relay Status that fails during a scrape (timeout) drops the relay's
// series from that scrape and reports the error; the other series are
// served.
//
// # Concurrency
//
// Collect, Observe and the readiness checks may run from any goroutine,
// concurrently with the components they read.
//
// Non-goals: no push gateway, no OpenTelemetry, no per-event or
// per-request timing inside the relay or consumer hot paths, no metrics
// of the C library (goindex_stats reports its own counters).
//
// # Files
//
//   - desc.go: metric families of const metrics, shared label helpers.
//   - relay.go: the relay collector and readiness.
//   - consume.go: the consumer collector and readiness policies.
//   - route.go: RouteMetrics (decisions, cost parts, router counters and signals) and route readiness.
//   - server.go: NewRegistry, Handler (/metrics, /healthz, /readyz), Listen, Server.
//   - log.go: NewLogger (text or JSON, level).
//   - errors.go: sentinels.
//
// # Tests
//
// Against a real relay, consumer and router on an embedded NATS server and
// loopback HTTP, the tests scrape the endpoints and prove: the relay's
// applied events equal the events sent and its published frames and bytes
// grow with them; /readyz is 503 before the relay and the consumer are
// set up and 200 after; every lane reports READY 1, its deltas and
// received frames match the relay's published ones, and its RTT appears;
// the router counts a decision per served request under its DC and
// policy with cost-part observations, and its readiness follows the
// replica; 500 clients stalled half-way through their requests are all
// released at the read timeout while scrapes are served beside them;
// structured logs carry pool, lane and lease; bad log formats,
// levels and readiness policies are refused; and every metric described
// is in this file's table.
package obs
