package relay

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/goindex/relayproto/snapenc"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of Config.
const (
	DefaultExpectedBlocks  = 1 << 20 // upstream relay's default: 524,288 buckets, 4 MiB
	DefaultMaxAge          = time.Hour
	DefaultMaxBytes        = 256 << 20
	DefaultSnapshotEvery   = time.Minute
	DefaultLoadEvery       = time.Second
	DefaultHeartbeatEvery  = time.Second
	DefaultLiveWindow      = 10 * time.Second
	DefaultPublishTimeout  = 5 * time.Second
	DefaultRetryEvery      = 250 * time.Millisecond
	DefaultCheckpointEvery = time.Minute
	DefaultCheckpointGrace = 30 * time.Second
	// eventQueue is the decoded-event buffer between the NATS callbacks and
	// a pool's writer goroutine.
	eventQueue = 4096
)

// EventScopes selects which of Dynamo's NATS subjects a pool subscribes
// to. Each release publishes on one; subscribing to both costs nothing and
// needs no release to be named.
type EventScopes uint8

// The event scopes.
const (
	// ScopeEndpoint (v1.4 on): namespace.<ns>.component.<c>.endpoint.<e>
	// .kv-events (batched payloads) and the same scope's kv_metrics.
	ScopeEndpoint EventScopes = 1 << iota
	// ScopeComponent (v1.3 and older): namespace.<ns>.component.<c>
	// .kv-events (one event per message), the G2025 ….kv_events JSON
	// subject, and namespace.<ns>.kv_metrics.
	ScopeComponent
	// ScopeBoth is the default: every released subject.
	ScopeBoth = ScopeEndpoint | ScopeComponent
)

// LoadSources selects where a pool takes worker load samples from.
type LoadSources uint8

// The load sources.
const (
	// LoadDynamo is Dynamo's own ActiveLoad on the kv_metrics topic (NATS
	// subjects of the pool's EventScopes, and ZMQ feeds).
	LoadDynamo LoadSources = 1 << iota
	// LoadGoindex is goindex's JSON WorkerLoad on P.D.C.worker-load.
	LoadGoindex
	// LoadBoth is the default.
	LoadBoth = LoadDynamo | LoadGoindex
)

// PoolConfig is one pool (domain, this DC) the relay serves: the Dynamo
// component whose KV events feed it and the CKF sizing every DC of the
// domain must share.
type PoolConfig struct {
	Domain    relayproto.DomainID
	Namespace string // Dynamo namespace; required
	Component string // Dynamo component; required
	// Endpoint is the workers' serving endpoint, which scopes KV events and
	// load from v1.4 on; optional; default: "generate".
	Endpoint string
	// Scopes are the NATS subjects subscribed; optional; default:
	// ScopeBoth.
	Scopes EventScopes
	// Loads are the load sample sources; optional; default: LoadBoth.
	Loads LoadSources
	// Feeds deliver messages of transports other than the relay's NATS
	// connection (ZMQ event plane, engine publishers); each runs while the
	// pool runs. Optional; default: none.
	Feeds []Feed
	// ExpectedBlocks sizes the filter (ckf.BucketCount) and presizes the
	// producer's owner table (ckf.Config.ExpectedBlocks: about 32 bytes a
	// block, allocated at start). Optional; default: 1,048,576.
	ExpectedBlocks uint64
	// Seed is the addressing seed; optional; default: ckf.DefaultSeed.
	Seed uint64
	// MaxKicks bounds a cuckoo insertion; optional; default: 500.
	MaxKicks int
	// ClearWorker widens Cleared events to every rank of the worker;
	// optional; default: false.
	ClearWorker bool
	// Source, when set, is published instead of the pool's producer: its
	// words fill every stored snapshot and its Drain feeds the delta log,
	// through the same publisher, log and snapshot store. The pool then
	// subscribes to no KV events; its producer stays empty, and Status's
	// Producer figures and the load reports' active blocks are that empty
	// producer's. It is for measurements whose table, at the load they
	// need, would come with more exact state than memory holds (`goindex
	// bench relay --synthetic`); a relay serving Dynamo leaves it nil. Its
	// calls run on the pool's writer goroutine, and its words must be the
	// pool's Format (ExpectedBlocks, Seed) bucket count; optional; default:
	// none (the producer).
	Source publish.Source
}

