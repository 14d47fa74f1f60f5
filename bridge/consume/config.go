package consume

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/internal/backoff"
	"github.com/nats-io/nats.go"
)

// Defaults of Config.
const (
	DefaultDiscoverFor    = 2 * time.Second
	DefaultDiscoverEvery  = 10 * time.Second
	DefaultPingEvery      = time.Second
	DefaultRequestTimeout = 5 * time.Second
	DefaultRetryEvery     = 250 * time.Millisecond
	// DefaultMaxRetryEvery caps a lane's resync pause: with a relay or
	// NATS down, 13 lanes retried 4 times a second each, for as long as
	// the outage lasted (14,400 attempts a lane an hour), and a lane whose
	// every install faulted fetched a snapshot as often; doubling to 2 s,
	// jittered, a lane makes under 2,400 an hour, and a DC back from an
	// outage is followed again within 2 s, inside the 5 s a router
	// tolerates stale signals before it routes around the DC
	// (route.DefaultMaxStaleness).
	DefaultMaxRetryEvery = 2 * time.Second
	DefaultPullMessages  = 1024
	// DefaultPullHeartbeat is the idle heartbeat a lane asks of its delta
	// log pull. nats.go's own default for an ordered consumer is 5 s, so a
	// lane whose DC's nats-server restarted, or whose link lost the pull,
	// sat about 10 s before resubscribing (two missed heartbeats).
	DefaultPullHeartbeat = time.Second
	// MinPullHeartbeat and MaxPullHeartbeat bound Config.PullHeartbeat:
	// nats.go refuses under 500 ms, and above half the pull's 30 s expiry.
	MinPullHeartbeat = 500 * time.Millisecond
	MaxPullHeartbeat = 15 * time.Second
	// DefaultSnapshotReads bounds the stored snapshots read at once. Each
	// read keeps up to 8 MiB requested, and the server closes a connection
	// whose unread data passes its max_pending (64 MiB by default): 13
	// lanes of 10M blocks read at once (then object-store pushes of a few
	// MiB each) on a busy 2-core consumer did, and every lane in flight
	// lost its read (BENCHMARKS.md, bench relay).
	DefaultSnapshotReads = 4
	// MaxSnapshotBytes bounds a stored snapshot object: 2^24 buckets dense
	// (128 MiB) plus chunk frame overhead.
	MaxSnapshotBytes = 130 << 20
)

// Config configures a Consumer.
type Config struct {
	// Conn is the NATS connection at the router site; required.
	Conn *nats.Conn
	// Prefix is the relays' subject prefix; optional; default: "goindex".
	Prefix string
	// Domain is the one domain served.
	Domain relayproto.DomainID
	// DCs lists the DCs, one lane each in this order; optional; default:
	// discovered (every relay of Domain that answers within DiscoverFor,
	// in DC id order).
	DCs []relayproto.DCID
	// DiscoverFor bounds discovery and the wait for a first ping when the
	// format is not given; optional; default: 2s.
	DiscoverFor time.Duration
	// DiscoverEvery is how often a consumer whose DCs were discovered asks
	// the domain's relays again while it runs: a relay that answers for
	// the first time (down or restarting when the consumer started, or a
	// DC that joined since) gets a lane, in a new generation of the
	// replica file; one of another format is logged and left out. Negative:
	// never; optional; default: 10s.
	DiscoverEvery time.Duration
	// Seed and Buckets give the format every lane shares; optional;
	// default: learned from the relays (which must agree).
	Seed, Buckets uint64
	// Path is the shared-memory replica file; required.
	Path string
	// Instance is the consumer instance id in leases; optional; default:
	// random.
	Instance uint64
	// PingEvery is the RTT probe period; optional; default: 1s.
	PingEvery time.Duration
	// RequestTimeout bounds pings, snapshot requests and each JetStream
	// request of a lane's snapshot install; the stored snapshot's read is
	// given up after a RequestTimeout without a chunk, or after 10× plus
	// a second per MiB in all (a DC's hung JetStream costs its own lane a
	// RequestTimeout per attempt, and never holds back the other lanes);
	// optional; default: 5s.
	RequestTimeout time.Duration
	// RetryEvery is the first pause before a lane's next resync attempt,
	// and the one after a subscription that kept the lane READY for at
	// least MaxRetryEvery: a transient fault resyncs at once. Each other
	// failed attempt in a row doubles the pause, up to MaxRetryEvery, and each
	// pause is jittered (between half and all of it: internal/backoff), so
	// lanes that failed together do not retry in lockstep. A failed
	// rebuild of the replica file is retried the same way; optional;
	// default: 250ms.
	RetryEvery time.Duration
	// MaxRetryEvery caps the pause RetryEvery doubles to (below
	// RetryEvery: RetryEvery, no doubling); optional; default: 2s.
	MaxRetryEvery time.Duration
	// PullMessages is how many log messages a lane keeps requested (the
	// pipelining that hides the WAN round trip); optional; default: 1024.
	PullMessages int
	// SnapshotReads is how many lanes read their stored snapshot at once
	// (the others wait their turn; a lane locates the snapshot and checks
	// the log before its read, and decodes and installs after it, outside
	// the bound); optional; default: DefaultSnapshotReads.
	SnapshotReads int
	// PullHeartbeat is the idle heartbeat a lane's delta-log pull asks the
	// server for; two missed end the pull and the lane resubscribes (a
	// restarted nats-server or a healed link is noticed after about twice
	// this). Each lane receives one small message per heartbeat while idle;
	// optional; default: 1s; from 500ms to 15s.
	PullHeartbeat time.Duration
	// Filter, when set, sees every delta-log frame of a lane before it is
	// decoded and returns the frames to apply instead (none drops it, two
	// copies duplicate it, holding one back reorders): fault injection at
	// the transport for tests; optional; default: none.
	Filter func(dc relayproto.DCID, frame []byte) [][]byte
	// ObserveDelta, when set, is told how long the lane's ingestor took to
	// apply each delta it applied: decoding the frame, the lane state
	// machine installing its images into the replica file (single-word
	// atomic stores) and the lane record; not the transport before it. It
	// runs on the ingestor goroutine, so it must return quickly
	// (benchmarks: goindex bench relay's apply percentiles); optional;
	// default: none (no clock read).
	ObserveDelta func(lane, images int, took time.Duration)
	// Logger receives progress and health logs; optional; default: discard.
	Logger *slog.Logger
	// Upstream maps DCs (each also in DCs) to the address of a Dynamo Pool
	// Relay (dynamo.kvrelay.v1, plaintext gRPC) whose pool of that dc_id
	// the DC's lane follows instead of a goindex relay on NATS
	// (bridge/kvrelay.Follow into the replica file; the pool's CKF format
	// must be the consumer's, so give Seed and Buckets when every lane is
	// upstream); optional; default: none.
	Upstream map[relayproto.DCID]string
}

