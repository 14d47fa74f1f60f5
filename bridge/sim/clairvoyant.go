package sim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// The clairvoyant router (Policy Clairvoyant) is the perfect version of
// what every TTFT cost model estimates: "this request's TTFT if sent to DC
// d now". For request i, sent at now, and every DC d it clones d's
// workers (queues, running batch, decode clocks, KV pools: worker.clone),
// copies every request's state, keeps the events that are d's future as
// of now (its workers' next state changes and the arrivals of the
// requests already on their way to it, with their order), adds i's
// arrival after its real one-way delay (matrix RTT and its own jitter
// draw), and runs that shadow with no further arrival until i's first
// token. i goes where that TTFT, round trip included, is least; the run's
// state is never touched.
//
// Why later arrivals (requests sent after i) mostly cannot change i's
// first token in this worker model, and where they can:
//
//   - A request j reaching d after i, on i's worker, queues behind i:
//     admission is FCFS and nothing overtakes the head (worker.admit), and
//     prefill is FIFO with the head taking the whole budget, so j is
//     admitted after i and prefilled after i. Its decode, which would slow
//     i's prefill, starts after i's first token. On another worker of d,
//     j shares nothing with i (each worker has its own pool).
//   - Admitted behind i, j can only help i: a decode that finds no free
//     block preempts the last-admitted sequence, j before i; once j is
//     preempted its private blocks are free and its hit blocks evictable
//     again, so the allocatable memory is what it would have been without
//     j and the same choice follows for i. Only if i is itself preempted
//     before its first token may j's admission have evicted cached blocks
//     i's recomputation would have hit: it then recomputes more. Both
//     effects are rare (a preemption of a request still in prefill).
//   - The local router places i at its arrival from the state then; j's
//     later arrival cannot move it.
//   - What does change i's first token: a request sent after i that
//     reaches d BEFORE i does, from a router nearer to d (its one-way
//     delay shorter than i's by more than the gap between the sends), or
//     from the same router with a smaller RTT jitter draw. It queues ahead
//     of i. The clairvoyant cannot see it (it is not yet sent), so its
//     TTFT is then optimistic; with clients at one site and no jitter
//     every request to d has the same delay and this never happens.
//   - And, slightly, the fluid time of worker.go: a worker's rates are
//     set at each state change, folding in the decode context grown since
//     the last one, so a later request's admission on i's worker refreshes
//     them sooner than the shadow does and shifts the worker's timeline by
//     a fraction of a millisecond (the test of this file bounds it).
//
// Result.Clairvoyance counts how often the foreseen TTFT of the chosen DC
// was what the request then saw, to the microsecond, and the error
// otherwise: the measure of how far "clairvoyant" is from exact in each
// run.

// Clairvoyance compares the clairvoyant's foreseen TTFT at the DC it chose
// with what each measured request then saw.
type Clairvoyance struct {
	// Requests counts the measured requests; Exact those whose TTFT was
	// the foreseen one within a microsecond; Later and Earlier those whose
	// first token came later or earlier than foreseen.
	Requests int `json:"requests"`
	Exact    int `json:"exact"`
	Later    int `json:"later"`
	Earlier  int `json:"earlier"`
	// MeanErrorMs is the mean of actual − foreseen TTFT over every measured
	// request; MaxLateMs the largest delay beyond the foreseen TTFT.
	MeanErrorMs float64 `json:"mean_error_ms"`
	MaxLateMs   float64 `json:"max_late_ms"`
}

// clairvoyanceTolMs is how far a TTFT may be from the foreseen one and
// still count as exact: the shadow and the run advance the same state in
// different steps (load reports and arrivals cut the run's fluid time), so
// they agree up to rounding.
const clairvoyanceTolMs = 1e-3

// foresee returns the DC where request i, sent at now by router rt, gets
// its first token soonest, and that TTFT. DCs are tried by increasing
// matrix RTT from rt's site (ties to the lower index), and a DC keeps the
// request only if its TTFT is strictly less than every DC tried before,
// so equal TTFTs go to the nearer DC; a shadow stops as soon as its time
// shows it cannot beat the best so far.
func (s *simulation) foresee(rt *router, i int, now float64) (int, float64, error) {
	sh := s.shadowSim()
	sh.reqs = append(sh.reqs[:0], s.reqs...)
	jitter := s.draw(i, drawJitter).Float64() * ms(s.cfg.RTTJitter)
	if rt.byRTT == nil {
		for l := range s.dcs {
			rt.byRTT = append(rt.byRTT, l)
		}
		slices.SortStableFunc(rt.byRTT, func(a, b int) int { return cmp.Compare(s.rtt(rt.site, s.dcs[a]), s.rtt(rt.site, s.dcs[b])) })
	}
	best, bestMs := -1, math.Inf(1)
	for _, l := range rt.byRTT {
		ttft, err := s.firstToken(sh, l, i, now, s.rtt(rt.site, s.dcs[l])+jitter, bestMs)
		if err != nil {
			return 0, 0, err
		}
		if ttft < bestMs {
			best, bestMs = l, ttft
		}
	}
	return best, bestMs, nil
}

