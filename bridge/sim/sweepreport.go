package sim

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Sweep report file names inside the report directory.
const (
	SweepReportFile  = "sweep.md"
	SweepHeatmapFile = "sweep_heatmap.png"
)

// WriteSweep writes rep into dir (created if needed): SweepReportFile, a
// Markdown table of every cell (each policy's TTFT p95, ttft against the
// best baseline, every losing cell marked; with several seeds, also each
// seed's Δ and the verdict over them) with the targets and the summary,
// and SweepHeatmapFile, the heat map of ttft against the best baseline per
// cell (with several seeds: its mean Δ against the better of load-only and
// prefix-then-load). tracePath names the trace in the text.
func WriteSweep(dir string, rep *SweepReport, tracePath string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := sweepHeatmap(rep, filepath.Join(dir, SweepHeatmapFile)); err != nil {
		return fmt.Errorf("%s: %w", SweepHeatmapFile, err)
	}
	return os.WriteFile(filepath.Join(dir, SweepReportFile), SweepMarkdown(rep, tracePath), 0o644)
}

// SweepMarkdown renders rep as Markdown: the setup, the targets, the
// summary and one table row per cell.
func SweepMarkdown(rep *SweepReport, tracePath string) []byte {
	var b bytes.Buffer
	c := rep.Config.Base
	clients := "every site alike"
	if c.OneSite {
		clients = "all at " + c.RouterSite
	} else if len(c.ClientShares) > 0 {
		clients = fmt.Sprint(c.ClientShares)
	}
	fmt.Fprintf(&b, "# goindex sim sweep\n\nTrace `%s`, %d requests; %d DCs; clients: %s. Every cell runs ttft and the baselines (%s) on identical input and the same capacity (workers per DC × %d DCs, KV blocks per worker as in the row); Δ is ttft's TTFT p95 over the best baseline's, minus 1 (negative: ttft is faster).\n\n",
		tracePath, rep.Requests, len(c.Grid.Sites), clients, policyNamesOf(rep.Config.Baselines), len(c.Grid.Sites))
	ss := rep.SeedSummary
	if ss != nil {
		fmt.Fprintf(&b, "Every cell ran %d seeds (%d–%d), paired: every policy of a cell with the same seed. The columns up to \"Δ vs better\" are the first seed's run alone (the one-seed sweep); the last three judge ttft's Δ against the better of load-only and prefix-then-load, chosen per seed: its mean over the seeds ± its standard error, **lost** when the mean exceeds +%.0f%% by more than two standard errors, won when it is below −%.0f%% by more than two, tied otherwise.\n\n",
			ss.Seeds, c.Seed, c.Seed+uint64(ss.Seeds)-1, 100*SweepLossMargin, 100*SweepLossMargin)
	}
	s := rep.Summary
	fmt.Fprintf(&b, "Targets (set before measuring): %s.\n\n", sweepTargetNote)
	first := ""
	if ss != nil {
		first = fmt.Sprintf("The first seed (%d) alone: ", c.Seed)
	}
	fmt.Fprintf(&b, "%sSummary over %d cells: ttft won %d, tied %d (within ±%.0f%%), lost %d against the best baseline; Δ from %+.1f%% to %+.1f%%. Against the better of load-only and prefix-then-load: %d cells lost by more than 1%% (worst %+.1f%%); band (concurrency %d–%d, %d workers per DC, KV 1×): %d of %d cells ≥ %.0f%% better (worst %+.1f%%).\n\n",
		first, len(rep.Cells), s.Won, s.Tied, 100*SweepLossMargin, s.Lost, 100*s.BestDelta, 100*s.WorstDelta,
		s.TargetLost, 100*s.WorstTarget, SweepBandLowC, SweepBandHighC, c.WorkersPerDC, s.BandMet, s.BandCells, 100*SweepBandGain, 100*s.BandWorst)
	if ss != nil {
		fmt.Fprintf(&b, "Over the %d seeds, against the better of load-only and prefix-then-load: ttft lost %d cells, tied %d, won %d; worst mean Δ %s; band: %d of %d cells with a mean ≥ %.0f%% better (worst mean %+.1f%%).\n\n",
			ss.Seeds, ss.Lost, ss.Tied, ss.Won, pctSE(ss.WorstMean, ss.WorstSE), ss.BandMet, ss.BandCells, 100*SweepBandGain, 100*ss.BandWorst)
		fmt.Fprintf(&b, "![ttft vs the better of load-only and prefix-then-load over %d seeds](%s)\n\n", ss.Seeds, SweepHeatmapFile)
	} else {
		fmt.Fprintf(&b, "![ttft vs the best baseline](%s)\n\n", SweepHeatmapFile)
	}
	tail, tailAlign := " best baseline | Δ vs best | Δ vs better of load-only, prefix-then-load | |", " --- | ---: | ---: | --- |"
	if ss != nil {
		tail = fmt.Sprintf(" best baseline | Δ vs best | Δ vs better of load-only, prefix-then-load | Δ vs better, seeds %d–%d | mean Δ ± SE | verdict |", c.Seed, c.Seed+uint64(ss.Seeds)-1)
		tailAlign = " --- | ---: | ---: | ---: | ---: | --- |"
	}
	tableHead(&b, "| load | workers/DC | KV × (blocks) | prefill util. | ttft p95 ms |", rep.Config.Baselines, tail, "| --- | ---: | ---: | ---: | ---: |", tailAlign)
	for _, cell := range rep.Cells {
		fmt.Fprintf(&b, "| %s | %d | %g (%d) | %.0f%% | %.0f |", cell.Setting(), cell.WorkersPerDC, cell.KVScale, cell.KVBlocksPerWorker, 100*cell.Utilization, cell.P95ms[TTFT.String()])
		for _, p := range rep.Config.Baselines {
			fmt.Fprintf(&b, " %.0f |", cell.P95ms[p.String()])
		}
		fmt.Fprintf(&b, " %s | %+.1f%% | %s |", cell.Best, 100*cell.Delta, pct(cell.TargetDelta))
		if v := cell.Verdict; v != nil {
			runs := make([]string, len(cell.Runs))
			for k, r := range cell.Runs {
				runs[k] = pct(r.TargetDelta)
			}
			mark := v.Outcome.String()
			if v.Outcome == CellLost {
				mark = "**lost**"
			}
			fmt.Fprintf(&b, " %s | %s | %s |\n", strings.Join(runs, ", "), pctSE(v.Mean, v.SE), mark)
			continue
		}
		mark := ""
		if cell.Lost {
			mark = "**lost**"
		}
		fmt.Fprintf(&b, " %s |\n", mark)
	}
	return b.Bytes()
}

