package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// Sweep defaults: the grid `goindex sim --sweep` runs unless told
// otherwise.
var (
	DefaultSweepConcurrency = []int{64, 128, 256, 512, 1024}
	DefaultSweepWorkers     = []int{1, 2, 4, 8}
	DefaultSweepKVScale     = []float64{0.25, 1, 4}
	DefaultSweepSpeeds      = []float64{1, 2, 4}
	DefaultSweepBaselines   = []Policy{LoadOnly, PrefixThenLoad, GORGO}
)

// SweepLossMargin is how much worse than the best baseline ttft may be in a
// cell before the cell counts as lost: ±1%, the noise the targets allow.
const SweepLossMargin = 0.01

// Sweep targets, set before any sweep ran (the routing issue's): never
// worse than prefix-then-load and load-only by more than SweepLossMargin
// in any cell, and at least SweepBandGain better than the better of them
// at p95 in every closed-loop cell of the band at the default capacity.
const (
	SweepBandGain   = 0.10
	SweepBandLowC   = 128
	SweepBandHighC  = 512
	sweepTargetNote = "never worse than the better of load-only and prefix-then-load by more than 1% in any cell; ≥ 10% better than it at p95 in every closed-loop cell of concurrency 128–512 at the default capacity"
)

// SweepConfig is a grid of runs around Base: every closed-loop cell
// (Concurrency × Workers × KVScale) and every open-loop cell (Speeds ×
// Workers × KVScale) runs ttft and the Baselines on identical input.
type SweepConfig struct {
	// Base is every run's configuration apart from the swept fields and
	// the policies; required (its Grid at least).
	Base Config
	// Concurrency lists the closed-loop client counts.
	// // optional; default: DefaultSweepConcurrency
	Concurrency []int
	// Workers lists the workers per DC. // optional; default: DefaultSweepWorkers
	Workers []int
	// KVScale lists multiples of Base's KV blocks per worker (after its
	// default). // optional; default: DefaultSweepKVScale
	KVScale []float64
	// Speeds lists open-loop replay speeds: requests sent at the trace's
	// timestamps divided by the speed. // optional; default:
	// DefaultSweepSpeeds
	Speeds []float64
	// NoOpenLoop runs no open-loop cell. // optional; default: false
	NoOpenLoop bool
	// Baselines are the policies ttft is compared with in every cell.
	// // optional; default: DefaultSweepBaselines
	Baselines []Policy
	// Progress, if set, is called after every cell.
	Progress func(done, total int, cell *SweepCell)
}

// SweepCell is one run of the sweep: its setting and each policy's TTFT
// p95, ttft's against the best baseline's (Delta: ttft/best − 1, negative
// when ttft wins) and against the better of load-only and
// prefix-then-load (TargetDelta, the targets' reference).
type SweepCell struct {
	Concurrency       int                `json:"concurrency,omitempty"` // closed loop; 0 in open loop
	Speed             float64            `json:"speed,omitempty"`       // open loop; 0 in closed loop
	WorkersPerDC      int                `json:"workers_per_dc"`
	KVScale           float64            `json:"kv_scale"`
	KVBlocksPerWorker int                `json:"kv_blocks_per_worker"`
	P95ms             map[string]float64 `json:"ttft_p95_ms"`
	Best              string             `json:"best_baseline"`
	Delta             float64            `json:"delta"`
	TargetDelta       float64            `json:"target_delta"`
	Lost              bool               `json:"lost"`
	// Utilization is ttft's prefill utilization: how loaded the cell is.
	Utilization float64 `json:"prefill_utilization"`
}

// Setting describes the cell's load: "c256" or "2× speed".
func (c *SweepCell) Setting() string {
	if c.Concurrency > 0 {
		return fmt.Sprintf("c%d", c.Concurrency)
	}
	return fmt.Sprintf("%g× speed", c.Speed)
}

