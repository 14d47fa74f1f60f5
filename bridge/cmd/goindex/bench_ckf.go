package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	cuckoo "github.com/seiflotfy/cuckoofilter"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
	"github.com/goindex/goindex/goindex/replica"
)

const benchCKFSynopsis = `Usage: goindex bench ckf [--trace FILE] [--lanes 4,16,64] [--blocks 1M] [--queries Q] [--radix-max-blocks B] [--json]

Measures the CKF against our own exact index on identical data, one cell
per (lanes, blocks per lane):
  probe   latency p50/p99 of one Mooncake-shaped query across every lane:
          the transposed CKF replica (chunked scan from the canonical hashes
          and from the local hashes, which it chains itself, and bisection),
          the exact radix index holding the same blocks for the same
          members, and D separate per-lane cuckoo filters (github.com/seiflotfy/cuckoofilter,
          8-bit fingerprints, same slot count) probed one after another;
  ingest  block ops/s on one core of a lane's producer (ckf.Producer, drained
          at the default cadence, ExpectedBlocks and ExpectedMemberBlocks =
          --blocks), of the radix index and of the per-lane
          filter, on the same events, over wall time and (linux) over the
          ingesting thread's CPU time;
  memory  bytes per tracked block per lane: replica table, producer, radix
          (Go heap), per-lane filter.

Data: real Dynamo canonical hashes. The trace's requests are copied into a
universe, copy k's hash ids offset by k·(max id + 1), ids hashed into local
hashes exactly as Dynamo hashes Mooncake tokens (dynamo.AppendMooncakeLocal).
Lane l is one mock engine (an LRU prefix cache of --blocks blocks) that walks
the universe from offset l·U/D, serving each request with probability 1/2,
until it is full and has evicted an eighth of its capacity; the universe is
just large enough for that to take about one walk, so a lane ends up holding
about half of it: lanes differ but share prefixes, as DCs do. The engines' events feed each structure; every
query is a request drawn from the universe. The CKF search and the per-lane
filters are timed from the query's canonical hashes; computing them from the
local hashes (kv.AppendChain) is timed on its own as "chain", since the radix
index walks the local hashes itself ("chunked from locals" is the replica
from the same input). Each timed query is first copied into a hot buffer, as
a router has just hashed it. By default queries run
interleaved (one query on every structure in turn, in an order that rotates
each query, each structure a sixth of the list ahead of the previous, so none
reads rows another just loaded), so
load from other processes hits all structures alike and each query finds the
caches as the other structures left them. Every answer is checked
afterwards against the engines' own caches: no structure may report less
than the exact depth, the radix index must equal it, and the chunked scan
must equal the linear reference; a failed check fails the run.

Cells and scale:
  --lanes LIST         lane counts (1..64), comma-separated
  --blocks LIST        blocks per lane, e.g. 1M,10M: K is 2^10, M is 10^6,
                       except that 1M alone is 2^20 (the upstream relay default)
  --radix-max-blocks B skip the radix index when lanes × blocks exceeds B
                       (it costs tens of bytes per member block of heap)
Data and queries:
  --trace FILE         Mooncake JSONL; default: ` + defaultBenchTrace + `,
                       found from the working directory up
  --block-size BS      KV block size in tokens (a divisor of 512)
  --queries Q          timed queries per structure and cell
  --seed S             walk and query seed
  --interleave=false   time each structure in its own pass over all queries
                       instead (warm caches and TLB for the structure timed)
  --json               print one JSON object instead of the tables

Progress goes to stderr once a phase runs longer than a second.`

// Flag limits of bench ckf.
const (
	maxCKFCells   = 16
	maxCKFBlocks  = 1 << 26 // ckf.BucketCount's ceiling is 2^24 buckets
	churnFraction = 8       // a lane stops after evicting capacity/8 blocks
	walkTakeOneIn = 2       // a lane serves each universe request with probability 1/2
)

type ckfReport struct {
	Benchmark string `json:"benchmark"`
	Trace     string `json:"trace"`
	Requests  int    `json:"trace_requests"`
	BlockSize int    `json:"block_size"`
	Seed      uint64 `json:"seed"`
	// Interleaved says how the probes were timed (see --interleave).
	Interleaved bool        `json:"interleaved"`
	Cells       []ckfCell   `json:"cells"`
	Machine     machineInfo `json:"machine"`
}

