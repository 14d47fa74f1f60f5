package sim

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Report file names inside the report directory; LoadChartFile names the
// per-policy load chart.
const (
	ReportFile     = "report.md"
	TTFTChartFile  = "ttft_cdf.png"
	ThroughputFile = "throughput.png"
	// CalibrationChartFile is written when Config.DCSpeed makes some DCs
	// faster or slower than configured.
	CalibrationChartFile = "calibration.png"
)

// calibrationWindow is the window of the calibration chart's routing share.
const calibrationWindow = 10.0 // s

// cdfPoints bounds the points of one CDF line: enough for a smooth curve
// at chart resolution, few enough that 100k requests do not bloat the PNG.
const cdfPoints = 1000

// LoadChartFile is the name of policy p's per-DC load chart.
func LoadChartFile(p string) string { return "load_" + p + ".png" }

// WriteReport writes rep into dir (created if needed): ReportFile, a
// Markdown report with the configuration and its rationale, the policy
// comparison, the target ratios, per-DC figures and CKF accuracy, and the
// PNG charts it embeds (the TTFT CDF of every policy, throughput per
// policy, and each policy's per-DC load over time). tracePath names the
// trace in the text.
func WriteReport(dir string, rep *Report, tracePath string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := ttftChart(rep, filepath.Join(dir, TTFTChartFile)); err != nil {
		return fmt.Errorf("%s: %w", TTFTChartFile, err)
	}
	if err := throughputChart(rep, filepath.Join(dir, ThroughputFile)); err != nil {
		return fmt.Errorf("%s: %w", ThroughputFile, err)
	}
	for _, r := range rep.Results {
		if err := loadChart(rep, r, filepath.Join(dir, LoadChartFile(r.Policy))); err != nil {
			return fmt.Errorf("%s: %w", LoadChartFile(r.Policy), err)
		}
	}
	if len(rep.Config.DCSpeed) > 0 {
		if err := calibrationChart(rep, filepath.Join(dir, CalibrationChartFile)); err != nil {
			return fmt.Errorf("%s: %w", CalibrationChartFile, err)
		}
	}
	return os.WriteFile(filepath.Join(dir, ReportFile), markdown(rep, tracePath), 0o644)
}

func ttftChart(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = "TTFT distribution per policy"
	p.X.Label.Text = "TTFT (ms, log scale)"
	p.Y.Label.Text = "fraction of requests"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = false, true
	for i, r := range rep.Results {
		pts := cdf(r.TTFTsMs)
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.LineStyle = policyStyle(r.Policy, i)
		p.Add(l)
		p.Legend.Add(r.Policy, l)
	}
	p.Add(plotter.NewGrid())
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}

// policyColors gives every policy its own colour (Okabe and Ito's
// colour-blind-safe palette, then greys), in AllPolicies order; ttft's is
// black, drawn thicker and solid so that it stands out.
var policyColors = map[string]color.Color{
	SingleDC.String():              color.RGBA{R: 0xe6, G: 0x9f, B: 0x00, A: 0xff}, // orange
	SingleDCSlice.String():         color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}, // grey
	RoundRobin.String():            color.RGBA{R: 0x56, G: 0xb4, B: 0xe9, A: 0xff}, // sky blue
	LoadOnly.String():              color.RGBA{R: 0x00, G: 0x9e, B: 0x73, A: 0xff}, // bluish green
	PrefixThenLoad.String():        color.RGBA{R: 0xd5, G: 0x5e, B: 0x00, A: 0xff}, // vermillion
	Credit.String():                color.RGBA{R: 0xcc, G: 0x79, B: 0xa7, A: 0xff}, // reddish purple
	GORGO.String():                 color.RGBA{R: 0x00, G: 0x72, B: 0xb2, A: 0xff}, // blue
	TTFTUncalibrated.String():      color.RGBA{R: 0x66, G: 0x66, B: 0x66, A: 0xff}, // dark grey
	TTFT.String():                  color.Black,
	ExactOracle.String():           color.RGBA{R: 0xf0, G: 0xe4, B: 0x42, A: 0xff}, // yellow
	ExactNow.String():              color.RGBA{R: 0xbb, G: 0xbb, B: 0xbb, A: 0xff}, // light grey
	Clairvoyant.String():           color.RGBA{R: 0x6a, G: 0x3d, B: 0x9a, A: 0xff}, // purple
	ClairvoyantMeanOutput.String(): color.RGBA{R: 0xca, G: 0xb2, B: 0xd6, A: 0xff}, // light purple
}

