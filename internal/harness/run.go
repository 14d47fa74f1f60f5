package harness

import (
	"fmt"
	"strings"

	"github.com/goindex/goindex/goindex/kv"
)

// Run defaults.
const (
	// DefaultReaders is the number of reader goroutines in ConcurrentReaders.
	DefaultReaders = 4
	// DefaultLanes is the number of lanes in LanePool.
	DefaultLanes = 1
)

// TB is the part of testing.TB that Run uses, so that this package does not
// import testing.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Options configures Run.
type Options struct {
	Mode    Mode // optional; default Serial
	Readers int  // ConcurrentReaders goroutines; optional; default DefaultReaders
	Lanes   int  // LanePool lanes; optional; default DefaultLanes
	// ClearScope is the clear scope of the index under test; optional;
	// default ClearRank.
	ClearScope ClearScope
	// AllowOvercount counts overcounts instead of failing on them, for
	// probabilistic indexes; Report.Counters.OvercountRate gives the rate.
	// Undercounts below reach_len still fail in strict mode.
	AllowOvercount bool
	// Short selects the short-mode defaults; pass testing.Short().
	Short bool
	// Knobs overrides the environment; optional; default
	// KnobsFromEnv(Short).
	Knobs *Knobs
}

// Failure is one failing seed.
type Failure struct {
	Seed      uint64
	Mode      Mode
	Violation Violation
	// Case is the shrunk failing case; nil when shrinking was off, this was
	// not the first failing seed, or the failure does not reproduce when
	// replayed serially.
	Case *Case
}

// String describes the failure and, when shrunk, lists the minimal case.
func (f *Failure) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "harness: seed %d, %s mode: %v (rerun with HARNESS_SEED=%d)", f.Seed, f.Mode, &f.Violation, f.Seed)
	if f.Case != nil {
		b.WriteString("\n")
		b.WriteString(f.Case.String())
	}
	return b.String()
}

// Report is what Run saw over all its seeds.
type Report struct {
	Mode     Mode
	Seeds    int // seeds run
	Counters Counters
	Failures []Failure
}

// Failed reports whether any seed failed.
func (r *Report) Failed() bool { return len(r.Failures) > 0 }

// Run holds the index that newIndex returns (a fresh one per seed and per
// shrink replay) against the reference model over every seed the knobs
// select, in opts.Mode. Each failing seed is reported with t.Errorf (the
// first one shrunk to a minimal case when HARNESS_SHRINK is on); a
// malformed knob is reported with t.Fatalf. Run logs a summary of the
// counters and returns them.
func Run(t TB, newIndex func() kv.Index, opts Options) Report {
	t.Helper()
	k := opts.Knobs
	if k == nil {
		env, err := KnobsFromEnv(opts.Short)
		if err != nil {
			t.Fatalf("%v", err)
			return Report{Mode: opts.Mode}
		}
		k = &env
	}
	rc := runConfig{
		mode:           opts.Mode,
		lanes:          opts.Lanes,
		readers:        opts.Readers,
		scope:          opts.ClearScope,
		allowOvercount: opts.AllowOvercount,
		strict:         k.Strict,
	}
	if rc.lanes <= 0 {
		rc.lanes = DefaultLanes
	}
	if rc.readers <= 0 {
		rc.readers = DefaultReaders
	}
	if k.Trace {
		rc.trace = t.Logf
	}
	rep := Report{Mode: opts.Mode}
	for _, seed := range k.SeedList() {
		rc.seed = seed
		ops := Generate(seed, GenConfig{Steps: k.Steps, DocLen: k.DocLen, ClearScope: opts.ClearScope})
		out := execute(newIndex(), ops, &rc)
		rep.Seeds++
		rep.Counters.Add(out.counters)
		if out.fail == nil {
			continue
		}
		f := Failure{Seed: seed, Mode: opts.Mode, Violation: *out.fail}
		if k.Shrink && len(rep.Failures) == 0 {
			f.Case = Shrink(newIndex, ops, out.fail, ShrinkConfig{Seed: seed, ClearScope: opts.ClearScope, AllowOvercount: opts.AllowOvercount, Strict: k.Strict})
		}
		rep.Failures = append(rep.Failures, f)
		t.Errorf("%s", &f)
	}
	t.Logf("harness: %s mode, %d seeds × %d steps: %s", opts.Mode, rep.Seeds, k.Steps, &rep.Counters)
	return rep
}
