package sim

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
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
	want := SweepSummary{Won: 2, Tied: 2, Lost: 1, WorstDelta: 0.02, BestDelta: -0.2, TargetLost: 1, WorstTarget: 0.03, BandCells: 2, BandMet: 1, BandWorst: -0.05}
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
	dir := t.TempDir()
	if err := WriteSweep(dir, rep, "trace.jsonl"); err != nil {
		t.Fatalf("WriteSweep: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, SweepReportFile))
	if err != nil {
		t.Fatal(err)
	}
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