// shadowSim returns the simulation the clairvoyant's shadows run in,
// built on first use: it shares the run's configuration, workload and
// topology (read-only) and owns everything a shadow changes.
func (s *simulation) shadowSim() *simulation {
	if s.shade == nil {
		s.shade = &simulation{cfg: s.cfg, w: s.w, policy: s.policy, topo: s.topo, shadow: true,
			dcs: make([]*dc, len(s.dcs)), workers: make([]*worker, len(s.workers)),
			workerDepth: make([]int, len(s.workerDepth))}
		s.shade.pcg = rand.NewPCG(0, 0)
		s.shade.rng = rand.New(s.shade.pcg)
	}
	return s.shade
}

// firstToken runs DC l's shadow in sh for request i, sent at now and
// paying rtt, and returns its TTFT, or +Inf as soon as the shadow's clock
// shows it cannot be below bound. sh.reqs holds every request's state as
// of now (the other DCs' shadows touch only their own requests, and i's
// state is set afresh here).
func (s *simulation) firstToken(sh *simulation, l, i int, now, rtt, bound float64) (float64, error) {
	d := s.dcs[l]
	s.cloneInto(sh, l)
	st := &sh.reqs[i]
	sent := &s.reqs[i]
	*st = reqState{dc: l, rttMs: rtt, sentMs: now, blocks: sent.blocks, jitter: sent.jitter}
	sh.q.push(now+rtt/2, evArrive, i, l)
	for sh.q.len() > 0 {
		e := sh.q.pop()
		if e.at+rtt/2-now >= bound {
			return math.Inf(1), nil
		}
		sh.now = e.at
		if err := sh.fire(e); err != nil {
			return 0, fmt.Errorf("clairvoyant shadow of dc %s for request %d: %w", d.name, i, err)
		}
		if st.generated > 0 {
			return st.ttftMs(), nil
		}
	}
	return 0, fmt.Errorf("%w: clairvoyant shadow of dc %s ran dry before request %d's first token", ErrEngine, d.name, i)
}

// cloneInto makes DC l's shadow in sh: a clone of the DC (dc.clone) and,
// as sh's event queue, the events of the run that are that DC's future
// (its workers' scheduled changes and the arrivals on their way to it),
// in their order. sh.reqs must hold the requests' state.
func (s *simulation) cloneInto(sh *simulation, l int) {
	d := s.dcs[l]
	sh.dcs[l] = d.clone(sh)
	sh.q = s.q.subset(sh.q.h, func(e *event) bool {
		switch e.kind {
		case evArrive:
			return e.b == l
		case evWorker:
			w := s.workers[e.a]
			return w.dc == d && e.b == w.gen
		}
		return false
	})
}

// clone returns a copy of d for a shadow in sh: its workers cloned (and
// registered in sh.workers under their ids), its local router's rule,
// speed and counters; no index, producer or links, which a shadow does not
// use (publishEvents and arrive read the pools instead).
func (d *dc) clone(sh *simulation) *dc {
	c := &dc{idx: d.idx, site: d.site, name: d.name, local: d.local, active: d.active, speed: d.speed, stats: d.stats}
	c.workers = make([]*worker, len(d.workers))
	for k, w := range d.workers {
		c.workers[k] = w.clone(c)
		sh.workers[w.id] = c.workers[k]
	}
	return c
}

// clairvoyance gathers the foreseen TTFTs of requests from..len-1 against
// what they saw.
func (s *simulation) clairvoyance(from int) *Clairvoyance {
	if s.policy != Clairvoyant {
		return nil
	}
	c := &Clairvoyance{}
	for i := from; i < len(s.reqs); i++ {
		st := &s.reqs[i]
		e := st.ttftMs() - st.foreseenMs
		c.Requests++
		c.MeanErrorMs += e
		switch {
		case e > clairvoyanceTolMs:
			c.Later++
			c.MaxLateMs = max(c.MaxLateMs, e)
		case e < -clairvoyanceTolMs:
			c.Earlier++
		default:
			c.Exact++
		}
	}
	c.MeanErrorMs = ratio(c.MeanErrorMs, float64(c.Requests))
	return c
}
