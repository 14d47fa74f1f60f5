package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/goindex/goindex/bridge/consume"
	"github.com/goindex/goindex/bridge/obs"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
)

const consumeSynopsis = `Usage: goindex consume [--nats URL] [--domain D] [--dcs 1,2,3] [--shm PATH] [--json]

Runs a router-site consumer: one lane per DC of the domain in a shared-memory
replica file that router processes (libgoindex.so) map read-only. Each lane
installs its relay's stored snapshot, follows the relay's delta log in
order, catches up after lag from the retained log, re-snapshots only after a
fault or when the deltas it needs are gone, measures RTT to the relay
continuously and records the DC's load reports. A fault on one lane never
disturbs the others. Without --nats it starts an embedded nats-server.

Lanes and format:
  --dcs LIST      DC ids, one lane each in this order (empty: discover every relay
                  of the domain answering <P>.<D>.discover within --discover-for,
                  and ask again every --discover-every: a relay answering later,
                  down at the start or a DC that joined, gets a lane in a new
                  generation of the replica file, into which the other lanes
                  are carried ready, with no resync; one of another format
                  is logged and left out)
  --seed, --expected-blocks  the format all lanes share (default: learned from
                  the relays, which must agree)
Replica file:
  --shm PATH      default /dev/shm/goindex-<D>.replica; a new generation replaces
                  an existing replica file atomically (readers reattach)
Retries:
  --retry-every, --max-retry-every  a faulted lane resyncs after --retry-every;
                  while its attempts fail (a relay or NATS down) the pause
                  doubles, jittered, up to --max-retry-every, and starts over
                  once the lane served READY for --max-retry-every
Output: progress and health logs on stderr (--log-format, --log-level); the
final lane status on stdout (one JSON object with --json). --duration stops
after a while (tests, demos).
Metrics: --metrics-addr serves Prometheus /metrics (per lane: state, lease,
lag, frames, resyncs, catch-ups, RTT, load), /healthz and /readyz (200 when
--ready-lanes any: a lane is READY; all: every lane is).` + natsSecurityUsage

