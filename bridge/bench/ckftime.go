package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
)

// structure is one timed way of answering a query: per-lane depths (nil
// for chain, which answers nothing), its latencies and the sum of its
// timed answers.
type structure struct {
	name   string
	answer func(q *ckfQuery) []uint32
	// judge classifies one (query, lane) answer v against the exact depth.
	judge func(v, want uint32)
	// store records the structure's figures in the cell.
	store func(Latency)
	lat   []time.Duration
	sink  uint64
}

// time times every structure on the cell's queries, checks every answer
// against the engines' depths, and fills the probe, ratio and check
// figures.
func (r *ckfRun) time(ctx context.Context) error {
	ss, err := r.structures()
	if err != nil {
		return err
	}
	for _, s := range ss {
		s.lat = make([]time.Duration, len(r.queries))
	}
	if err := r.timeAll(ctx, ss); err != nil {
		return err
	}
	for _, s := range ss {
		if err := r.judge(s); err != nil {
			return err
		}
	}
	if err := r.crossCheck(); err != nil {
		return err
	}
	r.ratios()
	return nil
}

// structures lists the cell's structures in the order the interleaved
// run rotates through.
func (r *ckfRun) structures() ([]*structure, error) {
	c := r.cell
	all := ^uint64(0) >> (replica.MaxLanes - c.Lanes)
	chunked, err := replica.NewSearcher(r.table, r.format, replica.SearchConfig{Mode: replica.Chunked})
	if err != nil {
		return nil, err
	}
	bisect, err := replica.NewSearcher(r.table, r.format, replica.SearchConfig{Mode: replica.Bisect})
	if err != nil {
		return nil, err
	}
	var depth []uint32
	under := func(v, want uint32) {
		if v < want {
			c.Checks.Underestimates++
		}
	}
	over := func(n *int) func(v, want uint32) {
		return func(v, want uint32) {
			under(v, want)
			if v > want {
				*n++
			}
		}
	}
	ss := []*structure{{
		name: "chunked", judge: over(&c.Checks.ChunkedOver), store: func(l Latency) { c.Probe.Chunked = l },
		answer: func(q *ckfQuery) []uint32 { depth, _ = chunked.Search(depth, q.chain, all); return depth },
	}}
	if r.small != nil {
		small, err := replica.NewSearcher(r.small, r.format, replica.SearchConfig{Mode: replica.Chunked})
		if err != nil {
			return nil, err
		}
		ss = append(ss, &structure{
			name: "small", judge: under, store: func(l Latency) { c.Probe.ChunkedSmallPages = &l },
			answer: func(q *ckfQuery) []uint32 { depth, _ = small.Search(depth, q.chain, all); return depth },
		})
	}
	afirst, err := replica.NewSearcher(r.table, r.format, replica.SearchConfig{Mode: replica.AFirst})
	if err != nil {
		return nil, err
	}
	ss = append(ss, &structure{
		// Over-counts must equal chunked's: crossCheck compares them.
		name: "afirst", judge: under, store: func(l Latency) { c.Probe.AFirst = l },
		answer: func(q *ckfQuery) []uint32 { depth, _ = afirst.Search(depth, q.chain, all); return depth },
	}, &structure{
		// Over-counts must equal chunked's: crossCheck compares them.
		name: "locals", judge: under, store: func(l Latency) { c.Probe.ChunkedLocals = l },
		answer: func(q *ckfQuery) []uint32 { depth, _ = chunked.SearchLocals(depth, q.locals, all); return depth },
	}, &structure{
		name: "bisect", judge: over(&c.Checks.BisectOver), store: func(l Latency) { c.Probe.Bisect = l },
		answer: func(q *ckfQuery) []uint32 { depth, _ = bisect.Search(depth, q.chain, all); return depth },
	})
	exact := func(v, want uint32) {
		if v != want {
			c.Checks.RadixMismatches++
		}
	}
	depths := make([]uint32, c.Lanes)
	if r.rx != nil {
		ss = append(ss, &structure{name: "radix", judge: exact, store: func(l Latency) { c.Probe.Radix = &l }, answer: radixAnswer(r.rx, depths)})
	}
	if r.churned != nil {
		ss = append(ss, &structure{name: "churned", judge: exact, store: func(l Latency) { c.Probe.RadixChurned = &l }, answer: radixAnswer(r.churned, depths)})
	}
	key := make([]byte, 8)
	var chain []uint64
	return append(ss, &structure{
		name: "perlane", store: func(l Latency) { c.Probe.PerLane = l },
		judge: func(v, want uint32) {
			switch {
			case v < want:
				// The library drops a fingerprint whose insertion ran out of
				// kicks: reported, not failed.
				c.Checks.PerLaneUnder++
			case v > want:
				c.Checks.PerLaneOver++
			}
		},
		answer: func(q *ckfQuery) []uint32 {
			for l, cf := range r.perLane {
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
	}, &structure{
		// The canonical hashes the replica and the per-lane filters start
		// from, timed on their own; it answers nothing.
		name: "chain", store: func(l Latency) { c.Probe.Chain = l },
		answer: func(q *ckfQuery) []uint32 {
			chain = kv.AppendChain(chain[:0], false, 0, q.locals)
			if chain[len(chain)-1] != q.chain[len(q.chain)-1] {
				return []uint32{1} // never: the sink check then fails
			}
			return nil
		},
	}), nil
}

// radixAnswer answers a query with x's per-member depths, lane = worker.
func radixAnswer(x interface {
	Match([]kv.Overlap, []uint64) []kv.Overlap
}, depths []uint32) func(q *ckfQuery) []uint32 {
	var ov []kv.Overlap
	return func(q *ckfQuery) []uint32 {
		ov = x.Match(ov[:0], q.locals)
		clear(depths)
		for _, o := range ov {
			depths[o.Member.Worker] = uint32(o.Blocks)
		}
		return depths
	}
}

// timeAll times every structure on every query. Interleaved, each step
// times one query on every structure in turn, so load from other
// processes on this shared machine hits all alike, and the order rotates
// each step, so every structure follows every other equally often (none
// always starts on the caches and TLB the per-lane filters just swept);
// structure s is len/S·s queries ahead in the list, so no replica search
// reads rows another just loaded. Sequential, one structure after another
// runs over every query.
func (r *ckfRun) timeAll(ctx context.Context, ss []*structure) error {
	// A router has just hashed the request when it searches: each timed
	// query is first copied into a hot buffer, so the figures cover the
	// structure, not a cache miss on the stored query.
	var hot ckfQuery
	timeOne := func(s *structure, q int) {
		hot.locals = append(hot.locals[:0], r.queries[q].locals...)
		hot.chain = append(hot.chain[:0], r.queries[q].chain...)
		t0 := time.Now()
		d := s.answer(&hot)
		s.lat[q] = time.Since(t0)
		for _, v := range d {
			s.sink += uint64(v)
		}
	}
	nq := len(r.queries)
	for step := range nq {
		if step&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		for k := range ss {
			i := (k + step) % len(ss)
			switch {
			case !r.cfg.Sequential:
				timeOne(ss[i], (step+i*nq/len(ss))%nq)
			case step == 0:
				for q := range nq {
					timeOne(ss[i], q)
				}
			}
		}
	}
	return nil
}

// judge answers every query again, untimed, checks each lane against the
// truth and the timed sum, and stores the structure's latencies.
func (r *ckfRun) judge(s *structure) error {
	var again uint64
	for q := range r.queries {
		d := s.answer(&r.queries[q])
		for l, v := range d {
			again += uint64(v)
			if s.judge != nil {
				s.judge(v, r.exact[q][l])
			}
		}
	}
	if again != s.sink {
		return fmt.Errorf("%s: the timed queries summed to %d blocks, the checked ones to %d", s.name, s.sink, again)
	}
	fig := LatencyOf(s.lat)
	fig.Overlaps = int(s.sink)
	s.store(fig)
	return nil
}

// crossCheck holds the chunked search equal to the linear reference, to
// itself from the local hashes and to its copy on small pages, lane by
// lane, and counts the lanes that hit and the best exact depths.
func (r *ckfRun) crossCheck() error {
	c := r.cell
	all := ^uint64(0) >> (replica.MaxLanes - c.Lanes)
	searcher := func(t *replica.Table, m replica.Mode) (*replica.Searcher, error) {
		return replica.NewSearcher(t, r.format, replica.SearchConfig{Mode: m})
	}
	chunked, err := searcher(r.table, replica.Chunked)
	if err != nil {
		return err
	}
	linear, err := searcher(r.table, replica.Linear)
	if err != nil {
		return err
	}
	afirst, err := searcher(r.table, replica.AFirst)
	if err != nil {
		return err
	}
	var small *replica.Searcher
	if r.small != nil {
		if small, err = searcher(r.small, replica.Chunked); err != nil {
			return err
		}
	}
	var depth, lin, loc, sp, af []uint32
	var hitLanes, best int
	shape := newShapeCounter(r)
	for q := range r.queries {
		before := chunked.Stats()
		depth, _ = chunked.Search(depth, r.queries[q].chain, all)
		shape.add(q, before, chunked.Stats(), depth)
		lin, _ = linear.Search(lin, r.queries[q].chain, all)
		loc, _ = chunked.SearchLocals(loc, r.queries[q].locals, all)
		af, _ = afirst.Search(af, r.queries[q].chain, all)
		if small != nil {
			sp, _ = small.Search(sp, r.queries[q].chain, all)
		}
		b := uint32(0)
		for l := range c.Lanes {
			c.Checks.Results++
			if depth[l] != lin[l] {
				c.Checks.ChunkedVsLinear++
			}
			if loc[l] != depth[l] {
				c.Checks.LocalsVsChunked++
			}
			if af[l] != depth[l] {
				c.Checks.AFirstVsChunked++
			}
			if small != nil && sp[l] != depth[l] {
				c.Checks.SmallVsChunked++
			}
			if r.exact[q][l] > 0 {
				hitLanes++
			}
			b = max(b, r.exact[q][l])
		}
		best += int(b)
	}
	c.Shape = shape.shape()
	c.HitLanes = float64(hitLanes) / float64(len(r.queries))
	c.ExactBlocks = float64(best) / float64(len(r.queries))
	return nil
}

// ratios fills chunked / other for every structure the cell timed.
func (r *ckfRun) ratios() {
	p, q := &r.cell.Probe, &r.cell.Ratios
	c := &p.Chunked
	over := func(a, b *Latency) (float64, float64) { return a.P50us / b.P50us, a.P99us / b.P99us }
	q.BisectP50, q.BisectP99 = over(c, &p.Bisect)
	q.AFirstP50, q.AFirstP99 = over(c, &p.AFirst)
	q.PerLaneP50, q.PerLaneP99 = over(c, &p.PerLane)
	if p.ChunkedSmallPages != nil {
		q.SmallPagesP50, q.SmallPagesP99 = over(c, p.ChunkedSmallPages)
	}
	if p.Radix != nil {
		q.RadixP50, q.RadixP99 = over(c, p.Radix)
		q.LocalsRadixP50, q.LocalsRadixP99 = over(&p.ChunkedLocals, p.Radix)
	}
	if p.RadixChurned != nil {
		q.ChurnedP50, q.ChurnedP99 = over(c, p.RadixChurned)
	}
}
