package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

// simPolicyOrder is the order of the final policy table: the baselines
// (single-dc with the grid's whole capacity in one DC, and the original
// one-DC slice), upstream's selectors, GORGO's cost, goindex's policy, its
// exact-index twin and the exact, current bound.
var simPolicyOrder = []string{"single-dc", "single-dc-slice", "round-robin", "load-only", "prefix-then-load", "credit", "gorgo", "ttft-uncalibrated", "ttft", "exact-oracle", "exact-now"}

// PolicyResult is one policy's figures from the simulation (`goindex sim
// --json`, the fields the final table shows).
type PolicyResult struct {
	Policy    string `json:"policy"`
	Completed int    `json:"completed"`
	Capacity  struct {
		DCs     int `json:"dcs"`
		Workers int `json:"workers"`
	} `json:"capacity"`
	ThroughputRPS float64 `json:"throughput_rps"`
	TTFTP50ms     float64 `json:"ttft_p50_ms"`
	TTFTP95ms     float64 `json:"ttft_p95_ms"`
	TTFTP99ms     float64 `json:"ttft_p99_ms"`
	E2EP95ms      float64 `json:"e2e_p95_ms"`
	HitRate       float64 `json:"hit_rate"`
	WANHops       int     `json:"wan_hops"`
	LoadImbalance float64 `json:"load_imbalance"`
}

// simulate runs `goindex sim` on the trace slice across the whole grid,
// its progress streamed, its JSON kept for the final table and its report
// (with charts) written to ReportDir.
func (d *demo) simulate(ctx context.Context) (string, error) {
	args := []string{"sim", "--trace", d.cfg.Trace, "--grid", d.cfg.Grid, "--router-site", d.cfg.RouterSite, "--json"}
	if d.cfg.Requests > 0 {
		args = append(args, "--requests", strconv.Itoa(len(d.cfg.reqs)))
	}
	if d.cfg.SimConcurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(d.cfg.SimConcurrency))
	}
	if d.cfg.ReportDir != "" {
		args = append(args, "--report", d.cfg.ReportDir)
	}
	fmt.Fprintf(d.out, "  goindex %s\n", strings.Join(args, " "))
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, d.cfg.Binary, args...)
	cmd.Stdout, cmd.WaitDelay = &stdout, stopGrace
	if last, err := d.stream(cmd, "  │ "); err != nil {
		return "", checkf("goindex sim: %v (its last line: %s)", err, last)
	}
	var rep struct {
		Policies map[string]PolicyResult `json:"policies"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return "", checkf("goindex sim --json: %v", err)
	}
	for _, name := range simPolicyOrder {
		p, ok := rep.Policies[name]
		if !ok {
			return "", checkf("goindex sim reported no policy %s", name)
		}
		if want := len(d.cfg.reqs); p.Completed != want {
			return "", checkf("goindex sim: %s completed %d of %d requests", name, p.Completed, want)
		}
		p.Policy = name
		d.sum.Policies = append(d.sum.Policies, p)
	}
	d.printPolicies()
	if d.cfg.ReportDir == "" {
		return fmt.Sprintf("%d policies on %d requests (no report directory given)", len(d.sum.Policies), len(d.cfg.reqs)), nil
	}
	d.sum.Report = filepath.Join(d.cfg.ReportDir, "report.md")
	if _, err := os.Stat(d.sum.Report); err != nil {
		return "", checkf("goindex sim wrote no report: %v", err)
	}
	return fmt.Sprintf("%d policies on %d requests; report with charts in %s", len(d.sum.Policies), len(d.cfg.reqs), d.cfg.ReportDir), nil
}

// printPolicies prints the policy table: each policy's capacity and
// figures, and its throughput and TTFT p95 against single-dc's, the
// capacity-matched baseline (the grid's workers in one DC).
func (d *demo) printPolicies() {
	var base *PolicyResult
	for i := range d.sum.Policies {
		if d.sum.Policies[i].Policy == "single-dc" {
			base = &d.sum.Policies[i]
		}
	}
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  policy\tworkers/DCs\treq/s\tTTFT p50 ms\tp95\tp99\thit rate\tWAN hops\tvs single-dc (same workers): req/s\tTTFT p95\t")
	for _, p := range d.sum.Policies {
		thr, p95 := "", ""
		if base != nil && base.ThroughputRPS > 0 && base.TTFTP95ms > 0 {
			thr = fmt.Sprintf("%.2f×", p.ThroughputRPS/base.ThroughputRPS)
			p95 = fmt.Sprintf("%+.0f%%", 100*(p.TTFTP95ms/base.TTFTP95ms-1))
		}
		fmt.Fprintf(tw, "  %s\t%d/%d\t%.2f\t%.0f\t%.0f\t%.0f\t%.1f%%\t%d\t%s\t%s\t\n", p.Policy, p.Capacity.Workers, p.Capacity.DCs,
			p.ThroughputRPS, p.TTFTP50ms, p.TTFTP95ms, p.TTFTP99ms, 100*p.HitRate, p.WANHops, thr, p95)
	}
	tw.Flush()
}
