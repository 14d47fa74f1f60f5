package harness

import (
	"strings"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// testKnobs returns small knobs for the harness's own tests: HARNESS_SEED_BASE
// and HARNESS_SEED from the environment still apply, so a failure can be
// rerun by seed.
func testKnobs(t *testing.T, seeds, steps int) *Knobs {
	t.Helper()
	k, err := KnobsFromEnv(testing.Short())
	if err != nil {
		t.Fatalf("KnobsFromEnv: %v", err)
	}
	k.Seeds, k.Steps, k.Shrink, k.Strict, k.Trace = seeds, steps, true, true, false
	if testing.Short() {
		k.Seeds = max(1, seeds/2)
	}
	return &k
}

// allModes are the modes every correct index must pass.
var allModes = []Options{
	{Mode: Serial},
	{Mode: ConcurrentReaders, Readers: 3},
	{Mode: LanePool, Lanes: 1},
	{Mode: LanePool, Lanes: 4},
}

func modeName(o Options) string {
	switch o.Mode {
	case ConcurrentReaders:
		return "readers"
	case LanePool:
		return "lanes" + string(rune('0'+o.Lanes))
	}
	return "serial"
}

// TestRun_ExactIndexPassesEveryMode: the simple exact index passes in every
// mode with no violation, and each mode did its kind of checking.
func TestRun_ExactIndexPassesEveryMode(t *testing.T) {
	for _, o := range allModes {
		t.Run(modeName(o), func(t *testing.T) {
			o.Knobs = testKnobs(t, 6, 600)
			rep := Run(t, newTestIndex(faultNone), o)
			c := rep.Counters
			if rep.Failed() || c.Overcounts != 0 || c.Undercounts != 0 || c.ApplyErrors != 0 || c.Malformed != 0 {
				t.Errorf("exact index: %s; failures %d", &c, len(rep.Failures))
			}
			if c.Exact == 0 || c.Holes == 0 {
				t.Errorf("exact index: exact %d, holes %d: want both > 0 (reach_len < held_len occurs)", c.Exact, c.Holes)
			}
			if c.Rejects == 0 {
				t.Errorf("exact index: no allowed rejects: the workload never stored below an orphan")
			}
			switch o.Mode {
			case Serial:
				if c.Queries == 0 || c.Checkpoints != 0 {
					t.Errorf("serial: queries %d, checkpoints %d: want queries after every op", c.Queries, c.Checkpoints)
				}
			case ConcurrentReaders:
				if c.ConcurrentMatches == 0 || c.Checkpoints == 0 {
					t.Errorf("readers: concurrent matches %d, checkpoints %d: want both > 0", c.ConcurrentMatches, c.Checkpoints)
				}
			case LanePool:
				if c.Checkpoints == 0 || c.Ops == 0 {
					t.Errorf("lanes: checkpoints %d, ops %d: want both > 0", c.Checkpoints, c.Ops)
				}
			}
		})
	}
}

// TestRun_HeldScoresAreHoles: an index scoring held_len (dynkv's counting)
// is within bounds: every check is exact by §3.6's definition.
func TestRun_HeldScoresAreHoles(t *testing.T) {
	rep := Run(t, newTestIndex(faultHeldScores), Options{Knobs: testKnobs(t, 4, 600)})
	c := rep.Counters
	if rep.Failed() || c.Exact != c.MemberChecks {
		t.Errorf("held-scoring index: %s; want every check exact", &c)
	}
}

// runBroken runs a broken index through a recorder and returns the report
// and what was reported.
func runBroken(t *testing.T, f fault, o Options) (Report, *recorder) {
	t.Helper()
	rec := &recorder{t: t}
	rep := Run(rec, newTestIndex(f), o)
	if rec.fatal != "" {
		t.Fatalf("Run: fatal %q", rec.fatal)
	}
	return rep, rec
}

// wantShrunk checks that a broken index was caught with kind, reported
// with its seed, and shrunk to at most maxOps engine-valid ops that still
// fail the same way.
func wantShrunk(t *testing.T, f fault, o Options, kind ViolationKind, maxOps int) *Case {
	t.Helper()
	rep, rec := runBroken(t, f, o)
	if !rep.Failed() || len(rec.errors) != len(rep.Failures) {
		t.Fatalf("broken index (fault %d): %d failures, %d errors reported, want ≥ 1 of each", f, len(rep.Failures), len(rec.errors))
	}
	first := rep.Failures[0]
	if first.Violation.Kind != kind {
		t.Errorf("first failure is %s, want %s: %s", first.Violation.Kind, kind, &first)
	}
	if !strings.Contains(rec.errors[0], "HARNESS_SEED=") {
		t.Errorf("report %q does not say how to rerun the seed", rec.errors[0])
	}
	c := first.Case
	if c == nil {
		t.Fatalf("first failure was not shrunk: %s", &first)
	}
	t.Logf("%s", &first)
	if len(c.Ops) > maxOps || len(c.Ops) >= c.From {
		t.Errorf("shrunk to %d ops from %d, want ≤ %d", len(c.Ops), c.From, maxOps)
	}
	if i := firstInvalid(c.Ops, o.ClearScope); i >= 0 {
		t.Errorf("shrunk case op %d %s is not engine-valid", i+1, &c.Ops[i])
	}
	sh := &shrinker{newIndex: newTestIndex(f), rc: runConfig{scope: o.ClearScope, strict: true}}
	if v := sh.replay(candidate{ops: c.Ops, probe: c.Probe}); v == nil || v.Kind != kind {
		t.Errorf("replaying the shrunk case gives %v, want a %s", v, kind)
	}
	for _, f := range rep.Failures[1:] {
		if f.Case != nil {
			t.Errorf("seed %d was shrunk too; only the first failing seed is", f.Seed)
		}
	}
	return c
}

// TestRun_OvercountCaughtAndShrunk: ignoring removals overcounts; the
// minimal case is a one-block store and its removal.
func TestRun_OvercountCaughtAndShrunk(t *testing.T) {
	c := wantShrunk(t, faultIgnoreRemovals, Options{Knobs: testKnobs(t, 3, 400)}, Overcount, 2)
	if len(c.Ops) == 2 && (len(c.Ops[0].Event.Blocks) != 1 || len(c.Ops[1].Event.Removed) != 1 || len(c.Probe[0].Locals) != 1) {
		t.Errorf("shrunk case is not store [a]; remove [a]; probe [a]:\n%s", c)
	}
}

// TestRun_UndercountCaughtAndShrunk: losing the last block of a store
// undercounts; the minimal case is one two-block store.
func TestRun_UndercountCaughtAndShrunk(t *testing.T) {
	c := wantShrunk(t, faultDropLastBlock, Options{Knobs: testKnobs(t, 3, 400)}, Undercount, 1)
	if len(c.Ops) == 1 && (len(c.Ops[0].Event.Blocks) != 2 || len(c.Probe[0].Locals) != 2) {
		t.Errorf("shrunk case is not one two-block store probed in full:\n%s", c)
	}
}

// TestRun_WrongClearScopeCaughtAndShrunk: a worker-wide clear under a
// rank-scoped harness undercounts the sibling rank; the case keeps two
// members (seed 3 has two dp ranks per worker).
func TestRun_WrongClearScopeCaughtAndShrunk(t *testing.T) {
	k := testKnobs(t, 1, 600)
	k.OneSeed, k.Seed = true, 3
	c := wantShrunk(t, faultClearWorker, Options{Knobs: k}, Undercount, 2)
	if len(members(c.Ops)) != 2 {
		t.Errorf("shrunk case touches members %v, want two ranks of one worker:\n%s", members(c.Ops), c)
	}
}

// TestRun_ApplyErrorCaughtAndShrunk: an error on a duplicate store fails in
// strict mode; the minimal case stores one block twice.
func TestRun_ApplyErrorCaughtAndShrunk(t *testing.T) {
	wantShrunk(t, faultRejectDuplicate, Options{Knobs: testKnobs(t, 3, 600)}, ApplyError, 2)
}

// TestRun_MalformedCaughtInEveryMode: a member reported twice fails in every
// mode, concurrent readers included.
func TestRun_MalformedCaughtInEveryMode(t *testing.T) {
	for _, o := range allModes {
		t.Run(modeName(o), func(t *testing.T) {
			k := testKnobs(t, 1, 200)
			k.Shrink = false
			o.Knobs = k
			rep, _ := runBroken(t, faultDuplicateMember, o)
			if !rep.Failed() || rep.Failures[0].Violation.Kind != Malformed {
				t.Errorf("duplicate members: failures %v, want a malformed match", rep.Failures)
			}
		})
	}
}

// TestRun_BrokenIndexCaughtInPipelinedModes: the overcounting index also
// fails under concurrent readers and the lane pool, where bounds are
// checked only at checkpoints, and the failure still shrinks (serially).
func TestRun_BrokenIndexCaughtInPipelinedModes(t *testing.T) {
	for _, o := range allModes[1:] {
		t.Run(modeName(o), func(t *testing.T) {
			o.Knobs = testKnobs(t, 2, 400)
			wantShrunk(t, faultIgnoreRemovals, o, Overcount, 2)
		})
	}
}

// TestRun_AllowOvercountReportsRate: a probabilistic index passes with
// AllowOvercount and reports its false-positive rate, fails without it, and
// still fails on undercounts with it.
func TestRun_AllowOvercountReportsRate(t *testing.T) {
	rep := Run(t, newTestIndex(faultFalsePositive), Options{AllowOvercount: true, Knobs: testKnobs(t, 3, 400)})
	c := rep.Counters
	if rep.Failed() || c.Overcounts == 0 || c.OvercountBlocks < c.Overcounts {
		t.Errorf("lossy index with AllowOvercount: %s; want a pass with overcounts", &c)
	}
	if r := c.OvercountRate(); r <= 0 || r > 0.03 {
		t.Errorf("OvercountRate() = %.4f, want in (0, 0.03] (3%% of the non-full scores)", r)
	}
	k := testKnobs(t, 3, 400)
	k.Shrink = false
	if rep, _ := runBroken(t, faultFalsePositive, Options{Knobs: k}); !rep.Failed() {
		t.Errorf("lossy index without AllowOvercount passed: %s", &rep.Counters)
	}
	if rep, _ := runBroken(t, faultDropLastBlock, Options{AllowOvercount: true, Knobs: k}); !rep.Failed() {
		t.Errorf("undercounting index passed with AllowOvercount: %s", &rep.Counters)
	}
}

// TestRun_NonStrictCountsUndercounts: with HARNESS_STRICT=0 undercounts and
// apply errors are counted, not failed.
func TestRun_NonStrictCountsUndercounts(t *testing.T) {
	k := testKnobs(t, 2, 400)
	k.Strict = false
	for _, f := range []fault{faultDropLastBlock, faultRejectDuplicate} {
		rep, _ := runBroken(t, f, Options{Knobs: k})
		c := rep.Counters
		if rep.Failed() || c.Undercounts+c.ApplyErrors == 0 {
			t.Errorf("fault %d, non-strict: failed %v, %s; want a pass that counts", f, rep.Failed(), &c)
		}
	}
}

// TestRun_BadKnobIsFatal: a malformed HARNESS_* value stops the run.
func TestRun_BadKnobIsFatal(t *testing.T) {
	t.Setenv("HARNESS_STEPS", "many")
	rec := &recorder{t: t}
	rep := Run(rec, newTestIndex(faultNone), Options{})
	if rec.fatal == "" || rep.Seeds != 0 {
		t.Errorf("HARNESS_STEPS=many: fatal %q, seeds %d; want a fatal error and no run", rec.fatal, rep.Seeds)
	}
}

// TestRun_FailedApplyInLane: a lane reports an apply error at the next
// checkpoint, with the op that failed.
func TestRun_FailedApplyInLane(t *testing.T) {
	ops := []Op{
		{Kind: OpEvent, Event: kv.Event{Member: m0, EventID: 1, Kind: kv.Cleared}},
		{Kind: OpEvent, Event: kv.Event{Member: m0, EventID: 2, Kind: kv.Cleared}, Checkpoint: true},
	}
	out := execute(&fixedIndex{err: errTestParent}, ops, &runConfig{mode: LanePool, lanes: 4, strict: true})
	if out.fail == nil || out.fail.Kind != ApplyError || out.fail.Op != 0 || out.counters.Ops != 2 {
		t.Errorf("lane pool with failing Apply: fail %v, ops %d; want an apply error at op 0 and 2 ops applied", out.fail, out.counters.Ops)
	}
}

// TestRun_TraceLogsEveryOp: with HARNESS_TRACE on, every op (and every
// checkpoint of a pipelined mode) is logged, plus the summary.
func TestRun_TraceLogsEveryOp(t *testing.T) {
	for _, o := range []Options{{Mode: Serial}, {Mode: LanePool, Lanes: 2}} {
		k := testKnobs(t, 1, 30)
		k.Seeds, k.Trace = 1, true
		o.Knobs = k
		rec := &recorder{t: t}
		rep := Run(rec, newTestIndex(faultNone), o)
		want := rep.Counters.Ops + rep.Counters.Checkpoints + 1
		if rep.Failed() || rec.logs != want {
			t.Errorf("%s trace: %d log lines, want %d (ops + checkpoints + summary)", o.Mode, rec.logs, want)
		}
	}
}
