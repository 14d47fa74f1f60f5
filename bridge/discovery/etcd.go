package discovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/internal/backoff"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// channelsRoot is the bucket of event channels in Dynamo's KV-store
// discovery (dynamo-current §1.7); instancesRoot the bucket of endpoint
// instances, one per worker serving an endpoint.
// sourcesRoot the bucket of KV event sources (v1.4 on). The channels and
// the sources are read as one key range, eventsFrom to eventsTo: every
// key beginning "v1/event_".
const (
	channelsRoot  = "v1/event_channels/"
	instancesRoot = "v1/instances/"
	sourcesRoot   = "v1/event_sources/"
	eventsFrom    = "v1/event_"
	eventsTo      = "v1/event`" // '`' follows '_'
)

// DefaultDialTimeout bounds connecting to etcd.
const DefaultDialTimeout = 5 * time.Second

// DefaultRequestTimeout bounds one list of the channels.
const DefaultRequestTimeout = 10 * time.Second

const (
	// retryEvery is the first wait before listing again after etcd or
	// Kubernetes failed, or a watch ended (compacted, expired).
	retryEvery = time.Second
	// MaxRetryDelay bounds the backoff between failed lists (etcd,
	// Kubernetes): the wait doubles from retryEvery up to it, jittered
	// (internal/backoff), and a list that succeeds resets it.
	MaxRetryDelay = 30 * time.Second
)

// EtcdConfig configures Etcd.
type EtcdConfig struct {
	// Endpoints are etcd's client URLs ("http://host:2379"); required.
	Endpoints []string
	// Scope is the pool's endpoint scope (namespace, component,
	// endpoint); required.
	Scope dynamo.Scope
	// DialTimeout bounds connecting; optional; default: 5s.
	DialTimeout time.Duration
	// RequestTimeout bounds one list of the channels: etcd's client
	// retries an unreachable cluster for as long as it is let, so an
	// unbounded list would wait, silent, for ever; past it the list
	// fails, is logged and is tried again. Optional; default: 10s.
	RequestTimeout time.Duration
	// CheckEvery spaces the checks, while watching, that etcd still
	// answers (a count of the channels, a linearizable read: a member cut
	// off from its quorum fails it too); a failed check ends the watch and
	// lists again. Optional; default: DefaultCheckEvery.
	CheckEvery time.Duration
	// Workers follows the workers serving the pool's endpoint instead of
	// its event channels: each instance record
	// (v1/instances/<ns>/<comp>/<endpoint>/<id, hex>, under the worker's
	// lease) is a Publisher with Worker set, whose going says the worker
	// is gone. For broker mode, where Dynamo's publishers register no
	// channel; the KV events' worker_id is the instance id.
	Workers bool
	// EtcdCredentials authenticate to a secured etcd; optional; default:
	// none.
	EtcdCredentials
	// Logger receives skipped records and retries; optional; default:
	// discard.
	Logger *slog.Logger
}

// EtcdCredentials are what a secured etcd asks of its clients, as
// Dynamo's own etcd client takes them from its environment.
type EtcdCredentials struct {
	// Username and Password authenticate to an etcd with authentication
	// on (Dynamo's ETCD_AUTH_USERNAME and ETCD_AUTH_PASSWORD).
	Username, Password string
	// CAFile names the PEM bundle of the CAs that sign etcd's certificate
	// (Dynamo's ETCD_AUTH_CA); CertFile and KeyFile a client certificate
	// and its key for mutual TLS (ETCD_AUTH_CLIENT_CERT,
	// ETCD_AUTH_CLIENT_KEY). TLS is used when any is given or an endpoint
	// is https:// (with the system's roots when CAFile is not given).
	CAFile, CertFile, KeyFile string
}