// policyStyle is the line style of policy name, the k-th line of a chart:
// its own colour and dash pattern; ttft solid, black and thick.
func policyStyle(name string, k int) draw.LineStyle {
	c, ok := policyColors[name]
	if !ok {
		c = plotutil.Color(k)
	}
	st := draw.LineStyle{Color: c, Width: vg.Points(1.5), Dashes: plotutil.Dashes(k%(len(plotutil.DefaultDashes)-1) + 1)}
	if name == TTFT.String() {
		st.Width, st.Dashes = vg.Points(3.5), nil
	}
	return st
}

// cdf samples the empirical CDF of ascending xs at up to cdfPoints points;
// values are floored at 0.01 ms so a log axis can show them.
func cdf(xs []float64) plotter.XYs {
	n := len(xs)
	step := max(1, (n+cdfPoints-1)/cdfPoints)
	var pts plotter.XYs
	for k := 0; k < n; k += step {
		pts = append(pts, plotter.XY{X: math.Max(xs[k], 0.01), Y: float64(k+1) / float64(n)})
	}
	if n > 0 && (n-1)%step != 0 {
		pts = append(pts, plotter.XY{X: math.Max(xs[n-1], 0.01), Y: 1})
	}
	return pts
}

func throughputChart(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = "Throughput per policy"
	p.Y.Label.Text = "completed requests per second"
	names := make([]string, len(rep.Results))
	p.Add(plotter.NewGrid())
	for i, r := range rep.Results {
		names[i] = r.Policy
		// One bar chart per policy, in its own colour (ttft's outlined).
		bar, err := plotter.NewBarChart(plotter.Values{r.ThroughputRPS}, vg.Points(36))
		if err != nil {
			return err
		}
		st := policyStyle(r.Policy, i)
		bar.XMin, bar.Color, bar.LineStyle.Width = float64(i), st.Color, vg.Points(0.5)
		if r.Policy == TTFT.String() {
			bar.LineStyle.Width = vg.Points(3)
		}
		p.Add(bar)
	}
	p.NominalX(names...)
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}

