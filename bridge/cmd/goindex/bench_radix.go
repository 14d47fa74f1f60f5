package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

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
  --trace FILE         Mooncake JSONL; default: testdata/mooncake/synthetic_head400.jsonl,
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

// defaultBenchTrace is the shipped slice replayed when --trace is not given.
const defaultBenchTrace = "testdata/mooncake/synthetic_head400.jsonl"

// Flag limits of the replay benchmarks, so a typo cannot ask for gigabytes
// of engines or latency samples.
const (
	maxBenchWorkers = 1 << 16
	maxBenchQueries = 1 << 24
)

// errBenchCheck marks a benchmark whose results failed their own check.
var errBenchCheck = errors.New("benchmark check failed")

func runBenchRadix(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runReplayBench(ctx, replayTarget{
		name:     "radix",
		synopsis: benchRadixSynopsis,
		newIndex: func() kv.Index { return radix.New(radix.Config{}) },
		sizes: func(x kv.Index) (int, int) {
			st := x.(*radix.Index).Stats()
			return st.Nodes, st.Blocks
		},
	}, args, stdout, stderr)
}

// replayTarget is an index a replay benchmark measures.
type replayTarget struct {
	name     string
	synopsis string
	newIndex func() kv.Index
	// sizes reports the index's own count of distinct blocks (tree nodes)
	// and of (member, block) pairs, checked against the engines'; optional.
	sizes func(kv.Index) (distinct, memberBlocks int)
}

// replayOptions are the flags of a trace-replay benchmark.
type replayOptions struct {
	tracePath          string
	stretch, duplicate int
	workers            int
	seed               uint64
	blockSize          int
	scheme             trace.Scheme
	capacityBlocks     int
	queries            int
	examples           int
}

// runReplayBench parses a replay benchmark's flags, runs it against the
// target's index, and prints the report. Any kv.Index can be measured this
// way by a bench_<name>.go with its own synopsis.
func runReplayBench(ctx context.Context, target replayTarget, args []string, stdout, stderr io.Writer) error {
	name := target.name
	fs := newFlagSet("bench "+name, target.synopsis, stderr)
	var o replayOptions
	fs.StringVar(&o.tracePath, "trace", "", "Mooncake JSONL trace (default: "+defaultBenchTrace+" found from the working directory up)")
	fs.IntVar(&o.stretch, "stretch", 1, "length stretch factor")
	fs.IntVar(&o.duplicate, "duplicate", 1, "duplication factor")
	fs.IntVar(&o.workers, "workers", 16, "workers the requests are partitioned over")
	fs.Uint64Var(&o.seed, "seed", 42, "partition seed")
	fs.IntVar(&o.blockSize, "block-size", trace.DefaultBlockSize, "KV block size in tokens")
	schemeName := fs.String("scheme", trace.Split.String(), "id → block mapping: split or per-id")
	fs.IntVar(&o.capacityBlocks, "capacity-blocks", trace.DefaultCapacityBlocks, "cache capacity of each worker's engine, in blocks")
	fs.IntVar(&o.queries, "queries", 0, "timed match queries (0: one per request)")
	fs.IntVar(&o.examples, "examples", 3, "example queries to show (those matched by the most members)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	usageErr := func(format string, a ...any) error {
		return fmt.Errorf("bench %s: %s: %w", name, fmt.Sprintf(format, a...), errUsage)
	}
	var err error
	if o.scheme, err = trace.ParseScheme(*schemeName); err != nil {
		return usageErr("--scheme: %v", err)
	}
	switch {
	case o.workers < 1 || o.workers > maxBenchWorkers:
		return usageErr("--workers must be in [1, %d]", maxBenchWorkers)
	case o.capacityBlocks < 1 || o.capacityBlocks > trace.MaxCapacityBlocks:
		return usageErr("--capacity-blocks must be in [1, %d]", trace.MaxCapacityBlocks)
	case o.queries < 0 || o.queries > maxBenchQueries:
		return usageErr("--queries must be in [0, %d]", maxBenchQueries)
	case o.examples < 0:
		return usageErr("--examples must not be negative")
	}
	if o.tracePath == "" {
		if o.tracePath, err = findUp(defaultBenchTrace); err != nil {
			return usageErr("no --trace given and %s not found from the working directory up", defaultBenchTrace)
		}
	}
	rep, err := replay(ctx, o, target, stderr)
	if errors.Is(err, trace.ErrConfig) {
		return usageErr("%v", err)
	}
	if err != nil {
		return fmt.Errorf("bench %s: %w", name, err)
	}
	rep.Benchmark = name
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout)
	}
	return rep.check()
}

