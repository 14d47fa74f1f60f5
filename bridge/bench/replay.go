package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/kv"
)

// Limits of a replay, so a typo cannot ask for gigabytes of engines or
// latency samples.
const (
	MaxReplayWorkers = 1 << 16
	MaxQueries       = 1 << 24
)

// ReplayConfig configures Replay: a Mooncake trace replayed as KV traffic
// through mock engines into an index, the way upstream's mooncake_bench
// does (dynamo-compat §6).
type ReplayConfig struct {
	// TracePath is the Mooncake JSONL trace.
	TracePath string
	// Stretch maps id h to h·F … h·F+F−1 (longer prompts, same sharing).
	// optional; default: 1
	Stretch int
	// Duplicate makes D disjoint copies of every request. optional; default: 1
	Duplicate int
	// Workers is the number of workers (one kv.Member each, rank 0) the
	// requests are partitioned over, in [1, MaxReplayWorkers].
	Workers int
	// Seed is the partition seed.
	Seed uint64
	// BlockSize is the KV block size in tokens. optional; default: trace.DefaultBlockSize
	BlockSize int
	// Scheme maps ids to blocks (trace.Split or trace.PerID).
	Scheme trace.Scheme
	// CapacityBlocks is each worker engine's cache size. optional; default: trace.DefaultCapacityBlocks
	CapacityBlocks int
	// Queries is the number of timed match queries, cycling over the
	// prompts in trace order; 0 is one per request.
	Queries int
	// Examples is how many of the most-shared queries the report shows.
	Examples int
	// Progress receives a line a second during long phases. optional
	Progress io.Writer
}

func (c *ReplayConfig) defaults() error {
	c.Stretch = cmp.Or(c.Stretch, 1)
	c.Duplicate = cmp.Or(c.Duplicate, 1)
	c.BlockSize = cmp.Or(c.BlockSize, trace.DefaultBlockSize)
	c.CapacityBlocks = cmp.Or(c.CapacityBlocks, trace.DefaultCapacityBlocks)
	switch {
	case c.Workers < 1 || c.Workers > MaxReplayWorkers:
		return fmt.Errorf("%w: workers %d, want 1..%d", ErrConfig, c.Workers, MaxReplayWorkers)
	case c.CapacityBlocks < 1 || c.CapacityBlocks > trace.MaxCapacityBlocks:
		return fmt.Errorf("%w: capacity blocks %d, want 1..%d", ErrConfig, c.CapacityBlocks, trace.MaxCapacityBlocks)
	case c.Queries < 0 || c.Queries > MaxQueries:
		return fmt.Errorf("%w: queries %d, want 0..%d", ErrConfig, c.Queries, MaxQueries)
	case c.Examples < 0:
		return fmt.Errorf("%w: examples %d must not be negative", ErrConfig, c.Examples)
	}
	return nil
}

// ReplayTarget is the index a replay measures: any kv.Index.
type ReplayTarget struct {
	// Name names the benchmark in the report ("radix").
	Name string
	// New returns an empty index.
	New func() kv.Index
	// Sizes reports the index's own count of distinct blocks (tree nodes)
	// and of (member, block) pairs, checked against the engines'. optional
	Sizes func(kv.Index) (distinct, memberBlocks int)
}

