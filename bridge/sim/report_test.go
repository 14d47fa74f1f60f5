package sim

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

func TestWriteReport_WritesMarkdownAndPNGCharts(t *testing.T) {
	w := shippedWorkload(t, 120, 60)
	rep := runAll(t, Config{Grid: fourSites(t), Concurrency: 32, Seed: testSeed(t), Policies: []Policy{SingleDC, TTFT, ExactOracle}}, w)
	dir := filepath.Join(t.TempDir(), "report")
	if err := WriteReport(dir, rep, "head.jsonl"); err != nil {
		t.Fatalf("WriteReport: %v", err)
	}
	charts := []string{TTFTChartFile, ThroughputFile}
	for _, r := range rep.Results {
		charts = append(charts, LoadChartFile(r.Policy))
	}
	for _, name := range charts {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.HasPrefix(b, pngMagic) || len(b) < 1000 {
			t.Errorf("%s: %d bytes, PNG header %v, err %v", name, len(b), bytes.HasPrefix(b, pngMagic), err)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatalf("read %s: %v", ReportFile, err)
	}
	text := string(md)
	for _, want := range append(charts, "## Targets", "ttft vs single-dc", "ttft vs exact-oracle", "head.jsonl", "KV capacity per worker") {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q", ReportFile, want)
		}
	}
	for _, r := range rep.Results {
		if !strings.Contains(text, "| "+r.Policy+" |") {
			t.Errorf("%s has no row for %s", ReportFile, r.Policy)
		}
	}
}

func TestCDF_SamplesEndAtOne(t *testing.T) {
	xs := make([]float64, 2500)
	for i := range xs {
		xs[i] = float64(i)
	}
	pts := cdf(xs)
	if len(pts) > cdfPoints+1 || pts[len(pts)-1].Y != 1 || pts[0].X != 0.01 {
		t.Errorf("cdf(2500 values) = %d points, last %+v, first %+v", len(pts), pts[len(pts)-1], pts[0])
	}
	for k := 1; k < len(pts); k++ {
		if pts[k].X < pts[k-1].X || pts[k].Y <= pts[k-1].Y {
			t.Fatalf("cdf not increasing at %d: %+v then %+v", k, pts[k-1], pts[k])
		}
	}
}

// TestWriteReport_CalibrationChartWhenADCIsRespeeded: with DCSpeed set the
// report also draws the calibration chart and says which DCs and whether
// the factor was applied; every policy's line style is its own, ttft's
// the thickest.
func TestWriteReport_CalibrationChartWhenADCIsRespeeded(t *testing.T) {
	w := shippedWorkload(t, 80, 60)
	c := Config{Grid: fourSites(t), Concurrency: 16, Seed: testSeed(t), Policies: []Policy{GORGO, TTFTUncalibrated, TTFT},
		DCSpeed: map[string]float64{"iad": 2}, Calibrate: true}
	rep := runAll(t, c, w)
	dir := t.TempDir()
	if err := WriteReport(dir, rep, "head.jsonl"); err != nil {
		t.Fatalf("WriteReport: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, CalibrationChartFile))
	if err != nil || !bytes.HasPrefix(b, pngMagic) {
		t.Errorf("%s: %d bytes, err %v", CalibrationChartFile, len(b), err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, ReportFile))
	if !strings.Contains(string(md), "## Calibration") || !strings.Contains(string(md), "map[iad:2]") {
		t.Errorf("%s lacks the calibration section", ReportFile)
	}
	seen := map[string]string{}
	for k, p := range AllPolicies {
		st := policyStyle(p.String(), k)
		key := fmt.Sprint(st.Color, st.Dashes)
		if other, dup := seen[key]; dup {
			t.Errorf("%s and %s share a line style", p, other)
		}
		seen[key] = p.String()
		if p != TTFT && st.Width >= policyStyle(TTFT.String(), 0).Width {
			t.Errorf("%s is drawn as thick as ttft", p)
		}
	}
}
