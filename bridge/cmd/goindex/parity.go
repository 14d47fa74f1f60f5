package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/goindex/goindex/bridge/parity"
	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/replica"
)

const paritySynopsis = `Usage: goindex parity [--trace FILE | --events FILE] [--lanes N] [--blocks-per-lane M] [--loads 0.5,0.8,0.9 | --load F] [--queries Q] [--json]

Replays KV events through the exact radix index and the CKF index (one lane
per member) side by side and reports how far the CKF's answers are from the
exact ones (spec ckf-algorithm.md §7): per (query, member) the depth error
CKF − exact, underestimates (must be 0 for admitted blocks; capacity misses
are counted apart), per query whether the best member agrees, and the
false-positive rate of single-position probes against the exact ownership,
next to the spec's 8α/65535.

Load: every lane's filter is sized once from --blocks-per-lane
(ckf.BucketCount: a power of two of buckets, 4 slots each); each lane is
then topped up to the target slot occupancy with synthetic resident blocks
(random root chains stored by the lane's member in both indexes, shared by
no query), so every lane sits at exactly the target. A lane whose replayed
blocks already exceed it keeps them; the table shows the actual load. A
sweep tops the same lanes up load after load and runs the same queries at
each.

Queries: the trace's prompts (or, for an event log, a seeded sample of the
stored paths), then, past those, the same paths with every block from a
random cut onward replaced by fresh random blocks (a request that diverges
from a cached prefix), so a run probes many more absent blocks than the
trace holds. Each distinct canonical hash is probed once per load.

Source (one of; default: --trace ` + defaultBenchTrace + `, found from
the working directory up):
  --trace FILE         Mooncake JSONL; every request goes to a worker (seeded
                       partition) whose mock LRU engine emits the events
  --events FILE        event log: one Dynamo JSON RouterEvent per line (CUR or
                       G2025 shape, as dynamo.AppendJSON writes it), in the
                       order the router consumed them; events not for the primary
                       index (other tiers, cache owners') skipped
Trace replay (--trace only):
  --workers N          members (one worker each, rank 0); at most --lanes
  --block-size BS      KV block size in tokens (a divisor of 512)
  --capacity-blocks C  each engine's cache (default: --blocks-per-lane)
CKF index:
  --lanes N            lanes, the most members held at once (1..64)
  --blocks-per-lane M  sizes every lane's filter
  --loads LIST         target slot occupancies, comma-separated, in (0, 0.99]
  --load F             one target (instead of --loads)
  --search MODE        prefix search: chunked, bisect or linear
Queries and output:
  --queries Q          queries per load (0: one per prompt or sampled path)
  --samples K          event log only: stored paths sampled as base queries
  --seed S             partition, filler and query seed
  --json               print one JSON object instead of the table

Exits 1 if any underestimate or false negative of an admitted block occurs.`

// Flag limits of parity.
const (
	maxParityQueries = 1 << 24
	maxParitySamples = 1 << 20
)

// errParityFailed marks a study that found an underestimate or a false
// negative: the CKF broke its guarantee.
var errParityFailed = errors.New("parity: the ckf index under-reported")