// pctSE formats a mean and its standard error as percentages.
func pctSE(mean, se float64) string {
	return fmt.Sprintf("%+.1f%% ± %.1f%%", 100*mean, 100*se)
}

// tableHead writes a Markdown table's two header rows: head, a cell per
// column, tail; then align, a right-aligned cell per column, tailAlign.
func tableHead[T any](b *bytes.Buffer, head string, cols []T, tail, align, tailAlign string) {
	b.WriteString(head)
	for _, c := range cols {
		fmt.Fprintf(b, " %v |", c)
	}
	b.WriteString(tail + "\n" + align)
	for range cols {
		b.WriteString(" ---: |")
	}
	b.WriteString(tailAlign + "\n")
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%+.1f%%", 100*v)
}

func policyNamesOf(ps []Policy) string {
	var b bytes.Buffer
	for k, p := range ps {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// sweepGrid is one heat-map panel: Δ in percent by column (concurrency or
// speed) and row (workers per DC); NaN where no cell ran.
type sweepGrid struct {
	z [][]float64 // [col][row]
}

func (g sweepGrid) Dims() (int, int)   { return len(g.z), len(g.z[0]) }
func (g sweepGrid) Z(c, r int) float64 { return g.z[c][r] }
func (g sweepGrid) X(c int) float64    { return float64(c) }
func (g sweepGrid) Y(r int) float64    { return float64(r) }

// sweepHeatmap draws one panel per (loop mode, KV scale): columns are the
// concurrencies (closed loop) or replay speeds (open loop), rows the
// workers per DC, colour ttft's Δ against the best baseline (blue: ttft
// faster, red: slower, on a scale symmetric around 0), each cell labelled
// with its Δ and every losing cell marked LOST. With several seeds the Δ
// is the verdict's mean against the better of load-only and
// prefix-then-load, labelled with its standard error, LOST as the verdict
// says.
func sweepHeatmap(rep *SweepReport, path string) error {
	value := func(c *SweepCell) (float64, string) {
		text := fmt.Sprintf("%+.1f%%", 100*c.Delta)
		if c.Lost {
			text += " LOST"
		}
		return c.Delta, text
	}
	title := fmt.Sprintf("ttft TTFT p95 vs the best baseline (%s), Δ %%; blue: ttft faster; LOST: slower by > 1%%", policyNamesOf(rep.Config.Baselines))
	if ss := rep.SeedSummary; ss != nil {
		value = func(c *SweepCell) (float64, string) {
			text := fmt.Sprintf("%+.1f±%.1f%%", 100*c.Verdict.Mean, 100*c.Verdict.SE)
			if c.Verdict.Outcome == CellLost {
				text += "\nLOST" // on its own line: the label is wider than the one-seed one
			}
			return c.Verdict.Mean, text
		}
		title = fmt.Sprintf("ttft TTFT p95 vs the better of load-only and prefix-then-load: mean Δ %% ± SE over %d seeds; blue: ttft faster; LOST: > +1%% by more than 2 SE", ss.Seeds)
	}
	kvs := sortedSettings(rep.Cells, func(c *SweepCell) (float64, bool) { return c.KVScale, true })
	workers := sortedSettings(rep.Cells, func(c *SweepCell) (int, bool) { return c.WorkersPerDC, true })
	concs := sortedSettings(rep.Cells, func(c *SweepCell) (int, bool) { return c.Concurrency, c.Concurrency > 0 })
	speeds := sortedSettings(rep.Cells, func(c *SweepCell) (float64, bool) { return c.Speed, c.Speed > 0 })
	if len(kvs) == 0 || len(workers) == 0 {
		return fmt.Errorf("no cells")
	}
	scale := 5.0 // percent; at least ±5% so that ties look neutral
	for _, c := range rep.Cells {
		v, _ := value(c)
		scale = max(scale, math.Min(math.Abs(100*v), 50))
	}
	type mode struct {
		name, axis string
		labels     []string
		col        func(*SweepCell) int
	}
	var modes []mode
	if len(concs) > 0 {
		labels := make([]string, len(concs))
		for k, v := range concs {
			labels[k] = strconv.Itoa(v)
		}
		modes = append(modes, mode{"closed loop", "concurrency", labels, func(c *SweepCell) int { return indexOfValue(concs, c.Concurrency) }})
	}
	if len(speeds) > 0 {
		labels := make([]string, len(speeds))
		for k, v := range speeds {
			labels[k] = strconv.FormatFloat(v, 'g', -1, 64) + "×"
		}
		modes = append(modes, mode{"open loop", "replay speed", labels, func(c *SweepCell) int { return indexOfValue(speeds, c.Speed) }})
	}
	plots := make([][]*plot.Plot, len(modes))
	for m, md := range modes {
		for _, kv := range kvs {
			g := sweepGrid{z: make([][]float64, len(md.labels))}
			for k := range g.z {
				g.z[k] = make([]float64, len(workers))
				for r := range g.z[k] {
					g.z[k][r] = math.NaN()
				}
			}
			var labels plotter.XYLabels
			for _, c := range rep.Cells {
				col := md.col(c)
				if c.KVScale != kv || col < 0 {
					continue
				}
				row := indexOfValue(workers, c.WorkersPerDC)
				v, text := value(c)
				g.z[col][row] = math.Max(-scale, math.Min(100*v, scale)) // beyond the scale: its end colour
				labels.XYs = append(labels.XYs, plotter.XY{X: float64(col), Y: float64(row)})
				labels.Labels = append(labels.Labels, text)
			}
			cmap := moreland.SmoothBlueRed()
			cmap.SetMin(-scale)
			cmap.SetMax(scale)
			h := plotter.NewHeatMap(g, cmap.Palette(255))
			h.Min, h.Max = -scale, scale
			h.NaN = color.Gray{Y: 230}
			p := plot.New()
			p.Title.Text = fmt.Sprintf("%s; KV %g×", md.name, kv)
			p.X.Label.Text = md.axis
			p.Y.Label.Text = "workers per DC"
			p.Add(h)
			if len(labels.XYs) > 0 {
				l, err := plotter.NewLabels(labels)
				if err != nil {
					return err
				}
				for k := range l.TextStyle {
					l.TextStyle[k].XAlign, l.TextStyle[k].YAlign = draw.XCenter, draw.YCenter
				}
				p.Add(l)
			}
			p.NominalX(md.labels...)
			ws := make([]string, len(workers))
			for k, v := range workers {
				ws[k] = strconv.Itoa(v)
			}
			p.NominalY(ws...)
			plots[m] = append(plots[m], p)
		}
	}
	const panelW, panelH = 5 * vg.Inch, 3.6 * vg.Inch
	img := vgimg.New(vg.Length(len(kvs))*panelW, vg.Length(len(modes))*panelH+0.4*vg.Inch)
	dc := draw.New(img)
	titleArea := draw.Crop(dc, 0, 0, vg.Length(len(modes))*panelH, 0)
	titleArea.FillText(draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 12), XAlign: draw.XCenter, Handler: plot.DefaultTextHandler},
		vg.Point{X: titleArea.Center().X, Y: titleArea.Min.Y + 0.12*vg.Inch}, title)
	body := draw.Crop(dc, 0, 0, 0, -0.4*vg.Inch)
	tiles := draw.Tiles{Rows: len(modes), Cols: len(kvs), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, body)
	for m := range plots {
		for k := range plots[m] {
			plots[m][k].Draw(canvases[m][k])
		}
	}
	return writePNG(path, img)
}

func indexOfValue[T int | float64](xs []T, v T) int {
	for k, x := range xs {
		if x == v {
			return k
		}
	}
	return -1
}
