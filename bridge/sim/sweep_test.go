package sim

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSweep_RunsEveryCellAndJudgesIt runs a small grid (two concurrencies
// and one replay speed, on two worker counts) and checks each cell against
// its own figures: Delta is ttft's p95 over the best baseline's, minus 1;
// TargetDelta over the better of load-only and prefix-then-load; Lost
// exactly when Delta exceeds the margin; the summary's counts add up.
func TestSweep_RunsEveryCellAndJudgesIt(t *testing.T) {
	w := shippedWorkload(t, 120, 60)
	sc := SweepConfig{Base: Config{Grid: fourSites(t), Seed: testSeed(t)}, Concurrency: []int{8, 16}, Workers: []int{1, 2},
		KVScale: []float64{1}, Speeds: []float64{2}}
	done := 0
	sc.Progress = func(d, total int, _ *SweepCell) { done = d }
	rep, err := Sweep(context.Background(), sc, w)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if len(rep.Cells) != 6 || done != 6 {
		t.Fatalf("%d cells, progress to %d; want 6 (2 × 2 closed loop + 2 open loop)", len(rep.Cells), done)
	}
	won, tied, lost := 0, 0, 0
	for _, c := range rep.Cells {
		best, target := math.Inf(1), math.Inf(1)
		for _, p := range DefaultSweepBaselines {
			v, ok := c.P95ms[p.String()]
			if !ok || !(v > 0) {
				t.Fatalf("cell %s/%d: no p95 for %v: %v", c.Setting(), c.WorkersPerDC, p, c.P95ms)
			}
			best = min(best, v)
			if p == LoadOnly || p == PrefixThenLoad {
				target = min(target, v)
			}
		}
		ours := c.P95ms[TTFT.String()]
		if math.Abs(c.Delta-(ours/best-1)) > 1e-12 || math.Abs(c.TargetDelta-(ours/target-1)) > 1e-12 || c.P95ms[c.Best] != best {
			t.Errorf("cell %s/%d: Δ %v (best %s), target Δ %v; recomputed %v and %v", c.Setting(), c.WorkersPerDC, c.Delta, c.Best, c.TargetDelta, ours/best-1, ours/target-1)
		}
		if c.Lost != (c.Delta > SweepLossMargin) {
			t.Errorf("cell %s/%d: lost %v at Δ %v", c.Setting(), c.WorkersPerDC, c.Lost, c.Delta)
		}
		switch {
		case c.Delta > SweepLossMargin:
			lost++
		case c.Delta < -SweepLossMargin:
			won++
		default:
			tied++
		}
		if (c.Concurrency > 0) == (c.Speed > 0) {
			t.Errorf("cell %+v is neither closed nor open loop", c)
		}
	}
	if s := rep.Summary; s.Won != won || s.Tied != tied || s.Lost != lost {
		t.Errorf("summary %+v, recounted %d won, %d tied, %d lost", s, won, tied, lost)
	}
}

// TestSweepSummary_CountsTheBandAtTheDefaultCapacity checks the targets'
// bookkeeping on hand-made cells: only closed-loop cells of concurrency
// 128–512 at the default workers and KV 1× are in the band.
func TestSweepSummary_CountsTheBandAtTheDefaultCapacity(t *testing.T) {
	cells := []*SweepCell{
		{Concurrency: 128, WorkersPerDC: 2, KVScale: 1, Delta: -0.2, TargetDelta: -0.2},   // band, met
		{Concurrency: 512, WorkersPerDC: 2, KVScale: 1, Delta: -0.05, TargetDelta: -0.05}, // band, missed
		{Concurrency: 1024, WorkersPerDC: 2, KVScale: 1, Delta: 0.02, TargetDelta: 0.03},  // not band, lost
		{Concurrency: 256, WorkersPerDC: 4, KVScale: 1, Delta: 0, TargetDelta: -0.3},      // other workers
		{Speed: 2, WorkersPerDC: 2, KVScale: 1, Delta: 0.005, TargetDelta: 0.005},         // open loop
	}
	s := summarize(cells, Config{WorkersPerDC: 2})
	want := SweepSummary{Tally: Tally{Won: 2, Tied: 2, Lost: 1}, WorstDelta: 0.02, BestDelta: -0.2, TargetLost: 1, WorstTarget: 0.03, Band: Band{BandCells: 2, BandMet: 1, BandWorst: -0.05}}
	if s != want {
		t.Errorf("summarize = %+v, want %+v", s, want)
	}
}

// TestWriteSweep_WritesTableAndHeatmap renders a hand-made report: the
// Markdown has a row per cell with every losing cell marked, the targets
// and the summary; the heat map is a PNG.
func TestWriteSweep_WritesTableAndHeatmap(t *testing.T) {
	rep := &SweepReport{Config: SweepConfig{Base: Config{Grid: lineGrid(0, 10), WorkersPerDC: 2}}.withDefaults(), Requests: 10}
	for k, d := range []float64{-0.3, 0.05, 0} {
		c := &SweepCell{Concurrency: 64 << k, WorkersPerDC: 2, KVScale: 1, KVBlocksPerWorker: 1024, Delta: d, TargetDelta: d, Lost: d > SweepLossMargin,
			Best: "gorgo", P95ms: map[string]float64{"ttft": 100 * (1 + d), "gorgo": 100, "load-only": 120, "prefix-then-load": 130}}
		rep.Cells = append(rep.Cells, c)
	}
	rep.Cells = append(rep.Cells, &SweepCell{Speed: 2, WorkersPerDC: 1, KVScale: 0.25, KVBlocksPerWorker: 256, Delta: 0.2, TargetDelta: math.NaN(), Lost: true,
		Best: "gorgo", P95ms: map[string]float64{"ttft": 120, "gorgo": 100}})
	rep.Summary = summarize(rep.Cells, rep.Config.Base)
	dir, md := writeSweep(t, rep)
	if got := strings.Count(string(md), "**lost**"); got != 2 {
		t.Errorf("%s marks %d cells lost, want 2:\n%s", SweepReportFile, got, md)
	}
	for _, want := range []string{"Targets (set before measuring)", "won 1, tied 1", "lost 2", "| c128 | 2 | 1 (1024) |", "| 2× speed | 1 | 0.25 (256) |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("%s lacks %q:\n%s", SweepReportFile, want, md)
		}
	}
	png, err := os.ReadFile(filepath.Join(dir, SweepHeatmapFile))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s: %d bytes, err %v; want a PNG", SweepHeatmapFile, len(png), err)
	}
}