func runConsume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("consume", consumeSynopsis, stderr)
	nf := addNATSFlags(fs)
	of := addObsFlags(fs)
	readyLanes := fs.String("ready-lanes", obs.ReadyAnyLane, "/readyz: any (at least one lane READY) or all (every lane READY)")
	domain := fs.Uint64("domain", 1, "indexer domain id")
	dcsArg := fs.String("dcs", "", "comma-separated DC ids (empty: discover)")
	upstreamArg := fs.String("upstream-relays", "", "DC=HOST:PORT,…: those DCs' lanes follow a Dynamo Pool Relay or goindex relay --kvrelay-listen (dynamo.kvrelay.v1 gRPC) instead of NATS, with status and metrics as other lanes (RTT: a GetRelayInfo round trip every --ping-every); each DC must be in --dcs")
	discoverFor := fs.Duration("discover-for", consume.DefaultDiscoverFor, "how long discovery (or a first ping, for the format) waits")
	discoverEvery := fs.Duration("discover-every", consume.DefaultDiscoverEvery, "without --dcs: how often to discover again, adding a lane for each relay that answers late (0: never)")
	seed := fs.Uint64("seed", 0, "addressing seed of every lane (0: learned from the relays)")
	expected := fs.Uint64("expected-blocks", 0, "the relays' --expected-blocks, which gives the bucket count (0: learned)")
	path := fs.String("shm", "", "replica file (default /dev/shm/goindex-<domain>.replica)")
	instance := fs.Uint64("instance", 0, "consumer instance id in leases (0: random)")
	pingEvery := fs.Duration("ping-every", consume.DefaultPingEvery, "RTT probe period per DC")
	retryEvery := fs.Duration("retry-every", consume.DefaultRetryEvery, "first pause before a lane's resync attempt (again after the lane served READY for --max-retry-every); it doubles while attempts fail")
	maxRetryEvery := fs.Duration("max-retry-every", consume.DefaultMaxRetryEvery, "cap of the pause --retry-every doubles to (a relay or NATS down)")
	pull := fs.Int("pull", consume.DefaultPullMessages, "log messages kept requested per lane (hides the WAN round trip)")
	statusEvery := fs.Duration("status-every", 10*time.Second, "log every lane's status this often (0: never)")
	duration := fs.Duration("duration", 0, "stop after this long (0: until SIGINT/SIGTERM)")
	asJSON := fs.Bool("json", false, "print the final status as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	upstream, err := parseUpstream(*upstreamArg)
	if err != nil {
		return err
	}
	dcs, err := parseDCs(*dcsArg)
	if err != nil {
		return err
	}
	if _, err := obs.ConsumeReady(nil, *readyLanes); err != nil {
		return fmt.Errorf("consume: --ready-lanes: %v: %w", err, errUsage)
	}
	var buckets uint64
	if *expected > 0 {
		if buckets, err = ckf.BucketCount(*expected); err != nil {
			return fmt.Errorf("consume: --expected-blocks: %v: %w", err, errUsage)
		}
		if *seed == 0 {
			*seed = ckf.DefaultSeed
		}
	} else if *seed != 0 {
		return fmt.Errorf("consume: --seed needs --expected-blocks: %w", errUsage)
	}
	if *path == "" {
		*path = fmt.Sprintf("/dev/shm/goindex-%d.replica", *domain)
	}
	log, err := of.logger(stderr)
	if err != nil {
		return err
	}
	nc, closeNATS, err := nf.connect("goindex consume", log)
	if err != nil {
		return err
	}
	defer closeNATS()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	if *discoverEvery <= 0 {
		*discoverEvery = -1 // never (the library's 0 is its default)
	}
	c, err := consume.New(ctx, consume.Config{Conn: nc, Prefix: *nf.prefix, Domain: relayproto.DomainID(*domain), DCs: dcs,
		DiscoverFor: *discoverFor, DiscoverEvery: *discoverEvery, Seed: *seed, Buckets: buckets, Path: *path, Instance: *instance,
		PingEvery: *pingEvery, RetryEvery: *retryEvery, MaxRetryEvery: *maxRetryEvery, PullMessages: *pull, Logger: log, Upstream: upstream})
	if err != nil {
		return err
	}
	log.Info("consumer up", "replica", c.Path(), "lanes", fmt.Sprint(c.Lanes()), "instance", c.Instance())
	stopMetrics, err := of.serveConsume(log, c, *readyLanes)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	defer stopMetrics()
	err = c.Supervise(ctx, *statusEvery, func(st []consume.LaneStatus) {
		consume.LogStatus(log, relayproto.DomainID(*domain), st)
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"replica": c.Path(), "lanes": c.Status()})
	}
	return consume.WriteStatus(stdout, c.Path(), c.Status())
}

// parseUpstream reads --upstream-relays: DC=ADDR pairs, comma-separated.
func parseUpstream(s string) (map[relayproto.DCID]string, error) {
	if s == "" {
		return nil, nil
	}
	m := map[relayproto.DCID]string{}
	for _, pair := range strings.Split(s, ",") {
		dc, addr, ok := strings.Cut(strings.TrimSpace(pair), "=")
		id, err := strconv.ParseUint(dc, 10, 64)
		if !ok || err != nil || id == 0 || addr == "" {
			return nil, fmt.Errorf("--upstream-relays: %q is not DC=HOST:PORT with a nonzero DC id", pair)
		}
		m[relayproto.DCID(id)] = addr
	}
	return m, nil
}

func parseDCs(s string) ([]relayproto.DCID, error) {
	if s == "" {
		return nil, nil
	}
	var out []relayproto.DCID
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil || v == 0 {
			return nil, fmt.Errorf("consume: --dcs %q: %q is not a non-zero DC id: %w", s, f, errUsage)
		}
		out = append(out, relayproto.DCID(v))
	}
	return out, nil
}
