package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/zmqfeed"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/snapenc"
	"github.com/nats-io/nats.go/jetstream"
)

const relaySynopsis = `Usage: goindex relay --dc ID [--nats URL] [--domain D --namespace NS --component COMP] [--json]

Runs a DC relay: consumes the DC's Dynamo KV events, keeps exact ownership
and a CKF filter per pool (domain, DC), and publishes the filter to every
router site over JetStream. Without --nats it starts an embedded nats-server
with JetStream on a temporary store (listening on --listen).

Input on NATS (Dynamo with DYN_EVENT_PLANE=nats; every release's subjects by
default, the payload shape is detected, no release is named):
  namespace.<NS>.component.<COMP>.endpoint.<EP>.kv-events   v1.4+: msgpack EventEnvelope,
                                               payload a list of RouterEvents (--event-scope endpoint)
  namespace.<NS>.component.<COMP>.kv-events   v1.3 and older: one RouterEvent per
                                               envelope (--event-scope component)
  namespace.<NS>.component.<COMP>.kv_events   G2025 JSON RouterEvent (component)
  namespace.<NS>.component.<COMP>.endpoint.<EP>.kv_metrics  Dynamo's ActiveLoad (endpoint)
  namespace.<NS>.kv_metrics                    ActiveLoad of older releases (component;
                                               only for workers seen in events)
  <P>.<D>.<DC>.worker-load                     goindex's JSON {worker_id, queued_prefill_tokens,
                                               active_decode_blocks, capacity_blocks}
  Names are percent-encoded as Dynamo does (a dot in a name becomes %2E).
  With --etcd (or --kube, --file-kv) also given, the workers' NATS EventChannel records
  are followed too: a worker whose record goes (lease expiry, pod deleted)
  has its blocks dropped, as Dynamo's router drops a dead worker's; without
  discovery a dead worker's blocks stay until the relay restarts.

Input over ZeroMQ (Dynamo's default event plane since v1.3; libzmq):
  --etcd http://H:2379[,…]        direct mode, publishers discovered in etcd (Dynamo's
                                  default discovery; $ETCD_ENDPOINTS by default):
                                  v1/event_channels/… records of the pool's endpoint,
                                  component and namespace scopes, followed as workers
                                  come, restart (new publisher id) and go (lease expiry:
                                  their blocks are dropped); a secured etcd takes
                                  --etcd-user/--etcd-password and --etcd-ca,
                                  --etcd-cert/--etcd-key (mutual TLS), by default
                                  Dynamo's own $ETCD_AUTH_USERNAME, $ETCD_AUTH_PASSWORD,
                                  $ETCD_AUTH_CA, $ETCD_AUTH_CLIENT_CERT, $ETCD_AUTH_CLIENT_KEY
  --kube                          direct mode, publishers discovered in the Kubernetes
                                  DynamoWorkerMetadata resources (nvidia.com/v1alpha1) of
                                  --kube-namespace (default: the pod's), in-cluster
                                  credentials, list and watch; on by default where
                                  $DYN_DISCOVERY_BACKEND=kubernetes, as in Dynamo's pods
  --file-kv DIR                   direct mode, publishers discovered in Dynamo's file
                                  store (workers started with --discovery-backend file,
                                  for hosts without etcd): the same records as files
                                  under DIR/v1/, polled every 0.5 s; a worker whose
                                  files are deleted or no longer touched (10 s, as
                                  Dynamo's store expires them) is gone. Default: with
                                  $DYN_DISCOVERY_BACKEND=file, $DYN_FILE_KV or
                                  $TMPDIR/dynamo_store_kv, as Dynamo's own processes
  --zmq-publisher tcp://H:P[,…]   direct mode: a SUB socket per worker PUB socket
                                  (4 parts: topic, publisher id, sequence, 5-byte
                                  header + msgpack EventEnvelope; kv-events and
                                  kv_metrics); a new publisher id on an endpoint is a
                                  restart: the old incarnation's blocks are dropped.
                                  An IPv6 host goes in brackets, with an optional
                                  zone: tcp://[fd00::2]:P, tcp://[fe80::1%eth0]:P
                                  (every ZMQ endpoint; IPv4 and names as before)
  --zmq-publisher-expiry 10s      a --zmq-publisher down this long (its connection
                                  dropped and not made again; ZMTP heartbeats every
                                  expiry/4, answered within expiry/2, catch a silent
                                  host) is gone: its worker's blocks are dropped, as
                                  when a discovery record's lease expires (Dynamo's
                                  lease TTL, 10 s, is the default); it stays
                                  subscribed, and continues when it comes back. 0:
                                  never
  --zmq-broker xsub=…,xpub=…      broker mode, DYN_ZMQ_BROKER_URL's syntax (its default):
                                  one SUB socket on every broker's XPUB side,
                                  subscribed to the pool's scoped subjects; copies
                                  heard through several brokers are taken once. A
                                  worker's departure is not visible through a broker:
                                  with --etcd, --kube or --file-kv the relay follows the instance
                                  records of the workers serving --endpoint instead
                                  and drops a worker's blocks when its record goes
                                  (lease expiry, pod deletion); without discovery they
                                  stay until the relay restarts
  --zmq-broker-discover           broker mode with the brokers looked up in etcd, as
                                  DYN_ZMQ_BROKER_ENABLED (its default) does: the
                                  xpub_endpoints of the ZmqBroker channel records of
                                  component zmq_broker in --namespace, looked up
                                  again until one is registered; needs --etcd, and
                                  --zmq-broker wins over it
  Frames, envelope and identity are checked; bad messages are dropped and counted
  (relay_rejected_total{reason=bad_frames|identity|…}). Each socket queues up to
  --zmq-recv-hwm messages while the relay is behind (then drops: a gap). With
  none of these sources and $DYN_EVENT_PLANE not "nats", the relay warns at
  start: it reads the NATS subjects only, where a default v1.3+ Dynamo sends
  nothing.

Input from a vLLM or SGLang engine without Dynamo (its kv_events_config publisher):
  --zmq-endpoint tcp://H:5557     the engine's PUB socket: 3 parts (topic, 8-byte BE
                                  sequence, msgpack KVEventBatch), normalized by
                                  Dynamo's rules (tiers, attention groups, LoRA salt,
                                  multimodal extra_keys) as --worker-id / --dp-rank
                                  with --block-size tokens per block
  --zmq-replay tcp://H:5558       the engine's replay socket: gaps are asked of it;
                                  what it cannot cover, an engine restart or a new
                                  connection resyncs (the engine's blocks are
                                  dropped and its buffer taken from the start)
  --zmq-topic T                   the engine's topic (default "", every message)
Output (P = --prefix; D, DC decimal ids):
  <P>.<D>.<DC>.delta      JetStream stream <P>-<D>-<DC>-delta: the ordered delta log
                          (deltas, heartbeats, drain marker), bounded by --max-age/--max-bytes
  object store <P>-<D>-<DC>-snapshot, object "snapshot": the chunked compact
                          snapshot, refreshed every --snapshot-every and on request
  <P>.<D>.<DC>.load       load-report frames every --load-every (last one in KV
                          <P>-<D>-<DC>-state, key "load"; key "owner" holds the claim)
  <P>.<D>.<DC>.ping       request/reply: the relay's Info (identity, assets) for RTT
  <P>.<D>.<DC>.snapshot   request/reply: store a fresh snapshot now
  <P>.<D>.discover        request: every relay of domain D answers its Info

A restarted relay claims the pool with a new incarnation; consumers then
re-snapshot. SIGINT/SIGTERM drain gracefully: the tail and a drain marker go
to the log.

Restart (--checkpoint-dir DIR): each pool's exact state is written to
DIR/<P>-<D>-<DC>-checkpoint every --checkpoint-every (1m) and on a graceful
stop, with the last sequence of every Dynamo event publisher (NATS or the ZMQ
event plane). A restarted relay restores it into its first snapshot, then
keeps a worker's restored blocks only once its publisher's next envelope
carries the next sequence (nothing was missed); a gap, a sequence reset, a
new publisher id (a restarted worker) or no envelope within
--checkpoint-grace (30s) clears them. Workers fed by --zmq-endpoint or the
G2025 JSON subject are not checkpointed. Without --checkpoint-dir a restarted
relay starts empty and blocks come back as they are stored again.

Progress and health logs go to stderr (--log-format, --log-level); the final
status goes to stdout (one JSON object with --json).
Metrics: --metrics-addr serves Prometheus /metrics (per pool: events applied
and rejected by reason, gaps, capacity omissions, load factor, frames and
bytes published by type, sequence, snapshots), /healthz and /readyz (200 once
every pool is set up and none has stopped, while every discovery source has
listed and its latest request, a list or the check every 5 s while watching,
each bounded by 10 s, succeeded; else 503 with the reason, also in the status
lines and relay_feeds_ready, until a list succeeds).` + kvrelayUsage + natsSecurityUsage

