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
	// Seeds is how many seeds every cell runs, paired: every policy of a
	// cell runs with Base.Seed, then Base.Seed+1, … Base.Seed+Seeds−1.
	// With more than one, each cell also gets a Verdict over the seeds.
	// // optional; default: 1
	Seeds int
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
	// Runs and Verdict are set when the sweep runs more than one seed:
	// each seed's run (the first is the one the fields above describe),
	// and ttft's mean TargetDelta over them with its standard error.
	Runs    []SeedRun    `json:"seed_runs,omitempty"`
	Verdict *SeedVerdict `json:"verdict,omitempty"`
}

// SeedRun is one seed's run of a sweep cell: each policy's TTFT p95 and
// ttft's against the better of load-only and prefix-then-load in it.
type SeedRun struct {
	Seed        uint64             `json:"seed"`
	P95ms       map[string]float64 `json:"ttft_p95_ms"`
	TargetDelta float64            `json:"target_delta"`
}

// Setting describes the cell's load: "c256" or "2× speed".
func (c *SweepCell) Setting() string {
	if c.Concurrency > 0 {
		return fmt.Sprintf("c%d", c.Concurrency)
	}
	return fmt.Sprintf("%g× speed", c.Speed)
}

// SweepReport is the outcome of Sweep. Summary judges each cell's first
// seed; SeedSummary, set when the sweep ran more than one seed, judges
// each cell's Verdict over them.
type SweepReport struct {
	Config      SweepConfig  `json:"-"`
	Requests    int          `json:"requests"`
	Cells       []*SweepCell `json:"cells"`
	Summary     SweepSummary `json:"summary"`
	SeedSummary *SeedSummary `json:"seed_summary,omitempty"`
	WallSeconds float64      `json:"wall_s"`
}

// Outcome is how a cell, or a run, ended for ttft against a reference.
type Outcome int8

// The outcomes: within the noise the targets allow, better, or worse.
const (
	CellTied Outcome = iota
	CellWon
	CellLost
)

// String names the outcome as the tables do.
func (o Outcome) String() string {
	switch o {
	case CellWon:
		return "won"
	case CellLost:
		return "lost"
	}
	return "tied"
}

// MarshalText makes an Outcome read as its name in JSON.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// SeedVerdict is ttft's Δ against a reference over a cell's seeds: the
// mean, its standard error (the seeds' sample standard deviation over
// √seeds; 0 with one seed) and the outcome: CellLost when the mean exceeds
// +SweepLossMargin by more than two standard errors, CellWon when it is
// below −SweepLossMargin by more than two, CellTied otherwise. With one
// seed that is the one-seed rule: lost above +1%, won below −1%.
type SeedVerdict struct {
	Seeds   int     `json:"seeds"`
	Mean    float64 `json:"mean_delta"`
	SE      float64 `json:"se"`
	Outcome Outcome `json:"outcome"`
}

// verdictOf judges the Δs of one cell's seeds (at least one, every one a
// number) as SeedVerdict says.
func verdictOf(deltas []float64) SeedVerdict {
	v := SeedVerdict{Seeds: len(deltas)}
	for _, d := range deltas {
		v.Mean += d / float64(len(deltas))
	}
	if n := len(deltas); n > 1 {
		var ss float64
		for _, d := range deltas {
			ss += (d - v.Mean) * (d - v.Mean)
		}
		v.SE = math.Sqrt(ss / float64(n-1) / float64(n))
	}
	switch {
	case v.Mean > SweepLossMargin+2*v.SE:
		v.Outcome = CellLost
	case v.Mean < -SweepLossMargin-2*v.SE:
		v.Outcome = CellWon
	}
	return v
}

// SeedSummary counts the cells by their Verdict over the seeds and checks
// the band target on the seeds' means.
type SeedSummary struct {
	Seeds int `json:"seeds"`
	Tally
	// WorstMean is the largest mean Δ; WorstSE its standard error.
	WorstMean, WorstSE float64
	Band
}

// SweepSummary counts the cells ttft won, tied (within SweepLossMargin) and
// lost against the best baseline, and checks the targets.
type SweepSummary struct {
	Tally
	// WorstDelta and BestDelta are ttft's largest loss (or smallest win)
	// and largest win against the best baseline.
	WorstDelta, BestDelta float64
	// TargetLost counts the cells ttft is more than SweepLossMargin worse
	// than the better of load-only and prefix-then-load; WorstTarget is the
	// largest TargetDelta.
	TargetLost  int
	WorstTarget float64
	// Band checks the band target on TargetDelta.
	Band
}

// Tally counts cells by Outcome.
type Tally struct {
	Won, Tied, Lost int
}

func (t *Tally) add(o Outcome) {
	switch o {
	case CellLost:
		t.Lost++
	case CellWon:
		t.Won++
	default:
		t.Tied++
	}
}

// Band checks the band target: BandCells counts the closed-loop cells of
// concurrency SweepBandLowC–SweepBandHighC at the default workers and KV,
// BandMet those where ttft is at least SweepBandGain better than the
// better of load-only and prefix-then-load; BandWorst is the band's
// largest Δ against it.
type Band struct {
	BandCells, BandMet int
	BandWorst          float64
}

