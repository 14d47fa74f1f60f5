package parity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/replica"
)

// MaxLoads bounds the target loads of one sweep.
const MaxLoads = 16

// Report is a study's outcome over a sweep of loads: what was replayed,
// the setup, the apply counts, the totals and each load's Result. Its JSON
// form is `goindex parity --json`.
type Report struct {
	Command string      `json:"command"`
	Source  Source      `json:"source"`
	Setup   Setup       `json:"setup"`
	Apply   ApplyCounts `json:"apply"`

	// Totals over every load of the sweep; rates are pooled.
	Queries             int     `json:"queries"`
	Underestimates      int     `json:"underestimates"`
	CapacityMisses      int     `json:"capacity_misses"`
	RejectedMisses      int     `json:"rejected_misses"`
	FalseNegatives      int     `json:"false_negatives"`
	WrongBest           int     `json:"wrong_best"`
	WrongBestRate       float64 `json:"wrong_best_rate"`
	FPRate              float64 `json:"fp_rate"`
	ExpectedFPRate      float64 `json:"expected_fp_rate"`
	MeanOvercountBlocks float64 `json:"mean_overcount_blocks"`

	Loads []Result `json:"loads"`
}

// Source says what a study replayed.
type Source struct {
	Kind        string `json:"kind"` // trace or events
	Path        string `json:"path"`
	Requests    int    `json:"requests,omitempty"`
	SkippedTier int    `json:"skipped_tier_events,omitempty"` // events not for the primary index
	BaseQueries int    `json:"base_queries"`
}

// Setup is a study's configuration as a report shows it.
type Setup struct {
	Lanes          int       `json:"lanes"`
	BlocksPerLane  uint64    `json:"blocks_per_lane"`
	Buckets        uint64    `json:"buckets"`
	Search         string    `json:"search"`
	Loads          []float64 `json:"target_loads"`
	Seed           uint64    `json:"seed"`
	Workers        int       `json:"workers,omitempty"`
	BlockSize      int       `json:"block_size,omitempty"`
	CapacityBlocks int       `json:"capacity_blocks,omitempty"`
}

// ReplayLogFile replays the event log at path into s, sampling samples
// stored paths as base queries (ReplayLog), and records it as the report's
// source.
func (r *Report) ReplayLogFile(s *Study, path string, samples int) ([][]uint64, error) {
	r.Source = Source{Kind: "events", Path: path}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lr := NewLogReader(f)
	base, err := s.ReplayLog(lr, samples)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.Source.SkippedTier, r.Source.BaseQueries = lr.Skipped(), len(base)
	return base, nil
}

// ReplayTraceFile replays the Mooncake trace at path into s through mock
// engines (ReplayTrace) and records it as the report's source and cfg in
// its setup.
func (r *Report) ReplayTraceFile(s *Study, path string, cfg TraceConfig) ([][]uint64, error) {
	r.Source = Source{Kind: "trace", Path: path}
	r.Setup.Workers, r.Setup.BlockSize, r.Setup.CapacityBlocks = cfg.Workers, cfg.BlockSize, cfg.CapacityBlocks
	reqs, err := trace.ReadFile(path, 0, trace.ReaderConfig{})
	if err != nil && !errors.Is(err, trace.ErrEmpty) {
		return nil, err
	}
	r.Source.Requests = len(reqs)
	base, err := s.ReplayTrace(reqs, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.Source.BaseQueries = len(base)
	return base, nil
}

// Sweep tops the study's lanes up to each of loads in turn (ascending) and
// measures qs at each, appending the results to r.Loads; then it fills the
// apply counts and the totals. A cancelled ctx stops it between loads.
func (r *Report) Sweep(ctx context.Context, s *Study, qs Queries, loads []float64) error {
	for _, l := range loads {
		if err := ctx.Err(); err != nil {
			return err
		}
		fill, err := s.Fill(l)
		if err != nil {
			return fmt.Errorf("parity: load %v: %w", l, err)
		}
		res, err := s.Measure(qs.All)
		if err != nil {
			return fmt.Errorf("parity: load %v: %w", l, err)
		}
		res.Fill = fill
		r.Loads = append(r.Loads, res)
	}
	r.Apply = s.Counts()
	r.total()
	return nil
}

// Failed reports whether any load found an underestimate or a false
// negative: the CKF broke its guarantee.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Loads, func(l Result) bool { return l.Failed() })
}