type ckfCell struct {
	Lanes         int     `json:"lanes"`
	BlocksPerLane int     `json:"blocks_per_lane"`
	Buckets       uint64  `json:"buckets"`
	Load          float64 `json:"load"` // slot occupancy of the lanes, mean
	Copies        int     `json:"universe_copies"`
	Queries       int     `json:"queries"`
	QueryBlocks   float64 `json:"mean_query_blocks"`
	HitLanes      float64 `json:"mean_hit_lanes"` // lanes with exact depth > 0 per query
	ExactBlocks   float64 `json:"mean_exact_best_blocks"`

	Probe   ckfProbe  `json:"probe"`
	Ratios  ckfRatios `json:"ratios"`
	Checks  ckfChecks `json:"checks"`
	Ingest  ckfIngest `json:"ingest"`
	Memory  ckfMemory `json:"memory"`
	Skipped string    `json:"radix_skipped,omitempty"`
	Seconds float64   `json:"build_seconds"`
}

type ckfProbe struct {
	Chunked matchFigures `json:"replica_chunked"`
	// ChunkedLocals is the chunked search given the query's local hashes
	// (replica.Searcher.SearchLocals chains them as it reads): the
	// router-facing figure, from the same input the radix index walks.
	ChunkedLocals matchFigures  `json:"replica_chunked_locals"`
	Bisect        matchFigures  `json:"replica_bisect"`
	Radix         *matchFigures `json:"radix,omitempty"`
	PerLane       matchFigures  `json:"perlane_filters"`
	// Chain is kv.AppendChain of the query's local hashes alone: the
	// canonical hashes the replica and the per-lane filters start from.
	Chain matchFigures `json:"chain"`
}

// ckfRatios are other / chunked: above 1 means the chunked replica is faster.
type ckfRatios struct {
	RadixP50 float64 `json:"radix_over_chunked_p50,omitempty"`
	RadixP99 float64 `json:"radix_over_chunked_p99,omitempty"`
	// RadixLocals* are radix / chunked-from-locals: both from the local
	// hashes.
	RadixLocalsP50 float64 `json:"radix_over_chunked_locals_p50,omitempty"`
	RadixLocalsP99 float64 `json:"radix_over_chunked_locals_p99,omitempty"`
	BisectP50      float64 `json:"bisect_over_chunked_p50"`
	BisectP99      float64 `json:"bisect_over_chunked_p99"`
	PerLaneP50     float64 `json:"perlane_over_chunked_p50"`
	PerLaneP99     float64 `json:"perlane_over_chunked_p99"`
}

// ckfChecks counts (query, lane) results against the engines' caches.
type ckfChecks struct {
	Results        int `json:"results"`
	Underestimates int `json:"underestimates"` // the replica or radix below the exact depth
	// PerLaneUnder counts per-lane filter results below the exact depth:
	// the library drops a fingerprint when an insertion runs out of kicks,
	// so they can follow PerLaneInsertFails (they are reported, not failed).
	PerLaneUnder       int `json:"perlane_underestimates"`
	ChunkedOver        int `json:"chunked_over"`
	BisectOver         int `json:"bisect_over"`
	PerLaneOver        int `json:"perlane_over"`
	ChunkedVsLinear    int `json:"chunked_vs_linear_mismatches"`
	LocalsVsChunked    int `json:"locals_vs_chunked_mismatches"` // SearchLocals against Search
	RadixMismatches    int `json:"radix_mismatches"`
	PerLaneInsertFails int `json:"perlane_insert_failures"`
	CapacityOmissions  int `json:"producer_capacity_omissions"`
}

type ckfIngest struct {
	Events         int     `json:"events"`
	BlockOps       int     `json:"block_ops"` // stored blocks + removed hashes, all lanes
	ProducerOpsSec float64 `json:"producer_block_ops_per_sec"`
	RadixOpsSec    float64 `json:"radix_block_ops_per_sec,omitempty"`
	PerLaneOpsSec  float64 `json:"perlane_block_ops_per_sec"`
	// The same rates over the CPU time of the ingesting thread (linux):
	// time the thread waited for a core while other processes ran is
	// left out, so on a loaded shared machine these are the per-core
	// figures.
	ProducerCPUOpsSec float64 `json:"producer_block_ops_per_cpu_sec,omitempty"`
	RadixCPUOpsSec    float64 `json:"radix_block_ops_per_cpu_sec,omitempty"`
}

type ckfMemory struct {
	ReplicaBytesPerBlock  float64 `json:"replica_bytes_per_block"`
	ProducerBytesPerBlock float64 `json:"producer_bytes_per_block"`
	RadixBytesPerBlock    float64 `json:"radix_heap_bytes_per_block,omitempty"`
	PerLaneBytesPerBlock  float64 `json:"perlane_bytes_per_block"`
}

