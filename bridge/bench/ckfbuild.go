package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	cuckoo "github.com/seiflotfy/cuckoofilter"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
	"github.com/goindex/goindex/goindex/replica"
)

// Shape of a cell's lanes.
const (
	churnFraction = 8 // a lane stops after evicting capacity/8 blocks
	// radixBytesEstimate is the radix heap per member block that AutoRadix
	// budgets: 37–43 B measured at 16 and 64 lanes, where lanes share most
	// prefixes (57–63 B at 4 lanes, whose cells are small).
	radixBytesEstimate = 40
	// autoMemoryShare is the share of the available memory AutoRadix lets
	// the radix indexes take; the rest is for the other structures and the
	// machine's other work.
	autoMemoryShare = 0.6
)

// ckfQuery is one timed query: its local hashes and canonical chain.
type ckfQuery struct{ locals, chain []uint64 }

// ckfRun is one cell while it is built, timed and checked.
type ckfRun struct {
	cfg      *CKFConfig
	cell     *CKFCell
	format   *ckf.Format
	words    []uint64 // the table's region (huge pages asked)
	table    *replica.Table
	small    *replica.Table // its copy on 4 KiB pages; nil when skipped
	smallMem []uint64
	rx       *radix.Index // best case; nil when skipped
	churned  *radix.Index // nil when skipped
	perLane  []*cuckoo.Filter
	queries  []ckfQuery
	exact    [][]uint32 // [query][lane], from the engines
	frees    []func()

	prodTime, prodCPU, radixTime, radixCPU, cfTime time.Duration
	prodMem, tracked, resident                     uint64
}

func (r *ckfRun) close() {
	for _, f := range r.frees {
		f()
	}
}

// runCKFCell builds every structure for one cell, times them and checks
// them.
func runCKFCell(ctx context.Context, u *universe, cfg *CKFConfig, lanes, blocks int) (*CKFCell, error) {
	start := time.Now()
	r, err := newCKFRun(u, cfg, lanes, blocks)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if r.churned != nil {
		// Junk as many node ids as the lanes' union can hold (the
		// universe's distinct blocks) so that every node lands scattered.
		if err := churnRadix(r.churned, r.cell.Copies*u.distinct, cfg.Seed); err != nil {
			return nil, fmt.Errorf("churn radix: %w", err)
		}
	}
	// Thread CPU time is per OS thread: keep this goroutine on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prog := newProgress(cfg.Progress, fmt.Sprintf("lanes=%d blocks=%d: filling lanes", lanes, blocks))
	for l := range lanes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		prog.tick(l, lanes)
		if err := r.fillLane(u, l); err != nil {
			return nil, fmt.Errorf("lane %d: %w", l, err)
		}
	}
	r.finishIngest()
	if err := r.copySmallPages(); err != nil {
		return nil, err
	}
	r.cell.Seconds = time.Since(start).Seconds()
	if err := r.time(ctx); err != nil {
		return nil, err
	}
	r.measureRadixHeap()
	return r.cell, nil
}

// newCKFRun sizes the cell: its format, table, queries, and which radix
// indexes it builds.
func newCKFRun(u *universe, cfg *CKFConfig, lanes, blocks int) (*ckfRun, error) {
	n, err := ckf.BucketCount(uint64(blocks))
	if err != nil {
		return nil, err
	}
	format, err := ckf.NewFormat(ckf.DefaultSeed, n)
	if err != nil {
		return nil, err
	}
	r := &ckfRun{cfg: cfg, format: format, cell: &CKFCell{Lanes: lanes, BlocksPerLane: blocks, Buckets: n}, perLane: make([]*cuckoo.Filter, lanes)}
	tc := replica.Config{Lanes: lanes, Buckets: n}
	words, _ := replica.RegionWords(tc)
	region, free, err := mapWords(words, true)
	if err != nil {
		return nil, err
	}
	r.frees = append(r.frees, free)
	r.words = region
	if r.table, err = replica.NewInRegion(region, tc); err != nil {
		r.close()
		return nil, err
	}
	// Just enough copies that a lane serving half the requests fills up
	// and churns in about one walk of the universe: it then holds about
	// half of everything, so a query typically hits half the lanes, fully
	// or partly.
	churn := blocks + blocks/churnFraction
	copies := max(1, (churn+u.halfDistinct-1)/max(1, u.halfDistinct))
	if uint64(copies)*u.stride > 1<<32 {
		r.close()
		return nil, fmt.Errorf("%d copies of ids below %d overflow the u32 token ids", copies, u.stride)
	}
	r.cell.Copies = copies
	r.makeQueries(u, lanes, blocks)
	r.chooseRadix(lanes, blocks)
	return r, nil
}

