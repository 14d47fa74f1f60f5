package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

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
                       order the router consumed them; non-device tiers skipped
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
	maxParityLoads   = 16
)

// errParityFailed marks a study that found an underestimate or a false
// negative: the CKF broke its guarantee.
var errParityFailed = errors.New("parity: the ckf index under-reported")

// parityReport is the --json output.
type parityReport struct {
	Command string             `json:"command"`
	Source  paritySource       `json:"source"`
	Setup   paritySetup        `json:"setup"`
	Apply   parity.ApplyCounts `json:"apply"`

	// Totals over every load of the sweep; rates are pooled.
	Queries             int     `json:"queries"`
	Underestimates      int     `json:"underestimates"`
	CapacityMisses      int     `json:"capacity_misses"`
	RejectedMisses      int     `json:"rejected_misses"`
	FalseNegatives      int     `json:"false_negatives"`
	WrongBest           int     `json:"wrong_best"`
	WrongBestRate       float64 `json:"wrong_best_rate"`
	FPRate              float64 `json:"fp_rate"`
	ExpectedFPRate      float64 `json:"expected_fp_rate"`
	MeanOvercountBlocks float64 `json:"mean_overcount_blocks"`

	Loads []parity.Result `json:"loads"`
}

type paritySource struct {
	Kind        string `json:"kind"` // trace or events
	Path        string `json:"path"`
	Requests    int    `json:"requests,omitempty"`
	SkippedTier int    `json:"skipped_tier_events,omitempty"`
	BaseQueries int    `json:"base_queries"`
}

type paritySetup struct {
	Lanes          int       `json:"lanes"`
	BlocksPerLane  uint64    `json:"blocks_per_lane"`
	Buckets        uint64    `json:"buckets"`
	Search         string    `json:"search"`
	Loads          []float64 `json:"target_loads"`
	Seed           uint64    `json:"seed"`
	Workers        int       `json:"workers,omitempty"`
	BlockSize      int       `json:"block_size,omitempty"`
	CapacityBlocks int       `json:"capacity_blocks,omitempty"`
}

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
	loads, err := parseLoads(*loadsFlag)
	if err != nil {
		return usageErr("--loads: %v", err)
	}
	if set["load"] {
		if set["loads"] {
			return usageErr("--load and --loads are exclusive")
		}
		if loads, err = parseLoads(strconv.FormatFloat(*load, 'g', -1, 64)); err != nil {
			return usageErr("--load: %v", err)
		}
	}
	search, err := parseSearch(*searchName)
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
	rep := &parityReport{Command: "parity", Setup: paritySetup{Lanes: *lanes, BlocksPerLane: *blocksPerLane,
		Buckets: study.Buckets(), Search: search.String(), Loads: loads, Seed: *seed}}

	var base [][]uint64
	if *eventsPath != "" {
		rep.Source = paritySource{Kind: "events", Path: *eventsPath}
		f, err := os.Open(*eventsPath)
		if err != nil {
			return fmt.Errorf("parity: %w", err)
		}
		lr := parity.NewLogReader(f)
		base, err = study.ReplayLog(lr, *samples)
		f.Close()
		if err != nil {
			return fmt.Errorf("parity: %s: %w", *eventsPath, err)
		}
		rep.Source.SkippedTier = lr.Skipped()
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
		rep.Source = paritySource{Kind: "trace", Path: *tracePath}
		rep.Setup.Workers, rep.Setup.BlockSize, rep.Setup.CapacityBlocks = cfg.Workers, cfg.BlockSize, cfg.CapacityBlocks
		f, err := os.Open(*tracePath)
		if err != nil {
			return fmt.Errorf("parity: %w", err)
		}
		reqs, err := trace.ReadAll(f, trace.ReaderConfig{})
		f.Close()
		if err != nil {
			return fmt.Errorf("parity: %s: %w", *tracePath, err)
		}
		rep.Source.Requests = len(reqs)
		if base, err = study.ReplayTrace(reqs, cfg); err != nil {
			if errors.Is(err, parity.ErrConfig) {
				return usageErr("%v", err)
			}
			return fmt.Errorf("parity: %s: %w", *tracePath, err)
		}
	}
	rep.Source.BaseQueries = len(base)
	qs := parity.Queries{Base: base, Count: *queries, Seed: *seed}
	for _, l := range loads {
		if err := ctx.Err(); err != nil {
			return err
		}
		fill, err := study.Fill(l)
		if err != nil {
			return fmt.Errorf("parity: load %v: %w", l, err)
		}
		res, err := study.Measure(qs.All)
		if err != nil {
			return fmt.Errorf("parity: load %v: %w", l, err)
		}
		res.Fill = fill
		rep.Loads = append(rep.Loads, res)
	}
	rep.Apply = study.Counts()
	rep.total()
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout)
	}
	for _, r := range rep.Loads {
		if r.Failed() {
			return fmt.Errorf("%d underestimates, %d false negatives over %d queries: %w", rep.Underestimates, rep.FalseNegatives, rep.Queries, errParityFailed)
		}
	}
	return nil
}

