package sim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/goindex/goindex/goindex/score"
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
// (with Config.Foresight, the TTFT the shadows foresaw at the DC the policy
// chose) with what each measured request then saw.
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
//
// With all not nil, every DC's TTFT is computed to the end (no shadow
// stops early) and stored in all, indexed by DC, with its parts.
func (s *simulation) foresee(rt *router, i int, now float64, all []truth) (int, float64, error) {
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
		bound := bestMs
		if all != nil {
			bound = math.Inf(1)
		}
		ttft, err := s.firstToken(sh, l, i, now, s.rtt(rt.site, s.dcs[l])+jitter, bound)
		if err != nil {
			return 0, 0, err
		}
		if all != nil {
			st := &sh.reqs[i]
			all[l] = truth{ttftMs: ttft, queueMs: st.prefillStartMs - st.arriveMs, prefillMs: st.firstTokenMs - st.prefillStartMs}
		}
		if ttft < bestMs {
			best, bestMs = l, ttft
		}
	}
	return best, bestMs, nil
}

// clairvoyant says whether the policy routes by shadows.
func (p Policy) clairvoyant() bool { return p == Clairvoyant || p == ClairvoyantMeanOutput }

// shadowSim returns the simulation the clairvoyant's shadows run in,
// built on first use: it shares the run's configuration and topology
// (read-only) and owns everything a shadow changes. Its workload is the
// run's, or for ClairvoyantMeanOutput a copy in which every request
// decodes the workload's mean output length.
func (s *simulation) shadowSim() *simulation {
	if s.shade == nil {
		s.shade = &simulation{cfg: s.cfg, w: s.w, policy: s.policy, topo: s.topo, shadow: true,
			dcs: make([]*dc, len(s.dcs)), workers: make([]*worker, len(s.workers)),
			workerDepth: make([]int, len(s.workerDepth))}
		if s.policy == ClairvoyantMeanOutput {
			s.shade.w = meanOutput(s.w)
		}
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
	if sh.w == s.w {
		return
	}
	// The shadow's requests decode other lengths than the run's: every
	// decoding sequence's next milestone is set again from where it is
	// now, and the worker's next change with it at the same rates (which
	// voids the one taken from the run's queue).
	for _, w := range sh.dcs[l].workers {
		sh.advance(w, s.now)
		w.marks = w.marks[:0]
		for _, j := range w.order {
			if !slices.Contains(w.prefillQ, j) {
				sh.pushMark(w, j) // a decode already past its shadow length ends now
			}
		}
		sh.schedule(w)
	}
}

// meanOutput returns a copy of w in which every request's output length
// is w's mean (at least 1).
func meanOutput(w *Workload) *Workload {
	c := &Workload{BlockSize: w.BlockSize, Requests: slices.Clone(w.Requests)}
	sum := 0
	for _, r := range w.Requests {
		sum += r.OutputTokens
	}
	for k := range c.Requests {
		c.Requests[k].OutputTokens = max(1, (sum+len(w.Requests)/2)/len(w.Requests))
	}
	return c
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

// clairvoyance gathers the foreseen TTFTs of requests from..len-1 at the
// DCs they went to (the clairvoyant's, or Foresight's for any policy)
// against what they saw.
func (s *simulation) clairvoyance(from int) *Clairvoyance {
	if !s.policy.clairvoyant() && !s.cfg.Foresight {
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

// Foresight (Config.Foresight) measures a policy's TTFT model against the
// truth: at every decision the clairvoyant's shadows give the TTFT the
// request would get at every DC, which the TTFT model's estimate for each
// candidate DC (the router's signals, as the run's policy read them) is
// compared with, grouped by how much KV the DC's requests need, and the
// policy's choice with the best DC. Figures cover the measured requests.
type Foresight struct {
	// Decisions counts the measured decisions; BestChosen those whose DC
	// had the least true TTFT (ties within a microsecond count as best).
	Decisions  int `json:"decisions"`
	BestChosen int `json:"best_chosen"`
	// RegretMeanMs and RegretP95Ms describe the true TTFT at the chosen DC
	// minus the least true TTFT of any DC.
	RegretMeanMs float64 `json:"regret_mean_ms"`
	RegretP95Ms  float64 `json:"regret_p95_ms"`
	// ByPressure is the model's error (estimate − true TTFT) by the KV
	// pressure of the DC at the decision: the blocks its running requests
	// hold plus those its waiting requests need, over its capacity (above
	// 1, admission waits for KV whatever the compute).
	ByPressure []PressureError `json:"by_kv_pressure"`
}

// PressureError is the TTFT model's error over the (decision, DC) pairs of
// one KV-pressure band [From, To).
type PressureError struct {
	From      float64 `json:"from"`
	To        float64 `json:"to,omitempty"` // 0: no upper bound
	Estimates int     `json:"estimates"`
	BiasMs    float64 `json:"bias_ms"` // mean of estimate − true
	// QueueBiasMs and PrefillBiasMs are the mean errors of the queue and
	// prefill terms against the request's wait between reaching the DC and
	// its prefill's start, and its prefill time there.
	QueueBiasMs   float64 `json:"queue_bias_ms"`
	PrefillBiasMs float64 `json:"prefill_bias_ms"`
	SpreadMs      float64 `json:"spread_ms"`    // standard deviation of estimate − true
	AbsErrorMs    float64 `json:"abs_error_ms"` // mean |estimate − true|
	TrueMeanMs    float64 `json:"true_mean_ms"`
}

// truth is what a shadow found for a request at one DC: its TTFT, its
// wait between reaching the DC and its prefill's start, and its prefill.
type truth struct {
	ttftMs, queueMs, prefillMs float64
}

// pressureBands are the bands of Foresight.ByPressure.
var pressureBands = []float64{0, 0.5, 0.9, 1.1, 2, math.Inf(1)}

// sightError is one (decision, DC) comparison of Foresight: the KV
// pressure, the TTFT model's TTFT, queue and prefill errors, and the true
// TTFT.
type sightError struct {
	req                                               int
	pressure, errMs, queueErrMs, prefillErrMs, trueMs float64
}

// foresight compares, for request i routed by rt to target, the TTFT
// model's estimate for every candidate DC (rt.cands) with the TTFT the
// request would get there, and records the regret of the choice.
func (s *simulation) foresight(rt *router, i int, req score.Request, target int, now float64) error {
	if cap(s.truth) < len(s.dcs) {
		s.truth = make([]truth, len(s.dcs))
	}
	all := s.truth[:len(s.dcs)]
	_, bestMs, err := s.foresee(rt, i, now, all)
	if err != nil {
		return err
	}
	s.reqs[i].foreseenMs, s.reqs[i].regretMs = all[target].ttftMs, all[target].ttftMs-bestMs
	for k := range rt.cands {
		c := rt.cands[k]
		one, err := rt.model.Score(req, []score.Candidate{c}, nil)
		if err != nil {
			continue // a DC without the signals the model needs
		}
		l, p := int(c.ID), one.Parts
		s.sight = append(s.sight, sightError{req: i, pressure: s.kvPressure(s.dcs[l]), errMs: p.TTFTms() - all[l].ttftMs,
			queueErrMs: p.QueueMs - all[l].queueMs, prefillErrMs: p.PrefillMs - all[l].prefillMs, trueMs: all[l].ttftMs})
	}
	return nil
}

// kvPressure is DC d's KV pressure now: the blocks its running requests
// hold plus the blocks its waiting requests need, over its capacity.
func (s *simulation) kvPressure(d *dc) float64 {
	var need float64
	for _, w := range d.workers {
		need += float64(w.pool.held())
		for _, j := range w.waiting {
			need += float64(s.blocksNeeded(j, s.reqs[j].generated))
		}
	}
	return need / float64(len(d.workers)*s.cfg.KVBlocksPerWorker)
}

// foresightOf summarises the Foresight of requests from..len-1 (nil when
// the run measured none).
func (s *simulation) foresightOf(from int) *Foresight {
	if !s.cfg.Foresight || s.policy.clairvoyant() {
		return nil
	}
	f := &Foresight{}
	var regrets []float64
	for i := from; i < len(s.reqs); i++ {
		r := s.reqs[i].regretMs
		regrets = append(regrets, r)
		if r <= clairvoyanceTolMs {
			f.BestChosen++
		}
	}
	f.Decisions = len(regrets)
	slices.Sort(regrets)
	f.RegretMeanMs, f.RegretP95Ms = mean(regrets), percentile(regrets, 95)
	for b := range len(pressureBands) - 1 {
		pe := PressureError{From: pressureBands[b], To: pressureBands[b+1]}
		var sum, sq, abs, trueSum, qSum, pSum float64
		for _, e := range s.sight {
			if e.req < from || e.pressure < pe.From || e.pressure >= pe.To {
				continue
			}
			pe.Estimates++
			sum, sq, abs, trueSum = sum+e.errMs, sq+e.errMs*e.errMs, abs+math.Abs(e.errMs), trueSum+e.trueMs
			qSum, pSum = qSum+e.queueErrMs, pSum+e.prefillErrMs
		}
		if n := float64(pe.Estimates); n > 0 {
			pe.BiasMs, pe.AbsErrorMs, pe.TrueMeanMs = sum/n, abs/n, trueSum/n
			pe.QueueBiasMs, pe.PrefillBiasMs = qSum/n, pSum/n
			pe.SpreadMs = math.Sqrt(max(sq/n-pe.BiasMs*pe.BiasMs, 0))
		}
		if math.IsInf(pe.To, 1) {
			pe.To = 0
		}
		f.ByPressure = append(f.ByPressure, pe)
	}
	return f
}
