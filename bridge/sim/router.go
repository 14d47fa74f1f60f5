package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/goindex/score"
)

// router is the global router of one client site: the consumer that keeps
// one replica lane per DC from the relays' frames (each DC's frames reach
// it one way, half the RTT between the two sites, after they leave), the
// searcher that probes every lane at once, and the policy's scorer. audit
// holds, per lane, the exact set of blocks of the events whose images the
// lane has received, so every probe can be checked against the state it
// reflects. Routers share nothing: each sees only its own sends.
type router struct {
	idx  int // index in simulation.routers
	site int // grid index of its site (and its clients')

	table    *replica.Table
	consumer *ingest.Consumer
	searcher *replica.Searcher
	scorer   *score.Scorer
	// model is the TTFT cost model (the TTFT policy's own scorer, or one
	// configured alike): every policy's chosen DC gets its estimate, which
	// the result compares with what the request then saw.
	model *score.Scorer
	audit []blockSet
	all   uint64 // mask of every lane

	// inflight lists, per DC, the requests routed there that its last load
	// report could not have counted yet, oldest first.
	inflight [][]inflight
	// seen and drift are, per lane, the last load report the router read
	// and what the reports showed beyond its own model (score.Drift).
	seen  []seenReport
	drift []*score.Drift
	// cal is, per lane, what the router learned from its requests' first
	// and last tokens (score.Calibration).
	cal []*score.Calibration
	// hold learns how long requests hold their KV at each lane's DC
	// (score.Holding); inserts is, per lane, the rate its DC's cache
	// stores blocks, from the events the router receives.
	hold    *score.Holding
	inserts []score.InsertRate
	// refetch is, per lane, the share of its DC's evicted blocks stored
	// again within a turnover (score.Refetch; with PriceEvictions only),
	// and size the mean prompt the router sends (with PriceKV).
	refetch []*score.Refetch
	size    score.RequestSize
	// demand measures the fleet's utilization from the prefill work the
	// router sends (score.Demand); rhoSum sums what decisions read.
	demand *score.Demand
	rhoSum float64

	byRTT     []int // the DCs by increasing RTT from the router (the clairvoyant's order)
	depth     []uint32
	exact     []int // every DC's exact, current depth
	delivered []int // every ready lane's exact depth of its delivered state
	cands     []score.Candidate
	alt       []score.Candidate
	arrivals  []score.Arrival
	overlaps  []kv.Overlap
}

// inflight is one routed request the router adds to a stale load report.
type inflight struct {
	arriveMs float64 // when it reaches the DC (router's estimate: matrix one-way)
	tokens   uint64  // prompt tokens the router expects to be prefilled
	blocks   uint64
}

// Accuracy compares, at every routing decision, each ready lane's CKF probe
// depth with the exact depth of the same lane's delivered state (the audit
// index), and that with the DC's current exact depth. Depths are the
// longest prefix any worker of the DC holds, in blocks.
type Accuracy struct {
	// Decisions is the routing decisions that probed the replica.
	Decisions int `json:"decisions"`
	// LaneChecks counts (decision, ready lane) pairs compared.
	LaneChecks int `json:"lane_checks"`
	// Overcounts are lanes whose probe depth exceeded the delivered exact
	// depth (fingerprint false positives); OverBlocks sums the excess.
	Overcounts int `json:"overcounts"`
	OverBlocks int `json:"over_blocks"`
	// Undercounts are lanes whose probe depth fell short of the delivered
	// exact depth: a missed tracked block. The CKF promises none except for
	// capacity omissions.
	Undercounts int `json:"undercounts"`
	// CapacityOmissions sums the producers' blocks tracked but never
	// admitted to a filter (stable false negatives).
	CapacityOmissions uint64 `json:"capacity_omissions"`
	// StaleBehind counts lanes whose delivered state was shallower than the
	// DC's current one (blocks stored but not yet across the WAN);
	// StaleAhead the reverse (evictions not yet across).
	StaleBehind int `json:"stale_behind"`
	StaleAhead  int `json:"stale_ahead"`
	// ExactDisagreements counts the decisions of a prefix-aware policy that
	// would have gone elsewhere with every DC's exact, current depth in
	// place of the depths it read (same loads, same tie-break draws): the
	// CKF's and the WAN delay's whole effect on routing, free of the chaos
	// that makes two runs drift apart after one different decision.
	ExactDisagreements int `json:"exact_disagreements"`
	// CKFDisagreements counts the decisions of a policy reading the CKF
	// that would have gone elsewhere with each ready lane's exact depth of
	// its delivered state in place of the probe depth: the CKF's own
	// effect on routing (fingerprint collisions), the WAN delay aside.
	CKFDisagreements int `json:"ckf_disagreements"`
	// MaxLoadFactor is the highest filter occupancy of any producer at the
	// end of the run.
	MaxLoadFactor float64 `json:"max_load_factor"`
	// LanesConverged counts lanes whose words equalled their producer's
	// byte for byte after the final drain (every lane, or the run fails).
	LanesConverged int `json:"lanes_converged"`
}

