package obs

import "github.com/prometheus/client_golang/prometheus"

// namespace is the first part of every goindex metric name.
const namespace = "goindex"

// family is one metric of a collector: its descriptor and type. Counters
// and gauges read from a status snapshot at scrape time are const metrics
// of these.
type family struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
}

func newFamily(subsystem, name, help string, kind prometheus.ValueType, labels ...string) family {
	return family{desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, name), help, labels, nil), kind: kind}
}

// emit sends one sample of f.
func (f family) emit(ch chan<- prometheus.Metric, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(f.desc, f.kind, v, labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
