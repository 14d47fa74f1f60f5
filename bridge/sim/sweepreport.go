package sim

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

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
// best baseline, every losing cell marked) with the targets and the
// summary, and SweepHeatmapFile, the heat map of ttft against the best
// baseline per cell. tracePath names the trace in the text.
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
	s := rep.Summary
	fmt.Fprintf(&b, "Targets (set before measuring): %s.\n\n", sweepTargetNote)
	fmt.Fprintf(&b, "Summary over %d cells: ttft won %d, tied %d (within ±%.0f%%), lost %d against the best baseline; Δ from %+.1f%% to %+.1f%%. Against the better of load-only and prefix-then-load: %d cells lost by more than 1%% (worst %+.1f%%); band (concurrency %d–%d, %d workers per DC, KV 1×): %d of %d cells ≥ %.0f%% better (worst %+.1f%%).\n\n",
		len(rep.Cells), s.Won, s.Tied, 100*SweepLossMargin, s.Lost, 100*s.BestDelta, 100*s.WorstDelta,
		s.TargetLost, 100*s.WorstTarget, SweepBandLowC, SweepBandHighC, c.WorkersPerDC, s.BandMet, s.BandCells, 100*SweepBandGain, 100*s.BandWorst)
	fmt.Fprintf(&b, "![ttft vs the best baseline](%s)\n\n", SweepHeatmapFile)
	tableHead(&b, "| load | workers/DC | KV × (blocks) | prefill util. | ttft p95 ms |", rep.Config.Baselines,
		" best baseline | Δ vs best | Δ vs better of load-only, prefix-then-load | |", "| --- | ---: | ---: | ---: | ---: |", " --- | ---: | ---: | --- |")
	for _, cell := range rep.Cells {
		fmt.Fprintf(&b, "| %s | %d | %g (%d) | %.0f%% | %.0f |", cell.Setting(), cell.WorkersPerDC, cell.KVScale, cell.KVBlocksPerWorker, 100*cell.Utilization, cell.P95ms[TTFT.String()])
		for _, p := range rep.Config.Baselines {
			fmt.Fprintf(&b, " %.0f |", cell.P95ms[p.String()])
		}
		mark := ""
		if cell.Lost {
			mark = "**lost**"
		}
		fmt.Fprintf(&b, " %s | %+.1f%% | %s | %s |\n", cell.Best, 100*cell.Delta, pct(cell.TargetDelta), mark)
	}
	return b.Bytes()
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
// with its Δ and every losing cell marked LOST.
func sweepHeatmap(rep *SweepReport, path string) error {
	kvs := sortedSettings(rep.Cells, func(c *SweepCell) (float64, bool) { return c.KVScale, true })
	workers := sortedSettings(rep.Cells, func(c *SweepCell) (int, bool) { return c.WorkersPerDC, true })
	concs := sortedSettings(rep.Cells, func(c *SweepCell) (int, bool) { return c.Concurrency, c.Concurrency > 0 })
	speeds := sortedSettings(rep.Cells, func(c *SweepCell) (float64, bool) { return c.Speed, c.Speed > 0 })
	if len(kvs) == 0 || len(workers) == 0 {
		return fmt.Errorf("no cells")
	}
	scale := 5.0 // percent; at least ±5% so that ties look neutral
	for _, c := range rep.Cells {
		scale = max(scale, math.Min(math.Abs(100*c.Delta), 50))
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
				g.z[col][row] = 100 * c.Delta
				text := fmt.Sprintf("%+.1f%%", 100*c.Delta)
				if c.Lost {
					text += " LOST"
				}
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
	title := draw.Crop(dc, 0, 0, vg.Length(len(modes))*panelH, 0)
	title.FillText(draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 12), XAlign: draw.XCenter, Handler: plot.DefaultTextHandler},
		vg.Point{X: title.Center().X, Y: title.Min.Y + 0.12*vg.Inch},
		fmt.Sprintf("ttft TTFT p95 vs the best baseline (%s), Δ %%; blue: ttft faster; LOST: slower by > 1%%", policyNamesOf(rep.Config.Baselines)))
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
