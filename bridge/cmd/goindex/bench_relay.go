package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/goindex/goindex/bridge/bench"
)

const benchRelaySynopsis = `Usage: goindex bench relay [--lanes 13] [--blocks 1000000] [--steady-events N] [--samples N] [--synthetic] [--json]

Measures the Relay over NATS on loopback, all in this process: one embedded
nats-server with JetStream, --lanes DC relays (one pool each, sized for
--blocks), and one consumer writing a shared-memory replica.

  fill     every relay is fed --blocks distinct blocks as Dynamo msgpack
           envelopes of --run-blocks blocks each, then stores a snapshot
  resync   a cold consumer starts: wall time until every lane is READY and
           equals its producer byte for byte; bytes the consumer's connection
           received, per resident block; compact snapshot objects per block
  encoding snapshot bytes per resident block, dense vs compact
  steady   --steady-events events into lane 0's relay as fast as they go:
           delta frames/s and bucket images/s on that lane, until the lane is
           back in step with its producer
  visible  --samples single stored events, one at a time: latency from
           publishing the event to the block being found by a probe of the
           replica (cadence timer, relay, JetStream, consumer apply)
  apply    the consumer side alone, for every delta of the steady and
           visible phases: decoding the frame and installing its images
           into the replica (the lane's ingestor, consume.Config.ObserveDelta),
           p50/p99/max; transport and the relay are not in it

Scale: a 10M-block lane is 4,194,304 buckets (32 MiB dense); the producer's
exact state needs roughly 60 bytes per block on top (about 180 bytes of
resident memory per block in this benchmark: 13 × 10M does not fit 23 GB).

--synthetic: a resync-only run whose tables are SYNTHETIC. No KV event is
fed and no producer holds exact ownership: each lane's table is filled
directly with --blocks random canonical hashes, addressed by the pool's
format and placed as the producer places them (first free slot of either
bucket, else cuckoo kicks), so it has the bucket count, load and
fingerprint distribution of a lane tracking --blocks blocks. Each relay
publishes its table through its real publisher and JetStream snapshot store
(relay.PoolConfig.Source) and subscribes to no events; the cold consumer's
resync is the real code path, checked equal to the tables byte for byte and
by probes of sampled hashes. Only synthesize (in place of fill), resync and
encoding run; the report has no steady, visible or apply figures.

--cpuprofile FILE writes a CPU profile of the whole run, --resync-profile
FILE (instead) one of the cold resync alone, for go tool pprof: the relays, the NATS
server and the consumer share the process, so the profile splits the
resync by stage (server sending, client receiving, frame decoding, table
install).`

func runBenchRelay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench relay", benchRelaySynopsis, stderr)
	cfg := bench.RelayConfig{Progress: stderr}
	fs.IntVar(&cfg.Lanes, "lanes", 13, "DCs (lanes), each with its own relay")
	fs.IntVar(&cfg.Blocks, "blocks", 1_000_000, "blocks per lane (the reference deployment: 10M)")
	fs.IntVar(&cfg.RunBlocks, "run-blocks", 64, "blocks per stored event while filling")
	fs.IntVar(&cfg.SteadyEvents, "steady-events", 20_000, "events of the steady-state phase")
	fs.IntVar(&cfg.Samples, "samples", 200, "visibility latency samples")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "block hash seed")
	fs.BoolVar(&cfg.Synthetic, "synthetic", false, "resync only, of SYNTHETIC tables filled directly at the load of --blocks (see above)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	resyncProfile := fs.String("resync-profile", "", "write a CPU profile of the cold resync alone to this file (go tool pprof)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *profile != "" && *resyncProfile != "" {
		return fmt.Errorf("bench relay: --cpuprofile and --resync-profile are exclusive (one CPU profile at a time): %w", errUsage)
	}
	if *resyncProfile != "" {
		f, err := os.Create(*resyncProfile)
		if err != nil {
			return fmt.Errorf("bench relay: --resync-profile: %w", err)
		}
		defer f.Close()
		cfg.ResyncProfile = f
	}
	var rep *bench.RelayReport
	err := withCPUProfile(*profile, func() (err error) {
		rep, err = bench.Relay(ctx, cfg)
		return err
	})
	if err != nil {
		return benchError("relay", err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	return rep.Print(stdout)
}
