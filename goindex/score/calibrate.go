package score

import (
	"math"
	"sync"
	"time"
)

// Calibration defaults.
const (
	// DefaultCalibrationMemory is how many recent requests Calibration's
	// estimate weighs (exponential forgetting of 1 − 1/memory per request):
	// a few minutes of one DC's traffic from one router at a request or
	// two per second, enough that the queueing noise of single TTFTs
	// (hundreds of ms) averages out of a factor that has to be right to a
	// few percent.
	DefaultCalibrationMemory = 100
	// calibrationPrior is the weight, in requests, of the prior belief that
	// the configured model is right (factor 1): it keeps the first few
	// noisy requests from swinging the factor.
	calibrationPrior = 10
	// calibrationZ is how many standard errors a learned factor must stand
	// away from 1 to be used (about a 95% two-sided test).
	calibrationZ = 2
	// MinWeight and MaxWeight bound a learned weight: a DC ten times faster
	// or slower than its configuration is a broken configuration to fix,
	// not one to learn.
	MinWeight = 0.1
	MaxWeight = 10
	// DefaultResidenceWindow is the time constant of the residence mean:
	// long enough to average a few dozen requests of a busy DC, short
	// enough to follow a change of output lengths.
	DefaultResidenceWindow = 30 * time.Second
)

// Weights scale a candidate's TTFT terms: the router's model, learned per
// candidate by Calibration. A zero weight means 1 (no correction).
type Weights struct {
	RTT, Queue, Prefill float64
}

func (w Weights) rtt() float64     { return orDefault(w.RTT, 1) }
func (w Weights) queue() float64   { return orDefault(w.Queue, 1) }
func (w Weights) prefill() float64 { return orDefault(w.Prefill, 1) }

// Calibration learns, for one candidate, how far its configured
// throughput is off, from the first-token times a router observes (the
// proxy sees every stream's first token). The queue wait and the prefill
// are both the candidate's compute at work (the queue drains at the rate
// prefills run), so one factor θ scales both: for each routed request, the
// estimate's queue and prefill time x (unweighted) and the observed TTFT
// minus the measured RTT, y, enter a least-squares fit through the origin,
// y ≈ θ·x, with exponential forgetting (DefaultCalibrationMemory requests)
// and a prior of calibrationPrior requests at θ = 1. A DC whose workers
// compute twice as fast as configured ends near θ = 0.5; one slowed by
// decode interference, above 1. θ stays in [MinWeight, MaxWeight]. The
// RTT is measured live, so its weight stays 1.
//
// It also learns the candidate's KV residence: the mean time a request
// holds its KV blocks after its first token (its decode), from the end of
// every stream, as an exponentially weighted mean over time. With it, the
// rate a full candidate frees blocks is its capacity over the residence
// (Little's law), which the TTFT cost uses for the wait for KV room.
//
// A Calibration is safe for concurrent use. The zero value is not usable;
// build it with NewCalibration.
type Calibration struct {
	mu       sync.Mutex
	keep     float64 // forgetting factor per request
	windowMs float64
	sxy, sxx float64 // forgotten sums of x·y and x²
	syy, m   float64 // forgotten sum of y², and of the observations' weights
	n        int
	resMs    float64 // mean residence, ms
	resAt    float64 // time of the last residence observation, ms
	resN     int
}

// NewCalibration returns a Calibration weighing about memory recent
// requests (DefaultCalibrationMemory if < 1), starting from the
// configured model (factor 1).
func NewCalibration(memory int) *Calibration {
	if memory < 1 {
		memory = DefaultCalibrationMemory
	}
	return &Calibration{keep: 1 - 1/float64(memory), windowMs: float64(DefaultResidenceWindow) / float64(time.Millisecond)}
}

// ObserveTTFT records one request: the terms of the estimate it was routed
// with (unweighted: the model's RTT, queue wait and prefill time, ms) and
// the TTFT it then saw, ms. Non-finite or negative inputs are ignored.
func (c *Calibration) ObserveTTFT(p Parts, ttftMs float64) {
	x := p.QueueMs + p.PrefillMs
	y := ttftMs - p.RTTms
	if !(x > 0) || math.IsInf(x, 1) || !(p.RTTms >= 0) || !(ttftMs >= 0) || math.IsInf(ttftMs, 1) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		// The prior, θ = 1 worth calibrationPrior requests the size of the
		// first one, forgotten like any observation.
		c.sxy, c.sxx, c.syy, c.m = calibrationPrior*x*x, calibrationPrior*x*x, calibrationPrior*x*x, calibrationPrior
	}
	c.sxy = c.keep*c.sxy + x*y
	c.sxx = c.keep*c.sxx + x*x
	c.syy = c.keep*c.syy + y*y
	c.m = c.keep*c.m + 1
	c.n++
}

// factor is θ, kept only as far as it stands out of its own noise; c.mu
// is held. The fit's standard error is se = √(RSS/(m − 1) / Σx²) (least
// squares through the origin); a departure from 1 smaller than
// calibrationZ standard errors is noise, and larger ones are shrunk by
// (1 − (z·se/(θ − 1))²), the positive-part James–Stein rule: a correctly
// configured DC keeps θ = 1 instead of a factor that wanders with the
// queueing noise of its last hundred requests, while a DC twice as fast
// gets its 0.5.
func (c *Calibration) factor() float64 {
	if c.n < 2 || c.m <= 1 {
		return 1
	}
	theta := c.sxy / c.sxx
	rss := max(c.syy-c.sxy*theta, 0)
	se2 := rss / (c.m - 1) / c.sxx
	d := theta - 1
	if d == 0 {
		return 1
	}
	shrink := max(0, 1-calibrationZ*calibrationZ*se2/(d*d))
	return min(max(1+d*shrink, MinWeight), MaxWeight)
}

// ObserveResidence records that a request held its KV for residenceMs
// after its first token, observed at atMs (the router's clock; the mean
// weighs time, not requests).
func (c *Calibration) ObserveResidence(atMs, residenceMs float64) {
	if !(residenceMs >= 0) || math.IsInf(residenceMs, 1) || math.IsNaN(atMs) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resN++
	w := 1 / float64(c.resN)
	if c.resN > 1 {
		w = max(min((atMs-c.resAt)/c.windowMs, 1), w)
	}
	c.resMs += w * (residenceMs - c.resMs)
	c.resAt = max(c.resAt, atMs)
}

// Weights returns the learned weights: θ on the queue and the prefill, 1
// on the RTT (θ = 1 before any observation).
func (c *Calibration) Weights() Weights {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.factor()
	return Weights{RTT: 1, Queue: f, Prefill: f}
}

// ResidenceMs returns the mean KV residence, ms, or 0 before any
// observation.
func (c *Calibration) ResidenceMs() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resMs
}

// Observations is the number of TTFTs learned from.
func (c *Calibration) Observations() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