type ckfOptions struct {
	tracePath     string
	lanes, blocks []int
	radixMax      int
	blockSize     int
	queries       int
	seed          uint64
	interleave    bool
}

func runBenchCKF(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench ckf", benchCKFSynopsis, stderr)
	var o ckfOptions
	fs.StringVar(&o.tracePath, "trace", "", "Mooncake JSONL trace (default: "+defaultBenchTrace+" found from the working directory up)")
	lanes := fs.String("lanes", "4,16,64", "lane counts, comma-separated")
	blocks := fs.String("blocks", "1M", "blocks per lane, comma-separated (K and M suffixes)")
	radixMax := fs.String("radix-max-blocks", "20M", "skip the radix index above lanes × blocks member blocks")
	fs.IntVar(&o.blockSize, "block-size", trace.DefaultBlockSize, "KV block size in tokens")
	fs.IntVar(&o.queries, "queries", 20000, "timed queries per structure and cell")
	fs.Uint64Var(&o.seed, "seed", 42, "walk and query seed")
	fs.BoolVar(&o.interleave, "interleave", true, "time the structures query by query in turn (false: one whole pass each)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	usageErr := func(format string, a ...any) error {
		return fmt.Errorf("bench ckf: %s: %w", fmt.Sprintf(format, a...), errUsage)
	}
	var err error
	if o.lanes, err = parseCounts(*lanes, 1, replica.MaxLanes); err != nil {
		return usageErr("--lanes: %v", err)
	}
	if o.blocks, err = parseCounts(*blocks, 1, maxCKFBlocks); err != nil {
		return usageErr("--blocks: %v", err)
	}
	radixMaxes, err := parseCounts(*radixMax, 0, 1<<40)
	if err != nil || len(radixMaxes) != 1 {
		return usageErr("--radix-max-blocks: want one count")
	}
	o.radixMax = radixMaxes[0]
	switch {
	case len(o.lanes)*len(o.blocks) > maxCKFCells:
		return usageErr("%d cells, at most %d", len(o.lanes)*len(o.blocks), maxCKFCells)
	case o.queries < 1 || o.queries > maxBenchQueries:
		return usageErr("--queries must be in [1, %d]", maxBenchQueries)
	case o.blockSize < 1 || trace.TokensPerID%o.blockSize != 0:
		return usageErr("--block-size must divide %d", trace.TokensPerID)
	}
	if o.tracePath == "" {
		if o.tracePath, err = findUp(defaultBenchTrace); err != nil {
			return usageErr("no --trace given and %s not found from the working directory up", defaultBenchTrace)
		}
	}
	f, err := os.Open(o.tracePath)
	if err != nil {
		return fmt.Errorf("bench ckf: %w", err)
	}
	reqs, err := trace.ReadAll(f, trace.ReaderConfig{})
	f.Close()
	if err != nil {
		return fmt.Errorf("bench ckf: %s: %w", o.tracePath, err)
	}
	if len(reqs) == 0 {
		return fmt.Errorf("bench ckf: %s: no requests", o.tracePath)
	}
	rep := &ckfReport{Benchmark: "ckf", Trace: o.tracePath, Requests: len(reqs), BlockSize: o.blockSize, Seed: o.seed, Interleaved: o.interleave,
		Machine: machineInfo{Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}}
	u := newUniverse(reqs, o.blockSize)
	for _, n := range o.blocks {
		for _, d := range o.lanes {
			cell, err := runCKFCell(ctx, u, o, d, n, stderr)
			if err != nil {
				return fmt.Errorf("bench ckf: lanes=%d blocks=%d: %w", d, n, err)
			}
			rep.Cells = append(rep.Cells, *cell)
		}
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout)
	}
	return rep.check()
}

// parseCounts parses a comma-separated list of counts with optional K (2^10)
// or M (10^6, except 1M = 2^20, the upstream relay default) suffixes.
func parseCounts(s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		switch {
		case f == "1M":
			f, mult = "1", 1<<20
		case strings.HasSuffix(f, "M"):
			f, mult = strings.TrimSuffix(f, "M"), 1_000_000
		case strings.HasSuffix(f, "K"):
			f, mult = strings.TrimSuffix(f, "K"), 1<<10
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 || v > hi/mult {
			return nil, fmt.Errorf("%q is not a count in [%d, %d]", f, lo, hi)
		}
		if v *= mult; v < lo {
			return nil, fmt.Errorf("%d is below %d", v, lo)
		}
		out = append(out, v)
	}
	return out, nil
}