func TestSweep_RefusesBadSettings(t *testing.T) {
	w := shippedWorkload(t, 20, 20)
	for _, sc := range []SweepConfig{
		{Base: Config{Grid: lineGrid(0, 10)}, KVScale: []float64{0.0001}},
		{Base: Config{Grid: lineGrid(0, 10)}, Speeds: []float64{-1}},
		{Base: Config{Grid: lineGrid(0, 10)}, Baselines: []Policy{TTFT}},
		{Base: Config{}},
	} {
		if _, err := Sweep(context.Background(), sc, w); !errors.Is(err, ErrConfig) {
			t.Errorf("Sweep(%+v) = %v, want ErrConfig", sc, err)
		}
	}
}

// TestVerdictOf judges hand-made Δs: the mean, the standard error (sample
// standard deviation over √n) and the outcome against +1% with two
// standard errors of slack, and with one seed the one-seed rule exactly
// (lost above +1%, won below −1%, the margin itself tied).
func TestVerdictOf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deltas   []float64
		mean, se float64
		want     Outcome
	}{
		{"one seed lost", []float64{0.05}, 0.05, 0, CellLost},
		{"one seed at the margin", []float64{SweepLossMargin}, SweepLossMargin, 0, CellTied},
		{"one seed just past it", []float64{math.Nextafter(SweepLossMargin, 1)}, math.Nextafter(SweepLossMargin, 1), 0, CellLost},
		{"one seed within", []float64{-0.004}, -0.004, 0, CellTied},
		{"one seed at −margin", []float64{-SweepLossMargin}, -SweepLossMargin, 0, CellTied},
		{"one seed won", []float64{-0.2}, -0.2, 0, CellWon},
		// mean 0.05, deviations ±0.01: sd 0.01·√2, SE 0.01; 0.05 > 0.01 + 2·0.01.
		{"two seeds lost", []float64{0.04, 0.06}, 0.05, 0.01, CellLost},
		// mean 0.05, deviations ±0.03: SE 0.03; 0.01 + 2·0.03 > 0.05.
		{"two seeds noisy", []float64{0.02, 0.08}, 0.05, 0.03, CellTied},
		// 0.1, 0.2, 0.3: mean 0.2, sd 0.1, SE 0.1/√3 ≈ 0.0577; 0.2 > 0.01 + 0.115.
		{"three seeds lost", []float64{0.1, 0.2, 0.3}, 0.2, 0.1 / math.Sqrt(3), CellLost},
		{"three seeds won", []float64{-0.1, -0.2, -0.3}, -0.2, 0.1 / math.Sqrt(3), CellWon},
		// One seed's +30% is not a loss when the others win: mean 0.0667, SE 0.176.
		{"one bad seed", []float64{0.3, -0.05, -0.05}, 0.2 / 3, 0.35 / math.Sqrt(3) / math.Sqrt(3), CellTied},
		{"identical seeds", []float64{0.02, 0.02, 0.02}, 0.02, 0, CellLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := verdictOf(tc.deltas)
			if v.Seeds != len(tc.deltas) || math.Abs(v.Mean-tc.mean) > 1e-12 || math.Abs(v.SE-tc.se) > 1e-12 || v.Outcome != tc.want {
				t.Errorf("verdictOf(%v) = %+v, want mean %v, SE %v, %v", tc.deltas, v, tc.mean, tc.se, tc.want)
			}
		})
	}
	// One seed is the one-seed sweep's rule, Δ by Δ.
	for _, d := range []float64{-0.5, -0.0100001, -0.01, 0, 0.0099999, 0.01, 0.0100001, 0.5} {
		today := CellTied
		if d > SweepLossMargin {
			today = CellLost
		} else if d < -SweepLossMargin {
			today = CellWon
		}
		if got := verdictOf([]float64{d}).Outcome; got != today {
			t.Errorf("verdictOf([%v]) = %v, the one-seed rule says %v", d, got, today)
		}
	}
}