func (b *Band) add(delta float64) {
	b.BandCells++
	b.BandWorst = max(b.BandWorst, delta)
	if delta <= -SweepBandGain {
		b.BandMet++
	}
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
	sc.Seeds = max(sc.Seeds, 1)
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
	if sc.Seeds > 1 && !slices.Contains(sc.Baselines, LoadOnly) && !slices.Contains(sc.Baselines, PrefixThenLoad) {
		return nil, fmt.Errorf("%w: a verdict over seeds needs load-only or prefix-then-load among the baselines", ErrConfig)
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
		cell := &SweepCell{Concurrency: st.conc, Speed: st.speed, WorkersPerDC: st.workers, KVScale: st.kv, KVBlocksPerWorker: st.kvBlocks,
			P95ms: map[string]float64{}}
		var deltas []float64
		for n := range sc.Seeds {
			c.Seed = base.Seed + uint64(n)
			r, err := Run(ctx, c, w)
			if err != nil {
				return nil, fmt.Errorf("sweep cell %d (%s), seed %d: %w", k, st, c.Seed, err)
			}
			if n == 0 {
				cell.judge(r)
			}
			if sc.Seeds > 1 {
				run := SeedRun{Seed: c.Seed, P95ms: map[string]float64{}}
				run.TargetDelta = targetDelta(r, run.P95ms)
				cell.Runs = append(cell.Runs, run)
				deltas = append(deltas, run.TargetDelta)
			}
		}
		if sc.Seeds > 1 {
			v := verdictOf(deltas)
			cell.Verdict = &v
		}
		rep.Cells = append(rep.Cells, cell)
		if sc.Progress != nil {
			sc.Progress(k+1, len(cells), cell)
		}
	}
	rep.Summary = summarize(rep.Cells, base)
	if sc.Seeds > 1 {
		ss := summarizeSeeds(rep.Cells, base, sc.Seeds)
		rep.SeedSummary = &ss
	}
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
	best := math.Inf(1)
	c.TargetDelta = targetDelta(r, c.P95ms)
	for _, res := range r.Results {
		if res.Policy == TTFT.String() {
			c.Utilization = res.PrefillUtilization
			continue
		}
		if res.TTFTp95Ms < best {
			best, c.Best = res.TTFTp95Ms, res.Policy
		}
	}
	c.Delta = ratio(c.P95ms[TTFT.String()], best) - 1
	c.Lost = verdictOf([]float64{c.Delta}).Outcome == CellLost
}

// targetDelta records each policy's TTFT p95 of r in p95 and returns
// ttft's over the better of load-only and prefix-then-load, minus 1 (NaN
// when neither ran).
func targetDelta(r *Report, p95 map[string]float64) float64 {
	target := math.Inf(1)
	var ours float64
	for _, res := range r.Results {
		p95[res.Policy] = res.TTFTp95Ms
		switch res.Policy {
		case TTFT.String():
			ours = res.TTFTp95Ms
		case LoadOnly.String(), PrefixThenLoad.String():
			target = min(target, res.TTFTp95Ms)
		}
	}
	if math.IsInf(target, 1) {
		return math.NaN()
	}
	return ratio(ours, target) - 1
}

// inBand says whether c is a cell of the band target: closed loop at
// concurrency SweepBandLowC–SweepBandHighC, base's workers per DC, KV 1×.
func inBand(c *SweepCell, base Config) bool {
	return c.Concurrency >= SweepBandLowC && c.Concurrency <= SweepBandHighC && c.WorkersPerDC == base.WorkersPerDC && c.KVScale == 1
}

func summarize(cells []*SweepCell, base Config) SweepSummary {
	s := SweepSummary{WorstDelta: math.Inf(-1), BestDelta: math.Inf(1), WorstTarget: math.Inf(-1), Band: Band{BandWorst: math.Inf(-1)}}
	for _, c := range cells {
		s.Tally.add(verdictOf([]float64{c.Delta}).Outcome)
		s.WorstDelta, s.BestDelta = max(s.WorstDelta, c.Delta), min(s.BestDelta, c.Delta)
		if math.IsNaN(c.TargetDelta) {
			continue
		}
		s.WorstTarget = max(s.WorstTarget, c.TargetDelta)
		if verdictOf([]float64{c.TargetDelta}).Outcome == CellLost {
			s.TargetLost++
		}
		if inBand(c, base) {
			s.Band.add(c.TargetDelta)
		}
	}
	return s
}

// summarizeSeeds counts the cells by their Verdict (every cell has one)
// and checks the band on their means.
func summarizeSeeds(cells []*SweepCell, base Config, seeds int) SeedSummary {
	s := SeedSummary{Seeds: seeds, WorstMean: math.Inf(-1), Band: Band{BandWorst: math.Inf(-1)}}
	for _, c := range cells {
		v := c.Verdict
		s.Tally.add(v.Outcome)
		if v.Mean > s.WorstMean {
			s.WorstMean, s.WorstSE = v.Mean, v.SE
		}
		if inBand(c, base) {
			s.Band.add(v.Mean)
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
