package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Result is one policy's outcome. Latencies are at the client, which sits
// at the router site: TTFT is the request's one-way trip to the DC, its
// wait for admission and for the worker's earlier prefills, the prefill of
// its uncached tokens, and the first token's trip back; end-to-end adds
// the decode of the remaining tokens.
//
// The per-request figures (throughput, latencies, queue and prefill, hit
// rates, estimate, WAN hops, RTT) count the measured requests: all but the
// first WarmupRequests of the trace (Config.Warmup). AllRequests repeats
// the headline figures over every request. Utilization, load imbalance,
// the per-DC figures, the CKF audit and the relay counters cover the whole
// run.
type Result struct {
	Policy    string `json:"policy"`
	Requests  int    `json:"requests"`
	Completed int    `json:"completed"`
	// Capacity is what the policy ran on: every policy gets the same
	// workers and KV except single-dc-slice.
	Capacity Capacity `json:"capacity"`
	// WarmupRequests is how many requests at the start of the trace the
	// per-request figures leave out.
	WarmupRequests int `json:"warmup_requests"`
	// SimulatedSeconds runs from the first send to the last completion.
	SimulatedSeconds float64 `json:"simulated_s"`
	// ThroughputRPS is the measured requests over the time from the first
	// one's send to the last completion.
	ThroughputRPS float64 `json:"throughput_rps"`

	TTFTMeanMs float64 `json:"ttft_mean_ms"`
	TTFTp50Ms  float64 `json:"ttft_p50_ms"`
	TTFTp95Ms  float64 `json:"ttft_p95_ms"`
	TTFTp99Ms  float64 `json:"ttft_p99_ms"`
	E2Ep50Ms   float64 `json:"e2e_p50_ms"`
	E2Ep95Ms   float64 `json:"e2e_p95_ms"`
	// QueueMeanMs and QueueP95Ms describe the wait between reaching the DC
	// and starting prefill (admission plus earlier prefills); PrefillMeanMs
	// is the mean prefill time. With MeanRTTms they decompose mean TTFT.
	QueueMeanMs   float64 `json:"queue_mean_ms"`
	QueueP95Ms    float64 `json:"queue_p95_ms"`
	PrefillMeanMs float64 `json:"prefill_mean_ms"`

	// FleetUtilizationMean is the mean fleet utilization the router
	// measured (score.Demand) at its decisions; 0 without PriceOthers.
	FleetUtilizationMean float64 `json:"fleet_utilization_mean"`
	// PrefillUtilization is the time the workers had prefill work over
	// their number times SimulatedSeconds: the share of the fleet's
	// prefill capacity the run used (decoding alone is not counted).
	PrefillUtilization float64 `json:"prefill_utilization"`
	// Preemptions counts the sequences preempted for KV memory (each is
	// recomputed when readmitted).
	Preemptions int `json:"preemptions"`

	// HitRate is cached prompt tokens over prompt tokens.
	HitRate      float64 `json:"hit_rate"`
	PromptTokens int64   `json:"prompt_tokens"`
	HitTokens    int64   `json:"hit_tokens"`
	// BelievedHitRate is the prompt tokens the global router counted on
	// finding cached at the DC it chose, over prompt tokens; HitRate is
	// what the prefills found on the worker the DC's router chose.
	BelievedHitRate float64 `json:"believed_hit_rate"`
	// Estimate compares the TTFT model's estimate for each request's
	// chosen DC with what the request then saw.
	Estimate Estimate `json:"estimate"`
	// Clairvoyance compares the clairvoyant's foreseen TTFTs with what
	// the requests saw (the clairvoyant policy, or any with Foresight).
	Clairvoyance *Clairvoyance `json:"clairvoyance,omitempty"`
	// Foresight measures the TTFT model and the policy's choices against
	// every DC's true TTFT (Config.Foresight only).
	Foresight *Foresight `json:"foresight,omitempty"`

	// WANHops counts requests served outside their client's site.
	WANHops int `json:"wan_hops"`
	// MeanRTTms is the mean round trip the requests paid, jitter included.
	MeanRTTms float64 `json:"mean_rtt_ms"`
	// LoadImbalance is the busiest DC's busy time over the mean DC's (1 is
	// perfect balance, the DC count is everything in one DC). A worker is
	// busy while it prefills or decodes anything; a DC's busy time sums its
	// workers'.
	LoadImbalance float64 `json:"load_imbalance"`
	// Fallbacks counts requests no DC was eligible for (sent home).
	Fallbacks int `json:"fallbacks"`

	// AllRequests is the headline figures over every request, warm-up
	// included.
	AllRequests Headline `json:"all_requests"`

	CKF   Accuracy   `json:"ckf"`
	Relay RelayStats `json:"relay"`
	PerDC []DCResult `json:"per_dc"`

	WallSeconds float64 `json:"wall_s"`

	// TTFTsMs holds every request's TTFT, ascending (for CDFs).
	TTFTsMs []float64 `json:"-"`
	// Sends lists every request in send order: when it left (s after the
	// first send) and the DC it went to (for charts over time).
	Sends []Send `json:"-"`
	// Load is the per-DC load over time (for charts).
	Load LoadSeries `json:"-"`
}

