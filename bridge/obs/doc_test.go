package obs

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/goindex/goindex/internal/doccheck"
	"github.com/prometheus/client_golang/prometheus"
)

// TestDoc_FileMapMatchesDirectory keeps doc.go's file map in step with the
// package's non-test Go files.
func TestDoc_FileMapMatchesDirectory(t *testing.T) { doccheck.FileMap(t, ".") }

// TestDoc_MetricsTableListsEveryMetric keeps doc.go's metrics table (and so
// the README's) in step with what the collectors describe, both ways.
func TestDoc_MetricsTableListsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^//\t([a-z_]+)\s+(counter|gauge|histogram)\b`)
	table := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		table[namespace+"_"+m[1]] = true
	}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	described := map[string]bool{}
	ch := make(chan *prometheus.Desc, 256)
	for _, c := range []prometheus.Collector{NewRelayCollector(nil), NewConsumeCollector(nil), NewRouteMetrics()} {
		c.Describe(ch)
	}
	close(ch)
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("desc %s has no fqName", d)
		}
		described[m[1]] = true
		if !table[m[1]] {
			t.Errorf("metric %s is described but not in doc.go's table", m[1])
		}
	}
	for name := range table {
		if !described[name] {
			t.Errorf("doc.go's table lists %s, which no collector describes", name)
		}
	}
	if len(described) < 60 || !strings.HasPrefix(string(doc), "// Package obs") {
		t.Errorf("%d metrics described; want the full set (≥ 60)", len(described))
	}
}

// TestDoc_READMEMetricsAreDescribed keeps the README's Metrics section to
// metric names a collector describes.
func TestDoc_READMEMetricsAreDescribed(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Metrics\n")
	if !ok {
		t.Fatal("README has no Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	ch := make(chan *prometheus.Desc, 256)
	for _, c := range []prometheus.Collector{NewRelayCollector(nil), NewConsumeCollector(nil), NewRouteMetrics()} {
		c.Describe(ch)
	}
	close(ch)
	described := map[string]bool{}
	for d := range ch {
		described[d.String()] = true
	}
	names := regexp.MustCompile("`((?:relay|consume|route)_[a-z_]+)`").FindAllStringSubmatch(section, -1)
	if len(names) < 10 {
		t.Fatalf("README Metrics section names %d metrics, want the main ones", len(names))
	}
	for _, m := range names {
		found := false
		for d := range described {
			found = found || strings.Contains(d, `fqName: "`+namespace+"_"+m[1]+`"`)
		}
		if !found {
			t.Errorf("README names %s, which no collector describes", m[1])
		}
	}
}