// makeQueries draws the cell's queries from the universe and makes room
// for the engines' exact depths.
func (r *ckfRun) makeQueries(u *universe, lanes, blocks int) {
	size := r.cell.Copies * len(u.reqs)
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(lanes)<<32|uint64(blocks)))
	r.queries = make([]ckfQuery, r.cfg.Queries)
	var qblocks int
	for q := range r.queries {
		l := u.locals(nil, rng.IntN(size))
		r.queries[q] = ckfQuery{locals: l, chain: kv.AppendChain(nil, false, 0, l)}
		qblocks += len(l)
	}
	r.cell.Queries, r.cell.QueryBlocks = len(r.queries), float64(qblocks)/float64(len(r.queries))
	r.exact = make([][]uint32, len(r.queries))
	for q := range r.exact {
		r.exact[q] = make([]uint32, lanes)
	}
}

// chooseRadix decides which radix indexes the cell builds: under
// RadixMaxBlocks, or with AutoRadix what the available memory holds (the
// best case first, then the churned one).
func (r *ckfRun) chooseRadix(lanes, blocks int) {
	members := lanes * blocks
	limit, why := r.cfg.RadixMaxBlocks, fmt.Sprintf("%d × %d member blocks exceed the radix limit %d", lanes, blocks, r.cfg.RadixMaxBlocks)
	if limit == AutoRadix {
		avail := availableBytes()
		limit = int(autoMemoryShare * float64(avail) / radixBytesEstimate)
		why = fmt.Sprintf("%d × %d member blocks at ~%d B each need more than %.0f%% of the %s available", lanes, blocks, radixBytesEstimate, 100*autoMemoryShare, bytesIEC(int64(avail)))
	}
	if members > limit {
		r.cell.RadixSkipped, r.cell.ChurnedSkipped = why, why
		return
	}
	r.rx = radix.New(radix.Config{})
	switch {
	case r.cfg.SkipChurnedRadix:
		r.cell.ChurnedSkipped = "not asked for"
	case r.cfg.RadixMaxBlocks == AutoRadix && 2*members > limit:
		r.cell.ChurnedSkipped = "memory: " + why + " twice"
	default:
		r.churned = radix.New(radix.Config{})
	}
}

// fillLane walks lane l's engine and feeds its events to every structure:
// the producer (timed), the per-lane filter (timed), the radix indexes
// (the best case timed), then records the lane's exact depth of every
// query from the engine's own cache.
func (r *ckfRun) fillLane(u *universe, l int) error {
	events, eng, err := walkLane(u, r.cfg.Seed, l, r.cell.Lanes, r.cell.BlocksPerLane, r.cell.Copies*len(u.reqs))
	if err != nil {
		return err
	}
	for i := range events {
		r.cell.Ingest.Events++
		r.cell.Ingest.BlockOps += len(events[i].Blocks) + len(events[i].Removed)
	}
	if err := r.ingestProducer(l, events); err != nil {
		return err
	}
	r.ingestPerLane(l, events)
	if r.rx != nil {
		c0, t0 := threadCPU(), time.Now()
		if err := applyEvents(r.rx, events); err != nil {
			return fmt.Errorf("radix: %w", err)
		}
		r.radixTime += time.Since(t0)
		r.radixCPU += threadCPU() - c0
	}
	if r.churned != nil {
		if err := applyEvents(r.churned, events); err != nil {
			return fmt.Errorf("churned radix: %w", err)
		}
	}
	for q := range r.queries {
		r.exact[q][l] = uint32(eng.Lookup(r.queries[q].locals))
	}
	return nil
}

func applyEvents(x *radix.Index, events []kv.Event) error {
	for i := range events {
		if err := x.Apply(&events[i]); err != nil {
			return err
		}
	}
	return nil
}