// Estimate is how well the TTFT cost model (score's TTFT policy, fed the
// same signals as the run's router) predicted the requests' TTFT at the
// DCs they went to, whatever policy chose them. Biases are means of
// estimate − actual: positive means the model was pessimistic.
type Estimate struct {
	// Requests counts the requests whose chosen DC had every signal the
	// model needs (load and RTT).
	Requests int `json:"requests"`
	// BiasMs and AbsErrorMs are the mean and mean absolute error of the
	// TTFT estimate.
	BiasMs     float64 `json:"bias_ms"`
	AbsErrorMs float64 `json:"abs_error_ms"`
	// QueueBiasMs compares the queue estimate with the wait between
	// reaching the DC and starting prefill; PrefillBiasMs the prefill
	// estimate with the prefill time (which reflects the cached prefix of
	// the worker the DC's router picked).
	QueueBiasMs   float64 `json:"queue_bias_ms"`
	PrefillBiasMs float64 `json:"prefill_bias_ms"`
}

// Send is one request's send time (s after the first send), DC index,
// TTFT and the TTFT model's estimate for it (HasEst when the DC had the
// signals the model needs).
type Send struct {
	AtSeconds     float64
	DC            int
	TTFTMs, EstMs float64
	HasEst        bool
}

// Capacity is the serving capacity of one policy's run.
type Capacity struct {
	DCs      int   `json:"dcs"`
	Workers  int   `json:"workers"`   // workers that served requests (single-dc-slice: one DC's)
	KVBlocks int64 `json:"kv_blocks"` // their KV blocks in all
}

// String is "W workers in D DCs".
func (c Capacity) String() string {
	if c.DCs == 1 {
		return fmt.Sprintf("%d workers in 1 DC", c.Workers)
	}
	return fmt.Sprintf("%d workers in %d DCs", c.Workers, c.DCs)
}

// Headline is a run's main figures over a set of requests.
type Headline struct {
	Requests      int     `json:"requests"`
	ThroughputRPS float64 `json:"throughput_rps"`
	TTFTp50Ms     float64 `json:"ttft_p50_ms"`
	TTFTp95Ms     float64 `json:"ttft_p95_ms"`
	TTFTp99Ms     float64 `json:"ttft_p99_ms"`
	E2Ep95Ms      float64 `json:"e2e_p95_ms"`
	HitRate       float64 `json:"hit_rate"`
}

