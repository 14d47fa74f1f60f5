package harness

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/goindex/goindex/goindex/kv"
)

// Mode says how Run drives the index.
type Mode uint8

const (
	// Serial applies one op at a time and checks every op's queries.
	Serial Mode = iota
	// ConcurrentReaders applies ops from one goroutine while
	// Options.Readers goroutines run Match on the segment's queries
	// (checked for shape only); at each checkpoint the writer pauses and the
	// readers check the checkpoint's queries against the model concurrently.
	ConcurrentReaders
	// LanePool pipelines ops to Options.Lanes goroutines, one lane per
	// worker (by hash), each applying its events in order without waiting
	// for the others; at each checkpoint every lane drains and the
	// checkpoint's queries are checked. With more than one lane the index's
	// mutations run concurrently for different workers.
	LanePool
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case Serial:
		return "serial"
	case ConcurrentReaders:
		return "concurrent-readers"
	case LanePool:
		return "lane-pool"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// laneDepth is each lane's channel buffer: deep enough that the feeder
// runs ahead of the lanes between checkpoints (about 6 ops apart).
const laneDepth = 64

// runConfig is what one execution needs from Options and Knobs.
type runConfig struct {
	mode           Mode
	lanes, readers int
	scope          ClearScope
	allowOvercount bool
	strict         bool
	seed           uint64
	trace          func(format string, args ...any) // nil: tracing off
}

// fails reports whether v fails the run under rc's policy.
func (rc *runConfig) fails(v *Violation) bool {
	switch v.Kind {
	case Overcount:
		return !rc.allowOvercount
	case Undercount, ApplyError:
		return rc.strict
	}
	return true
}

func (rc *runConfig) tracef(format string, args ...any) {
	if rc.trace != nil {
		rc.trace(format, args...)
	}
}

// outcome is one execution's tally and its first failing violation.
type outcome struct {
	counters Counters
	fail     *Violation
}

// execute runs ops against ix in rc.mode.
func execute(ix kv.Index, ops []Op, rc *runConfig) outcome {
	switch rc.mode {
	case ConcurrentReaders:
		return runConcurrent(ix, ops, rc)
	case LanePool:
		return runLanes(ix, ops, rc)
	}
	return runSerial(ix, ops, rc)
}

// judgeApply turns the index's answer to op i into a violation: an error on
// a MustApply op is an ApplyError; on a MayReject op it is an allowed
// reject.
func judgeApply(expect Expect, err error, op *Op, i int, c *Counters) *Violation {
	c.Ops++
	if err == nil {
		return nil
	}
	if expect != MustApply {
		c.Rejects++
		return nil
	}
	c.ApplyErrors++
	mem, _ := op.member()
	return &Violation{Kind: ApplyError, Op: i, Member: mem, Err: err}
}

// firstFailing returns the first of vs that fails under rc, stamped with
// op index i.
func (rc *runConfig) firstFailing(vs []Violation, i int) *Violation {
	for k := range vs {
		if rc.fails(&vs[k]) {
			v := vs[k]
			v.Op = i
			return &v
		}
	}
	return nil
}

// applyOp applies op i to the model and to ix, counts and traces it, and
// returns the violation that fails the run if ix's answer is one.
func applyOp(ix kv.Index, m *Model, ops []Op, i int, c *Counters, rc *runConfig) *Violation {
	op := &ops[i]
	expect := m.Apply(op)
	err := op.Apply(ix)
	rc.tracef("op %d %s: %s, err %v", i, op, expect, err)
	if v := judgeApply(expect, err, op, i, c); v != nil && rc.fails(v) {
		return v
	}
	return nil
}

// checkQueries checks qs serially after op i.
func checkQueries(ix kv.Index, m *Model, qs []Query, i int, c *Counters, rc *runConfig) *Violation {
	var vs []Violation
	for _, q := range qs {
		vs = Check(ix, m, q, c, vs[:0])
		if v := rc.firstFailing(vs, i); v != nil {
			return v
		}
	}
	return nil
}

func runSerial(ix kv.Index, ops []Op, rc *runConfig) outcome {
	var out outcome
	m := NewModel(rc.scope)
	for i := range ops {
		if out.fail = applyOp(ix, m, ops, i, &out.counters, rc); out.fail != nil {
			return out
		}
		if out.fail = checkQueries(ix, m, ops[i].Queries, i, &out.counters, rc); out.fail != nil {
			return out
		}
	}
	return out
}

// segmentEnd returns the index of the first checkpoint at or after lo (the
// last op if none).
func segmentEnd(ops []Op, lo int) int {
	hi := lo
	for hi < len(ops)-1 && !ops[hi].Checkpoint {
		hi++
	}
	return hi
}

func runConcurrent(ix kv.Index, ops []Op, rc *runConfig) outcome {
	var out outcome
	m := NewModel(rc.scope)
	readers := max(rc.readers, 1)
	for lo := 0; lo < len(ops); {
		hi := segmentEnd(ops, lo)
		var pool []Query
		for i := lo; i <= hi; i++ {
			pool = append(pool, ops[i].Queries...)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		counts := make([]Counters, readers)
		bad := make([]*Violation, readers)
		for r := range readers {
			if len(pool) == 0 {
				break
			}
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(rc.seed, uint64(lo*readers+r)))
				var buf []kv.Overlap
				var vs []Violation
				for first := true; first || !stop.Load(); first = false {
					q := pool[rng.IntN(len(pool))]
					buf = ix.Match(buf[:0], q.Locals)
					counts[r].ConcurrentMatches++
					if vs = checkShape(buf, q, &counts[r], vs[:0]); len(vs) > 0 && bad[r] == nil {
						v := vs[0]
						v.Op = hi
						bad[r] = &v
					}
				}
			})
		}
		for i := lo; i <= hi && out.fail == nil; i++ {
			out.fail = applyOp(ix, m, ops, i, &out.counters, rc)
		}
		stop.Store(true)
		wg.Wait()
		for r := range readers {
			out.counters.Add(counts[r])
			if out.fail == nil && bad[r] != nil {
				out.fail = bad[r]
			}
		}
		if out.fail != nil {
			return out
		}
		if out.fail = checkParallel(ix, m, ops[hi].Queries, hi, readers, &out.counters, rc); out.fail != nil {
			return out
		}
		lo = hi + 1
	}
	return out
}