// findUp returns rel joined to the working directory or its nearest parent
// that has it.
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// replayReport is the result of a replay benchmark; its JSON form is the
// --json output.
type replayReport struct {
	Benchmark string         `json:"benchmark"`
	Trace     traceFigures   `json:"trace"`
	Setup     setupFigures   `json:"setup"`
	Apply     applyFigures   `json:"apply"`
	Match     matchFigures   `json:"match"`
	Index     indexFigures   `json:"index"`
	Cache     cacheFigures   `json:"cache"`
	Overlap   overlapFigures `json:"overlap"`
	Workers   []workerRow    `json:"per_worker"`
	Examples  []exampleQuery `json:"examples"`
	Machine   machineInfo    `json:"machine"`
}

type traceFigures struct {
	Path         string `json:"path"`
	Requests     int    `json:"requests"`
	Stretch      int    `json:"stretch"`
	Duplicate    int    `json:"duplicate"`
	PromptBlocks int    `json:"prompt_blocks"`
}

type setupFigures struct {
	Workers        int    `json:"workers"`
	Seed           uint64 `json:"seed"`
	BlockSize      int    `json:"block_size"`
	Scheme         string `json:"scheme"`
	CapacityBlocks int    `json:"capacity_blocks"`
}

type applyFigures struct {
	Events         int     `json:"events"`
	StoredEvents   int     `json:"stored_events"`
	RemovedEvents  int     `json:"removed_events"`
	BlockOps       int     `json:"block_ops"` // stored blocks + removed hashes
	Seconds        float64 `json:"seconds"`
	EventsPerSec   float64 `json:"events_per_sec"`
	BlockOpsPerSec float64 `json:"block_ops_per_sec"`
	Errors         int     `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
}

type matchFigures struct {
	Queries  int     `json:"queries"`
	Overlaps int     `json:"overlaps"` // member overlaps the timed queries returned
	P50us    float64 `json:"p50_us"`
	P99us    float64 `json:"p99_us"`
	MeanUs   float64 `json:"mean_us"`
	MaxUs    float64 `json:"max_us"`
}

// indexFigures counts what the index must track, from the engines' caches,
// and what its heap costs per tracked block.
type indexFigures struct {
	MemberBlocks            int            `json:"member_blocks"`   // (member, block) ownerships held
	DistinctBlocks          int            `json:"distinct_blocks"` // distinct prefixes held by anyone
	Reported                *reportedSizes `json:"reported,omitempty"`
	HeapBytes               int64          `json:"heap_bytes"`
	HeapBytesPerMemberBlock float64        `json:"heap_bytes_per_member_block"`
	HeapBytesPerBlock       float64        `json:"heap_bytes_per_block"`
}

// reportedSizes are the index's own counts (replayTarget.sizes).
type reportedSizes struct {
	DistinctBlocks int `json:"distinct_blocks"`
	MemberBlocks   int `json:"member_blocks"`
}

type cacheFigures struct {
	PromptBlocks  int     `json:"prompt_blocks"`
	HitBlocks     int     `json:"hit_blocks"`
	HitRate       float64 `json:"hit_rate"`
	StoredBlocks  int     `json:"stored_blocks"`
	EvictedBlocks int     `json:"evicted_blocks"`
}

type overlapFigures struct {
	Verified          int     `json:"verified_queries"`
	WantTimedOverlaps int     `json:"want_timed_overlaps"` // what match.overlaps must be
	Mismatches        int     `json:"mismatches"`
	FirstMismatch     string  `json:"first_mismatch,omitempty"`
	Matched           int     `json:"matched_queries"`
	MeanBestBlocks    float64 `json:"mean_best_overlap_blocks"`
	BestFraction      float64 `json:"best_overlap_fraction"` // Σ best depth / Σ query blocks
}

type workerRow struct {
	Worker         uint64  `json:"worker"`
	Requests       int     `json:"requests"`
	PromptBlocks   int     `json:"prompt_blocks"`
	HitBlocks      int     `json:"hit_blocks"`
	HitRate        float64 `json:"hit_rate"`
	EvictedBlocks  int     `json:"evicted_blocks"`
	HeldBlocks     int     `json:"held_blocks"`
	MatchedQueries int     `json:"matched_queries"`
	MeanMatched    float64 `json:"mean_matched_blocks"` // over the queries it matched
}

type exampleQuery struct {
	Request int           `json:"request"`
	Worker  int           `json:"worker"` // where the trace sent it
	Blocks  int           `json:"blocks"`
	Matches []exampleHold `json:"matches"` // deepest first
}

type exampleHold struct {
	Worker uint64 `json:"worker"`
	Rank   uint32 `json:"rank"`
	Blocks int    `json:"blocks"`
}

type machineInfo struct {
	Go         string `json:"go"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// replay runs the benchmark: generate the events, apply them (timed),
// measure memory, time the queries and check them against the engines.
func replay(ctx context.Context, o replayOptions, target replayTarget, stderr io.Writer) (*replayReport, error) {
	f, err := os.Open(o.tracePath)
	if err != nil {
		return nil, err
	}
	reqs, err := trace.ReadAll(f, trace.ReaderConfig{})
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.tracePath, err)
	}
	if reqs, err = trace.Stretch(reqs, o.stretch); err != nil {
		return nil, err
	}
	if reqs, err = trace.Duplicate(reqs, o.duplicate); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s: no requests", o.tracePath)
	}
	mapper, err := trace.NewMapper(trace.MapperConfig{BlockSize: o.blockSize, Scheme: o.scheme})
	if err != nil {
		return nil, err
	}
	part, err := trace.NewPartition(o.workers, o.seed)
	if err != nil {
		return nil, err
	}
	engines := make([]*trace.Engine, o.workers)
	for w := range engines {
		if engines[w], err = trace.NewEngine(trace.EngineConfig{Member: kv.Member{Worker: uint64(w)}, CapacityBlocks: o.capacityBlocks}); err != nil {
			return nil, err
		}
	}
	rep := &replayReport{
		Trace: traceFigures{Path: o.tracePath, Requests: len(reqs), Stretch: o.stretch, Duplicate: o.duplicate},
		Setup: setupFigures{Workers: o.workers, Seed: o.seed, BlockSize: o.blockSize, Scheme: o.scheme.String(), CapacityBlocks: o.capacityBlocks},
		Machine: machineInfo{Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
			CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)},
		Workers: make([]workerRow, o.workers),
	}
	for w := range rep.Workers {
		rep.Workers[w].Worker = uint64(w)
	}

	// Phase 1, untimed: the engines turn the trace into events.
	prompts := make([][]uint64, len(reqs))
	sentTo := make([]int, len(reqs))
	var events []kv.Event
	distinct := map[uint64]int{} // external hash → holders: the index's distinct blocks
	prog := newProgress(stderr, "generating events")
	for i, r := range reqs {
		if i&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			prog.tick(i, len(reqs))
		}
		w := part.Worker(uint64(i))
		prompts[i], sentTo[i] = mapper.AppendLocals(nil, r.HashIDs), w
		first := len(events)
		var res trace.Result
		events, res = engines[w].Serve(events, prompts[i])
		row := &rep.Workers[w]
		row.Requests++
		row.PromptBlocks += res.PromptBlocks
		row.HitBlocks += res.CachedBlocks
		row.EvictedBlocks += res.EvictedBlocks
		rep.Cache.StoredBlocks += res.StoredBlocks
		for _, ev := range events[first:] {
			for _, b := range ev.Blocks {
				distinct[b.External]++
			}
			for _, h := range ev.Removed {
				if distinct[h]--; distinct[h] == 0 {
					delete(distinct, h)
				}
			}
		}
	}
	for w, e := range engines {
		row := &rep.Workers[w]
		row.HeldBlocks = e.Blocks()
		row.HitRate = ratio(row.HitBlocks, row.PromptBlocks)
		rep.Cache.PromptBlocks += row.PromptBlocks
		rep.Cache.HitBlocks += row.HitBlocks
		rep.Cache.EvictedBlocks += row.EvictedBlocks
		rep.Index.MemberBlocks += row.HeldBlocks
	}
	rep.Trace.PromptBlocks = rep.Cache.PromptBlocks
	rep.Cache.HitRate = ratio(rep.Cache.HitBlocks, rep.Cache.PromptBlocks)
	rep.Index.DistinctBlocks = len(distinct)
	for i := range events {
		switch ev := &events[i]; ev.Kind {
		case kv.Stored:
			rep.Apply.StoredEvents++
			rep.Apply.BlockOps += len(ev.Blocks)
		case kv.Removed:
			rep.Apply.RemovedEvents++
			rep.Apply.BlockOps += len(ev.Removed)
		}
	}
	rep.Apply.Events = len(events)

	// Phase 2, timed: apply every event to an empty index.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	idx := target.newIndex()
	prog = newProgress(stderr, "applying events")
	start := time.Now()
	for i := range events {
		if i&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			prog.tick(i, len(events))
		}
		if err := idx.Apply(&events[i]); err != nil {
			if rep.Apply.Errors == 0 {
				rep.Apply.FirstError = fmt.Sprintf("event %d (%v %v): %v", i, events[i].Member, events[i].Kind, err)
			}
			rep.Apply.Errors++
		}
	}
	elapsed := time.Since(start).Seconds()
	rep.Apply.Seconds = elapsed
	rep.Apply.EventsPerSec = float64(rep.Apply.Events) / elapsed
	rep.Apply.BlockOpsPerSec = float64(rep.Apply.BlockOps) / elapsed
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(events)
	rep.Index.HeapBytes = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	rep.Index.HeapBytesPerMemberBlock = ratio64(rep.Index.HeapBytes, rep.Index.MemberBlocks)
	rep.Index.HeapBytesPerBlock = ratio64(rep.Index.HeapBytes, rep.Index.DistinctBlocks)
	events = nil
	if target.sizes != nil {
		d, m := target.sizes(idx)
		rep.Index.Reported = &reportedSizes{DistinctBlocks: d, MemberBlocks: m}
	}

	// Phase 3, timed per query: match the prompts against the full index.
	queries := o.queries
	if queries == 0 {
		queries = len(prompts)
	}
	lat := make([]time.Duration, queries)
	dst := make([]kv.Overlap, 0, o.workers)
	timedOverlaps := 0 // the sink: checked against the verification below
	prog = newProgress(stderr, "matching")
	for q := range lat {
		if q&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			prog.tick(q, queries)
		}
		p := prompts[q%len(prompts)]
		t0 := time.Now()
		dst = idx.Match(dst[:0], p)
		lat[q] = time.Since(t0)
		timedOverlaps += len(dst)
	}
	rep.Match = latencyFigures(lat)
	rep.Match.Overlaps = timedOverlaps

	// Phase 4, untimed: every distinct query's answer must equal the
	// engines' own cached prefixes.
	holders := verify(rep, idx, engines, prompts[:min(queries, len(prompts))], sentTo, o.examples)
	for q := range queries {
		rep.Overlap.WantTimedOverlaps += holders[q%len(holders)]
	}
	return rep, nil
}

