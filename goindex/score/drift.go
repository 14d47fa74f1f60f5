package score

import (
	"math"
	"time"
)

// DefaultDriftWindow is the time constant of Drift's averages: twenty load
// reports at the default 100 ms period, enough to average the noise of
// single reports (which move by whole prompts) down by a factor of about
// four, and still a few times shorter than a long request's life, so the
// estimate follows a change of load within seconds.
const DefaultDriftWindow = 2 * time.Second

// Drift learns, for one candidate, what its load reports show that the
// router's own model of the candidate did not predict: from one report to
// the next, the router predicts the queue with Backlog (the earlier
// report, drained at the candidate's reported rate, plus the router's own
// sends in between); the report then tells the truth. The difference, the
// innovation, is the work other routers sent meanwhile plus the error of
// the drain rate (a reported rate is configured, not measured: decode
// interference and a candidate faster or slower than configured all show
// up here). Drift keeps an exponentially weighted mean of the innovation
// per ms (Rate) and of its square, so that a router can forecast the queue
// a request will find, Backlog + Rate × (time since the report), and how
// uncertain that forecast is, Spread.
//
// A report with an empty queue censors the innovation (work that arrived
// and drained in between is invisible), which biases Rate low exactly when
// the unseen work did not matter: the candidate had room for it.
//
// A Drift is not safe for concurrent use; a router keeps one per candidate
// and updates it from the goroutine that reads the candidate's reports.
// The zero value is not usable; build it with NewDrift.
type Drift struct {
	windowMs float64
	n        int
	rate     float64 // tokens/ms, weighted mean of innovation/Δt
	vari     float64 // tokens²/ms, weighted mean of (innovation − rate·Δt)²/Δt
}

// NewDrift returns a Drift averaging over window (DefaultDriftWindow if
// ≤ 0).
func NewDrift(window time.Duration) *Drift {
	if window <= 0 {
		window = DefaultDriftWindow
	}
	return &Drift{windowMs: float64(window) / float64(time.Millisecond)}
}

// Observe records one report: the router predicted queue tokens
// predicted, the report says reported, and sinceMs have passed since the
// previous report. Non-positive or non-finite spans are ignored.
func (d *Drift) Observe(predicted, reported, sinceMs float64) {
	if !(sinceMs > 0) || math.IsInf(sinceMs, 1) || math.IsNaN(predicted) || math.IsNaN(reported) {
		return
	}
	innov := reported - predicted
	// Weight of the new observation: its span over the window, so that
	// irregular report spacing weighs time, not reports; the first
	// observations are averaged plainly.
	d.n++
	w := max(min(sinceMs/d.windowMs, 1), 1/float64(d.n))
	dev := innov - d.rate*sinceMs // against the mean before this report
	d.rate += w * (innov/sinceMs - d.rate)
	if d.n > 1 {
		d.vari += w * (dev*dev/sinceMs - d.vari)
	}
}

// Rate is the mean innovation per ms: the work, in tokens per ms, that the
// candidate's queue gains beyond what the router predicts (negative when
// it drains faster than its reported rate). 0 before any observation.
func (d *Drift) Rate() float64 { return d.rate }

// Spread is the standard deviation of the innovation accumulated over
// spanMs (the queue forecast's uncertainty after that long without a
// report), treating innovations as independent increments of a random
// walk: √(variance per ms × spanMs). 0 before two observations or for a
// non-positive span.
func (d *Drift) Spread(spanMs float64) float64 {
	if !(spanMs > 0) {
		return 0
	}
	return math.Sqrt(max(d.vari, 0) * spanMs)
}