// retry returns the backoff between a lane's resync attempts, or a
// rebuild's: RetryEvery doubling to MaxRetryEvery.
func (c *Config) retry() backoff.Backoff {
	return backoff.Backoff{First: c.RetryEvery, Max: c.MaxRetryEvery}
}

func (c *Config) setDefaults() error {
	if c.Conn == nil {
		return fmt.Errorf("%w: a consumer needs a NATS connection", ErrBadConfig)
	}
	if c.Path == "" {
		return fmt.Errorf("%w: a consumer needs a replica file path", ErrBadConfig)
	}
	if c.Prefix == "" {
		c.Prefix = relay.DefaultPrefix
	}
	if err := relay.ValidPrefix(c.Prefix); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if len(c.DCs) > relayproto.MaxLanes {
		return fmt.Errorf("%w: %d DCs, at most %d lanes", ErrBadConfig, len(c.DCs), relayproto.MaxLanes)
	}
	seen := map[relayproto.DCID]bool{}
	for _, dc := range c.DCs {
		if dc == 0 || seen[dc] {
			return fmt.Errorf("%w: DC %d is zero or listed twice", ErrBadConfig, dc)
		}
		seen[dc] = true
	}
	for dc := range c.Upstream {
		if !seen[dc] {
			return fmt.Errorf("%w: upstream DC %d is not among the DCs", ErrBadConfig, dc)
		}
	}
	if (c.Seed == 0) != (c.Buckets == 0) {
		return fmt.Errorf("%w: give both the seed and the bucket count, or neither", ErrBadConfig)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.DiscoverFor, DefaultDiscoverFor)
	if c.DiscoverEvery == 0 {
		c.DiscoverEvery = DefaultDiscoverEvery
	}
	def(&c.PingEvery, DefaultPingEvery)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.RetryEvery, DefaultRetryEvery)
	def(&c.MaxRetryEvery, DefaultMaxRetryEvery)
	if c.SnapshotReads <= 0 {
		c.SnapshotReads = DefaultSnapshotReads
	}
	if c.PullMessages <= 0 {
		c.PullMessages = DefaultPullMessages
	}
	def(&c.PullHeartbeat, DefaultPullHeartbeat)
	if c.PullHeartbeat < MinPullHeartbeat || c.PullHeartbeat > MaxPullHeartbeat {
		return fmt.Errorf("%w: pull heartbeat %v outside %v…%v", ErrBadConfig, c.PullHeartbeat, MinPullHeartbeat, MaxPullHeartbeat)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