// TestSummarizeSeeds counts hand-made verdicts and checks the band on
// their means.
func TestSummarizeSeeds(t *testing.T) {
	v := func(mean, se float64, o Outcome) *SeedVerdict {
		return &SeedVerdict{Seeds: 3, Mean: mean, SE: se, Outcome: o}
	}
	cells := []*SweepCell{
		{Concurrency: 128, WorkersPerDC: 2, KVScale: 1, Verdict: v(-0.12, 0.01, CellWon)},  // band, met
		{Concurrency: 512, WorkersPerDC: 2, KVScale: 1, Verdict: v(-0.08, 0.05, CellTied)}, // band, missed
		{Concurrency: 1024, WorkersPerDC: 2, KVScale: 1, Verdict: v(0.09, 0.02, CellLost)}, // worst
		{Concurrency: 256, WorkersPerDC: 1, KVScale: 1, Verdict: v(0.3, 0.2, CellTied)},    // worse mean, not lost
		{Speed: 2, WorkersPerDC: 2, KVScale: 1, Verdict: v(-0.3, 0.01, CellWon)},           // open loop
	}
	got := summarizeSeeds(cells, Config{WorkersPerDC: 2}, 3)
	want := SeedSummary{Seeds: 3, Tally: Tally{Won: 2, Tied: 2, Lost: 1}, WorstMean: 0.3, WorstSE: 0.2, Band: Band{BandCells: 2, BandMet: 1, BandWorst: -0.08}}
	if got != want {
		t.Errorf("summarizeSeeds = %+v, want %+v", got, want)
	}
}