// SweepReport is the outcome of Sweep.
type SweepReport struct {
	Config      SweepConfig  `json:"-"`
	Requests    int          `json:"requests"`
	Cells       []*SweepCell `json:"cells"`
	Summary     SweepSummary `json:"summary"`
	WallSeconds float64      `json:"wall_s"`
}

// SweepSummary counts the cells ttft won, tied (within SweepLossMargin) and
// lost against the best baseline, and checks the targets.
type SweepSummary struct {
	Won, Tied, Lost int
	// WorstDelta and BestDelta are ttft's largest loss (or smallest win)
	// and largest win against the best baseline.
	WorstDelta, BestDelta float64
	// TargetLost counts the cells ttft is more than SweepLossMargin worse
	// than the better of load-only and prefix-then-load; WorstTarget is the
	// largest TargetDelta.
	TargetLost  int
	WorstTarget float64
	// BandCells and BandMet count the closed-loop cells of concurrency
	// SweepBandLowC–SweepBandHighC at the default workers and KV, and
	// those where ttft is at least SweepBandGain better than the better of
	// load-only and prefix-then-load; BandWorst is the band's largest
	// TargetDelta.
	BandCells, BandMet int
	BandWorst          float64
}

// withDefaults fills the sweep's unset lists.
func (sc SweepConfig) withDefaults() SweepConfig {
	if len(sc.Concurrency) == 0 {
		sc.Concurrency = DefaultSweepConcurrency
	}
	if len(sc.Workers) == 0 {
		sc.Workers = DefaultSweepWorkers
	}
	if len(sc.KVScale) == 0 {
		sc.KVScale = DefaultSweepKVScale
	}
	if len(sc.Speeds) == 0 {
		sc.Speeds = DefaultSweepSpeeds
	}
	if sc.NoOpenLoop {
		sc.Speeds = nil
	}
	if len(sc.Baselines) == 0 {
		sc.Baselines = DefaultSweepBaselines
	}
	return sc
}

// Sweep runs every cell of sc on w, in order (closed loop by KV, workers
// and concurrency, then open loop by KV, workers and speed); each cell's
// policies run in parallel as in Run. An error stops the sweep: ErrConfig
// for a bad setting, or Run's error.
func Sweep(ctx context.Context, sc SweepConfig, w *Workload) (*SweepReport, error) {
	began := time.Now()
	sc = sc.withDefaults()
	base, err := sc.Base.withDefaults()
	if err != nil {
		return nil, err
	}
	for _, p := range sc.Baselines {
		if p == TTFT || p == SingleDCSlice {
			return nil, fmt.Errorf("%w: %v is not a sweep baseline", ErrConfig, p)
		}
	}
	policies := append([]Policy{TTFT}, sc.Baselines...)
	var cells []sweepSetting
	for _, kv := range sc.KVScale {
		blocks := int(math.Round(kv * float64(base.KVBlocksPerWorker)))
		if !(kv > 0) || blocks < 1 {
			return nil, fmt.Errorf("%w: KV scale %v leaves no block", ErrConfig, kv)
		}
		for _, wk := range sc.Workers {
			for _, c := range sc.Concurrency {
				cells = append(cells, sweepSetting{conc: c, workers: wk, kv: kv, kvBlocks: blocks})
			}
		}
	}
	for _, kv := range sc.KVScale {
		blocks := int(math.Round(kv * float64(base.KVBlocksPerWorker)))
		for _, wk := range sc.Workers {
			for _, sp := range sc.Speeds {
				if !(sp > 0) {
					return nil, fmt.Errorf("%w: replay speed %v must be positive", ErrConfig, sp)
				}
				cells = append(cells, sweepSetting{speed: sp, workers: wk, kv: kv, kvBlocks: blocks})
			}
		}
	}
	rep := &SweepReport{Config: sc, Requests: len(w.Requests)}
	for k, st := range cells {
		c := base
		c.Policies, c.Progress = policies, nil
		c.WorkersPerDC, c.KVBlocksPerWorker = st.workers, st.kvBlocks
		if st.speed > 0 {
			c.OpenLoop, c.TimeScale = true, 1/st.speed
		} else {
			c.OpenLoop, c.Concurrency = false, st.conc
		}
		r, err := Run(ctx, c, w)
		if err != nil {
			return nil, fmt.Errorf("sweep cell %d (%s): %w", k, st, err)
		}
		cell := &SweepCell{Concurrency: st.conc, Speed: st.speed, WorkersPerDC: st.workers, KVScale: st.kv, KVBlocksPerWorker: st.kvBlocks,
			P95ms: map[string]float64{}}
		cell.judge(r)
		rep.Cells = append(rep.Cells, cell)
		if sc.Progress != nil {
			sc.Progress(k+1, len(cells), cell)
		}
	}
	rep.Summary = summarize(rep.Cells, base)
	rep.WallSeconds = time.Since(began).Seconds()
	return rep, nil
}