// universe is the trace's requests copied with offset ids; request r of
// copy k is index k·len(reqs) + r.
type universe struct {
	reqs      []trace.Request
	stride    uint64 // max id + 1
	blockSize int
	// halfDistinct is the distinct blocks of a random half of one copy's
	// requests: what a lane gains per copy it walks.
	halfDistinct int
}

func newUniverse(reqs []trace.Request, blockSize int) *universe {
	u := &universe{reqs: reqs, stride: trace.MaxID(reqs) + 1, blockSize: blockSize}
	seen := map[uint64]struct{}{}
	var locals, chain []uint64
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range reqs {
		if rng.IntN(walkTakeOneIn) != 0 {
			continue
		}
		locals = u.locals(locals[:0], i)
		chain = kv.AppendChain(chain[:0], false, 0, locals)
		for _, c := range chain {
			seen[c] = struct{}{}
		}
	}
	u.halfDistinct = len(seen)
	return u
}

// locals appends the local hashes of universe request i.
func (u *universe) locals(dst []uint64, i int) []uint64 {
	r := &u.reqs[i%len(u.reqs)]
	off := uint64(i/len(u.reqs)) * u.stride
	start := len(dst)
	dst = append(dst, r.HashIDs...)
	ids := dst[start:]
	for j := range ids {
		ids[j] += off
	}
	return dynamo.AppendMooncakeLocal(dst[:start], ids, u.blockSize)
}

// ckfQuery is one timed query: its local hashes and canonical chain.
type ckfQuery struct{ locals, chain []uint64 }

