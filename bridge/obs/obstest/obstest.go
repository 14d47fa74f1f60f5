// Package obstest holds the test support for scraping a goindex metrics
// endpoint: one scrape parsed by the Prometheus text parser, and a sample
// looked up by name and labels.
package obstest

import (
	"fmt"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is one scrape of /metrics by metric name.
type Families map[string]*dto.MetricFamily

// Scrape fetches and parses base + "/metrics".
func Scrape(base string) (Families, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse %s/metrics: %w", base, err)
	}
	return fams, nil
}

// Value returns the first sample of name whose labels include every
// "k=v" of labels: a counter's or gauge's value, a histogram's sample
// count.
func (f Families) Value(name string, labels ...string) (float64, error) {
	fam, ok := f[name]
	if !ok {
		return 0, fmt.Errorf("%s not scraped", name)
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), nil
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), nil
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), nil
		}
	}
	return 0, fmt.Errorf("%s%v not scraped", name, labels)
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for _, kv := range labels {
		k, v, _ := strings.Cut(kv, "=")
		found := false
		for _, lp := range m.GetLabel() {
			found = found || (lp.GetName() == k && lp.GetValue() == v)
		}
		if !found {
			return false
		}
	}
	return true
}

// Want returns nil when name{labels} equals v in a fresh scrape of base,
// else an error naming what it got.
func Want(base string, v float64, name string, labels ...string) error {
	f, err := Scrape(base)
	if err != nil {
		return err
	}
	got, err := f.Value(name, labels...)
	if err != nil {
		return err
	}
	if got != v {
		return fmt.Errorf("%s%v = %g, want %g", name, labels, got, v)
	}
	return nil
}