func runRelay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("relay", relaySynopsis, stderr)
	nf := addNATSFlags(fs)
	of := addObsFlags(fs)
	kf := addKvRelayFlags(fs)
	jsDomain := fs.String("js-domain", "", "JetStream domain consumers reach this DC's assets through (a leaf node's)")
	dc := fs.Uint64("dc", 0, "this DC's id (required, non-zero)")
	name := fs.String("name", "", "this DC's human name (shown to consumers)")
	domain := fs.Uint64("domain", 1, "pool: indexer domain id")
	namespace := fs.String("namespace", "dynamo", "pool: Dynamo namespace of the KV events")
	component := fs.String("component", "backend", "pool: Dynamo component of the KV events")
	endpoint := fs.String("endpoint", "generate", "pool: Dynamo endpoint of the workers, which scopes KV events and load from v1.4 on")
	eventScope := fs.String("event-scope", "both", "pool: NATS subjects to read: endpoint (v1.4+), component (v1.3 and older, G2025 JSON), or both")
	loadSource := fs.String("load-source", "both", "pool: worker load from dynamo (ActiveLoad on kv_metrics), goindex (<P>.<D>.<DC>.worker-load), or both")
	expected := fs.Uint64("expected-blocks", relay.DefaultExpectedBlocks, "pool: blocks a DC is expected to hold: sizes the filter (every DC of a domain must use the same) and presizes the producer's owner table (~32 B a block)")
	seed := fs.Uint64("seed", ckf.DefaultSeed, "pool: addressing seed; every DC of a domain must use the same")
	batch := fs.Int("batch-events", ckf.DefaultBatchEvents, "publication: a boundary every N events")
	flush := fs.Duration("flush-after", ckf.DefaultFlushAfter, "publication: or this long after a window opens")
	maxAge := fs.Duration("max-age", relay.DefaultMaxAge, "delta log retention: age")
	maxBytes := fs.Int64("max-bytes", relay.DefaultMaxBytes, "delta log retention: bytes")
	memory := fs.Bool("memory", false, "JetStream assets in memory instead of files")
	encoding := fs.String("encoding", "compact", "stored snapshot encoding: compact or dense")
	snapEvery := fs.Duration("snapshot-every", relay.DefaultSnapshotEvery, "refresh the stored snapshot this often (when it changed)")
	loadEvery := fs.Duration("load-every", relay.DefaultLoadEvery, "load report period")
	hbEvery := fs.Duration("heartbeat-every", relay.DefaultHeartbeatEvery, "heartbeat an idle delta log this often")
	prefill := fs.Float64("prefill-tokens-per-ms", 0, "load model: one request's prefill speed on one worker (0: unknown)")
	queue := fs.Float64("queue-tokens-per-ms", 0, "load model: DC-wide queued prefill drain rate (0: unknown)")
	decode := fs.Float64("decode-blocks-per-ms", 0, "load model: DC-wide KV release rate of decodes (0: unknown)")
	capacity := fs.Uint64("worker-capacity-blocks", 0, "load model: KV capacity per worker without load samples (0: unknown)")
	replicaSync := fs.Bool("router-replica-sync", truthy(os.Getenv("DYN_ROUTER_REPLICA_SYNC")),
		"load model: the DC's Dynamo routers share their active sequences (Dynamo's --router-replica-sync), so each router's ActiveLoad view of a worker is its whole load: merge the views by their maximum instead of summing them (default: $DYN_ROUTER_REPLICA_SYNC, else false as Dynamo's)")
	zf := addZMQPlaneFlags(fs)
	pubExpiry := fs.Duration("zmq-publisher-expiry", zmqfeed.DefaultPublisherExpiry, "ZMQ event plane: a --zmq-publisher whose connection stays down this long (no reconnect; a peer not answering heartbeats counts as down) is gone: its worker's blocks are dropped, as when a discovery record goes; 0: never (default: Dynamo's discovery lease TTL)")
	zmqEndpoint := fs.String("zmq-endpoint", "", "engine without Dynamo: the vLLM/SGLang KV-event PUB endpoint (tcp://host:port)")
	zmqReplay := fs.String("zmq-replay", "", "engine without Dynamo: its replay endpoint, asked to cover gaps (tcp://host:port)")
	zmqTopic := fs.String("zmq-topic", "", "engine without Dynamo: its topic (subscription prefix)")
	workerID := fs.Uint64("worker-id", 0, "engine without Dynamo: the worker id its events are indexed as (0 is a valid id)")
	dpRank := fs.Uint("dp-rank", 0, "engine without Dynamo: its data-parallel rank, 0 for the first (a batch's data_parallel_rank wins)")
	blockSize := fs.Int("block-size", 16, "engine without Dynamo: its KV block size in tokens (also the pool's kv_block_size in the Pool Relay catalog)")
	ckptDir := fs.String("checkpoint-dir", "", "restart: keep each pool's exact state here and restore it at start (empty: start empty)")
	ckptEvery := fs.Duration("checkpoint-every", relay.DefaultCheckpointEvery, "restart: write the checkpoint this often (and on a graceful stop)")
	ckptGrace := fs.Duration("checkpoint-grace", relay.DefaultCheckpointGrace, "restart: clear restored blocks whose publisher sent no next envelope within this")
	statusEvery := fs.Duration("status-every", 10*time.Second, "log a status line this often (0: never)")
	asJSON := fs.Bool("json", false, "print the final status as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dc == 0 {
		return fmt.Errorf("relay: --dc is required: %w", errUsage)
	}
	enc := snapenc.Compact
	switch *encoding {
	case "compact":
	case "dense":
		enc = snapenc.Dense
	default:
		return fmt.Errorf("relay: --encoding %q: want compact or dense: %w", *encoding, errUsage)
	}
	scopes, err := parseChoice("--event-scope", *eventScope, map[string]relay.EventScopes{
		"both": relay.ScopeBoth, "endpoint": relay.ScopeEndpoint, "component": relay.ScopeComponent})
	if err != nil {
		return err
	}
	loads, err := parseChoice("--load-source", *loadSource, map[string]relay.LoadSources{
		"both": relay.LoadBoth, "dynamo": relay.LoadDynamo, "goindex": relay.LoadGoindex})
	if err != nil {
		return err
	}
	poolCfg := relay.PoolConfig{Domain: relayproto.DomainID(*domain), Namespace: *namespace, Component: *component,
		Endpoint: *endpoint, Scopes: scopes, Loads: loads, ExpectedBlocks: *expected, Seed: *seed}
	kvPool, err := kf.poolOf(poolCfg, *blockSize)
	if err != nil {
		return err
	}
	log, err := of.logger(stderr)
	if err != nil {
		return err
	}
	scope := dynamo.Scope{Namespace: *namespace, Component: *component, Endpoint: *endpoint}
	feedsCfg := zf.config(scope, log)
	feedsCfg.PublisherExpiry = *pubExpiry
	feedsCfg.Engine = zmqfeed.EngineConfig{Endpoint: *zmqEndpoint, Replay: *zmqReplay, Topic: *zmqTopic, WorkerID: *workerID,
		DpRank: uint32(*dpRank), BlockSize: *blockSize}
	feeds, err := zmqfeed.Feeds(feedsCfg)
	if err != nil {
		return fmt.Errorf("relay: %v: %w", err, errUsage)
	}
	poolCfg.Feeds = feeds
	warnIfNATSOnly(log, len(feeds), os.Getenv("DYN_EVENT_PLANE"))
	nc, closeNATS, err := nf.connect(fmt.Sprintf("goindex relay dc %d", *dc), log)
	if err != nil {
		return err
	}
	defer closeNATS()
	storage := jetstream.FileStorage
	if *memory {
		storage = jetstream.MemoryStorage
	}
	r, err := relay.New(relay.Config{Conn: nc, Prefix: *nf.prefix, DC: relayproto.DCID(*dc), Name: *name, JSDomain: *jsDomain,
		Pools:       []relay.PoolConfig{poolCfg},
		BatchEvents: *batch, FlushAfter: *flush, MaxAge: *maxAge, MaxBytes: *maxBytes, Storage: storage, Encoding: enc,
		SnapshotEvery: *snapEvery, LoadEvery: *loadEvery, HeartbeatEvery: *hbEvery,
		PrefillTokensPerMs: *prefill, QueueTokensPerMs: *queue, DecodeBlocksPerMs: *decode, WorkerCapacityBlocks: *capacity,
		RouterReplicaSync: *replicaSync, CheckpointDir: *ckptDir, CheckpointEvery: *ckptEvery, CheckpointGrace: *ckptGrace, Logger: log})
	if err != nil {
		return fmt.Errorf("relay: %v: %w", err, errUsage)
	}
	stopMetrics, err := of.serveRelay(log, r)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	defer stopMetrics()
	stopKvRelay, err := kf.serve(log, r, poolCfg.Domain, kvPool, *loadEvery, *hbEvery)
	if err != nil {
		return err
	}
	defer stopKvRelay()
	st, err := r.Supervise(ctx, *statusEvery, func(st []relay.PoolStatus) { relay.LogStatus(log, st) })
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"pools": st})
	}
	return relay.WriteStatus(stdout, st)
}

// parseChoice maps a flag's value through choices, or fails naming them.
func parseChoice[T any](flag, v string, choices map[string]T) (T, error) {
	if c, ok := choices[v]; ok {
		return c, nil
	}
	var zero T
	names := slices.Sorted(maps.Keys(choices))
	return zero, fmt.Errorf("relay: %s %q: want one of %s: %w", flag, v, strings.Join(names, ", "), errUsage)
}