// verify checks each prompt's overlaps against the engines' Lookup, fills
// the overlap figures, the per-worker match columns and the examples, and
// returns how many members each prompt matches.
func verify(rep *replayReport, idx kv.Index, engines []*trace.Engine, prompts [][]uint64, sentTo []int, examples int) []int {
	var bestSum, blocksSum int
	matchedBlocks := make([]int, len(engines))
	var got []kv.Overlap
	want := make([]kv.Overlap, 0, len(engines))
	holders := make([]int, len(prompts)) // members matching each query
	for q, p := range prompts {
		got = idx.Match(got[:0], p)
		want = want[:0]
		best := 0
		for w, e := range engines {
			if d := e.Lookup(p); d > 0 {
				want = append(want, kv.Overlap{Member: e.Member(), Blocks: d})
				rep.Workers[w].MatchedQueries++
				matchedBlocks[w] += d
				best = max(best, d)
			}
		}
		slices.SortFunc(got, compareOverlap)
		slices.SortFunc(want, compareOverlap)
		if !slices.Equal(got, want) {
			if rep.Overlap.Mismatches == 0 {
				rep.Overlap.FirstMismatch = fmt.Sprintf("request %d: index %v, engines %v", q, got, want)
			}
			rep.Overlap.Mismatches++
		}
		if best > 0 {
			rep.Overlap.Matched++
		}
		holders[q] = len(want)
		bestSum += best
		blocksSum += len(p)
	}
	rep.Overlap.Verified = len(prompts)
	rep.Overlap.MeanBestBlocks = ratio(bestSum, len(prompts))
	rep.Overlap.BestFraction = ratio(bestSum, blocksSum)
	for w := range rep.Workers {
		rep.Workers[w].MeanMatched = ratio(matchedBlocks[w], rep.Workers[w].MatchedQueries)
	}
	// Examples: the queries most members match, to show sharing across
	// workers; deepest holders first.
	order := make([]int, len(prompts))
	for q := range order {
		order[q] = q
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(holders[b], holders[a]) })
	for _, q := range order[:min(examples, len(order))] {
		ex := exampleQuery{Request: q, Worker: sentTo[q], Blocks: len(prompts[q]), Matches: []exampleHold{}}
		got = idx.Match(got[:0], prompts[q])
		slices.SortFunc(got, func(a, b kv.Overlap) int {
			return cmp.Or(cmp.Compare(b.Blocks, a.Blocks), compareOverlap(a, b))
		})
		for _, o := range got {
			ex.Matches = append(ex.Matches, exampleHold{Worker: o.Member.Worker, Rank: o.Member.Rank, Blocks: o.Blocks})
		}
		rep.Examples = append(rep.Examples, ex)
	}
	return holders
}