// checkParallel checks qs after op i from n goroutines at once (the model
// and the index are quiescent) and returns the failing violation of the
// lowest-numbered query, if any.
func checkParallel(ix kv.Index, m *Model, qs []Query, i, n int, c *Counters, rc *runConfig) *Violation {
	c.Checkpoints++
	counts := make([]Counters, n)
	fails := make([]*Violation, n)
	var wg sync.WaitGroup
	for g := range n {
		lo, hi := len(qs)*g/n, len(qs)*(g+1)/n
		wg.Go(func() { fails[g] = checkQueries(ix, m, qs[lo:hi], i, &counts[g], rc) })
	}
	wg.Wait()
	var first *Violation
	for g := range n {
		c.Add(counts[g])
		if first == nil {
			first = fails[g]
		}
	}
	rc.tracef("checkpoint after op %d: %s", i, c)
	return first
}

// laneItem is one op sent to a lane, or (barrier non-nil) a request to
// report that everything before it has been applied.
type laneItem struct {
	op      *Op
	idx     int
	expect  Expect
	barrier *sync.WaitGroup
}

func runLanes(ix kv.Index, ops []Op, rc *runConfig) outcome {
	var out outcome
	m := NewModel(rc.scope)
	n := max(rc.lanes, 1)
	lanes := make([]chan laneItem, n)
	counts := make([]Counters, n)
	fails := make([]*Violation, n)
	var running sync.WaitGroup
	for l := range n {
		lanes[l] = make(chan laneItem, laneDepth)
		running.Go(func() {
			for it := range lanes[l] {
				if it.barrier != nil {
					it.barrier.Done()
					continue
				}
				err := it.op.Apply(ix)
				if v := judgeApply(it.expect, err, it.op, it.idx, &counts[l]); v != nil && rc.fails(v) && fails[l] == nil {
					fails[l] = v
				}
			}
		})
	}
	finish := func() outcome {
		for _, ch := range lanes {
			close(ch)
		}
		running.Wait()
		for l := range n {
			out.counters.Add(counts[l])
		}
		return out
	}
	for i := range ops {
		op := &ops[i]
		expect := m.Apply(op)
		rc.tracef("op %d %s: %s (lane %d)", i, op, expect, mix(op.worker())%uint64(n))
		lanes[mix(op.worker())%uint64(n)] <- laneItem{op: op, idx: i, expect: expect}
		if !op.Checkpoint && i < len(ops)-1 {
			continue
		}
		var drained sync.WaitGroup
		drained.Add(n)
		for _, ch := range lanes {
			ch <- laneItem{barrier: &drained}
		}
		drained.Wait()
		for _, f := range fails {
			if f != nil && (out.fail == nil || f.Op < out.fail.Op) {
				out.fail = f
			}
		}
		if out.fail == nil {
			out.counters.Checkpoints++
			out.fail = checkQueries(ix, m, op.Queries, i, &out.counters, rc)
			rc.tracef("checkpoint after op %d: %s", i, &out.counters)
		}
		if out.fail != nil {
			return finish()
		}
	}
	return finish()
}