// Replay generates the trace's events through one engine per worker, then
// applies them to an empty index of the target in trace order on one
// goroutine (timed), times a match of every prompt against the populated
// index, and checks every answer against the engines' own caches. A
// configuration or trace it cannot use is an error (ErrConfig, or the
// trace's own); a run whose answers disagree still returns its report,
// which Check then fails.
func Replay(ctx context.Context, cfg ReplayConfig, target ReplayTarget) (*ReplayReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	reqs, err := readTrace(cfg.TracePath)
	if err != nil {
		return nil, err
	}
	if reqs, err = trace.Stretch(reqs, cfg.Stretch); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if reqs, err = trace.Duplicate(reqs, cfg.Duplicate); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	mapper, err := trace.NewMapper(trace.MapperConfig{BlockSize: cfg.BlockSize, Scheme: cfg.Scheme})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	part, err := trace.NewPartition(cfg.Workers, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	engines, err := newEngines(cfg.Workers, cfg.CapacityBlocks)
	if err != nil {
		return nil, err
	}
	rep := &ReplayReport{
		Benchmark: target.Name,
		Trace:     TraceFigures{Path: cfg.TracePath, Requests: len(reqs), Stretch: cfg.Stretch, Duplicate: cfg.Duplicate},
		Setup:     SetupFigures{Workers: cfg.Workers, Seed: cfg.Seed, BlockSize: cfg.BlockSize, Scheme: cfg.Scheme.String(), CapacityBlocks: cfg.CapacityBlocks},
		Machine:   ReadMachine(),
		Workers:   make([]WorkerRow, cfg.Workers),
	}
	for w := range rep.Workers {
		rep.Workers[w].Worker = uint64(w)
	}
	gen, err := generate(ctx, rep, reqs, mapper, part, engines, cfg.Progress)
	if err != nil {
		return nil, err
	}
	idx, err := applyAll(ctx, rep, target, gen.events, cfg.Progress)
	if err != nil {
		return nil, err
	}
	gen.events = nil
	queries := cmp.Or(cfg.Queries, len(gen.prompts))
	if err := matchAll(ctx, rep, idx, gen.prompts, queries, cfg.Workers, cfg.Progress); err != nil {
		return nil, err
	}
	holders := verify(rep, idx, engines, gen.prompts[:min(queries, len(gen.prompts))], gen.sentTo, cfg.Examples)
	for q := range queries {
		rep.Overlap.WantTimedOverlaps += holders[q%len(holders)]
	}
	return rep, nil
}

// readTrace reads a whole Mooncake trace; an empty one is an error.
func readTrace(path string) ([]trace.Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	reqs, err := trace.ReadAll(f, trace.ReaderConfig{})
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s: no requests", path)
	}
	return reqs, nil
}

func newEngines(workers, capacity int) ([]*trace.Engine, error) {
	engines := make([]*trace.Engine, workers)
	for w := range engines {
		var err error
		if engines[w], err = trace.NewEngine(trace.EngineConfig{Member: kv.Member{Worker: uint64(w)}, CapacityBlocks: capacity}); err != nil {
			return nil, err
		}
	}
	return engines, nil
}

// generated is phase 1's output: every request's prompt and worker, and
// the engines' events in trace order.
type generated struct {
	prompts [][]uint64
	sentTo  []int
	events  []kv.Event
}

// generate is phase 1, untimed: the engines turn the trace into events; it
// fills the trace, cache, per-worker and event-count figures.
func generate(ctx context.Context, rep *ReplayReport, reqs []trace.Request, mapper *trace.Mapper, part trace.Partition, engines []*trace.Engine, progress io.Writer) (*generated, error) {
	g := &generated{prompts: make([][]uint64, len(reqs)), sentTo: make([]int, len(reqs))}
	distinct := map[uint64]int{} // external hash → holders: the index's distinct blocks
	prog := newProgress(progress, "generating events")
	for i, r := range reqs {
		if i&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			prog.tick(i, len(reqs))
		}
		w := part.Worker(uint64(i))
		g.prompts[i], g.sentTo[i] = mapper.AppendLocals(nil, r.HashIDs), w
		first := len(g.events)
		var res trace.Result
		g.events, res = engines[w].Serve(g.events, g.prompts[i])
		row := &rep.Workers[w]
		row.Requests++
		row.PromptBlocks += res.PromptBlocks
		row.HitBlocks += res.CachedBlocks
		row.EvictedBlocks += res.EvictedBlocks
		rep.Cache.StoredBlocks += res.StoredBlocks
		countDistinct(distinct, g.events[first:])
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
	for i := range g.events {
		switch ev := &g.events[i]; ev.Kind {
		case kv.Stored:
			rep.Apply.StoredEvents++
			rep.Apply.BlockOps += len(ev.Blocks)
		case kv.Removed:
			rep.Apply.RemovedEvents++
			rep.Apply.BlockOps += len(ev.Removed)
		}
	}
	rep.Apply.Events = len(g.events)
	return g, nil
}