// runCKFCell builds every structure for one cell, times them and checks them.
func runCKFCell(ctx context.Context, u *universe, o ckfOptions, lanes, blocks int, stderr io.Writer) (*ckfCell, error) {
	start := time.Now()
	n, err := ckf.BucketCount(uint64(blocks))
	if err != nil {
		return nil, err
	}
	format, err := ckf.NewFormat(ckf.DefaultSeed, n)
	if err != nil {
		return nil, err
	}
	table, err := replica.New(replica.Config{Lanes: lanes, Buckets: n})
	if err != nil {
		return nil, err
	}
	cell := &ckfCell{Lanes: lanes, BlocksPerLane: blocks, Buckets: n}
	// Just enough copies that a lane serving half the requests fills up
	// and churns in about one walk of the universe: it then holds about
	// half of everything, so a query typically hits half the lanes, fully
	// or partly.
	churn := blocks + blocks/churnFraction
	copies := max(1, (churn+u.halfDistinct-1)/max(1, u.halfDistinct))
	size := copies * len(u.reqs)
	if uint64(copies)*u.stride > 1<<32 {
		return nil, fmt.Errorf("%d copies of ids below %d overflow the u32 token ids", copies, u.stride)
	}
	cell.Copies = copies

	rng := rand.New(rand.NewPCG(o.seed, uint64(lanes)<<32|uint64(blocks)))
	queries := make([]ckfQuery, o.queries)
	var qblocks int
	for q := range queries {
		l := u.locals(nil, rng.IntN(size))
		queries[q] = ckfQuery{locals: l, chain: kv.AppendChain(nil, false, 0, l)}
		qblocks += len(l)
	}
	cell.Queries, cell.QueryBlocks = len(queries), float64(qblocks)/float64(len(queries))
	exact := make([][]uint32, len(queries)) // [query][lane] from the engines
	for q := range exact {
		exact[q] = make([]uint32, lanes)
	}

	var rx *radix.Index
	if lanes*blocks <= o.radixMax {
		rx = radix.New(radix.Config{})
	} else {
		cell.Skipped = fmt.Sprintf("%d × %d member blocks exceed --radix-max-blocks %d", lanes, blocks, o.radixMax)
	}
	perLane := make([]*cuckoo.Filter, lanes)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	var prodTime, radixTime, cfTime, prodCPU, radixCPU time.Duration
	// Thread CPU time is per OS thread: keep this goroutine on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var prodMem, tracked uint64
	var resident uint64
	prog := newProgress(stderr, fmt.Sprintf("lanes=%d blocks=%d: filling lanes", lanes, blocks))
	for l := range lanes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		prog.tick(l, lanes)
		events, eng, err := walkLane(u, o.seed, l, lanes, blocks, size)
		if err != nil {
			return nil, fmt.Errorf("lane %d: %w", l, err)
		}
		for i := range events {
			cell.Ingest.Events++
			cell.Ingest.BlockOps += len(events[i].Blocks) + len(events[i].Removed)
		}
		// Producer: the relay's work for one lane, drained at its cadence,
		// its owner table and the lane's one lineage sized for the lane's
		// capacity, as a relay sizes them from its pool.
		p, err := ckf.New(ckf.Config{Format: format, ExpectedBlocks: blocks, ExpectedMemberBlocks: blocks})
		if err != nil {
			return nil, err
		}
		var images []ckf.Image
		c0, t0 := threadCPU(), time.Now()
		for i := range events {
			step, err := p.Apply(&events[i])
			if err != nil && !errors.Is(err, ckf.ErrCapacityExhausted) {
				return nil, fmt.Errorf("lane %d producer: %w", l, err)
			}
			if step == ckf.StepPublish {
				images = p.Drain(images[:0])
			}
		}
		images = p.Drain(images[:0])
		prodTime += time.Since(t0)
		prodCPU += threadCPU() - c0
		st := p.Stats()
		prodMem += st.MemoryBytes
		tracked += st.TrackedBlocks
		resident += st.Resident
		cell.Checks.CapacityOmissions += int(st.CapacityOmissions)
		if err := table.Install(l, p.AppendWords(nil)); err != nil {
			return nil, err
		}
		p = nil

		cf := cuckoo.NewFilter(uint(4 * n))
		var key [8]byte
		t0 = time.Now()
		for i := range events {
			for _, b := range events[i].Blocks {
				binary.LittleEndian.PutUint64(key[:], b.External)
				if !cf.Insert(key[:]) {
					cell.Checks.PerLaneInsertFails++
				}
			}
			for _, h := range events[i].Removed {
				binary.LittleEndian.PutUint64(key[:], h)
				cf.Delete(key[:])
			}
		}
		cfTime += time.Since(t0)
		perLane[l] = cf

		if rx != nil {
			c0, t0 = threadCPU(), time.Now()
			for i := range events {
				if err := rx.Apply(&events[i]); err != nil {
					return nil, fmt.Errorf("lane %d radix: %w", l, err)
				}
			}
			radixTime += time.Since(t0)
			radixCPU += threadCPU() - c0
		}
		// The lane's exact truth, from the engine's own cache.
		for q := range queries {
			exact[q][l] = uint32(eng.Lookup(queries[q].locals))
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	cell.Load = float64(resident) / float64(uint64(lanes)*4*n)
	ops := float64(cell.Ingest.BlockOps)
	cell.Ingest.ProducerOpsSec = ops / prodTime.Seconds()
	cell.Ingest.PerLaneOpsSec = ops / cfTime.Seconds()
	if prodCPU > 0 {
		cell.Ingest.ProducerCPUOpsSec = ops / prodCPU.Seconds()
	}
	if radixCPU > 0 {
		cell.Ingest.RadixCPUOpsSec = ops / radixCPU.Seconds()
	}
	words, _ := replica.RegionWords(replica.Config{Lanes: lanes, Buckets: n})
	memberBlocks := float64(tracked)
	cell.Memory = ckfMemory{
		ReplicaBytesPerBlock:  float64(words*8) / memberBlocks,
		ProducerBytesPerBlock: float64(prodMem) / memberBlocks,
		PerLaneBytesPerBlock:  float64(uint64(lanes)*4*n) / memberBlocks, // one byte per slot
	}
	if rx != nil {
		cell.Ingest.RadixOpsSec = ops / radixTime.Seconds()
		heap := int64(after.HeapAlloc) - int64(before.HeapAlloc) - int64(lanes)*int64(4*n)
		cell.Memory.RadixBytesPerBlock = float64(heap) / memberBlocks
	}
	cell.Seconds = time.Since(start).Seconds()
	if err := timeCKFCell(ctx, cell, format, table, rx, perLane, queries, exact, o.interleave); err != nil {
		return nil, err
	}
	return cell, nil
}

// walkLane runs lane l's engine over the universe from offset l·size/lanes,
// serving each request with probability 1/walkTakeOneIn, until the engine
// is full and has evicted blocks/churnFraction blocks, and returns the
// events it emitted and the engine, whose cache is the lane's exact truth.
func walkLane(u *universe, seed uint64, l, lanes, blocks, size int) ([]kv.Event, *trace.Engine, error) {
	eng, err := trace.NewEngine(trace.EngineConfig{Member: kv.Member{Worker: uint64(l)}, CapacityBlocks: blocks})
	if err != nil {
		return nil, nil, err
	}
	rng := rand.New(rand.NewPCG(seed^0xC0FFEE, uint64(l)))
	var events []kv.Event
	var locals []uint64
	evicted, idle := 0, 0
	for i := l * size / lanes; evicted < blocks/churnFraction || eng.Blocks() < blocks; i = (i + 1) % size {
		if rng.IntN(walkTakeOneIn) != 0 {
			continue
		}
		locals = u.locals(locals[:0], i)
		var res trace.Result
		events, res = eng.Serve(events, locals)
		if eng.Blocks() == blocks {
			evicted += res.EvictedBlocks
		}
		if res.StoredBlocks == 0 {
			if idle++; idle > 4*size {
				return nil, nil, fmt.Errorf("engine stuck at %d of %d blocks", eng.Blocks(), blocks)
			}
		} else {
			idle = 0
		}
	}
	return events, eng, nil
}

// timeCKFCell times every structure on the queries, one query at a time,
// then checks every answer against the engines' depths.
func timeCKFCell(ctx context.Context, cell *ckfCell, format *ckf.Format, table *replica.Table, rx *radix.Index, perLane []*cuckoo.Filter, queries []ckfQuery, exact [][]uint32, interleave bool) error {
	lanes := cell.Lanes
	all := ^uint64(0) >> (replica.MaxLanes - lanes)
	searcher := func(m replica.Mode) (*replica.Searcher, error) {
		return replica.NewSearcher(table, format, replica.SearchConfig{Mode: m})
	}
	chunked, err := searcher(replica.Chunked)
	if err != nil {
		return err
	}
	bisect, err := searcher(replica.Bisect)
	if err != nil {
		return err
	}
	linear, err := searcher(replica.Linear)
	if err != nil {
		return err
	}
	var chain []uint64
	var depth []uint32
	var ov []kv.Overlap
	key := make([]byte, 8)
	depths := make([]uint32, lanes)
	// Each structure answers with per-lane depths. The hash-keyed ones
	// start from the query's canonical chain, which "chain" times on its
	// own (it answers nothing); the radix index walks the local hashes.
	run := map[string]func(q *ckfQuery) []uint32{
		"chain": func(q *ckfQuery) []uint32 {
			chain = kv.AppendChain(chain[:0], false, 0, q.locals)
			if chain[len(chain)-1] != q.chain[len(q.chain)-1] {
				return []uint32{1} // never: the sink check below then fails
			}
			return nil
		},
		"chunked": func(q *ckfQuery) []uint32 {
			depth, _ = chunked.Search(depth, q.chain, all)
			return depth
		},
		"locals": func(q *ckfQuery) []uint32 {
			depth, _ = chunked.SearchLocals(depth, q.locals, all)
			return depth
		},
		"bisect": func(q *ckfQuery) []uint32 {
			depth, _ = bisect.Search(depth, q.chain, all)
			return depth
		},
		"perlane": func(q *ckfQuery) []uint32 {
			for l, cf := range perLane {
				d := 0
				for ; d < len(q.chain); d++ {
					binary.LittleEndian.PutUint64(key, q.chain[d])
					if !cf.Lookup(key) {
						break
					}
				}
				depths[l] = uint32(d)
			}
			return depths
		},
	}
	if rx != nil {
		run["radix"] = func(q *ckfQuery) []uint32 {
			ov = rx.Match(ov[:0], q.locals)
			clear(depths)
			for _, o := range ov {
				depths[o.Member.Worker] = uint32(o.Blocks)
			}
			return depths
		}
	}
	names := []string{"chunked", "locals", "bisect", "radix", "perlane", "chain"}
	lat := make(map[string][]time.Duration)
	sink := make(map[string]uint64) // every lane's depth of every timed query, checked below
	for _, name := range names {
		if run[name] != nil {
			lat[name] = make([]time.Duration, len(queries))
		}
	}
	// A router has just hashed the request when it searches: each timed
	// query is first copied into a hot buffer, so the figures cover the
	// structure, not a cache miss on the stored query.
	var hot ckfQuery
	timeOne := func(name string, q int) {
		hot.locals = append(hot.locals[:0], queries[q].locals...)
		hot.chain = append(hot.chain[:0], queries[q].chain...)
		t0 := time.Now()
		d := run[name](&hot)
		lat[name][q] = time.Since(t0)
		for _, v := range d {
			sink[name] += uint64(v)
		}
	}
	for step := range queries {
		if step&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		for k := range names {
			// The order rotates each step, so every structure follows
			// every other equally often: none always starts on the
			// caches and TLB the per-lane filters just swept.
			s := (k + step) % len(names)
			name := names[s]
			switch {
			case run[name] == nil:
			case interleave:
				// Each step times one query on every structure in turn,
				// so load from other processes on this shared machine hits
				// all alike; structure s is len/6·s queries ahead in the
				// list, so the replica searches never read rows another
				// just loaded.
				timeOne(name, (step+s*len(queries)/len(names))%len(queries))
			case step == 0:
				// One structure after another, each over every query.
				for q := range queries {
					timeOne(name, q)
				}
			}
		}
	}
	for _, name := range names {
		fn := run[name]
		if fn == nil {
			continue
		}
		// Untimed: the same answers again, lane by lane, against the truth.
		var again uint64
		for q := range queries {
			d := fn(&queries[q])
			if name == "chain" {
				continue
			}
			for l, v := range d {
				again += uint64(v)
				want := exact[q][l]
				switch {
				case v < want && name == "perlane":
					cell.Checks.PerLaneUnder++
				case v < want:
					cell.Checks.Underestimates++
				case v > want && name == "chunked":
					cell.Checks.ChunkedOver++
				case v > want && name == "locals":
					// Counted as LocalsVsChunked below: it must equal chunked.
				case v > want && name == "bisect":
					cell.Checks.BisectOver++
				case v > want && name == "perlane":
					cell.Checks.PerLaneOver++
				case v != want && name == "radix":
					cell.Checks.RadixMismatches++
				}
			}
		}
		if name != "chain" && again != sink[name] || name == "chain" && sink[name] != 0 {
			return fmt.Errorf("%s: the timed queries summed to %d blocks, the checked ones to %d", name, sink[name], again)
		}
		fig := latencyFigures(lat[name])
		fig.Overlaps = int(sink[name])
		switch name {
		case "chunked":
			cell.Probe.Chunked = fig
		case "locals":
			cell.Probe.ChunkedLocals = fig
		case "bisect":
			cell.Probe.Bisect = fig
		case "radix":
			cell.Probe.Radix = &fig
		case "perlane":
			cell.Probe.PerLane = fig
		case "chain":
			cell.Probe.Chain = fig
		}
	}
	var lin, loc []uint32
	var hitLanes, best int
	for q := range queries {
		depth, _ = chunked.Search(depth, queries[q].chain, all)
		lin, _ = linear.Search(lin, queries[q].chain, all)
		loc, _ = chunked.SearchLocals(loc, queries[q].locals, all)
		b := uint32(0)
		for l := range lanes {
			cell.Checks.Results++
			if depth[l] != lin[l] {
				cell.Checks.ChunkedVsLinear++
			}
			if loc[l] != depth[l] {
				cell.Checks.LocalsVsChunked++
			}
			if exact[q][l] > 0 {
				hitLanes++
			}
			b = max(b, exact[q][l])
		}
		best += int(b)
	}
	cell.HitLanes = float64(hitLanes) / float64(len(queries))
	cell.ExactBlocks = float64(best) / float64(len(queries))
	c, p := &cell.Probe.Chunked, &cell.Probe
	cell.Ratios = ckfRatios{BisectP50: p.Bisect.P50us / c.P50us, BisectP99: p.Bisect.P99us / c.P99us,
		PerLaneP50: p.PerLane.P50us / c.P50us, PerLaneP99: p.PerLane.P99us / c.P99us}
	if p.Radix != nil {
		cell.Ratios.RadixP50, cell.Ratios.RadixP99 = p.Radix.P50us/c.P50us, p.Radix.P99us/c.P99us
		cl := &p.ChunkedLocals
		cell.Ratios.RadixLocalsP50, cell.Ratios.RadixLocalsP99 = p.Radix.P50us/cl.P50us, p.Radix.P99us/cl.P99us
	}
	return nil
}

// check fails the run when any structure answered below the exact depth,
// the radix index differed from the engines, or the chunked scan from the
// linear reference: the latencies would not measure correct searches.
func (r *ckfReport) check() error {
	for _, c := range r.Cells {
		k := c.Checks
		if k.Underestimates > 0 || k.RadixMismatches > 0 || k.ChunkedVsLinear > 0 || k.LocalsVsChunked > 0 {
			return fmt.Errorf("bench ckf: lanes=%d blocks=%d: %d underestimates, %d radix mismatches, %d chunked-vs-linear and %d locals-vs-chunked mismatches over %d results: %w",
				c.Lanes, c.BlocksPerLane, k.Underestimates, k.RadixMismatches, k.ChunkedVsLinear, k.LocalsVsChunked, k.Results, errBenchCheck)
		}
	}
	return nil
}

func (r *ckfReport) print(w io.Writer) {
	fmt.Fprintf(w, "goindex bench ckf: %s (%d requests), block size %d, seed %d\n\n", r.Trace, r.Requests, r.BlockSize, r.Seed)
	fmt.Fprintln(w, "probe latency per query, µs (p50 / p99); ratio = other / chunked replica")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lanes\tblocks\tload\tquery blocks\thit lanes\treplica chunked\tchunked from locals\treplica bisect\tradix\tper-lane filters\tchain\tradix/chunked p50\tp99\tradix/locals p50\tp99\t")
	for _, c := range r.Cells {
		radixCol, rp50, rp99, lp50, lp99 := "skipped", "-", "-", "-", "-"
		if c.Probe.Radix != nil {
			radixCol = fmt.Sprintf("%.2f / %.2f", c.Probe.Radix.P50us, c.Probe.Radix.P99us)
			rp50, rp99 = fmt.Sprintf("%.2f×", c.Ratios.RadixP50), fmt.Sprintf("%.2f×", c.Ratios.RadixP99)
			lp50, lp99 = fmt.Sprintf("%.2f×", c.Ratios.RadixLocalsP50), fmt.Sprintf("%.2f×", c.Ratios.RadixLocalsP99)
		}
		fmt.Fprintf(tw, "%d\t%d\t%.1f%%\t%.1f\t%.1f\t%.2f / %.2f\t%.2f / %.2f\t%.2f / %.2f\t%s\t%.2f / %.2f\t%.2f / %.2f\t%s\t%s\t%s\t%s\t\n",
			c.Lanes, c.BlocksPerLane, 100*c.Load, c.QueryBlocks, c.HitLanes,
			c.Probe.Chunked.P50us, c.Probe.Chunked.P99us, c.Probe.ChunkedLocals.P50us, c.Probe.ChunkedLocals.P99us,
			c.Probe.Bisect.P50us, c.Probe.Bisect.P99us, radixCol,
			c.Probe.PerLane.P50us, c.Probe.PerLane.P99us, c.Probe.Chain.P50us, c.Probe.Chain.P99us, rp50, rp99, lp50, lp99)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ningest (block ops/s, one core, same events) and memory (bytes per tracked block per lane)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lanes\tblocks\tblock ops\tproducer\tproducer cpu\tradix\tradix cpu\tper-lane\treplica B\tproducer B\tradix B\tper-lane B\t")
	for _, c := range r.Cells {
		radixOps, radixCPU, radixB := "skipped", "skipped", "skipped"
		if c.Probe.Radix != nil {
			radixOps, radixCPU, radixB = si(c.Ingest.RadixOpsSec), si(c.Ingest.RadixCPUOpsSec), fmt.Sprintf("%.1f", c.Memory.RadixBytesPerBlock)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.1f\t%s\t%.2f\t\n", c.Lanes, c.BlocksPerLane, c.Ingest.BlockOps,
			si(c.Ingest.ProducerOpsSec), si(c.Ingest.ProducerCPUOpsSec), radixOps, radixCPU, si(c.Ingest.PerLaneOpsSec),
			c.Memory.ReplicaBytesPerBlock, c.Memory.ProducerBytesPerBlock, radixB, c.Memory.PerLaneBytesPerBlock)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nchecks against the engines' caches ((query, lane) results above the exact depth; none may be below)")
	for _, c := range r.Cells {
		k := c.Checks
		fmt.Fprintf(w, "  lanes=%d blocks=%d: %d results, %d under; over: chunked %d, bisect %d, per-lane %d; radix mismatches %d; locals vs chunked %d; per-lane: %d insert failures, %d under; producer omissions %d\n",
			c.Lanes, c.BlocksPerLane, k.Results, k.Underestimates, k.ChunkedOver, k.BisectOver, k.PerLaneOver, k.RadixMismatches, k.LocalsVsChunked, k.PerLaneInsertFails, k.PerLaneUnder, k.CapacityOmissions)
		if c.Skipped != "" {
			fmt.Fprintf(w, "    radix skipped: %s\n", c.Skipped)
		}
	}
	fmt.Fprintf(w, "\nmachine  %s %s/%s, %d CPUs (GOMAXPROCS %d); everything runs on one goroutine\n", r.Machine.Go, r.Machine.OS, r.Machine.Arch, r.Machine.CPUs, r.Machine.GOMAXPROCS)
}