// DCResult is one DC's share of a policy's run: its requests, the mean RTT
// they paid (the matrix mean from their clients' sites, jitter aside),
// their hit rate and the DC's busy seconds.
type DCResult struct {
	Name     string  `json:"name"`
	RTTms    float64 `json:"rtt_ms"`
	Requests int     `json:"requests"`
	HitRate  float64 `json:"hit_rate"`
	BusyS    float64 `json:"busy_s"`
}

// LoadSeries samples every DC's requests in flight (arrived, not finished)
// every Config.SampleInterval: Active[dc][k] at AtSeconds[k] after the
// first send. For a calibrating policy, PrefillWeight[dc][k] is the
// compute factor the routers had learned for the DC then (each router's
// weighted by the requests it learned from; 0 before any).
type LoadSeries struct {
	AtSeconds     []float64
	Active        [][]int
	PrefillWeight [][]float64
}

// result summarises a finished run; the first warm requests are left out
// of the per-request figures.
func (s *simulation) result(warm int) *Result {
	n := len(s.reqs)
	res := &Result{Policy: s.policy.String(), Requests: n, Completed: s.completed, WarmupRequests: warm,
		Fallbacks: s.fallbacks, CKF: s.acc, Load: s.samples}
	measured := s.summarize(warm)
	all := s.summarize(0)
	res.AllRequests = all.headline()
	ttft, e2e := measured.ttft, measured.e2e
	k := float64(len(ttft))
	res.TTFTsMs = ttft
	res.Sends = make([]Send, len(s.reqs))
	for i := range s.reqs {
		st := &s.reqs[i]
		res.Sends[i] = Send{AtSeconds: (st.sentMs - s.startMs) / 1000, DC: st.dc, TTFTMs: st.ttftMs(), EstMs: st.est.TTFTms(), HasEst: st.hasEst}
	}
	slices.SortStableFunc(res.Sends, func(a, b Send) int { return cmp.Compare(a.AtSeconds, b.AtSeconds) })
	res.SimulatedSeconds = (all.last - s.startMs) / 1000
	res.ThroughputRPS = measured.headline().ThroughputRPS
	res.TTFTMeanMs = mean(ttft)
	res.TTFTp50Ms, res.TTFTp95Ms, res.TTFTp99Ms = percentile(ttft, 50), percentile(ttft, 95), percentile(ttft, 99)
	res.E2Ep50Ms, res.E2Ep95Ms = percentile(e2e, 50), percentile(e2e, 95)
	res.QueueMeanMs, res.QueueP95Ms = mean(measured.queue), percentile(measured.queue, 95)
	res.PrefillMeanMs = measured.prefill / k
	res.MeanRTTms = measured.rtt / k
	res.WANHops = measured.wanHops
	res.PromptTokens, res.HitTokens = measured.prompt, measured.hit
	res.HitRate = ratio(float64(measured.hit), float64(measured.prompt))
	res.BelievedHitRate = ratio(measured.believed, float64(measured.prompt))
	res.Estimate = measured.est
	res.Clairvoyance = s.clairvoyance(warm)
	res.Foresight = s.foresightOf(warm)
	var busyMax, busySum, prefillMs float64
	for _, d := range s.dcs {
		busy := 0.0
		for _, w := range d.workers {
			s.advance(w, s.now)
			busy += w.busyMs
			prefillMs += w.prefillMs
		}
		res.Preemptions += d.stats.preemptions
		busyMax, busySum = max(busyMax, busy), busySum+busy
		res.Relay.add(d.stats.relay)
		res.PerDC = append(res.PerDC, DCResult{Name: d.name, RTTms: ratio(d.stats.rttMs, float64(d.stats.requests)), Requests: d.stats.requests,
			HitRate: ratio(float64(d.stats.hitTokens), float64(d.stats.promptTokens)), BusyS: busy / 1000})
		st := d.prod.Stats()
		res.CKF.CapacityOmissions += st.CapacityOmissions
		res.CKF.MaxLoadFactor = max(res.CKF.MaxLoadFactor, st.LoadFactor)
	}
	rhoSum := 0.0
	for _, rt := range s.routers {
		rhoSum += rt.rhoSum
	}
	res.FleetUtilizationMean = ratio(rhoSum, float64(s.acc.Decisions))
	res.Capacity = Capacity{DCs: len(s.dcs), Workers: len(s.workers)}
	if s.policy == SingleDCSlice {
		res.Capacity = Capacity{DCs: 1, Workers: len(s.dcs[0].workers)}
	}
	res.Capacity.KVBlocks = int64(res.Capacity.Workers) * int64(s.cfg.KVBlocksPerWorker)
	res.PrefillUtilization = ratio(prefillMs, float64(len(s.workers))*(all.last-s.startMs))
	res.LoadImbalance = ratio(busyMax, busySum/float64(len(s.dcs)))
	return res
}