func runParity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("parity", paritySynopsis, stderr)
	tracePath := fs.String("trace", "", "Mooncake JSONL trace")
	eventsPath := fs.String("events", "", "event log, one Dynamo JSON RouterEvent per line")
	workers := fs.Int("workers", 16, "members the trace's requests are partitioned over")
	blockSize := fs.Int("block-size", trace.DefaultBlockSize, "KV block size in tokens")
	capacity := fs.Int("capacity-blocks", 0, "each engine's cache in blocks (0: --blocks-per-lane)")
	lanes := fs.Int("lanes", 16, "CKF lanes (1..64)")
	blocksPerLane := fs.Uint64("blocks-per-lane", parity.DefaultBlocksPerLane, "blocks that size each lane's filter")
	loadsFlag := fs.String("loads", "0.5,0.8,0.9", "target slot occupancies, comma-separated")
	load := fs.Float64("load", 0, "one target slot occupancy above 0, instead of --loads (unset: --loads)")
	searchName := fs.String("search", replica.Chunked.String(), "CKF prefix search: chunked, bisect or linear")
	queries := fs.Int("queries", 0, "queries per load (0: one per base path)")
	samples := fs.Int("samples", 4096, "event log: stored paths sampled as base queries")
	seed := fs.Uint64("seed", 42, "partition, filler and query seed")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	usageErr := func(format string, a ...any) error {
		return fmt.Errorf("parity: %s: %w", fmt.Sprintf(format, a...), errUsage)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	loads, err := parity.ParseLoads(*loadsFlag)
	if err != nil {
		return usageErr("--loads: %v", err)
	}
	if set["load"] {
		if set["loads"] {
			return usageErr("--load and --loads are exclusive")
		}
		if loads, err = parity.ParseLoads(strconv.FormatFloat(*load, 'g', -1, 64)); err != nil {
			return usageErr("--load: %v", err)
		}
	}
	search, err := parity.ParseSearch(*searchName)
	if err != nil {
		return usageErr("--search: %v", err)
	}
	switch {
	case *tracePath != "" && *eventsPath != "":
		return usageErr("--trace and --events are exclusive")
	case *eventsPath != "" && (set["workers"] || set["block-size"] || set["capacity-blocks"]):
		return usageErr("--workers, --block-size and --capacity-blocks apply to --trace only")
	case *eventsPath == "" && set["samples"]:
		return usageErr("--samples applies to --events only")
	case *lanes < 1 || *lanes > replica.MaxLanes:
		return usageErr("--lanes must be in [1, %d]", replica.MaxLanes)
	case *eventsPath == "" && (*workers < 1 || *workers > *lanes):
		return usageErr("--workers must be in [1, --lanes = %d]", *lanes)
	case *blocksPerLane < 1:
		return usageErr("--blocks-per-lane must be at least 1")
	case *capacity < 0 || *capacity > trace.MaxCapacityBlocks:
		return usageErr("--capacity-blocks must be in [0, %d]", trace.MaxCapacityBlocks)
	case *queries < 0 || *queries > maxParityQueries:
		return usageErr("--queries must be in [0, %d]", maxParityQueries)
	case *samples < 1 || *samples > maxParitySamples:
		return usageErr("--samples must be in [1, %d]", maxParitySamples)
	}
	study, err := parity.New(parity.Config{Lanes: *lanes, BlocksPerLane: *blocksPerLane, Seed: *seed, Search: search})
	if errors.Is(err, parity.ErrConfig) {
		return usageErr("%v", err)
	}
	if err != nil {
		return err
	}
	rep := &parity.Report{Command: "parity", Setup: parity.Setup{Lanes: *lanes, BlocksPerLane: *blocksPerLane,
		Buckets: study.Buckets(), Search: search.String(), Loads: loads, Seed: *seed}}
	var base [][]uint64
	if *eventsPath != "" {
		if base, err = rep.ReplayLogFile(study, *eventsPath, *samples); err != nil {
			return fmt.Errorf("parity: %w", err)
		}
	} else {
		if *tracePath == "" {
			if *tracePath, err = findUp(defaultBenchTrace); err != nil {
				return usageErr("no --trace or --events given and %s not found from the working directory up", defaultBenchTrace)
			}
		}
		cfg := parity.TraceConfig{Workers: *workers, Seed: *seed, BlockSize: *blockSize, CapacityBlocks: *capacity}
		if cfg.CapacityBlocks == 0 {
			cfg.CapacityBlocks = int(min(*blocksPerLane, trace.MaxCapacityBlocks))
		}
		if base, err = rep.ReplayTraceFile(study, *tracePath, cfg); errors.Is(err, parity.ErrConfig) {
			return usageErr("%v", err)
		} else if err != nil {
			return fmt.Errorf("parity: %w", err)
		}
	}
	if err := rep.Sweep(ctx, study, parity.Queries{Base: base, Count: *queries, Seed: *seed}, loads); err != nil {
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		rep.WriteText(stdout)
	}
	if rep.Failed() {
		return fmt.Errorf("%d underestimates, %d false negatives over %d queries: %w", rep.Underestimates, rep.FalseNegatives, rep.Queries, errParityFailed)
	}
	return nil
}