// ParseLoads parses a comma-separated list of slot occupancies in
// (0, MaxLoad], at most MaxLoads, and returns it sorted ascending without
// repeats (a sweep only tops lanes up).
func ParseLoads(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		if !(v > 0 && v <= MaxLoad) {
			return nil, fmt.Errorf("load %v not in (0, %v]", v, MaxLoad)
		}
		out = append(out, v)
	}
	if len(out) > MaxLoads {
		return nil, fmt.Errorf("%d loads, at most %d", len(out), MaxLoads)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ParseSearch maps a search mode's name to the mode.
func ParseSearch(name string) (replica.Mode, error) {
	for _, m := range []replica.Mode{replica.Chunked, replica.Bisect, replica.Linear} {
		if m.String() == name {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q (want chunked, bisect or linear)", name)
}

// total fills the report's totals from its loads.
func (r *Report) total() {
	r.Queries, r.Underestimates, r.CapacityMisses, r.RejectedMisses, r.FalseNegatives, r.WrongBest = 0, 0, 0, 0, 0, 0
	var overs, overBlocks, fps, negs int
	var expected float64
	for _, l := range r.Loads {
		r.Queries += l.Queries
		r.Underestimates += l.Underestimates
		r.CapacityMisses += l.CapacityMisses
		r.RejectedMisses += l.RejectedMisses
		r.FalseNegatives += l.FP.FalseNegatives
		r.WrongBest += l.Best.WrongBest
		overs += l.Overcounts
		overBlocks += int(l.MeanOvercountBlocks*float64(l.Overcounts) + 0.5)
		fps += l.FP.FalsePositives
		negs += l.FP.Negatives
		expected += l.FP.ExpectedFPRate * float64(l.FP.Negatives)
	}
	r.WrongBestRate = ratio(r.WrongBest, r.Queries)
	r.FPRate = ratio(fps, negs)
	r.ExpectedFPRate = 0
	if negs > 0 {
		r.ExpectedFPRate = expected / float64(negs)
	}
	r.MeanOvercountBlocks = ratio(overBlocks, overs)
}

// WriteText writes the report as `goindex parity` prints it: the source,
// the apply counts, the setup, a row per load, each load's depth error
// histogram and the totals.
func (r *Report) WriteText(w io.Writer) {
	s := &r.Setup
	switch r.Source.Kind {
	case "trace":
		fmt.Fprintf(w, "goindex parity: trace %s: %d requests over %d workers (block size %d, %d cache blocks each)\n",
			r.Source.Path, r.Source.Requests, s.Workers, s.BlockSize, s.CapacityBlocks)
	default:
		fmt.Fprintf(w, "goindex parity: event log %s (%d events not for the primary index skipped)\n", r.Source.Path, r.Source.SkippedTier)
	}
	a := &r.Apply
	fmt.Fprintf(w, "events   %d (%d block ops) applied to both indexes; rejected: exact %d, ckf %d; %d capacity omissions; %d synthetic filler blocks\n",
		a.Events, a.BlockOps, a.RejectedExact, a.RejectedCKF, a.Omissions, a.FillerBlocks)
	if a.FirstRejectExact != "" {
		fmt.Fprintf(w, "         first exact rejection: %s\n", a.FirstRejectExact)
	}
	fmt.Fprintf(w, "ckf      %d lanes × %d buckets (%d slots; sized for %d blocks), %s search; %d base queries\n\n",
		s.Lanes, s.Buckets, 4*s.Buckets, s.BlocksPerLane, s.Search, r.Source.BaseQueries)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "load\tactual\tqueries\tpairs\tunder\tcap miss\tover\tmean over\tbest agree\ttie risk\twrong best\tfp rate\t8α/65535\tratio\tfalse neg\t")
	for _, l := range r.Loads {
		fmt.Fprintf(tw, "%.0f%%\t%.1f%%\t%d\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t%d (%.3f%%)\t%.3g\t%.3g\t%.2f\t%d\t\n",
			100*l.Fill.TargetLoad, 100*l.Fill.MeanLoad, l.Queries, l.Pairs, l.Underestimates, l.CapacityMisses, l.Overcounts,
			l.MeanOvercountBlocks, l.Best.Agree, l.Best.TieRisk, l.Best.WrongBest, 100*l.Best.WrongBestRate,
			l.FP.FPRate, l.FP.ExpectedFPRate, l.FP.FPRatio, l.FP.FalseNegatives)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ndepth error CKF − exact (pairs):")
	for _, l := range r.Loads {
		fmt.Fprintf(w, "  %.0f%%:", 100*l.Fill.TargetLoad)
		for _, b := range l.DepthError {
			fmt.Fprintf(w, " %+d:%d", b.Error, b.Pairs)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\ntotal    %d queries: %d underestimates, %d capacity misses, %d misses from events only the exact index accepted, %d false negatives, %d wrong best (%.4f%%), fp rate %.3g (8α/65535: %.3g), mean overcount %.2f blocks\n",
		r.Queries, r.Underestimates, r.CapacityMisses, r.RejectedMisses, r.FalseNegatives, r.WrongBest, 100*r.WrongBestRate, r.FPRate, r.ExpectedFPRate, r.MeanOvercountBlocks)
}