// tlsConfig loads cfg's TLS files; nil when TLS is not used.
func (cfg *EtcdConfig) tlsConfig() (*tls.Config, error) {
	https := false
	for _, ep := range cfg.Endpoints {
		https = https || strings.HasPrefix(ep, "https://")
	}
	if !https && cfg.CAFile == "" && cfg.CertFile == "" && cfg.KeyFile == "" {
		return nil, nil
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both its file and its key's", ErrBadConfig)
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: etcd CA: %w", ErrBadConfig, err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%w: etcd CA %s holds no PEM certificate", ErrBadConfig, cfg.CAFile)
		}
	}
	if cfg.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: etcd client certificate: %w", ErrBadConfig, err)
		}
		t.Certificates = []tls.Certificate{pair}
	}
	return t, nil
}

// Etcd follows the event channels Dynamo's workers register in etcd
// (discovery backend etcd, the default outside Kubernetes): the pool's KV
// events on endpoint scope (v1.4 on) and component scope (older), its load
// on endpoint and namespace scope, each key
// v1/event_channels/<scope path>/topic/<topic>/<publisher id, hex>, and
// the pre-EventScope layout v1/event_channels/<ns>/<comp>/<topic>/<hex>
// ([unverified], accepted). Keys live under their worker's lease: a worker
// that dies is gone when its lease expires, and a restarted one registers
// a new key with a new publisher id. Direct-mode ZMQ and NATS channels
// become publishers; broker channels are skipped. The KV event sources
// the pool's workers register beside their channels (v1.4 on) are read
// too: any key under v1/event_sources/ whose record names an endpoint of
// the pool's component (the key's layout is [unverified]) becomes a
// Publisher with KVSource set.
type Etcd struct {
	cfg EtcdConfig
	records
	// root to end is the key range listed and watched: the event buckets
	// (eventsFrom, eventsTo), or instancesRoot's keys (Workers).
	root, end string
	tls       *tls.Config // nil: plaintext
	health    health
}

// NewEtcd checks cfg and loads its TLS files; it does no network I/O.
func NewEtcd(cfg EtcdConfig) (*Etcd, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: no etcd endpoints", ErrBadConfig)
	}
	if err := checkPoolScope(cfg.Scope); err != nil {
		return nil, err
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	cfg.RequestTimeout, cfg.CheckEvery, cfg.Logger = sourceDefaults(cfg.RequestTimeout, cfg.CheckEvery, cfg.Logger)
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, fmt.Errorf("%w: etcd authentication needs both a user name and a password", ErrBadConfig)
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	e := &Etcd{cfg: cfg, records: newRecords(cfg.Scope, cfg.Workers, cfg.Logger), tls: tlsCfg, root: eventsFrom, end: eventsTo}
	e.health.name = e.String()
	if cfg.Workers {
		e.root, e.end = instancesRoot, clientv3.GetPrefixRangeEnd(instancesRoot)
	}
	return e, nil
}

// client makes an etcd client with the source's endpoints, credentials
// and TLS, living until ctx ends or it is closed.
func (e *Etcd) client(ctx context.Context) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.cfg.Endpoints, DialTimeout: e.cfg.DialTimeout,
		Username: e.cfg.Username, Password: e.cfg.Password, TLS: e.tls, Context: ctx, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", e.cfg.Endpoints, err)
	}
	return cli, nil
}

// String names the source in logs.
func (e *Etcd) String() string {
	if e.cfg.Workers {
		return "etcd " + strings.Join(e.cfg.Endpoints, ",") + " (workers)"
	}
	return "etcd " + strings.Join(e.cfg.Endpoints, ",")
}

// Health implements Source.
func (e *Etcd) Health() error { return e.health.state() }