// TestSweep_SeedsArePairedRuns runs a cell with two seeds and checks that
// its first seed is the one-seed sweep's cell, its second the one-seed
// sweep at the next seed, and its verdict theirs; the Markdown and heat
// map carry the verdict.
func TestSweep_SeedsArePairedRuns(t *testing.T) {
	w := shippedWorkload(t, 120, 60)
	seed := testSeed(t)
	base := SweepConfig{Base: Config{Grid: fourSites(t), Seed: seed}, Concurrency: []int{16}, Workers: []int{1}, KVScale: []float64{1}, NoOpenLoop: true}
	ctx := context.Background()
	two := base
	two.Seeds = 2
	rep, err := Sweep(ctx, two, w)
	if err != nil {
		t.Fatalf("Sweep(2 seeds): %v", err)
	}
	one, err := Sweep(ctx, base, w)
	if err != nil {
		t.Fatalf("Sweep(seed %d): %v", seed, err)
	}
	next := base
	next.Base.Seed = seed + 1
	other, err := Sweep(ctx, next, w)
	if err != nil {
		t.Fatalf("Sweep(seed %d): %v", seed+1, err)
	}
	c, c1, c2 := rep.Cells[0], one.Cells[0], other.Cells[0]
	if c1.Runs != nil || c1.Verdict != nil || one.SeedSummary != nil {
		t.Errorf("a one-seed sweep has seed figures: %+v, %+v", c1, one.SeedSummary)
	}
	if c.Delta != c1.Delta || c.TargetDelta != c1.TargetDelta || c.Best != c1.Best || c.Lost != c1.Lost || rep.Summary != one.Summary {
		t.Errorf("the two-seed sweep's first-seed figures %+v differ from the one-seed sweep's %+v", c, c1)
	}
	if len(c.Runs) != 2 || c.Runs[0].Seed != seed || c.Runs[1].Seed != seed+1 {
		t.Fatalf("runs %+v, want seeds %d and %d", c.Runs, seed, seed+1)
	}
	for k, ref := range []*SweepCell{c1, c2} {
		run := c.Runs[k]
		if run.TargetDelta != ref.TargetDelta || len(run.P95ms) != len(ref.P95ms) {
			t.Errorf("seed %d: Δ %v, p95 %v; the one-seed sweep at that seed: %v, %v", run.Seed, run.TargetDelta, run.P95ms, ref.TargetDelta, ref.P95ms)
		}
		for p, v := range ref.P95ms {
			if run.P95ms[p] != v {
				t.Errorf("seed %d: %s p95 %v, the one-seed sweep's %v", run.Seed, p, run.P95ms[p], v)
			}
		}
	}
	if c1.TargetDelta == c2.TargetDelta {
		t.Errorf("seeds %d and %d gave the same Δ %v: the seed does not reach the runs", seed, seed+1, c1.TargetDelta)
	}
	if want := verdictOf([]float64{c1.TargetDelta, c2.TargetDelta}); c.Verdict == nil || *c.Verdict != want {
		t.Errorf("verdict %+v, want %+v", c.Verdict, want)
	}
	if rep.SeedSummary == nil || rep.SeedSummary.Seeds != 2 || rep.SeedSummary.Won+rep.SeedSummary.Tied+rep.SeedSummary.Lost != 1 {
		t.Errorf("seed summary %+v", rep.SeedSummary)
	}
	_, md := writeSweep(t, rep)
	for _, want := range []string{"Every cell ran 2 seeds", "mean Δ ± SE | verdict |", pctSE(c.Verdict.Mean, c.Verdict.SE), "The first seed (" + strconv.FormatUint(seed, 10) + ") alone"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("%s lacks %q:\n%s", SweepReportFile, want, md)
		}
	}
}

// TestSweepMarkdown_MarksTheVerdict renders hand-made multi-seed cells: the
// verdict column marks exactly the cells the verdict lost, whatever their
// first seed's Δ.
func TestSweepMarkdown_MarksTheVerdict(t *testing.T) {
	rep := &SweepReport{Config: SweepConfig{Base: Config{Grid: lineGrid(0, 10), WorkersPerDC: 2, Seed: 7}, Seeds: 3}.withDefaults(), Requests: 10}
	for k, ds := range [][]float64{{0.05, -0.02, -0.02}, {0.03, 0.04, 0.05}, {-0.3, -0.2, -0.25}} {
		c := &SweepCell{Concurrency: 64 << k, WorkersPerDC: 2, KVScale: 1, KVBlocksPerWorker: 1024, Delta: ds[0], TargetDelta: ds[0], Lost: ds[0] > SweepLossMargin,
			Best: "load-only", P95ms: map[string]float64{"ttft": 100 * (1 + ds[0]), "gorgo": 110, "load-only": 100, "prefix-then-load": 130}}
		for n, d := range ds {
			c.Runs = append(c.Runs, SeedRun{Seed: uint64(7 + n), TargetDelta: d})
		}
		v := verdictOf(ds)
		c.Verdict = &v
		rep.Cells = append(rep.Cells, c)
	}
	rep.Summary = summarize(rep.Cells, rep.Config.Base)
	ss := summarizeSeeds(rep.Cells, rep.Config.Base, 3)
	rep.SeedSummary = &ss
	md := string(SweepMarkdown(rep, "trace.jsonl"))
	if got := strings.Count(md, "| **lost** |"); got != 1 {
		t.Errorf("%d cells marked lost, want 1 (the second):\n%s", got, md)
	}
	for _, want := range []string{"| +5.0%, -2.0%, -2.0% | +0.3% ± 2.3% | tied |", "| +3.0%, +4.0%, +5.0% | +4.0% ± 0.6% | **lost** |",
		"| -30.0%, -20.0%, -25.0% | -25.0% ± 2.9% | won |", "seeds 7–9", "ttft lost 1 cells, tied 1, won 1"} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
	dir, _ := writeSweep(t, rep)
	if png, err := os.ReadFile(filepath.Join(dir, SweepHeatmapFile)); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s: %d bytes, err %v; want a PNG", SweepHeatmapFile, len(png), err)
	}
}

// writeSweep writes rep's report into a temporary directory and returns
// the directory and its Markdown.
func writeSweep(t *testing.T, rep *SweepReport) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := WriteSweep(dir, rep, "trace.jsonl"); err != nil {
		t.Fatalf("WriteSweep: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, SweepReportFile))
	if err != nil {
		t.Fatal(err)
	}
	return dir, md
}
