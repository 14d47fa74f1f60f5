package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Row is one line of the report: a fault (or the warm-up), how often it
// was injected, the requests sent from its injection until the next
// fault's, and how long the system took to converge after each healing.
type Row struct {
	Fault    string `json:"fault"`
	Injected int    `json:"injected"`
	Served   uint64 `json:"requests_served"`
	// Degraded counts the requests served that the router routed without
	// fresh signals (X-Goindex-Degraded: failing open).
	Degraded uint64 `json:"requests_degraded"`
	// Failed counts requests that failed while the router was up: each is
	// a violation.
	Failed uint64 `json:"requests_failed"`
	// RouterDown counts requests that failed while the router itself was
	// the process killed.
	RouterDown uint64          `json:"requests_failed_router_down"`
	Recoveries []time.Duration `json:"recoveries_ns"`
}

// RecoverMax returns the longest recovery (0: none).
func (r *Row) RecoverMax() time.Duration {
	if len(r.Recoveries) == 0 {
		return 0
	}
	return slices.Max(r.Recoveries)
}

// RecoverMedian returns the median recovery (0: none).
func (r *Row) RecoverMedian() time.Duration {
	if len(r.Recoveries) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(r.Recoveries))
	return s[len(s)/2]
}

// Report is a run's outcome.
type Report struct {
	DCs     int           `json:"dcs"`
	Rounds  int           `json:"rounds"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Rows    []Row         `json:"rows"`
	// HostProbes counts the C host's probes (every start's), and
	// HostDegraded its scores answered degraded (no fresh signals).
	HostProbes   uint64 `json:"host_probes"`
	HostDegraded uint64 `json:"host_degraded_scores"`
	// Events counts the KV events published over all DCs.
	Events uint64 `json:"events"`
	// Violations describes every broken promise (empty: the run passed).
	Violations []string `json:"violations"`
}

// Total returns the rows summed (recoveries of every fault).
func (r *Report) Total() Row {
	t := Row{Fault: "total"}
	for _, row := range r.Rows {
		t.Injected += row.Injected
		t.Served += row.Served
		t.Degraded += row.Degraded
		t.Failed += row.Failed
		t.RouterDown += row.RouterDown
		t.Recoveries = append(t.Recoveries, row.Recoveries...)
	}
	return t
}

// Table writes the report as a plain-text table, then the violations.
func (r *Report) Table(w io.Writer) {
	fmt.Fprintf(w, "chaos: %d DCs, %d round(s), %v; %d KV events; the C host: %d probes, %d scores degraded\n",
		r.DCs, r.Rounds, r.Elapsed.Round(time.Second), r.Events, r.HostProbes, r.HostDegraded)
	fmt.Fprintf(w, "%-17s %8s %9s %9s %7s %12s %13s %13s\n", "fault", "injected", "served", "degraded", "failed", "router down", "recover p50", "recover max")
	rows := append(slices.Clone(r.Rows), r.Total())
	for i, row := range rows {
		if i == len(rows)-1 {
			fmt.Fprintln(w, strings.Repeat("-", 17+8+9+9+7+12+13+13+7))
		}
		fmt.Fprintf(w, "%-17s %8d %9d %9d %7d %12d %13s %13s\n", row.Fault, row.Injected, row.Served, row.Degraded,
			row.Failed, row.RouterDown, duration(row.RecoverMedian()), duration(row.RecoverMax()))
	}
	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "no violation: no process exited on its own, no request failed while a DC was reachable, every lane converged")
		return
	}
	fmt.Fprintf(w, "%d violation(s):\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  - %s\n", v)
	}
}

func duration(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(10 * time.Millisecond).String()
}

// counters are a row's request counters, updated by the clients.
type counters struct {
	served, degraded, failed, routerDown atomic.Uint64
}