func loadChart(rep *Report, r *Result, path string) error {
	p := plot.New()
	p.Title.Text = "Requests in flight per DC: " + r.Policy
	p.X.Label.Text = "simulated time (s)"
	p.Y.Label.Text = "requests at the DC"
	p.Legend.Top = true
	colors := len(plotutil.DefaultColors)
	for k, name := range rep.Config.Grid.Sites {
		if k >= len(r.Load.Active) {
			break
		}
		pts := make(plotter.XYs, len(r.Load.AtSeconds))
		for j, at := range r.Load.AtSeconds {
			pts[j] = plotter.XY{X: at, Y: float64(r.Load.Active[k][j])}
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color, l.Dashes = plotutil.Color(k), plotutil.Dashes(k/colors)
		p.Add(l)
		p.Legend.Add(name, l)
	}
	p.Add(plotter.NewGrid())
	return p.Save(10*vg.Inch, 5.5*vg.Inch, path)
}

// markdown renders the report text.
func markdown(rep *Report, tracePath string) []byte {
	var b bytes.Buffer
	c := rep.Config
	n := 0
	if len(rep.Results) > 0 {
		n = rep.Results[0].Requests
	}
	fmt.Fprintf(&b, "# goindex sim report\n\nTrace `%s`, %d requests, %d DCs (%v); clients: %s, each site's requests routed by its own router; single-dc's site: `%s`.\n\n", tracePath, n, len(c.Grid.Sites), c.Grid.Sites, rep.Clients, rep.SingleDCSite)
	b.WriteString("## Model and configuration\n\n| setting | value | why |\n| --- | --- | --- |\n")
	mode := fmt.Sprintf("closed loop, %d clients", c.Concurrency)
	if c.OpenLoop {
		mode = fmt.Sprintf("open loop at trace timestamps × %g", c.TimeScale)
	}
	rows := [][3]string{
		{"load", mode, "closed loop: each client sends the next trace request when its previous one completes"},
		{"workers per DC", fmt.Sprint(c.WorkersPerDC), "one worker = one GPU node serving the model"},
		{"KV capacity per worker", fmt.Sprintf("%d blocks × %d tokens = %d tokens", c.KVBlocksPerWorker, c.BlockSize, c.KVBlocksPerWorker*c.BlockSize), "16k–32k blocks of 16 tokens, the usual vLLM range, in 512-token blocks (one Mooncake id)"},
		{"iteration", fmt.Sprintf("%d tokens (decode first, prefill FIFO); lasts max(tokens / %g per ms, %g ms + %g ms per 1k context tokens)", c.TokenBudget, c.PrefillTokensPerMs, c.DecodeMsPerToken, c.DecodeMsPerKToken), "vLLM's chunked prefill (max_num_batched_tokens); the roofline: prefill compute-bound, decode memory-bound (weights + KV read); sources in bridge/sim/config.go"},
		{"KV", "paged, prefix-cached; running requests pin their blocks, LRU eviction of the rest; a decode without a free block preempts the last admitted sequence (recomputed later)", "vLLM's block manager and recompute preemption"},
		{"batch limit", fmt.Sprintf("%d sequences per worker; admission FCFS while the blocks fit", c.BatchLimit), "vLLM's max_num_seqs"},
		{"in-DC routing", "Dynamo's credit rule over an exact radix index of the DC's workers", "what Dynamo's local KV router does"},
		{"relay", "one CKF producer per DC (16 events or 1 ms cadence), leased publisher, relayproto frames over the WAN (one-way = RTT/2), one replica lane per DC", "the production path, end to end"},
		{"load reports", fmt.Sprintf("every %v per DC; stale after one-way + %d intervals; router adds its own in-flight requests: %v", c.LoadReportInterval, loadStaleReports, !c.NoInflight), "load is as stale as in production"},
		{"clients", rep.Clients, "every site has clients and a router holding the replica (--clients router-site: one site, the original model); every request pays its client's RTT to the DC chosen"},
		{"RTT", fmt.Sprintf("matrix mean + uniform [0, %v] per request", c.RTTJitter), "the matrix holds means; the router scores with the mean"},
		{"seed", fmt.Sprint(c.Seed), "same seed, same results"},
		{"warm-up", warmupText(rep), "a closed loop's first requests leave at once to cold caches: a start-up transient, not the steady state"},
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r[0], r[1], r[2])
	}
	b.WriteString("\n## Policies side by side\n\nCapacity is what each policy ran on; every policy but single-dc-slice has the same.\n\n| policy | capacity | req/s | TTFT p50 ms | p95 | p99 | e2e p95 ms | queue p95 ms | hit rate | WAN hops | mean RTT ms | load imbalance | preemptions | fallbacks |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f%% | %d | %.1f | %.2f | %d | %d |\n",
			r.Policy, r.Capacity, r.ThroughputRPS, r.TTFTp50Ms, r.TTFTp95Ms, r.TTFTp99Ms, r.E2Ep95Ms, r.QueueP95Ms, 100*r.HitRate, r.WANHops, r.MeanRTTms, r.LoadImbalance, r.Preemptions, r.Fallbacks)
	}
	if rep.Warmup > 0 {
		b.WriteString("\nThe same over every request, warm-up included:\n\n| policy | req/s | TTFT p50 ms | p95 | p99 | e2e p95 ms | hit rate |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, r := range rep.Results {
			a := r.AllRequests
			fmt.Fprintf(&b, "| %s | %.2f | %.0f | %.0f | %.0f | %.0f | %.1f%% |\n", r.Policy, a.ThroughputRPS, a.TTFTp50Ms, a.TTFTp95Ms, a.TTFTp99Ms, a.E2Ep95Ms, 100*a.HitRate)
		}
	}
	if t := targetLines(rep); len(t) > 0 {
		b.WriteString("\n## Targets\n\n")
		for _, l := range t {
			b.WriteString("- " + l + "\n")
		}
	}
	fmt.Fprintf(&b, "\n![TTFT CDF](%s)\n\n![Throughput](%s)\n", TTFTChartFile, ThroughputFile)
	if len(c.DCSpeed) > 0 {
		fmt.Fprintf(&b, "\n## Calibration\n\nDCs computing faster or slower than the rate their reports carry: %v (calibration applied: %v). Left: the compute factor the routers learned for them (each router's weighted by the requests it learned from; the dashed line is the true 1/speed), and for one correctly configured DC. Right: the TTFT model's mean error on the requests sent to them, per %g s and policy (positive: pessimistic).\n\n![Calibration](%s)\n", c.DCSpeed, c.Calibrate, calibrationWindow, CalibrationChartFile)
	}
	b.WriteString("\n## CKF accuracy and relay traffic\n\nProbe depth against the exact depth of the state each lane had received (over: fingerprint false positives; under: missed tracked blocks, which the CKF rules out), and the delivered state against the DC's current one (staleness).\n\n| policy | lane checks | over (blocks) | under | capacity omissions | stale behind / ahead | decisions exact, current depths would change | decisions exact delivered depths would change | max filter load | lanes converged | deltas | delta bytes | load reports | load bytes |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rep.Results {
		a, x := r.CKF, r.Relay
		fmt.Fprintf(&b, "| %s | %d | %d (%d) | %d | %d | %d / %d | %d | %d | %.1f%% | %d | %d | %d | %d | %d |\n",
			r.Policy, a.LaneChecks, a.Overcounts, a.OverBlocks, a.Undercounts, a.CapacityOmissions, a.StaleBehind, a.StaleAhead,
			a.ExactDisagreements, a.CKFDisagreements, 100*a.MaxLoadFactor, a.LanesConverged, x.Deltas, x.DeltaBytes, x.LoadReports, x.LoadReportBytes)
	}
	b.WriteString("\n## Per DC\n\nRequests served and busy seconds per DC.\n\n")
	tableHead(&b, "| policy |", c.Grid.Sites, "", "| --- |", "")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "| %s |", r.Policy)
		for _, d := range r.PerDC {
			fmt.Fprintf(&b, " %d / %.0f s |", d.Requests, d.BusyS)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Load over time\n\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "![%s](%s)\n\n", r.Policy, LoadChartFile(r.Policy))
	}
	return b.Bytes()
}