func compareOverlap(a, b kv.Overlap) int {
	return cmp.Or(cmp.Compare(a.Member.Worker, b.Member.Worker), cmp.Compare(a.Member.Rank, b.Member.Rank), cmp.Compare(a.Blocks, b.Blocks))
}

// latencyFigures summarizes per-query latencies (nearest-rank percentiles).
// Each sample includes one time.Now pair (tens of ns on Linux's vDSO clock).
func latencyFigures(lat []time.Duration) matchFigures {
	m := matchFigures{Queries: len(lat)}
	if len(lat) == 0 {
		return m
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	rank := func(p float64) time.Duration { return lat[max(0, int(p*float64(len(lat))+0.999999)-1)] }
	m.P50us, m.P99us, m.MaxUs = us(rank(0.50)), us(rank(0.99)), us(lat[len(lat)-1])
	m.MeanUs = us(sum) / float64(len(lat))
	return m
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func ratio64(a int64, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// check fails the run when the index rejected events, counts blocks other
// than the engines hold, or disagreed with the engines on a query: the
// figures would not measure what they claim.
func (r *replayReport) check() error {
	if r.Apply.Errors > 0 {
		return fmt.Errorf("bench %s: the index rejected %d of %d events (first: %s): %w", r.Benchmark, r.Apply.Errors, r.Apply.Events, r.Apply.FirstError, errBenchCheck)
	}
	if rs := r.Index.Reported; rs != nil && (rs.DistinctBlocks != r.Index.DistinctBlocks || rs.MemberBlocks != r.Index.MemberBlocks) {
		return fmt.Errorf("bench %s: the index reports %d distinct and %d member blocks, the engines hold %d and %d: %w",
			r.Benchmark, rs.DistinctBlocks, rs.MemberBlocks, r.Index.DistinctBlocks, r.Index.MemberBlocks, errBenchCheck)
	}
	if r.Match.Overlaps != r.Overlap.WantTimedOverlaps {
		return fmt.Errorf("bench %s: the timed queries returned %d overlaps, the engines imply %d: %w", r.Benchmark, r.Match.Overlaps, r.Overlap.WantTimedOverlaps, errBenchCheck)
	}
	if r.Overlap.Mismatches > 0 {
		return fmt.Errorf("bench %s: %d of %d queries disagree with the engines' caches (first: %s): %w", r.Benchmark, r.Overlap.Mismatches, r.Overlap.Verified, r.Overlap.FirstMismatch, errBenchCheck)
	}
	return nil
}

// maxWorkerRows bounds the per-worker table of the human report.
const maxWorkerRows = 32

func (r *replayReport) print(w io.Writer) {
	fmt.Fprintf(w, "goindex bench %s: %s\n", r.Benchmark, r.Trace.Path)
	fmt.Fprintf(w, "trace    %d requests (stretch %d, duplicate %d), %d prompt blocks\n", r.Trace.Requests, r.Trace.Stretch, r.Trace.Duplicate, r.Trace.PromptBlocks)
	fmt.Fprintf(w, "setup    %d workers (partition seed %d), block size %d (%s), %d cache blocks per worker\n", r.Setup.Workers, r.Setup.Seed, r.Setup.BlockSize, r.Setup.Scheme, r.Setup.CapacityBlocks)
	fmt.Fprintf(w, "apply    %d events (%d stored, %d removed), %d block ops in %.1f ms: %s events/s, %s block ops/s\n",
		r.Apply.Events, r.Apply.StoredEvents, r.Apply.RemovedEvents, r.Apply.BlockOps, r.Apply.Seconds*1e3, si(r.Apply.EventsPerSec), si(r.Apply.BlockOpsPerSec))
	fmt.Fprintf(w, "match    %d queries: p50 %.2f µs, p99 %.2f µs, mean %.2f µs, max %.2f µs\n", r.Match.Queries, r.Match.P50us, r.Match.P99us, r.Match.MeanUs, r.Match.MaxUs)
	counted := ""
	if rs := r.Index.Reported; rs != nil {
		counted = fmt.Sprintf(" (index's own count: %d and %d)", rs.MemberBlocks, rs.DistinctBlocks)
	}
	fmt.Fprintf(w, "index    %d member blocks, %d distinct blocks%s, heap %s: %.0f B per member block, %.0f B per block\n",
		r.Index.MemberBlocks, r.Index.DistinctBlocks, counted, bytesIEC(r.Index.HeapBytes), r.Index.HeapBytesPerMemberBlock, r.Index.HeapBytesPerBlock)
	fmt.Fprintf(w, "cache    engine hit rate %.1f%% (%d of %d prompt blocks), %d stored, %d evicted\n",
		100*r.Cache.HitRate, r.Cache.HitBlocks, r.Cache.PromptBlocks, r.Cache.StoredBlocks, r.Cache.EvictedBlocks)
	fmt.Fprintf(w, "overlap  %d queries checked against the engines: %d mismatches; %d matched somewhere, best overlap %.1f blocks on average (%.1f%% of the prompt)\n",
		r.Overlap.Verified, r.Overlap.Mismatches, r.Overlap.Matched, r.Overlap.MeanBestBlocks, 100*r.Overlap.BestFraction)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "worker\trequests\tprompt blocks\thit blocks\thit rate\tevicted\theld\tmatched queries\tmean depth\t")
	for i, row := range r.Workers {
		if i == maxWorkerRows {
			fmt.Fprintf(tw, "…\t%d more workers in --json\t\t\t\t\t\t\t\t\n", len(r.Workers)-maxWorkerRows)
			break
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f%%\t%d\t%d\t%d\t%.1f\t\n", row.Worker, row.Requests, row.PromptBlocks, row.HitBlocks,
			100*row.HitRate, row.EvictedBlocks, row.HeldBlocks, row.MatchedQueries, row.MeanMatched)
	}
	tw.Flush()
	if len(r.Examples) > 0 {
		fmt.Fprintln(w, "\nexample queries (member=matched blocks, deepest first):")
	}
	for _, ex := range r.Examples {
		fmt.Fprintf(w, "  request %d (%d-block prompt, served by worker %d):", ex.Request, ex.Blocks, ex.Worker)
		for i, m := range ex.Matches {
			if i == 8 {
				fmt.Fprintf(w, " … %d more", len(ex.Matches)-8)
				break
			}
			fmt.Fprintf(w, " %d/%d=%d", m.Worker, m.Rank, m.Blocks)
		}
		if len(ex.Matches) == 0 {
			fmt.Fprint(w, " no member holds its first block")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nmachine  %s %s/%s, %d CPUs (GOMAXPROCS %d); apply and match run on one goroutine\n", r.Machine.Go, r.Machine.OS, r.Machine.Arch, r.Machine.CPUs, r.Machine.GOMAXPROCS)
}

// si formats a rate with a k/M/G suffix.
func si(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// bytesIEC formats a byte count in KiB/MiB/GiB.
func bytesIEC(n int64) string {
	v := float64(n)
	switch {
	case v >= 1<<30 || v <= -(1<<30):
		return fmt.Sprintf("%.2f GiB", v/(1<<30))
	case v >= 1<<20 || v <= -(1<<20):
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10 || v <= -(1<<10):
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// progress reports a long phase on stderr at most once a second, and not at
// all for phases shorter than a second.
type progress struct {
	w     io.Writer
	label string
	next  time.Time
}

func newProgress(w io.Writer, label string) *progress {
	return &progress{w: w, label: label, next: time.Now().Add(time.Second)}
}

func (p *progress) tick(done, total int) {
	if now := time.Now(); now.After(p.next) {
		fmt.Fprintf(p.w, "bench: %s %d/%d\n", p.label, done, total)
		p.next = now.Add(time.Second)
	}
}
