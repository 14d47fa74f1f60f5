package main

import (
	"context"
	"fmt"
	"io"

	"github.com/goindex/goindex/bridge/bench"
	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

const benchRadixSynopsis = `Usage: goindex bench radix [--trace FILE] [--workers N] [--block-size 512] [--capacity-blocks C] [--queries Q] [--duplicate D] [--json]

Replays a Mooncake request trace as KV traffic into the exact radix index and
measures it, the way upstream's mooncake_bench does (dynamo-compat §6):
every request goes to a worker (seeded random partition), whose mock engine
(an LRU prefix cache of --capacity-blocks blocks) turns it into Stored and
Removed events. The events are generated first, then applied to an empty
index in trace order on one goroutine (timed), then every request's prompt is
matched against the populated index, each query timed on its own. Finally
every query's answer is checked against the engines' own caches, and any
disagreement fails the run.

Trace:
  --trace FILE         Mooncake JSONL; default: ` + defaultBenchTrace + `,
                       looked up from the working directory and its parents
  --stretch F          id h → h·F … h·F+F−1 (longer prompts, same sharing)
  --duplicate D        D disjoint copies of every request (ids offset by max id + 1)
Workers and engines:
  --workers N          workers (one kv.Member each, rank 0)
  --seed S             partition seed (upstream's default 42; the assignment is
                       not upstream's Rust StdRng stream)
  --block-size BS      KV block size in tokens
  --scheme split|per-id  split: an id's 512 tokens become 512/BS blocks;
                       per-id: one BS-token block per id (upstream's mapping)
  --capacity-blocks C  cache size of each worker's engine
Measurement and output:
  --queries Q          timed match queries, cycling over the prompts in trace
                       order (0: one per request)
  --examples K         show the K queries matched by the most members (earliest
                       first among equals) with every member's matched depth
  --json               print one JSON object instead of the report

Progress goes to stderr once a phase runs longer than a second.`

// radixTarget is the exact radix index as a replay target.
var radixTarget = bench.ReplayTarget{
	Name: "radix",
	New:  func() kv.Index { return radix.New(radix.Config{}) },
	Sizes: func(x kv.Index) (int, int) {
		st := x.(*radix.Index).Stats()
		return st.Nodes, st.Blocks
	},
}

func runBenchRadix(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runReplayBench(ctx, radixTarget, benchRadixSynopsis, args, stdout, stderr)
}

// runReplayBench wires a replay benchmark's flags to bench.Replay against
// the target's index and prints its report. Any kv.Index can be measured
// this way by a bench_<name>.go with its own synopsis.
func runReplayBench(ctx context.Context, target bench.ReplayTarget, synopsis string, args []string, stdout, stderr io.Writer) error {
	name := target.Name
	fs := newFlagSet("bench "+name, synopsis, stderr)
	cfg := bench.ReplayConfig{Progress: stderr}
	fs.StringVar(&cfg.TracePath, "trace", "", "Mooncake JSONL trace (default: "+defaultBenchTrace+" found from the working directory up)")
	fs.IntVar(&cfg.Stretch, "stretch", 1, "length stretch factor")
	fs.IntVar(&cfg.Duplicate, "duplicate", 1, "duplication factor")
	fs.IntVar(&cfg.Workers, "workers", 16, "workers the requests are partitioned over")
	fs.Uint64Var(&cfg.Seed, "seed", 42, "partition seed")
	fs.IntVar(&cfg.BlockSize, "block-size", trace.DefaultBlockSize, "KV block size in tokens")
	schemeName := fs.String("scheme", trace.Split.String(), "id → block mapping: split or per-id")
	fs.IntVar(&cfg.CapacityBlocks, "capacity-blocks", trace.DefaultCapacityBlocks, "cache capacity of each worker's engine, in blocks")
	fs.IntVar(&cfg.Queries, "queries", 0, "timed match queries (0: one per request)")
	fs.IntVar(&cfg.Examples, "examples", 3, "example queries to show (those matched by the most members)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if cfg.Scheme, err = trace.ParseScheme(*schemeName); err != nil {
		return benchError(name, fmt.Errorf("%w: --scheme: %v", bench.ErrConfig, err))
	}
	if cfg.TracePath == "" {
		if cfg.TracePath, err = findUp(defaultBenchTrace); err != nil {
			return benchError(name, fmt.Errorf("%w: no --trace given and %s not found from the working directory up", bench.ErrConfig, defaultBenchTrace))
		}
	}
	rep, err := bench.Replay(ctx, cfg, target)
	if err != nil {
		return benchError(name, err)
	}
	return benchOutput(stdout, *asJSON, rep)
}