// warmupText describes the report's warm-up.
func warmupText(rep *Report) string {
	if rep.Warmup == 0 {
		return "none: every request is counted"
	}
	return fmt.Sprintf("the first %d requests are served but left out of the per-request figures (the whole run's are below the table)", rep.Warmup)
}

// targetLines states the targets for ttft against the policies
// present in rep, with the measured ratios, met or missed.
func targetLines(rep *Report) []string {
	by := map[string]*Result{}
	for _, r := range rep.Results {
		by[r.Policy] = r
	}
	t := by[TTFT.String()]
	if t == nil {
		return nil
	}
	out := []string{fmt.Sprintf("reference (not a policy): with an infinite cache shared by every DC, no queueing and no RTT, TTFT p50/p95/p99 would be %.0f / %.0f / %.0f ms at a %.1f%% hit rate (Ideal)",
		rep.Ideal.TTFTp50Ms, rep.Ideal.TTFTp95Ms, rep.Ideal.TTFTp99Ms, 100*rep.Ideal.HitRate)}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	if s := by[SingleDC.String()]; s != nil {
		x, y := ratio(t.ThroughputRPS, s.ThroughputRPS), 1-ratio(t.TTFTp95Ms, s.TTFTp95Ms)
		out = append(out, fmt.Sprintf("ttft vs single-dc (the same %s in one DC at %s): throughput %.2f×; TTFT p95 %s", s.Capacity, rep.SingleDCSite, x, lower(y)))
	}
	if g := by[GORGO.String()]; g != nil {
		out = append(out, fmt.Sprintf("ttft vs gorgo: TTFT p95 %s", lower(1-ratio(t.TTFTp95Ms, g.TTFTp95Ms))))
	}
	for _, p := range []Policy{PrefixThenLoad, LoadOnly} {
		if o := by[p.String()]; o != nil {
			y := 1 - ratio(t.TTFTp95Ms, o.TTFTp95Ms)
			out = append(out, fmt.Sprintf("ttft vs %s: TTFT p95 %s (target ≥ 10%% lower, %s)", p, lower(y), verdict(y >= 0.10)))
		}
	}
	if o := by[ExactOracle.String()]; o != nil {
		worst, what := 0.0, ""
		for _, f := range oracleFigures(t, o) {
			if d := math.Abs(f.ours-f.oracle) / math.Max(math.Abs(f.oracle), 1e-12); d >= worst {
				worst, what = d, f.name
			}
		}
		out = append(out, fmt.Sprintf("ttft vs exact-oracle: largest difference %.2f%% (%s; target within 2%% on every figure, %s)", 100*worst, what, verdict(worst <= 0.02)))
	}
	return out
}

// lower phrases a relative reduction y (negative: an increase).
func lower(y float64) string {
	if y < 0 {
		return fmt.Sprintf("%.1f%% higher", -100*y)
	}
	return fmt.Sprintf("%.1f%% lower", 100*y)
}

// figurePair is one figure of two results.
type figurePair struct {
	name         string
	ours, oracle float64
}

// oracleFigures lists the figures the exact-oracle target compares.
func oracleFigures(a, b *Result) []figurePair {
	return []figurePair{
		{"throughput", a.ThroughputRPS, b.ThroughputRPS},
		{"TTFT p50", a.TTFTp50Ms, b.TTFTp50Ms},
		{"TTFT p95", a.TTFTp95Ms, b.TTFTp95Ms},
		{"TTFT p99", a.TTFTp99Ms, b.TTFTp99Ms},
		{"e2e p95", a.E2Ep95Ms, b.E2Ep95Ms},
		{"hit rate", a.HitRate, b.HitRate},
		{"WAN hops", float64(a.WANHops), float64(b.WANHops)},
		{"mean RTT", a.MeanRTTms, b.MeanRTTms},
		{"load imbalance", a.LoadImbalance, b.LoadImbalance},
	}
}