// Watch lists the pool's channels, then follows their changes; after a
// failed or compacted watch it lists again, reporting what vanished
// meanwhile as gone. A client that cannot be made (with credentials, an
// etcd that cannot be reached or refuses them) is made again, and a
// failed list or check retried, after retryEvery doubling to MaxRetryDelay
// while they keep failing (a watch that ended waits retryEvery); each distinct failure
// is logged once, and so is the list that ends it. Watch returns only
// when ctx ends.
func (e *Etcd) Watch(ctx context.Context, fn func(Update)) error {
	var cli *clientv3.Client
	defer func() {
		if cli != nil {
			cli.Close()
		}
	}()
	known := map[string]Publisher{}
	retry := backoff.Backoff{First: retryEvery, Max: MaxRetryDelay}
	for ctx.Err() == nil {
		var err error
		if cli == nil {
			cli, err = e.client(ctx)
		}
		failure := err // a client not made, a list or a check failed; not a watch that ended
		if cli != nil {
			var rev int64
			if rev, err = e.list(ctx, cli, known, fn); err != nil {
				failure = err
			} else {
				if ended := e.health.succeeded(true); ended != nil {
					e.cfg.Logger.Info("etcd discovery listed again", "after", ended)
				}
				err = e.follow(ctx, cli, rev, known, fn)
				if ce := (*checkError)(nil); errors.As(err, &ce) {
					failure = err
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if failure == nil {
			retry.Reset() // it listed: the next list waits retryEvery
		}
		wait := retry.Next()
		switch {
		case failure == nil:
			retry.Reset() // an ended watch is no failure: the next list waits retryEvery too
			e.cfg.Logger.Warn("etcd discovery interrupted; listing again", "err", err)
		case e.health.failed(failure):
			e.cfg.Logger.Warn("etcd discovery failing; retrying with backoff", "in", wait, "err", failure)
		}
		backoff.Sleep(ctx, wait)
	}
	return nil
}

// list reads every channel under the root at one revision, reports new and
// changed publishers and those known that are gone, and returns the
// revision.
func (e *Etcd) list(ctx context.Context, cli *clientv3.Client, known map[string]Publisher, fn func(Update)) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	resp, err := cli.Get(lctx, e.root, clientv3.WithRange(e.end))
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", e.root, err)
	}
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		if p, ok := e.publisher(key, kv.Value); ok {
			seen[key] = true
			note(known, key, p, fn)
		}
	}
	sweep(known, seen, fn)
	return resp.Header.Revision, nil
}

// errWatchEnded reports a watch channel that closed (compaction, a lost
// connection past the client's retries).
var errWatchEnded = errors.New("etcd watch ended")

// follow applies the root's changes after revision rev until the watch
// ends, or a check of etcd fails (an unreachable etcd does not end a
// watch: the client waits for it).
func (e *Etcd) follow(ctx context.Context, cli *clientv3.Client, rev int64, known map[string]Publisher, fn func(Update)) error {
	wctx, cancel := context.WithCancelCause(clientv3.WithRequireLeader(ctx))
	var checks sync.WaitGroup
	defer func() { cancel(nil); checks.Wait() }()
	checks.Go(func() {
		e.health.checkEvery(wctx, e.cfg.CheckEvery, e.cfg.RequestTimeout, func(c context.Context) error {
			_, err := cli.Get(c, e.root, clientv3.WithRange(e.end), clientv3.WithCountOnly())
			return err
		}, cancel)
	})
	for resp := range cli.Watch(wctx, e.root, clientv3.WithRange(e.end), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("watch %s: %w", e.root, err)
		}
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			if ev.Type == clientv3.EventTypeDelete {
				if p, ok := known[key]; ok {
					delete(known, key)
					fn(Update{Publisher: p, Gone: true})
				}
				continue
			}
			p, ok := e.publisher(key, ev.Kv.Value)
			if !ok {
				if old, had := known[key]; had { // rewritten as something else
					delete(known, key)
					fn(Update{Publisher: old, Gone: true})
				}
				continue
			}
			note(known, key, p, fn)
		}
	}
	if ce := (*checkError)(nil); errors.As(context.Cause(wctx), &ce) {
		return ce
	}
	return errWatchEnded
}