// Config configures a Relay.
type Config struct {
	// Conn is the NATS connection to the DC's server; required.
	Conn *nats.Conn
	// Prefix is the first subject token; optional; default: "goindex".
	Prefix string
	// DC is this data center's id; required (non-zero).
	DC relayproto.DCID
	// Name is the DC's human name, shown in Info; optional.
	Name string
	// JSDomain is the JetStream domain consumers reach this DC's assets
	// through (a leaf node's domain); optional; default: none.
	JSDomain string
	// Pools are the pools served; at least one, distinct domains.
	Pools []PoolConfig
	// BatchEvents is N of the publication cadence; optional; default: 16.
	BatchEvents int
	// FlushAfter is the cadence timer; optional; default: 1ms.
	FlushAfter time.Duration
	// MaxAge and MaxBytes bound the delta log's retention; optional;
	// defaults: 1h, 256 MiB.
	MaxAge   time.Duration
	MaxBytes int64
	// Storage of the JetStream assets; optional; default: file.
	Storage jetstream.StorageType
	// Encoding of stored snapshots; optional; default: compact.
	Encoding snapenc.Encoding
	// SnapshotEvery refreshes the stored snapshot when deltas were
	// published since the last one; optional; default: 1m.
	SnapshotEvery time.Duration
	// LoadEvery is the load-report period; optional; default: 1s.
	LoadEvery time.Duration
	// HeartbeatEvery puts a heartbeat in an idle delta log; optional;
	// default: 1s.
	HeartbeatEvery time.Duration
	// LiveWindow is how recently a worker must have sent an event or a load
	// sample to count as live when nothing says it is present: a worker fed
	// by a source whose departure is reported (Source.ReportsGone) counts
	// while that source is, and one whose instance record is present
	// (KindWorkerPresent) until the record goes, however long it is silent
	// (Dynamo sends ActiveLoad only when it changes, so an idle worker is a
	// silent one). The window alone decides for broker mode without
	// discovery, fixed publishers without expiry, NATS without discovery,
	// engine feeds and goindex WorkerLoad samples, and for a held worker
	// once its sources are gone; optional; default: 10s.
	LiveWindow time.Duration
	// RouterReplicaSync says the deployment's Dynamo routers share their
	// active sequences (router_replica_sync, DYN_ROUTER_REPLICA_SYNC), so
	// each router's ActiveLoad view of a worker is its whole load and the
	// views are merged by their maximum. Without it, each view holds only
	// its own router's requests and the views are summed; optional;
	// default: false, as Dynamo's.
	RouterReplicaSync bool
	// PublishTimeout bounds one JetStream publish or store; optional;
	// default: 5s.
	PublishTimeout time.Duration
	// RetryEvery is how soon a fenced pool retries storing a snapshot,
	// and a failed heartbeat or snapshot refresh is tried again; each
	// further failure in a row doubles the wait, up to 10 s (each taken
	// jittered, between half and all of it: internal/backoff). Optional;
	// default: 250ms.
	RetryEvery time.Duration
	// Throughput model figures copied into load reports (relayproto
	// LoadReport units; 0: not measured) and the per-worker capacity used
	// when workers send no samples; optional.
	PrefillTokensPerMs   float64
	QueueTokensPerMs     float64
	DecodeBlocksPerMs    float64
	WorkerCapacityBlocks uint64
	// CheckpointDir keeps each pool's checkpoint (its exact state by
	// publisher, with each publisher's last sequence), written every
	// CheckpointEvery and on a graceful stop, and restored at start: a
	// restored member is kept only once its publisher's next envelope
	// proves that nothing was missed. Optional; default: none (a restarted
	// relay starts its pools empty).
	CheckpointDir string
	// CheckpointEvery is how often a checkpoint is written (on the pool's
	// writer goroutine: about 0.1 s and 16 MiB per million blocks, and
	// about 0.7 s per million to restore at start, on a 2-core EPYC);
	// optional; default: 1m.
	CheckpointEvery time.Duration
	// CheckpointGrace is how long restored members wait for their
	// publisher's next envelope before they are cleared; optional;
	// default: 30s.
	CheckpointGrace time.Duration
	// Logger receives progress and health logs; optional; default: discard.
	Logger *slog.Logger
}