// calibrationChart draws, side by side, the compute factor the routers of
// each calibrating policy learned over time for the DCs of Config.DCSpeed
// (and the true 1/speed, dashed), and those DCs' share of the requests per
// calibrationWindow under every policy.
func calibrationChart(rep *Report, path string) error {
	g := rep.Config.Grid
	var odd []int
	normal := -1
	for k, name := range g.Sites {
		if v, ok := rep.Config.DCSpeed[name]; ok && v != 1 {
			odd = append(odd, k)
		} else if normal < 0 {
			normal = k
		}
	}
	factor := plot.New()
	factor.Title.Text = "Learned compute factor"
	factor.X.Label.Text = "simulated time (s)"
	factor.Y.Label.Text = "factor (1 = as configured)"
	factor.Legend.Top = true
	share := plot.New()
	share.Title.Text = fmt.Sprintf("TTFT estimate error of requests to the re-speeded DCs, mean per %g s", calibrationWindow)
	share.X.Label.Text = "simulated time (s)"
	share.Y.Label.Text = "estimate − actual TTFT (ms)"
	share.Legend.Top = true
	line := 0
	for i, r := range rep.Results {
		w := r.Load.PrefillWeight
		for _, k := range append(odd, normal) {
			if len(w) <= k || k < 0 {
				continue
			}
			pts := make(plotter.XYs, len(w[k]))
			for j, v := range w[k] {
				pts[j] = plotter.XY{X: r.Load.AtSeconds[j], Y: v}
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			l.LineStyle = policyStyle(r.Policy, i)
			l.LineStyle.Dashes = plotutil.Dashes(line % len(plotutil.DefaultDashes))
			line++
			factor.Add(l)
			factor.Legend.Add(fmt.Sprintf("%s: %s", r.Policy, g.Sites[k]), l)
		}
		// The estimate error of the requests sent to the re-speeded DCs,
		// per window.
		var pts plotter.XYs
		inOdd := map[int]bool{}
		for _, k := range odd {
			inOdd[k] = true
		}
		n, sum, end := 0, 0.0, calibrationWindow
		for _, sd := range r.Sends {
			for sd.AtSeconds >= end {
				if n > 0 {
					pts = append(pts, plotter.XY{X: end - calibrationWindow/2, Y: sum / float64(n)})
				}
				n, sum, end = 0, 0, end+calibrationWindow
			}
			if sd.HasEst && inOdd[r.dcIndex(sd.DC, g)] {
				n++
				sum += sd.EstMs - sd.TTFTMs
			}
		}
		if len(pts) > 1 {
			l, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			l.LineStyle = policyStyle(r.Policy, i)
			share.Add(l)
			share.Legend.Add(r.Policy, l)
		}
	}
	for _, k := range odd {
		truth := 1 / rep.Config.DCSpeed[g.Sites[k]]
		if last := lastSample(rep); last > 0 {
			l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: truth}, {X: last, Y: truth}})
			if err != nil {
				return err
			}
			l.Color, l.Dashes = color.Gray{Y: 100}, []vg.Length{vg.Points(6), vg.Points(4)}
			factor.Add(l)
			factor.Legend.Add(fmt.Sprintf("true factor of %s", g.Sites[k]), l)
		}
	}
	factor.Add(plotter.NewGrid())
	share.Add(plotter.NewGrid())
	img := vgimg.New(16*vg.Inch, 5.5*vg.Inch)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadY: vg.Inch / 8, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	plots := [][]*plot.Plot{{factor, share}}
	canvases := plot.Align(plots, tiles, draw.New(img))
	factor.Draw(canvases[0][0])
	share.Draw(canvases[0][1])
	return writePNG(path, img)
}

// dcIndex maps the DC index of r's run to its grid site index: single-dc
// runs one DC (at its site), every other policy one per site in order.
func (r *Result) dcIndex(dc int, g *Grid) int {
	if len(r.PerDC) == len(g.Sites) {
		return dc
	}
	k, _ := g.Index(r.PerDC[dc].Name)
	return k
}

// lastSample is the latest load sample time of rep's runs, s.
func lastSample(rep *Report) float64 {
	last := 0.0
	for _, r := range rep.Results {
		if n := len(r.Load.AtSeconds); n > 0 {
			last = max(last, r.Load.AtSeconds[n-1])
		}
	}
	return last
}

// writePNG writes the canvas img to path as a PNG file.
func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