// countDistinct counts each block's holders as events store and remove it.
func countDistinct(distinct map[uint64]int, events []kv.Event) {
	for _, ev := range events {
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

// applyAll is phase 2, timed: every event applied to an empty index; it
// fills the apply and heap figures.
func applyAll(ctx context.Context, rep *ReplayReport, target ReplayTarget, events []kv.Event, progress io.Writer) (kv.Index, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	idx := target.New()
	prog := newProgress(progress, "applying events")
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
	rep.Index.HeapBytesPerMemberBlock = ratio(float64(rep.Index.HeapBytes), float64(rep.Index.MemberBlocks))
	rep.Index.HeapBytesPerBlock = ratio(float64(rep.Index.HeapBytes), float64(rep.Index.DistinctBlocks))
	if target.Sizes != nil {
		d, m := target.Sizes(idx)
		rep.Index.Reported = &ReportedSizes{DistinctBlocks: d, MemberBlocks: m}
	}
	return idx, nil
}

// matchAll is phase 3, timed per query: queries prompts (cycling) matched
// against the full index.
func matchAll(ctx context.Context, rep *ReplayReport, idx kv.Index, prompts [][]uint64, queries, workers int, progress io.Writer) error {
	lat := make([]time.Duration, queries)
	dst := make([]kv.Overlap, 0, workers)
	timedOverlaps := 0 // the sink: checked against the verification
	prog := newProgress(progress, "matching")
	for q := range lat {
		if q&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			prog.tick(q, queries)
		}
		p := prompts[q%len(prompts)]
		t0 := time.Now()
		dst = idx.Match(dst[:0], p)
		lat[q] = time.Since(t0)
		timedOverlaps += len(dst)
	}
	rep.Match = LatencyOf(lat)
	rep.Match.Overlaps = timedOverlaps
	return nil
}

// verify is phase 4, untimed: it checks each prompt's overlaps against the
// engines' Lookup, fills the overlap figures, the per-worker match columns
// and the examples, and returns how many members each prompt matches.
func verify(rep *ReplayReport, idx kv.Index, engines []*trace.Engine, prompts [][]uint64, sentTo []int, examples int) []int {
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
	rep.Examples = examplesOf(idx, prompts, sentTo, holders, examples)
	return holders
}

// examplesOf returns the k queries most members match (earliest first
// among equals), to show sharing across workers; deepest holders first.
func examplesOf(idx kv.Index, prompts [][]uint64, sentTo, holders []int, k int) []ExampleQuery {
	order := make([]int, len(prompts))
	for q := range order {
		order[q] = q
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(holders[b], holders[a]) })
	var out []ExampleQuery
	var got []kv.Overlap
	for _, q := range order[:min(k, len(order))] {
		ex := ExampleQuery{Request: q, Worker: sentTo[q], Blocks: len(prompts[q]), Matches: []ExampleHold{}}
		got = idx.Match(got[:0], prompts[q])
		slices.SortFunc(got, func(a, b kv.Overlap) int {
			return cmp.Or(cmp.Compare(b.Blocks, a.Blocks), compareOverlap(a, b))
		})
		for _, o := range got {
			ex.Matches = append(ex.Matches, ExampleHold{Worker: o.Member.Worker, Rank: o.Member.Rank, Blocks: o.Blocks})
		}
		out = append(out, ex)
	}
	return out
}

func compareOverlap(a, b kv.Overlap) int {
	return cmp.Or(cmp.Compare(a.Member.Worker, b.Member.Worker), cmp.Compare(a.Member.Rank, b.Member.Rank), cmp.Compare(a.Blocks, b.Blocks))
}
