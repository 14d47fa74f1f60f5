package main

import (
	"context"
	"fmt"
	"io"

	"github.com/goindex/goindex/bridge/bench"
	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/replica"
)

const benchCKFSynopsis = `Usage: goindex bench ckf [--trace FILE] [--lanes 4,16,64] [--blocks 1M] [--queries Q] [--radix-max-blocks auto|B] [--json]

Measures the CKF against our own exact index on identical data, one cell
per (lanes, blocks per lane):
  probe   latency p50/p99 of one Mooncake-shaped query across every lane,
          every structure timed in the same interleaved run:
          the transposed CKF replica (chunked scan from the canonical hashes
          and from the local hashes, which it chains itself; the same scan on
          a copy of the table on 4 KiB pages; bisection), the exact radix
          index holding the same blocks for the same members, as built (its
          best case: each chain's nodes in consecutive cache lines) and
          churned (the same content with its nodes at random ids, as after
          hours of evictions), and D separate per-lane cuckoo filters
          (github.com/seiflotfy/cuckoofilter, 8-bit fingerprints, same slot
          count) probed one after another; then the ratios chunked / other
          (below 1: the CKF is faster);
  ingest  block ops/s on one core of a lane's producer (ckf.Producer, drained
          at the default cadence, ExpectedBlocks and ExpectedMemberBlocks =
          --blocks), of the radix index and of the per-lane
          filter, on the same events, over wall time and (linux) over the
          ingesting thread's CPU time;
  memory  bytes per tracked block per lane: replica table (and the share the
          kernel backed with huge pages), producer, radix (Go heap), per-lane
          filter.
The report ends with the machine: CPU model, Go, and the kernel's
transparent huge page policy for anonymous and for shared memory.

Data: real Dynamo canonical hashes. The trace's requests are copied into a
universe, copy k's hash ids offset by k·(max id + 1), ids hashed into local
hashes exactly as Dynamo hashes Mooncake tokens (dynamo.AppendMooncakeLocal).
Lane l is one mock engine (an LRU prefix cache of --blocks blocks) that walks
the universe from offset l·U/D, serving each request with probability 1/2,
until it is full and has evicted an eighth of its capacity; the universe is
just large enough for that to take about one walk, so a lane ends up holding
about half of it: lanes differ but share prefixes, as DCs do. The engines'
events feed each structure; every query is a request drawn from the
universe. The CKF search and the per-lane filters are timed from the query's
canonical hashes; computing them from the local hashes (kv.AppendChain) is
timed on its own as "chain", since the radix index walks the local hashes
itself ("from locals" is the replica from the same input). Each timed query
is first copied into a hot buffer, as a router has just hashed it. By
default queries run interleaved (one query on every structure in turn, in
an order that rotates each query, each structure a fraction of the list
ahead of the previous, so none reads rows another just loaded), so load
from other processes hits all structures alike and each query finds the
caches as the other structures left them. Every answer is checked
afterwards against the engines' own caches: no structure may report less
than the exact depth, the radix indexes must equal it, and the chunked scan
must equal the linear reference and its 4 KiB copy; a failed check fails
the run.

Cells and scale:
  --lanes LIST         lane counts (1..64), comma-separated
  --blocks LIST        blocks per lane, e.g. 1M,10M: K is 2^10, M is 10^6,
                       except that 1M alone is 2^20 (the upstream relay default)
  --radix-max-blocks B skip the radix indexes when lanes × blocks exceeds B;
                       auto: build them when the available memory holds them
                       (about 40 B of heap per member block each; the churned
                       one only when both fit)
  --radix-churned      also build and time the churned radix index
  --small-pages        also time the chunked scan on a 4 KiB-page copy of the
                       table (linux; costs the table's size again)
Data and queries:
  --trace FILE         Mooncake JSONL; default: ` + defaultBenchTrace + `,
                       found from the working directory up
  --block-size BS      KV block size in tokens (a divisor of 512)
  --queries Q          timed queries per structure and cell
  --seed S             walk and query seed
  --interleave=false   time each structure in its own pass over all queries
                       instead (warm caches and TLB for the structure timed)
  --json               print one JSON object instead of the tables
  --cpuprofile FILE    write a CPU profile of the run for go tool pprof

Progress goes to stderr once a phase runs longer than a second.`

func runBenchCKF(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench ckf", benchCKFSynopsis, stderr)
	cfg := bench.CKFConfig{Progress: stderr}
	fs.StringVar(&cfg.TracePath, "trace", "", "Mooncake JSONL trace (default: "+defaultBenchTrace+" found from the working directory up)")
	lanes := fs.String("lanes", "4,16,64", "lane counts, comma-separated")
	blocks := fs.String("blocks", "1M", "blocks per lane, comma-separated (K and M suffixes)")
	radixMax := fs.String("radix-max-blocks", "auto", "skip the radix indexes above lanes × blocks member blocks (auto: by available memory)")
	churned := fs.Bool("radix-churned", true, "also time the churned-heap radix index")
	small := fs.Bool("small-pages", true, "also time the chunked scan on a 4 KiB-page copy of the table")
	fs.IntVar(&cfg.BlockSize, "block-size", trace.DefaultBlockSize, "KV block size in tokens")
	fs.IntVar(&cfg.Queries, "queries", 20000, "timed queries per structure and cell")
	fs.Uint64Var(&cfg.Seed, "seed", 42, "walk and query seed")
	interleave := fs.Bool("interleave", true, "time the structures query by query in turn (false: one whole pass each)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	usageErr := func(format string, a ...any) error {
		return fmt.Errorf("bench ckf: %s: %w", fmt.Sprintf(format, a...), errUsage)
	}
	var err error
	if cfg.Lanes, err = bench.ParseCounts(*lanes, 1, replica.MaxLanes); err != nil {
		return usageErr("--lanes: %v", err)
	}
	if cfg.Blocks, err = bench.ParseCounts(*blocks, 1, bench.MaxCKFBlocks); err != nil {
		return usageErr("--blocks: %v", err)
	}
	cfg.RadixMaxBlocks = bench.AutoRadix
	if *radixMax != "auto" {
		maxes, err := bench.ParseCounts(*radixMax, 0, 1<<40)
		if err != nil || len(maxes) != 1 {
			return usageErr("--radix-max-blocks: want auto or one count")
		}
		cfg.RadixMaxBlocks = maxes[0]
	}
	cfg.SkipChurnedRadix, cfg.SkipSmallPages, cfg.Sequential = !*churned, !*small, !*interleave
	if cfg.TracePath == "" {
		if cfg.TracePath, err = findUp(defaultBenchTrace); err != nil {
			return usageErr("no --trace given and %s not found from the working directory up", defaultBenchTrace)
		}
	}
	var rep *bench.CKFReport
	err = withCPUProfile(*profile, func() (err error) {
		rep, err = bench.CKF(ctx, cfg)
		return err
	})
	if err != nil {
		return benchError("ckf", err)
	}
	return benchOutput(stdout, *asJSON, rep)
}