// summary is the per-request figures of the requests from some index on.
type summary struct {
	ttft, e2e, queue []float64 // ascending
	rtt, prefill     float64   // sums, ms
	believed         float64   // tokens
	prompt, hit      int64     // tokens
	wanHops          int
	firstSent, last  float64 // first send and last completion, ms
	est              Estimate
}

// summarize gathers the figures of requests from..len-1.
func (s *simulation) summarize(from int) summary {
	m := summary{firstSent: math.Inf(1), last: s.startMs}
	var est Estimate
	for i := from; i < len(s.reqs); i++ {
		st := &s.reqs[i]
		r := &s.w.Requests[i]
		m.believed += float64(min(st.believed*s.w.BlockSize, r.InputTokens-1))
		if st.hasEst {
			e := st.est.RTTms + st.est.QueueMs + st.est.PrefillMs - st.ttftMs()
			est.Requests++
			est.BiasMs += e
			est.AbsErrorMs += math.Abs(e)
			est.QueueBiasMs += st.est.QueueMs - (st.prefillStartMs - st.arriveMs)
			est.PrefillBiasMs += st.est.PrefillMs - (st.firstTokenMs - st.prefillStartMs)
		}
		m.ttft = append(m.ttft, st.ttftMs())
		m.e2e = append(m.e2e, st.doneMs-st.sentMs)
		m.queue = append(m.queue, st.prefillStartMs-st.arriveMs)
		m.rtt += st.rttMs
		m.prefill += st.firstTokenMs - st.prefillStartMs
		m.prompt += int64(r.InputTokens)
		m.hit += int64(st.hitTokens)
		m.firstSent = min(m.firstSent, st.sentMs)
		m.last = max(m.last, st.doneMs)
		if s.dcs[st.dc].site != s.topo.origin[i] {
			m.wanHops++
		}
	}
	slices.Sort(m.ttft)
	slices.Sort(m.e2e)
	slices.Sort(m.queue)
	if k := float64(est.Requests); k > 0 {
		est.BiasMs, est.AbsErrorMs, est.QueueBiasMs, est.PrefillBiasMs = est.BiasMs/k, est.AbsErrorMs/k, est.QueueBiasMs/k, est.PrefillBiasMs/k
	}
	m.est = est
	return m
}

// headline returns m's main figures.
func (m *summary) headline() Headline {
	h := Headline{Requests: len(m.ttft), TTFTp50Ms: percentile(m.ttft, 50), TTFTp95Ms: percentile(m.ttft, 95),
		TTFTp99Ms: percentile(m.ttft, 99), E2Ep95Ms: percentile(m.e2e, 95), HitRate: ratio(float64(m.hit), float64(m.prompt))}
	if span := m.last - m.firstSent; span > 0 {
		h.ThroughputRPS = float64(len(m.ttft)) / (span / 1000)
	}
	return h
}

// percentile returns the nearest-rank p-th percentile of ascending xs.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(xs)))) - 1
	return xs[min(max(k, 0), len(xs)-1)]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