// sweepSetting is one cell's setting: a closed loop of conc clients, or
// an open loop at speed.
type sweepSetting struct {
	conc     int
	speed    float64
	workers  int
	kv       float64
	kvBlocks int
}

// String names a setting for errors.
func (s sweepSetting) String() string {
	load := fmt.Sprintf("concurrency %d", s.conc)
	if s.speed > 0 {
		load = fmt.Sprintf("%g× replay speed", s.speed)
	}
	return fmt.Sprintf("%s, %d workers per DC, KV %g× (%d blocks)", load, s.workers, s.kv, s.kvBlocks)
}

// judge fills the cell's figures from its run.
func (c *SweepCell) judge(r *Report) {
	best, target := math.Inf(1), math.Inf(1)
	var ours float64
	for _, res := range r.Results {
		c.P95ms[res.Policy] = res.TTFTp95Ms
		switch res.Policy {
		case TTFT.String():
			ours, c.Utilization = res.TTFTp95Ms, res.PrefillUtilization
			continue
		case LoadOnly.String(), PrefixThenLoad.String():
			target = min(target, res.TTFTp95Ms)
		}
		if res.TTFTp95Ms < best {
			best, c.Best = res.TTFTp95Ms, res.Policy
		}
	}
	c.Delta = ratio(ours, best) - 1
	c.TargetDelta = math.NaN()
	if !math.IsInf(target, 1) {
		c.TargetDelta = ratio(ours, target) - 1
	}
	c.Lost = c.Delta > SweepLossMargin
}

func summarize(cells []*SweepCell, base Config) SweepSummary {
	s := SweepSummary{WorstDelta: math.Inf(-1), BestDelta: math.Inf(1), WorstTarget: math.Inf(-1), BandWorst: math.Inf(-1)}
	for _, c := range cells {
		switch {
		case c.Delta > SweepLossMargin:
			s.Lost++
		case c.Delta < -SweepLossMargin:
			s.Won++
		default:
			s.Tied++
		}
		s.WorstDelta, s.BestDelta = max(s.WorstDelta, c.Delta), min(s.BestDelta, c.Delta)
		if math.IsNaN(c.TargetDelta) {
			continue
		}
		s.WorstTarget = max(s.WorstTarget, c.TargetDelta)
		if c.TargetDelta > SweepLossMargin {
			s.TargetLost++
		}
		if c.Concurrency >= SweepBandLowC && c.Concurrency <= SweepBandHighC && c.WorkersPerDC == base.WorkersPerDC && c.KVScale == 1 {
			s.BandCells++
			s.BandWorst = max(s.BandWorst, c.TargetDelta)
			if c.TargetDelta <= -SweepBandGain {
				s.BandMet++
			}
		}
	}
	return s
}

// sortedSettings returns the distinct values of f over cells, ascending.
func sortedSettings[T int | float64](cells []*SweepCell, f func(*SweepCell) (T, bool)) []T {
	var out []T
	for _, c := range cells {
		if v, ok := f(c); ok && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}
