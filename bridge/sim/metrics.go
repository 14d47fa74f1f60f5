package sim

import (
	"math"
	"slices"
)

// Result is one policy's outcome. Latencies are at the client, which sits
// at the router site: TTFT is the request's one-way trip to the DC, its
// wait for admission and for the worker's earlier prefills, the prefill of
// its uncached tokens, and the first token's trip back; end-to-end adds
// the decode of the remaining tokens.
type Result struct {
	Policy    string `json:"policy"`
	Requests  int    `json:"requests"`
	Completed int    `json:"completed"`
	// SimulatedSeconds runs from the first send to the last completion.
	SimulatedSeconds float64 `json:"simulated_s"`
	// ThroughputRPS is Completed / SimulatedSeconds.
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

	// PrefillUtilization is the workers' prefill time over their number
	// times SimulatedSeconds: the share of the fleet's prefill capacity the
	// run used (decoding is not counted; it never waits for prefill).
	PrefillUtilization float64 `json:"prefill_utilization"`

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

	// WANHops counts requests served outside the router-site DC.
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

	CKF   Accuracy   `json:"ckf"`
	Relay RelayStats `json:"relay"`
	PerDC []DCResult `json:"per_dc"`

	WallSeconds float64 `json:"wall_s"`

	// TTFTsMs holds every request's TTFT, ascending (for CDFs).
	TTFTsMs []float64 `json:"-"`
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

// DCResult is one DC's share of a policy's run.
type DCResult struct {
	Name     string  `json:"name"`
	RTTms    float64 `json:"rtt_ms"`
	Requests int     `json:"requests"`
	HitRate  float64 `json:"hit_rate"`
	BusyS    float64 `json:"busy_s"`
}

// LoadSeries samples every DC's requests in flight (arrived, not finished)
// every Config.SampleInterval: Active[dc][k] at AtSeconds[k] after the
// first send.
type LoadSeries struct {
	AtSeconds []float64
	Active    [][]int
}

// result summarises a finished run.
func (s *simulation) result() *Result {
	n := len(s.reqs)
	res := &Result{Policy: s.policy.String(), Requests: n, Completed: s.completed, Fallbacks: s.fallbacks, CKF: s.acc, Load: s.samples}
	ttft := make([]float64, 0, n)
	e2e := make([]float64, 0, n)
	queue := make([]float64, 0, n)
	var rtt, prefill, believed float64
	var est Estimate
	last := s.startMs
	for i := range s.reqs {
		st := &s.reqs[i]
		r := &s.w.Requests[i]
		believed += float64(min(st.believed*s.w.BlockSize, r.InputTokens-1))
		if st.hasEst {
			e := st.est.RTTms + st.est.QueueMs + st.est.PrefillMs - st.ttftMs()
			est.Requests++
			est.BiasMs += e
			est.AbsErrorMs += math.Abs(e)
			est.QueueBiasMs += st.est.QueueMs - (st.prefillStartMs - st.arriveMs)
			est.PrefillBiasMs += st.est.PrefillMs - (st.firstTokenMs - st.prefillStartMs)
		}
		ttft = append(ttft, st.ttftMs())
		e2e = append(e2e, st.doneMs-st.sentMs)
		queue = append(queue, st.prefillStartMs-st.arriveMs)
		rtt += st.rttMs
		prefill += st.firstTokenMs - st.prefillStartMs
		last = max(last, st.doneMs)
		if st.dc != s.home {
			res.WANHops++
		}
	}
	slices.Sort(ttft)
	slices.Sort(e2e)
	slices.Sort(queue)
	res.TTFTsMs = ttft
	res.SimulatedSeconds = (last - s.startMs) / 1000
	if res.SimulatedSeconds > 0 {
		res.ThroughputRPS = float64(s.completed) / res.SimulatedSeconds
	}
	res.TTFTMeanMs = mean(ttft)
	res.TTFTp50Ms, res.TTFTp95Ms, res.TTFTp99Ms = percentile(ttft, 50), percentile(ttft, 95), percentile(ttft, 99)
	res.E2Ep50Ms, res.E2Ep95Ms = percentile(e2e, 50), percentile(e2e, 95)
	res.QueueMeanMs, res.QueueP95Ms = mean(queue), percentile(queue, 95)
	res.PrefillMeanMs = prefill / float64(n)
	res.MeanRTTms = rtt / float64(n)
	var busyMax, busySum float64
	for _, d := range s.dcs {
		busy := 0.0
		for _, w := range d.workers {
			w.settle(s.now)
			busy += w.busyMs
		}
		busyMax, busySum = max(busyMax, busy), busySum+busy
		res.PromptTokens += d.stats.promptTokens
		res.HitTokens += d.stats.hitTokens
		res.Relay.add(d.stats.relay)
		res.PerDC = append(res.PerDC, DCResult{Name: d.name, RTTms: d.rttMs, Requests: d.stats.requests,
			HitRate: ratio(float64(d.stats.hitTokens), float64(d.stats.promptTokens)), BusyS: busy / 1000})
		st := d.prod.Stats()
		res.CKF.CapacityOmissions += st.CapacityOmissions
		res.CKF.MaxLoadFactor = max(res.CKF.MaxLoadFactor, st.LoadFactor)
	}
	res.HitRate = ratio(float64(res.HitTokens), float64(res.PromptTokens))
	res.BelievedHitRate = ratio(believed, float64(res.PromptTokens))
	res.PrefillUtilization = ratio(prefill, float64(len(s.dcs)*s.cfg.WorkersPerDC)*(last-s.startMs))
	if k := float64(est.Requests); k > 0 {
		est.BiasMs, est.AbsErrorMs, est.QueueBiasMs, est.PrefillBiasMs = est.BiasMs/k, est.AbsErrorMs/k, est.QueueBiasMs/k, est.PrefillBiasMs/k
	}
	res.Estimate = est
	res.LoadImbalance = ratio(busyMax, busySum/float64(len(s.dcs)))
	return res
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
