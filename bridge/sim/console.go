package sim

import (
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"
)

// RunInput is what a caller adds to a Report for printing: where the trace
// came from, how many requests it held and how long the whole run took.
type RunInput struct {
	Trace       string
	Requests    int
	WallSeconds float64
}

// ProgressPrinter returns a Config.Progress callback that writes a line to
// w per finished policy (of policies in all) and, at most once per every,
// the latest state of the running one. It is safe for concurrent use.
func ProgressPrinter(w io.Writer, policies int, every time.Duration) func(Progress) {
	var mu sync.Mutex
	last := time.Now()
	finished := 0
	return func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p.Done:
			finished++
			fmt.Fprintf(w, "sim: %-16s done: %d requests in %.1f simulated s (%d of %d policies)\n", p.Policy, p.Completed, p.SimMs/1000, finished, policies)
		case time.Since(last) >= every:
			last = time.Now()
			fmt.Fprintf(w, "sim: %-16s %d/%d requests, %.1f simulated s\n", p.Policy, p.Completed, p.Total, p.SimMs/1000)
		}
	}
}

// SweepProgressPrinter returns a SweepConfig.Progress callback that writes
// a line to w per finished cell, with the seconds since began (and, with
// several seeds, the cell's verdict over them).
func SweepProgressPrinter(w io.Writer, began time.Time) func(done, total int, c *SweepCell) {
	return func(done, total int, c *SweepCell) {
		seeds := ""
		if v := c.Verdict; v != nil {
			seeds = fmt.Sprintf("; over %d seeds %s vs the better of load-only, prefix-then-load: %v", v.Seeds, pctSE(v.Mean, v.SE), v.Outcome)
		}
		fmt.Fprintf(w, "sweep: %d/%d %s, %d workers/DC, KV %g×: ttft %+.1f%% vs %s%s (%.0f s)\n",
			done, total, c.Setting(), c.WorkersPerDC, c.KVScale, 100*c.Delta, c.Best, seeds, time.Since(began).Seconds())
	}
}

// ReportJSON is the JSON object of a run: per-policy figures keyed by
// name, the ideal bound, and the configuration the run used.
func ReportJSON(rep *Report, in RunInput) map[string]any {
	pols := make(map[string]*Result, len(rep.Results))
	order := make([]string, len(rep.Results))
	for i, r := range rep.Results {
		pols[r.Policy] = r
		order[i] = r.Policy
	}
	c := rep.Config
	return map[string]any{
		"policies": pols,
		"ideal":    rep.Ideal,
		"config": map[string]any{
			"policies": order, "trace": in.Trace, "requests": in.Requests, "sites": c.Grid.Sites, "router_site": c.RouterSite,
			"one_site": c.OneSite, "clients": rep.Clients, "single_dc_site": rep.SingleDCSite,
			"workers_per_dc": c.WorkersPerDC, "kv_blocks_per_worker": c.KVBlocksPerWorker, "block_size": c.BlockSize,
			"prefill_tokens_per_ms": c.PrefillTokensPerMs, "decode_ms_per_token": c.DecodeMsPerToken,
			"decode_ms_per_ktoken": c.DecodeMsPerKToken, "token_budget": c.TokenBudget, "prefill_jitter": c.PrefillJitter,
			"batch_limit": c.BatchLimit, "concurrency": c.Concurrency, "open_loop": c.OpenLoop, "time_scale": c.TimeScale,
			"warmup_requests":         rep.Warmup,
			"load_report_interval_ms": float64(c.LoadReportInterval) / float64(time.Millisecond),
			"rtt_jitter_ms":           float64(c.RTTJitter) / float64(time.Millisecond),
			"inflight":                !c.NoInflight, "queue_drain": !c.NoQueueDrain, "drift": !c.NoDrift, "calibration": !c.NoCalibration, "calibrate": c.Calibrate, "dc_speed": c.DCSpeed, "price_others": c.PriceOthers, "price_kv": c.PriceKV, "price_evictions": c.PriceEvictions, "seed": c.Seed, "wall_s": in.WallSeconds,
		},
	}
}

