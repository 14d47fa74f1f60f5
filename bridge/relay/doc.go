// Package relay is the DC relay: it consumes the DC's Dynamo KV events (from
// NATS, and through Feeds from Dynamo's ZMQ event plane or the engines' own
// ZMQ publishers), keeps exact ownership and a CKF filter per pool (domain, DC) in a
// ckf.Producer, and publishes the filter to every router site over NATS
// JetStream: an ordered delta log with bounded retention, a stored
// snapshot that cold consumers resync from without asking the relay, load
// reports, and a ping responder for RTT.
//
// # Concepts
//
// Intake: each pool subscribes, on NATS, to every subject Dynamo released
// (PoolConfig.Scopes): the endpoint scope of v1.4 on
// (namespace.<ns>.component.<comp>.endpoint.<ep>.kv-events, a msgpack
// EventEnvelope carrying a list of RouterEvents), the component scope of
// v1.3 and older (….component.<comp>.kv-events, one RouterEvent per
// envelope) and the G2025 subject (….kv_events, one JSON RouterEvent per
// message); the payload shape is told by its first byte, so no release is
// configured. Feeds (feed.go) deliver ZMQ messages to the same writer
// goroutine: Dynamo event-plane messages, whose frames and identity are
// checked (bad ones counted by reason and dropped), and vLLM/SGLang batches,
// normalized by Dynamo's rules. Each publisher's envelopes pass a window of
// its recent sequences (window.go), as Dynamo's HA-broker subscriber drops
// copies: a sequence above the highest is taken and the ones it skipped
// count as gaps; one below it that was never taken is taken late (another
// broker's copy of one the first lost: IntakeStats.Late); a copy, or one
// too old to tell, is dropped as a duplicate. Late events apply out of
// order, as in Dynamo's router. Only events for the primary index reach
// the producer (worker-owned device-tier stores and removals, clears of
// every domain or the worker's: Dynamo's targets_primary); an event
// Dynamo's residency rules refuse is skipped alone and counted
// (IntakeStats.Unsupported), not its whole message. A feed source that is gone, or whose engine
// stream lost what its replay could not cover, has its members cleared;
// so does a NATS publisher whose discovery record a feed saw go (a Source
// with NATS set: the members whose latest events came in its envelopes).
// Load: Dynamo's ActiveLoad on kv_metrics (endpoint scope; namespace scope
// for older releases, then for workers seen in events only) and goindex's
// JSON WorkerLoad samples (PoolConfig.Loads). A report's live workers are
// those something says are present, not only those that spoke lately:
// Dynamo debounces ActiveLoad (a value goes out only when it changes), so
// the idle worker a router should send work to is a silent one. A worker
// counts while any feed source whose departure is reported
// (Source.ReportsGone: a discovered or expiring ZMQ publisher, a NATS
// publisher whose record a feed follows, announced by KindPresent) that
// delivered its KV events or its own ActiveLoad (one carrying
// kv_used_blocks; a router's view of it does not hold it) is present,
// while its KV event source record is (KindWorkerPresent from a source
// that reports its going, until that source's KindGone), and while its
// instance record is (KindWorkerPresent from another source, broker mode
// with discovery, until KindWorkerGone drops it at once). Other workers count
// while they sent something within Config.LiveWindow, and so do held ones
// once their sources' KindGone came (the window counted from their last
// message, so an idle one leaves at the next report). Holds are bounded:
// 8 sources per worker, 64 workers per source (a publisher speaks for one
// worker), in the 4,096-worker table. Each load report also counts
// the blocks stored since the relay started (every block of every applied
// device-tier store event, re-stores included; transport duplicates are
// dropped before): a router differences it into the DC's insert rate. A
// report carrying the counter goes on P.D.C.load-stored; the same sample
// without it on P.D.C.load (and the state bucket) for consumers that
// decode only the load report's older 12-field layout.
// A rank's ActiveLoad comes from two kinds of sender, kept apart: the
// worker itself (samples carrying kv_used_blocks, perhaps its active
// decode blocks) and each router (frontend) with its scheduler's view
// (decode blocks, queued prefill tokens). Router views are keyed by
// publisher and merged — summed, since without Dynamo's replica sync (its
// default) a frontend's view holds only its own requests, or by their
// maximum with Config.RouterReplicaSync — and a view leaves with its
// publisher's KindGone or after routerViewLife live windows without a
// newer one. Decode blocks are the worker's own when it sends them, else
// the routers', else its KV occupancy.
// Where DCs share one subject space (leaf nodes joined to a hub), the event
// plane subjects must stay local to their DC: deny their export on the leaf
// remote, or give each DC's component its own name (as the end-to-end tests
// do); otherwise a relay would ingest another DC's events.
//
// Publication: the cadence is the producer's (N events, default 16, or the
// FlushAfter timer, default 1 ms). Each boundary's batch goes through a
// publish.Fanout [EXT] into the delta log, cut to the server's
// max payload; every frame is one stream message, published with the
// stream's expected last sequence. Snapshots (compact encoding by default)
// are stored as one object whose metadata name the terminal sequence N and
// the stream sequence of the last log message they reflect: a cold consumer
// installs the object and reads the log after that position. The stored
// snapshot is refreshed every SnapshotEvery (when deltas were published) and
// on request; the requests that arrive while the loop is busy are answered
// together by one snapshot taken after all of them. Heartbeats fill an idle log; a graceful shutdown ends it with
// a drain marker. A PoolConfig.Source stands in for the producer: the same
// publisher, log and store carry its words, and the pool takes no events
// (measurements at a scale whose exact state would not fit in memory).
//
// Identity and fencing: a starting relay claims each pool in its state
// bucket with a new incarnation (above the previous owner's and the clock),
// so a restart always means a new identity and a re-snapshot on every lane.
// A publish that finds the log moved by someone else reads the claim: a
// newer owner means this relay was superseded and the pool stops
// (ErrSuperseded): two producers of one pool are fenced, never merged.
// After an uncertain publish (NATS restart, timeout) the publisher is
// fenced and the pool retries to re-read the log position and store a new
// snapshot (publish burns the uncertain sequences), dropping batches
// meanwhile (the snapshot covers them). JetStream writes run on the pool's
// goroutine, so none is tried while the NATS connection is down (it fails
// at once and fences), and failing ones (the recovery, heartbeats, a
// snapshot refresh) are spaced from RetryEvery doubling to 10 s
// (internal/backoff, jittered): the
// intake goes on through an outage at full speed instead of waiting out a
// PublishTimeout on every tick, which used to overflow the workers'
// sockets and lose their events. While fenced, only the delta log's
// writes wait: load reports, expiry and checkpoints go on. A publication
// that falls due takes the messages already queued first (up to the
// queue's length), so a relay behind its inputs publishes its backlog in
// a few deltas, each waiting for one acknowledgement, instead of one per
// BatchEvents events. A
// producer fenced by an invariant violation is rebuilt empty as the next
// layout generation.
//
// Restart (Config.CheckpointDir): each pool writes a checkpoint file, its
// exact state (every member's source block → canonical mappings) filed
// under the publisher of the member's latest envelope with that
// publisher's last sequence, every CheckpointEvery and on a graceful stop
// (temporary file, sync, rename; XXH3 checksum). A starting pool restores
// it into its producer before its first snapshot, as one-block root stores
// (the filter's layout differs, its membership does not; its event inputs
// already run meanwhile, their messages queued, so the restore's own time
// opens no gap), and keeps every
// restored member on probation: its publisher's first envelope keeps the
// publisher's members when its sequence is the next one (nothing was
// missed while the relay was down) and clears them otherwise (a gap, or a
// sequence at or below the last: the worker restarted); a member's events
// from another publisher (a restarted worker's new id) clear it first; and
// members still unproven after CheckpointGrace are cleared. So a restored
// block outlives the worker's dropping it by at most the grace, never by
// more than a missed removal does today after a live gap. Members fed by
// engine feeds or the legacy JSON subject carry no envelope sequence and
// are not checkpointed. A missing, damaged, foreign or other-version file
// (ErrCheckpoint, ErrCheckpointVersion) is logged and the pool starts
// empty. Dynamo's own router persists its radix tree and recovers a
// worker's events from the worker's local indexer; goindex's relay keeps
// its state locally instead, and proves continuity from the event plane's
// own sequence numbers.
//
// Subjects and assets (P = Config.Prefix, default "goindex"; D = domain id,
// C = DC id, decimal): see Names. In short: P.D.C.delta (the log),
// P.D.C.load, P.D.C.load-stored, P.D.C.ping, P.D.C.snapshot,
// P.D.C.worker-load, P.D.discover;
// stream P-D-C-delta, object store P-D-C-snapshot, KV P-D-C-state (P
// escaped one to one into asset names by AssetPrefix).
//
// # Invariants
//
//   - A stored snapshot at sequence N plus the log's deltas N+1..M of its
//     identity reproduce the producer's words at the cut of M, byte for byte.
//   - No delta goes out after a failed one until a newer snapshot is stored.
//   - Every relay start has a new, larger incarnation per pool.
//
// # Errors
//
// New returns ErrBadConfig and does nothing else. Run first waits for the
// NATS connection (nil if ctx ends meanwhile, an error for a closed
// connection), then returns a *PoolError
// when a pool cannot be set up (nothing keeps running) and the pools' own
// errors (ErrSuperseded) when they stop; a stopped pool never disturbs the
// others. DecodeInfo and DecodeWorkerLoad return ErrTooLarge or
// ErrMalformed and nothing else.
//
// # Concurrency
//
// Each pool has one writer goroutine that owns its producer, publisher and
// intake state; NATS callbacks only hand it messages. Status, AppendWords,
// Flush, Snapshot, Watch, Catalog, Load, Info and Close may be called from
// any goroutine while Run runs.
//
// # Watches
//
// Watch serves transports other than NATS (bridge/kvrelay's Pool Relay
// gRPC contract) from a publication of its own beside the delta log: every
// drained batch goes to the watches first, as deltas of their own sequence,
// then to the log unless it is fenced. So a watch is served through an
// outage of NATS or JetStream, and a fence, an uncertain publish or a
// stored snapshot never disturbs it. On the writer goroutine Watch
// publishes the pending window, copies the words (the watches'
// publication's state at its last sequence, exactly) and registers a
// channel that then gets, in order, the deltas, heartbeats while idle, a
// rebuilt producer's words whole, and the drain marker at a graceful stop.
// The pool never waits for a watch: one whose buffer is full is dropped
// (ErrLagged).
// Catalog and Load give the live pools' identities (with a change
// channel) and their last load reports, with how many live workers sent
// the load samples summed in them and the oldest sample's time (Coverage:
// a partial sum reads as less load than there is).
//
// Non-goals: no recovery of events lost in an envelope gap (that would need
// the workers' dumps through ckf.ReplaceRanks; gaps are counted and
// logged), no standby relay, no per-consumer leases (fan-out only).
//
// # Files
//
//   - config.go: Config, PoolConfig, EventScopes, LoadSources, defaults.
//   - names.go: Names (subjects, stream and bucket names), Info, WorkerLoad and their decoders.
//   - relay.go: Relay: New, Run, Close, Status, AppendWords, Flush, Snapshot.
//   - pool.go: one pool's setup, claim, writer loop, publication, fencing and shutdown.
//   - sinks.go: the JetStream delta log and snapshot store behind the publisher.
//   - intake.go: decoding Dynamo messages, duplicate, gap and late accounting.
//   - window.go: seqWindow, a stream's recently taken sequences (publishers
//     and engine sources).
//   - feed.go: Feed, HealthReporter, Message and Source: the intake of
//     non-NATS transports; a feed that says it does not work (its
//     discovery failing) shows in PoolStatus.FeedErr.
//   - load.go: worker liveness and load aggregation into load reports.
//   - watch.go: Watch: a pool's publication from a consistent start, for other transports.
//   - status.go: Supervise (Run with periodic status), LogStatus, WriteStatus.
//   - checkpoint.go: the checkpoint file's layout, writer and decoder.
//   - recover.go: checkpointing a pool, restoring it at start, the continuity test and grace, CheckpointStats.
//   - errors.go: sentinels and PoolError.
//
// # Tests
//
// The tests prove that one message per Dynamo release shape, published on
// that release's subject, is taken without naming the release (and that
// Scopes selects the subjects), that ActiveLoad samples merge by field and
// rank into load reports, two frontends' views of a worker summed (their
// maximum with replica sync) whatever their order, a departed or silent
// router's view dropped, a worker's own decode blocks preferred, and at
// most maxRouterViews views a rank kept against a flood of router ids, that a stored snapshot plus the log reproduce the
// producer's words after random event streams (including a mid-stream
// snapshot and a legacy JSON event), that pings answer the identity and
// asset names, that relays of one pool under two prefixes run side by side
// with every asset and subject under their own prefix, that load reports
// count live workers, that an idle worker fed by a present source whose
// departure is reported (a ZMQ publisher, a followed NATS one) stays in
// the reports' live workers and capacity 20 live windows into its silence
// and leaves once its last such source's KindGone came, while one fed by
// an unreported source leaves after the window, that KindWorkerPresent
// holds a silent worker at the configured capacity until KindWorkerGone,
// or, from a source that reports its going (a KV event source record),
// until that source's KindGone, which clears nothing its publisher fed,
// that a router's ActiveLoad (no kv_used_blocks) holds nothing, that a
// followed NATS publisher outlasts made-up ones in the pool's publisher
// table, that a relay started before its NATS server waits
// for it and then sets its pools up, that a pool takes every event of a
// worker while its NATS server is down and recovers with a snapshot
// holding them once it is back, that a queued backlog goes out in a few
// deltas, that load reports go on while the publication is fenced, that
// a burst of snapshot requests costs one snapshot, that a graceful stop
// ends the log with a drain marker, that a restart takes a larger
// incarnation and stores an empty snapshot (without a checkpoint), that a
// restart with a checkpoint restores the exact state into its first
// snapshot and then keeps exactly the workers whose next sequence proves
// continuity, clearing a worker with a gap, one restarted under a new
// publisher id and one whose sequence reset (and, over the ZMQ event
// plane, keeps the continuing workers and clears one with a gap), that
// restored workers that
// send nothing are cleared after the grace, that damaged, cut and
// other-version checkpoints are refused (and, fuzzed, never panic the
// decoder), that a second relay of a pool
// supersedes the first, that a pool given a Source stores its words and
// logs its drained images and subscribes to no events, that bad configs are refused (a wildcard, space or
// empty token in a namespace or component, which would subscribe the
// unescaped legacy subject to other pools' events), and (fuzz) that the
// Info and WorkerLoad decoders never panic and respect their limits. The
// sequence window matches an exact reference (a set of taken sequences)
// on random streams, and an intake fed two lossy, interleaved copies of
// each publisher's stream, one lagging by up to the window, takes every
// sequence either copy had exactly once, with Gaps − Late the ones both
// lost; a late copy from a slower broker is taken. The
// Hostile tests flood the intake with made-up publishers and the load
// tracker with made-up workers (both tables stay at their bound, the
// excess is counted, the live heap stays within a few MiB, a real
// publisher keeps its place; a present source holds at most 64 forged
// workers and a worker at most 8 sources), check that forged huge load samples
// saturate the report's sums instead of wrapping, that bad envelopes are
// counted by reason and yield nothing, and that a running relay takes
// events from its own pool's subjects only. A requested snapshot first
// passes messages other clients appended to the delta log (when the pool
// is still this relay's), so a consumer that hit a poison message starts
// its next subscription after it (tests/hostile). A watch starts from the
// pool's words at its last sequence with the pending window published
// first, its deltas keep a copy byte-identical to the pool's words, it
// sees heartbeats, stored snapshots and the drain marker, a watch that
// falls behind is dropped alone, and the catalog drops a stopped pool.
package relay
