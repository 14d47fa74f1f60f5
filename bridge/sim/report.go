package sim

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Report file names inside the report directory; LoadChartFile names the
// per-policy load chart.
const (
	ReportFile     = "report.md"
	TTFTChartFile  = "ttft_cdf.png"
	ThroughputFile = "throughput.png"
)

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
		l.Color, l.Dashes, l.Width = plotutil.Color(i), plotutil.Dashes(i), vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(r.Policy, l)
	}
	p.Add(plotter.NewGrid())
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
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
	vals := make(plotter.Values, len(rep.Results))
	names := make([]string, len(rep.Results))
	for i, r := range rep.Results {
		vals[i], names[i] = r.ThroughputRPS, r.Policy
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(36))
	if err != nil {
		return err
	}
	bars.Color = plotutil.Color(0)
	p.Add(bars, plotter.NewGrid())
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
	b.WriteString("\n## CKF accuracy and relay traffic\n\nProbe depth against the exact depth of the state each lane had received (over: fingerprint false positives; under: missed tracked blocks, which the CKF rules out), and the delivered state against the DC's current one (staleness).\n\n| policy | lane checks | over (blocks) | under | capacity omissions | stale behind / ahead | decisions exact, current depths would change | decisions exact delivered depths would change | max filter load | lanes converged | deltas | delta bytes | load reports | load bytes |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rep.Results {
		a, x := r.CKF, r.Relay
		fmt.Fprintf(&b, "| %s | %d | %d (%d) | %d | %d | %d / %d | %d | %d | %.1f%% | %d | %d | %d | %d | %d |\n",
			r.Policy, a.LaneChecks, a.Overcounts, a.OverBlocks, a.Undercounts, a.CapacityOmissions, a.StaleBehind, a.StaleAhead,
			a.ExactDisagreements, a.CKFDisagreements, 100*a.MaxLoadFactor, a.LanesConverged, x.Deltas, x.DeltaBytes, x.LoadReports, x.LoadReportBytes)
	}
	b.WriteString("\n## Per DC\n\nRequests served and busy seconds per DC.\n\n| policy |")
	for _, s := range c.Grid.Sites {
		fmt.Fprintf(&b, " %s |", s)
	}
	b.WriteString("\n| --- |")
	for range c.Grid.Sites {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
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