// literalSegment checks a namespace or component for the legacy event
// subject, which G2025 built unescaped: a wildcard (`*`, `>`), whitespace
// or an empty token would make the pool subscribe to other namespaces' or
// components' events, which a relay must never accept.
func literalSegment(s string) error {
	for _, tok := range strings.Split(s, ".") {
		if tok == "" {
			return fmt.Errorf("empty subject token")
		}
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r == '*' || r == '>' || unicode.IsSpace(r) || r < 0x20 }); i >= 0 {
		return fmt.Errorf("%q would match other subjects", s[i])
	}
	return nil
}

func (c *Config) setDefaults() error {
	if c.Conn == nil {
		return fmt.Errorf("%w: a relay needs a NATS connection", ErrBadConfig)
	}
	if c.DC == 0 {
		return fmt.Errorf("%w: the DC id must be non-zero", ErrBadConfig)
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if err := ValidPrefix(c.Prefix); err != nil {
		return err
	}
	if len(c.Pools) == 0 {
		return fmt.Errorf("%w: no pools", ErrBadConfig)
	}
	seen := map[relayproto.DomainID]bool{}
	for i := range c.Pools {
		p := &c.Pools[i]
		if seen[p.Domain] {
			return fmt.Errorf("%w: domain %d served twice", ErrBadConfig, p.Domain)
		}
		seen[p.Domain] = true
		if p.Namespace == "" || p.Component == "" {
			return fmt.Errorf("%w: pool %d needs a namespace and a component", ErrBadConfig, p.Domain)
		}
		for _, f := range []struct{ what, v string }{{"namespace", p.Namespace}, {"component", p.Component}} {
			if err := literalSegment(f.v); err != nil {
				return fmt.Errorf("%w: pool %d %s %q: %v", ErrBadConfig, p.Domain, f.what, f.v, err)
			}
		}
		if p.Endpoint == "" {
			p.Endpoint = dynamo.DefaultEndpoint
		}
		if p.Scopes == 0 {
			p.Scopes = ScopeBoth
		}
		if p.Scopes&^ScopeBoth != 0 {
			return fmt.Errorf("%w: pool %d: unknown event scopes %#x", ErrBadConfig, p.Domain, p.Scopes)
		}
		if p.Loads == 0 {
			p.Loads = LoadBoth
		}
		if p.Loads&^LoadBoth != 0 {
			return fmt.Errorf("%w: pool %d: unknown load sources %#x", ErrBadConfig, p.Domain, p.Loads)
		}
		if p.ExpectedBlocks == 0 {
			p.ExpectedBlocks = DefaultExpectedBlocks
		}
		if p.Seed == 0 {
			p.Seed = ckf.DefaultSeed
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.BatchEvents <= 0 {
		c.BatchEvents = ckf.DefaultBatchEvents
	}
	def(&c.FlushAfter, ckf.DefaultFlushAfter)
	def(&c.MaxAge, DefaultMaxAge)
	def(&c.SnapshotEvery, DefaultSnapshotEvery)
	def(&c.LoadEvery, DefaultLoadEvery)
	def(&c.HeartbeatEvery, DefaultHeartbeatEvery)
	def(&c.LiveWindow, DefaultLiveWindow)
	def(&c.PublishTimeout, DefaultPublishTimeout)
	def(&c.RetryEvery, DefaultRetryEvery)
	def(&c.CheckpointEvery, DefaultCheckpointEvery)
	def(&c.CheckpointGrace, DefaultCheckpointGrace)
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Encoding != snapenc.Compact && c.Encoding != snapenc.Dense {
		return fmt.Errorf("%w: unknown snapshot %v", ErrBadConfig, c.Encoding)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