func (a *Accuracy) observe(probe, delivered, current int) {
	a.LaneChecks++
	switch {
	case probe > delivered:
		a.Overcounts++
		a.OverBlocks += probe - delivered
	case probe < delivered:
		a.Undercounts++
	}
	switch {
	case delivered < current:
		a.StaleBehind++
	case delivered > current:
		a.StaleAhead++
	}
}

func newRouter(c *Config, p Policy, idx, site int, home uint64, f *ckf.Format, lanes []relayproto.PoolID) (*router, error) {
	t, err := replica.New(replica.Config{Lanes: len(lanes), Buckets: f.Buckets()})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	m := relayproto.Manifest{ConsumerInstance: 1, Domain: domain, Format: relayproto.FormatOf(f), Lanes: lanes}
	cons, err := ingest.New(m, t, ingest.Config{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	se, err := replica.NewSearcher(t, f, replica.SearchConfig{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	sc, err := score.New(score.Config{Policy: p.scorePolicy(), BlockSize: c.BlockSize, PrefillTokensPerMs: c.PrefillTokensPerMs, Home: home})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	model := sc
	if p.scorePolicy() != score.TTFT {
		if model, err = score.New(score.Config{Policy: score.TTFT, BlockSize: c.BlockSize, PrefillTokensPerMs: c.PrefillTokensPerMs}); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	rt := &router{idx: idx, site: site, table: t, consumer: cons, searcher: se, scorer: sc, model: model,
		all: ^uint64(0) >> (64 - len(lanes)), inflight: make([][]inflight, len(lanes)), demand: score.NewDemand(0),
		exact: make([]int, len(lanes)), delivered: make([]int, len(lanes))}
	rt.seen = make([]seenReport, len(lanes))
	rt.hold, rt.inserts = score.NewHolding(len(lanes), 0), make([]score.InsertRate, len(lanes))
	for range lanes {
		if c.PriceEvictions && p.forecasts() {
			rt.refetch = append(rt.refetch, score.NewRefetch(c.WorkersPerDC*c.KVBlocksPerWorker, 0))
		}
		rt.drift = append(rt.drift, score.NewDrift(0))
		rt.cal = append(rt.cal, score.NewCalibration(0))
		rt.audit = append(rt.audit, blockSet{})
	}
	return rt, nil
}

// observeRefetch feeds one event of lane l's DC to its Refetch: the
// blocks it evicted, the blocks it stored.
func (rt *router) observeRefetch(l int, ev *kv.Event) {
	switch ev.Kind {
	case kv.Removed:
		for _, h := range ev.Removed {
			rt.refetch[l].Evict(h)
		}
	case kv.Stored:
		for _, b := range ev.Blocks {
			rt.refetch[l].Prefill(b.External)
		}
	}
}

// deepest returns the longest overlap any member of x has with locals.
func (rt *router) deepest(x *radix.Index, locals []uint64) int {
	rt.overlaps = x.Match(rt.overlaps[:0], locals)
	best := 0
	for _, o := range rt.overlaps {
		best = max(best, o.Blocks)
	}
	return best
}

// prefixAware says whether the policy reads prefix depths, so a DC whose
// lane is not ready lacks a signal it needs (ExactNow reads every DC's
// own index and needs no lane).
func (p Policy) prefixAware() bool {
	return p == PrefixThenLoad || p == Credit || p == GORGO || p == TTFT || p == ExactOracle
}

// readsCKF says whether the policy's depths are the replica's probe depths.
func (p Policy) readsCKF() bool {
	return p == PrefixThenLoad || p == Credit || p == GORGO || p == TTFT
}

// decide routes request i at now on router rt, its client site's: it
// probes the replica (every policy does, so every run audits the CKF),
// builds one candidate per DC from the policy's depths, the lane's last
// load report plus the router's own in-flight requests, and the matrix RTT
// from the router's site, and asks the scorer. With no eligible DC the
// request goes to the DC nearest the router (a fallback, counted). It
// returns the DC and the prefix depth the router believed.
func (s *simulation) decide(rt *router, i int, now float64) (int, int, error) {
	r := &s.w.Requests[i]
	depth, ready := rt.searcher.Search(rt.depth, r.Seqs, rt.all)
	rt.depth = depth
	s.acc.Decisions++
	for l, d := range s.dcs {
		rt.exact[l] = rt.deepest(d.index, r.Locals)
		rt.delivered[l] = 0
		if ready&(1<<l) != 0 {
			rt.delivered[l] = rt.audit[l].depth(r.Seqs)
			s.acc.observe(int(depth[l]), rt.delivered[l], rt.exact[l])
		}
	}
	// depthOf is the policy's view of lane l's depth.
	depthOf := func(l int) int {
		switch s.policy {
		case ExactNow, Clairvoyant, ClairvoyantMeanOutput:
			return rt.exact[l]
		case ExactOracle:
			return rt.delivered[l]
		}
		return int(depth[l])
	}
	cands := rt.cands[:0]
	for l, d := range s.dcs {
		c := score.Candidate{ID: uint64(l), HasRTT: true, RTTms: s.rtt(rt.site, d)}
		switch {
		case s.policy == ExactNow || ready&(1<<l) != 0:
			c.CachedBlocks = depthOf(l)
		case s.policy.prefixAware():
			continue
		}
		s.loadSignals(rt, &c, l, now)
		c.EvictionFactor = score.EvictionFactor(float64(c.CapacityBlocks), rt.inserts[l].At(now))
		if rt.refetch != nil {
			c.EvictionFactor = score.CascadeFactor(rt.refetch[l].Share())
		}
		if s.cfg.PriceKV && s.policy.forecasts() {
			c.MeanRequestBlocks = rt.size.MeanBlocks()
		}
		if s.policy.calibrates() && !s.cfg.NoCalibration {
			c.HoldMs = rt.hold.HoldMs(l)
			if s.cfg.Calibrate {
				c.Weights = rt.cal[l].Weights()
			}
		}
		cands = append(cands, c)
	}
	rt.cands = cands
	req := score.Request{ISLTokens: r.InputTokens}
	if s.cfg.PriceOthers {
		req.FleetUtilization = rt.demand.Utilization(now, rt.model.FleetTokensPerMs(cands))
		rt.rhoSum += req.FleetUtilization
	}
	if s.policy.clairvoyant() {
		l, ttft, err := s.foresee(rt, i, now, nil)
		if err != nil {
			return 0, 0, err
		}
		s.reqs[i].foreseenMs = ttft
		for k := range cands {
			if cands[k].ID == uint64(l) {
				s.estimate(rt, i, req, &cands[k])
			}
		}
		return l, rt.exact[l], nil
	}
	res, err := rt.scorer.Score(req, cands, s.draw(i, drawGlobal))
	target := s.nearest[rt.site]
	switch {
	case errors.Is(err, score.ErrNoCandidate):
		s.fallbacks++
	case err != nil:
		return 0, 0, fmt.Errorf("%w: score: %w", ErrEngine, err)
	default:
		target = int(cands[res.Index].ID)
		s.estimate(rt, i, req, &cands[res.Index])
	}
	if s.cfg.Foresight {
		if err := s.foresight(rt, i, req, target, now); err != nil {
			return 0, 0, err
		}
	}
	if s.policy.prefixAware() && s.choiceWith(rt, req, i, rt.exact) != target {
		s.acc.ExactDisagreements++
	}
	if s.policy.readsCKF() && s.choiceWith(rt, req, i, rt.delivered) != target {
		s.acc.CKFDisagreements++
	}
	believed := 0
	if s.policy == ExactNow || ready&(1<<target) != 0 {
		believed = depthOf(target)
	}
	return target, believed, nil
}

// estimate records the TTFT model's parts for request i on its chosen
// candidate c, when c has the signals the model needs.
func (s *simulation) estimate(rt *router, i int, req score.Request, c *score.Candidate) {
	one, err := rt.model.Score(req, []score.Candidate{*c}, nil)
	if err != nil {
		return
	}
	st := &s.reqs[i]
	st.est, st.hasEst = one.Parts, true
	// The model's own terms, unweighted, for the calibration to learn from
	// when the first token comes back.
	raw := *c
	raw.Weights = score.Weights{}
	if one, err = rt.model.Score(req, []score.Candidate{raw}, nil); err == nil {
		st.raw = one.Parts
	}
}

// choiceWith is the DC the policy would pick for request i if every
// candidate DC l carried depths[l] instead, with the same loads and
// tie-break stream.
func (s *simulation) choiceWith(rt *router, req score.Request, i int, depths []int) int {
	rt.alt = append(rt.alt[:0], rt.cands...)
	for k := range rt.alt {
		rt.alt[k].CachedBlocks = depths[rt.alt[k].ID]
	}
	res, err := rt.scorer.Score(req, rt.alt, s.draw(i, drawGlobal))
	if err != nil {
		return s.nearest[rt.site]
	}
	return int(rt.alt[res.Index].ID)
}

// loadSignals fills c's load from router rt's lane l's last load report,
// if it is fresh (no older than the one-way delay plus loadStaleReports
// intervals), plus the requests rt sent since that report was sampled.
func (s *simulation) loadSignals(rt *router, c *score.Candidate, l int, now float64) {
	rep, ok := rt.consumer.Lane(l).LastLoad()
	if !ok {
		return
	}
	sampled := float64(rep.TimestampUnixNano) / 1e6
	oneWay := s.rtt(rt.site, s.dcs[l]) / 2
	if now-sampled > oneWay+loadStaleReports*ms(s.cfg.LoadReportInterval) {
		return
	}
	c.HasLoad = true
	c.ActiveDecodeBlocks = rep.ActiveDecodeBlocks
	c.HasCapacity, c.CapacityBlocks = rep.CapacityBlocks > 0, rep.CapacityBlocks
	c.PrefillTokensPerMs, c.QueueTokensPerMs, c.DecodeBlocksPerMs = rep.PrefillTokensPerMs, rep.QueueTokensPerMs, rep.DecodeBlocksPerMs
	if seen := &rt.seen[l]; sampled > seen.sampledMs {
		// A new report: what the router predicted for its sampling time,
		// from the last one it read and its own sends since, against what
		// it says.
		if seen.ok {
			predicted := score.Backlog(seen.queued, seen.sampledMs, rep.QueueTokensPerMs, rt.arrivalsOf(l), sampled)
			rt.drift[l].Observe(predicted, float64(rep.QueuedPrefillTokens), sampled-seen.sampledMs)
		}
		*seen = seenReport{ok: true, sampledMs: sampled, queued: float64(rep.QueuedPrefillTokens)}
	}
	arrivals := rt.arrivals[:0]
	if !s.cfg.NoInflight {
		fl := rt.inflight[l]
		k := 0
		for k < len(fl) && fl[k].arriveMs <= sampled {
			k++
		}
		fl = fl[k:]
		rt.inflight[l] = fl
		for _, f := range fl {
			c.ActiveDecodeBlocks += f.blocks
			arrivals = append(arrivals, score.Arrival{AtMs: f.arriveMs, Tokens: float64(f.tokens)})
		}
	}
	rt.arrivals = arrivals
	if s.cfg.NoQueueDrain {
		// The report read as current: its queue plus every request sent since.
		queued := float64(rep.QueuedPrefillTokens)
		for _, a := range arrivals {
			queued += a.Tokens
		}
		c.ActivePrefillTokens = uint64(queued)
		return
	}
	// The queue the request will find when it arrives (matrix one-way):
	// the report's, plus the requests sent since, drained meanwhile.
	arrive := now + oneWay
	queued := score.Backlog(float64(rep.QueuedPrefillTokens), sampled, rep.QueueTokensPerMs, arrivals, arrive)
	if s.policy.forecasts() && !s.cfg.NoDrift {
		// ttft's own forecast: what the reports show beyond the router's
		// model (other routers' sends, a drain slower or faster than
		// reported) keeps coming at its learned rate until the request
		// arrives, with the spread of that guess.
		d := rt.drift[l]
		queued = max(queued+d.Rate()*(arrive-sampled), 0)
		c.QueueSpreadTokens = d.Spread(arrive - sampled)
	}
	c.ActivePrefillTokens = uint64(math.Round(queued))
}

// arrivalsOf lists the router's in-flight sends to lane l as Arrivals.
func (rt *router) arrivalsOf(l int) []score.Arrival {
	rt.arrivals = rt.arrivals[:0]
	for _, f := range rt.inflight[l] {
		rt.arrivals = append(rt.arrivals, score.Arrival{AtMs: f.arriveMs, Tokens: float64(f.tokens)})
	}
	return rt.arrivals
}

// seenReport is the last load report a router read from a lane.
type seenReport struct {
	ok        bool
	sampledMs float64
	queued    float64
}

// forecasts says whether the policy is ttft's cost model, which forecasts
// each queue with score.Drift; the baselines read every load signal as the
// drained report.
func (p Policy) forecasts() bool {
	return p == TTFT || p == TTFTUncalibrated || p == ExactOracle || p == ExactNow
}

// calibrates says whether the policy scales its estimates by what its
// router learned from first-token times (score.Calibration).
func (p Policy) calibrates() bool { return p == TTFT || p == ExactOracle || p == ExactNow }

// feedback is what router rt learns when request i's first token (first
// true) or last token reaches its client, as a proxy sees both: the TTFT
// against the estimate's terms, or how long the request held its KV
// blocks: from its admission (the estimated prefill before the first
// token, since admission is not seen) to its last token.
func (s *simulation) feedback(i int, first bool) {
	st := &s.reqs[i]
	if !s.policy.calibrates() || s.cfg.NoCalibration || !st.hasEst {
		return
	}
	rt := s.routers[s.routerAt[s.topo.origin[i]]]
	if first {
		rt.cal[st.dc].ObserveTTFT(st.raw, st.ttftMs())
		return
	}
	rt.hold.ObserveStream(st.dc, st.doneMs-st.rttMs/2-st.firstTokenMs, st.raw.PrefillMs, float64(st.blocks))
}

// routed records request i, sent by router rt to DC l believing a cached
// prefix of believed blocks, for rt's demand and in-flight accounting.
func (s *simulation) routed(rt *router, i, l, believed int, now float64) {
	r := &s.w.Requests[i]
	tokens := r.InputTokens - min(believed*s.w.BlockSize, r.InputTokens-1)
	rt.demand.Add(now, float64(tokens))
	rt.size.Observe(float64(len(r.Locals)))
	if rt.refetch != nil {
		// Every block the request will prefill again at l is a refetch of
		// any DC that evicted it lately (l's own store counts it too).
		for _, h := range r.Seqs[min(believed, len(r.Seqs)):] {
			for _, f := range rt.refetch {
				f.Prefill(h)
			}
		}
	}
	if s.cfg.NoInflight {
		return
	}
	rt.inflight[l] = append(rt.inflight[l], inflight{
		arriveMs: now + s.rtt(rt.site, s.dcs[l])/2, tokens: uint64(tokens), blocks: uint64(s.reqs[i].blocks),
	})
}

// blockSet is an exact, cheap index of what a DC's events say it caches:
// how many of its workers hold each block, by sequence hash. Every worker's
// cache is prefix-closed (kvpool.go), so a prompt's longest prefix held by
// one worker is its longest prefix of blocks held by any, which is what a
// radix index's deepest overlap gives, without a radix index's arena per
// (router, lane).
type blockSet map[uint64]int32

// apply counts one event's blocks in or out.
func (b blockSet) apply(ev *kv.Event) error {
	switch ev.Kind {
	case kv.Stored:
		for _, blk := range ev.Blocks {
			b[blk.External]++
		}
	case kv.Removed:
		for _, h := range ev.Removed {
			n, ok := b[h]
			if !ok {
				return fmt.Errorf("removal of block %#x nobody holds", h)
			}
			if n == 1 {
				delete(b, h)
			} else {
				b[h] = n - 1
			}
		}
	default:
		return fmt.Errorf("unexpected %v event", ev.Kind)
	}
	return nil
}

// depth is the number of leading blocks of seqs the set holds.
func (b blockSet) depth(seqs []uint64) int {
	for k, h := range seqs {
		if b[h] == 0 {
			return k
		}
	}
	return len(seqs)
}