// ingestProducer is the relay's work for one lane: its producer drained at
// the default cadence, its owner table and the lane's one lineage sized
// for the lane's capacity as a relay sizes them from its pool; the drained
// table is installed into the replica.
func (r *ckfRun) ingestProducer(l int, events []kv.Event) error {
	blocks := r.cell.BlocksPerLane
	p, err := ckf.New(ckf.Config{Format: r.format, ExpectedBlocks: blocks, ExpectedMemberBlocks: blocks})
	if err != nil {
		return err
	}
	var images []ckf.Image
	c0, t0 := threadCPU(), time.Now()
	for i := range events {
		step, err := p.Apply(&events[i])
		if err != nil && !errors.Is(err, ckf.ErrCapacityExhausted) {
			return fmt.Errorf("producer: %w", err)
		}
		if step == ckf.StepPublish {
			images = p.Drain(images[:0])
		}
	}
	p.Drain(images[:0])
	r.prodTime += time.Since(t0)
	r.prodCPU += threadCPU() - c0
	st := p.Stats()
	r.prodMem += st.MemoryBytes
	r.tracked += st.TrackedBlocks
	r.resident += st.Resident
	r.cell.Checks.CapacityOmissions += int(st.CapacityOmissions)
	return r.table.Install(l, p.AppendWords(nil))
}

// ingestPerLane feeds lane l's events to its own cuckoo filter with the
// CKF's slot count (8-bit fingerprints).
func (r *ckfRun) ingestPerLane(l int, events []kv.Event) {
	cf := cuckoo.NewFilter(uint(4 * r.cell.Buckets))
	var key [8]byte
	t0 := time.Now()
	for i := range events {
		for _, b := range events[i].Blocks {
			binary.LittleEndian.PutUint64(key[:], b.External)
			if !cf.Insert(key[:]) {
				r.cell.Checks.PerLaneInsertFails++
			}
		}
		for _, h := range events[i].Removed {
			binary.LittleEndian.PutUint64(key[:], h)
			cf.Delete(key[:])
		}
	}
	r.cfTime += time.Since(t0)
	r.perLane[l] = cf
}

// finishIngest turns the lanes' totals into rates and bytes per block.
func (r *ckfRun) finishIngest() {
	c := r.cell
	lanes, n := uint64(c.Lanes), c.Buckets
	c.Load = float64(r.resident) / float64(lanes*ckf.SlotsPerBucket*n)
	ops := float64(c.Ingest.BlockOps)
	c.Ingest.ProducerOpsSec = ops / r.prodTime.Seconds()
	c.Ingest.PerLaneOpsSec = ops / r.cfTime.Seconds()
	if r.prodCPU > 0 {
		c.Ingest.ProducerCPUOpsSec = ops / r.prodCPU.Seconds()
	}
	if r.rx != nil {
		c.Ingest.RadixOpsSec = ops / r.radixTime.Seconds()
		if r.radixCPU > 0 {
			c.Ingest.RadixCPUOpsSec = ops / r.radixCPU.Seconds()
		}
	}
	tracked := float64(r.tracked)
	c.Memory = CKFMemory{
		ReplicaBytesPerBlock:    float64(len(r.words)*8) / tracked,
		ProducerBytesPerBlock:   float64(r.prodMem) / tracked,
		PerLaneBytesPerBlock:    float64(lanes*ckf.SlotsPerBucket*n) / tracked, // one byte per slot
		ReplicaHugePageFraction: hugeFraction(r.words),
	}
}

// hugeFraction is the share of words the kernel backs with huge pages, or
// -1 when unknown.
func hugeFraction(words []uint64) float64 {
	b := hugeBacked(words)
	if b < 0 {
		return -1
	}
	return float64(b) / float64(len(words)*8)
}

// copySmallPages copies the table, lane by lane, into a region on 4 KiB
// pages, unless skipped; where no such region can be had it is skipped.
func (r *ckfRun) copySmallPages() error {
	if r.cfg.SkipSmallPages {
		return nil
	}
	tc := replica.Config{Lanes: r.cell.Lanes, Buckets: r.cell.Buckets}
	region, free, err := mapWords(len(r.words), false)
	if err != nil {
		return nil // no small pages here (not linux): the column stays empty
	}
	r.frees = append(r.frees, free)
	if r.small, err = replica.NewInRegion(region, tc); err != nil {
		return err
	}
	var lane []uint64
	for l := range r.cell.Lanes {
		lane = r.table.AppendLane(lane[:0], l)
		if err := r.small.Install(l, lane); err != nil {
			return err
		}
	}
	r.smallMem = region
	r.cell.Memory.SmallPagesHugeFraction = hugeFraction(region)
	return nil
}

// measureRadixHeap is the best-case radix index's heap per member block:
// the live heap with it, then without it.
func (r *ckfRun) measureRadixHeap() {
	if r.rx == nil {
		return
	}
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	r.rx = nil
	runtime.GC()
	runtime.ReadMemStats(&without)
	r.cell.Memory.RadixBytesPerBlock = float64(int64(with.HeapAlloc)-int64(without.HeapAlloc)) / float64(r.tracked)
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