// WriteTable writes the human-readable comparison of a run to w: the
// setting, one row per policy, what the columns mean, the ideal bound and,
// when reportDir is not empty, where the report is.
func WriteTable(w io.Writer, rep *Report, in RunInput, reportDir string) {
	c := rep.Config
	mode := fmt.Sprintf("closed loop, concurrency %d", c.Concurrency)
	if c.OpenLoop {
		mode = fmt.Sprintf("open loop, time scale %g", c.TimeScale)
	}
	fmt.Fprintf(w, "goindex sim: %s, %d requests; %d DCs × %d workers; clients: %s; %s\n",
		in.Trace, in.Requests, len(c.Grid.Sites), c.WorkersPerDC, rep.Clients, mode)
	fmt.Fprintf(w, "model: %d KV blocks × %d tokens per worker, compute %g tokens/ms, iteration ≥ %g ms + %g ms per 1k context tokens, budget %d tokens, batch limit %d; load reports every %v, RTT jitter ≤ %v\n",
		c.KVBlocksPerWorker, c.BlockSize, c.PrefillTokensPerMs, c.DecodeMsPerToken, c.DecodeMsPerKToken, c.TokenBudget, c.BatchLimit, c.LoadReportInterval, c.RTTJitter)
	if rep.Warmup > 0 {
		fmt.Fprintf(w, "figures over requests %d–%d: the first %d (the start-up burst to cold caches) are served but not counted (--warmup)\n",
			rep.Warmup+1, in.Requests, rep.Warmup)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tworkers/DCs\treq/s\tTTFT p50 ms\tp95\tp99\te2e p95 ms\thit rate\tWAN hops\tmean RTT ms\timbalance\tpreempt\tCKF over/under\t≠exact\t≠ckf\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%d/%d\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f%%\t%d\t%.1f\t%.2f\t%d\t%d/%d\t%d\t%d\t\n",
			r.Policy, r.Capacity.Workers, r.Capacity.DCs, r.ThroughputRPS, r.TTFTp50Ms, r.TTFTp95Ms, r.TTFTp99Ms, r.E2Ep95Ms, 100*r.HitRate,
			r.WANHops, r.MeanRTTms, r.LoadImbalance, r.Preemptions, r.CKF.Overcounts, r.CKF.Undercounts, r.CKF.ExactDisagreements, r.CKF.CKFDisagreements)
	}
	tw.Flush()
	checks := 0
	for _, r := range rep.Results {
		checks = max(checks, r.CKF.LaneChecks)
	}
	fmt.Fprintf(w, "\nworkers/DCs: the capacity each policy ran on (%d KV blocks per worker); single-dc is one DC at %s holding the grid's workers, single-dc-slice one DC's own share. WAN hops: requests served outside their client's site.\n", c.KVBlocksPerWorker, rep.SingleDCSite)
	fmt.Fprintf(w, "CKF over/under: probe depth above/below the exact depth of the lane's delivered state, of up to %d lane checks per policy (every ready lane of the deciding router at every decision); every lane converged to its producer's bytes.\n", checks)
	fmt.Fprintf(w, "≠exact: decisions a prefix-aware policy would have made differently with every DC's exact, current depth; ≠ckf: with each lane's exact depth of its delivered state (the CKF's own effect).\n")
	fmt.Fprintf(w, "ideal (infinite shared cache, no queue, no RTT): TTFT p50 %.0f, p95 %.0f, p99 %.0f ms, hit rate %.1f%%\n",
		rep.Ideal.TTFTp50Ms, rep.Ideal.TTFTp95Ms, rep.Ideal.TTFTp99Ms, 100*rep.Ideal.HitRate)
	if reportDir != "" {
		fmt.Fprintf(w, "report: %s\n", reportDir+"/report.md")
	}
	fmt.Fprintf(w, "wall time %.1f s\n", in.WallSeconds)
}

// WriteSweepTable writes a sweep's Markdown table to w, then, when
// reportDir is not empty, where its report and heat map are, and the wall
// time.
func WriteSweepTable(w io.Writer, rep *SweepReport, tracePath, reportDir string) error {
	if _, err := w.Write(SweepMarkdown(rep, tracePath)); err != nil {
		return err
	}
	if reportDir != "" {
		fmt.Fprintf(w, "\nreport: %s, heat map: %s\n", reportDir+"/"+SweepReportFile, reportDir+"/"+SweepHeatmapFile)
	}
	_, err := fmt.Fprintf(w, "wall time %.1f s\n", rep.WallSeconds)
	return err
}