// parseLoads parses a comma-separated list of slot occupancies and returns
// it sorted ascending (a sweep only tops lanes up).
func parseLoads(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		if !(v > 0 && v <= parity.MaxLoad) {
			return nil, fmt.Errorf("load %v not in (0, %v]", v, parity.MaxLoad)
		}
		out = append(out, v)
	}
	if len(out) > maxParityLoads {
		return nil, fmt.Errorf("%d loads, at most %d", len(out), maxParityLoads)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// parseSearch maps a search mode's name to the mode.
func parseSearch(name string) (replica.Mode, error) {
	for _, m := range []replica.Mode{replica.Chunked, replica.Bisect, replica.Linear} {
		if m.String() == name {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q (want chunked, bisect or linear)", name)
}

// total fills the report's totals from its loads.
func (r *parityReport) total() {
	var overs, overBlocks, fps, negs int
	var expected float64
	for _, l := range r.Loads {
		r.Queries += l.Queries
		r.Underestimates += l.Underestimates
		r.CapacityMisses += l.CapacityMisses
		r.RejectedMisses += l.RejectedMisses
		r.FalseNegatives += l.FP.FalseNegatives
		r.WrongBest += l.Best.WrongBest
		overs += l.Overcounts
		overBlocks += int(l.MeanOvercountBlocks*float64(l.Overcounts) + 0.5)
		fps += l.FP.FalsePositives
		negs += l.FP.Negatives
		expected += l.FP.ExpectedFPRate * float64(l.FP.Negatives)
	}
	r.WrongBestRate = ratio(r.WrongBest, r.Queries)
	r.FPRate = ratio(fps, negs)
	if negs > 0 {
		r.ExpectedFPRate = expected / float64(negs)
	}
	r.MeanOvercountBlocks = ratio(overBlocks, overs)
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (r *parityReport) print(w io.Writer) {
	s := &r.Setup
	switch r.Source.Kind {
	case "trace":
		fmt.Fprintf(w, "goindex parity: trace %s: %d requests over %d workers (block size %d, %d cache blocks each)\n",
			r.Source.Path, r.Source.Requests, s.Workers, s.BlockSize, s.CapacityBlocks)
	default:
		fmt.Fprintf(w, "goindex parity: event log %s (%d non-device events skipped)\n", r.Source.Path, r.Source.SkippedTier)
	}
	a := &r.Apply
	fmt.Fprintf(w, "events   %d (%d block ops) applied to both indexes; rejected: exact %d, ckf %d; %d capacity omissions; %d synthetic filler blocks\n",
		a.Events, a.BlockOps, a.RejectedExact, a.RejectedCKF, a.Omissions, a.FillerBlocks)
	if a.FirstRejectExact != "" {
		fmt.Fprintf(w, "         first exact rejection: %s\n", a.FirstRejectExact)
	}
	fmt.Fprintf(w, "ckf      %d lanes × %d buckets (%d slots; sized for %d blocks), %s search; %d base queries\n\n",
		s.Lanes, s.Buckets, 4*s.Buckets, s.BlocksPerLane, s.Search, r.Source.BaseQueries)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "load\tactual\tqueries\tpairs\tunder\tcap miss\tover\tmean over\tbest agree\ttie risk\twrong best\tfp rate\t8α/65535\tratio\tfalse neg\t")
	for _, l := range r.Loads {
		fmt.Fprintf(tw, "%.0f%%\t%.1f%%\t%d\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t%d (%.3f%%)\t%.3g\t%.3g\t%.2f\t%d\t\n",
			100*l.Fill.TargetLoad, 100*l.Fill.MeanLoad, l.Queries, l.Pairs, l.Underestimates, l.CapacityMisses, l.Overcounts,
			l.MeanOvercountBlocks, l.Best.Agree, l.Best.TieRisk, l.Best.WrongBest, 100*l.Best.WrongBestRate,
			l.FP.FPRate, l.FP.ExpectedFPRate, l.FP.FPRatio, l.FP.FalseNegatives)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ndepth error CKF − exact (pairs):")
	for _, l := range r.Loads {
		fmt.Fprintf(w, "  %.0f%%:", 100*l.Fill.TargetLoad)
		for _, b := range l.DepthError {
			fmt.Fprintf(w, " %+d:%d", b.Error, b.Pairs)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\ntotal    %d queries: %d underestimates, %d capacity misses, %d misses from events only the exact index accepted, %d false negatives, %d wrong best (%.4f%%), fp rate %.3g (8α/65535: %.3g), mean overcount %.2f blocks\n",
		r.Queries, r.Underestimates, r.CapacityMisses, r.RejectedMisses, r.FalseNegatives, r.WrongBest, 100*r.WrongBestRate, r.FPRate, r.ExpectedFPRate, r.MeanOvercountBlocks)
}
