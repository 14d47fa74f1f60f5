package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/goindex/goindex/internal/doccheck"
	"github.com/goindex/goindex/internal/testseed"
)

func TestDoc_FileMapMatchesDirectory(t *testing.T) { doccheck.FileMap(t, ".") }

// full and none are fixed jitter sources: the wait is the whole step, or
// half of it.
func full(d time.Duration) time.Duration { return d }
func none(time.Duration) time.Duration   { return 0 }

func TestBackoff_DoublesToItsCapAndStartsOverAfterAReset(t *testing.T) {
	const ms = time.Millisecond
	b := Backoff{First: 250 * ms, Max: 2 * time.Second, Jitter: full}
	for i, want := range []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second} {
		if got := b.Next(); got != want {
			t.Errorf("Next() after %d failures = %v, want %v", i, got, want)
		}
	}
	b.Reset()
	for i, want := range []time.Duration{250 * ms, 500 * ms} {
		if got := b.Next(); got != want {
			t.Errorf("Next() %d after a Reset = %v, want %v", i, got, want)
		}
	}
	b.Jitter = none
	if got := b.Next(); got != 500*ms {
		t.Errorf("Next() with no jitter on a 1s step = %v, want 500ms (half the step)", got)
	}
}

func TestBackoff_CapBelowFirstOrHugeNeverGoesWrong(t *testing.T) {
	b := Backoff{First: time.Second, Jitter: full} // no Max: First every time
	for i := range 3 {
		if got := b.Next(); got != time.Second {
			t.Errorf("Next() %d with no Max = %v, want 1s", i, got)
		}
	}
	const most = time.Duration(1<<63 - 1)
	b = Backoff{First: time.Second, Max: most, Jitter: full}
	prev := time.Duration(0)
	for i := range 80 { // past 2^63 ns: doubling must stop at Max, not wrap
		got := b.Next()
		if got < prev || got > most {
			t.Fatalf("Next() %d with Max %v = %v after %v, want between them", i, most, got, prev)
		}
		prev = got
	}
	if prev != most {
		t.Errorf("Next() after 80 failures with Max %v = %v, want Max", most, prev)
	}
}

func TestBackoff_RandomJitterStaysWithinHalfTheStepAndTheStep(t *testing.T) {
	r := testseed.Rand(t, 1)
	b := Backoff{First: 10 * time.Millisecond, Max: 10 * time.Second,
		Jitter: func(d time.Duration) time.Duration { return time.Duration(r.Int64N(int64(d))) }}
	step := b.First
	seen := map[time.Duration]bool{}
	for i := range 40 {
		got := b.Next()
		if got < step/2 || got > step {
			t.Errorf("Next() %d on step %v = %v, want within [%v, %v]", i, step, got, step/2, step)
		}
		seen[got] = true
		step = min(2*step, b.Max)
	}
	if len(seen) < 30 {
		t.Errorf("40 jittered waits took %d distinct values, want at least 30 (retriers in lockstep)", len(seen))
	}
	b.Jitter = nil // the default source keeps to the same bounds
	for i := range 20 {
		if got := b.Next(); got < b.Max/2 || got > b.Max {
			t.Errorf("Next() %d with the default jitter on step %v = %v, want within [%v, %v]", i, b.Max, got, b.Max/2, b.Max)
		}
	}
}

func TestBackoff_PollFormIsReadyOnceTheWaitPassed(t *testing.T) {
	b := Backoff{First: 250 * time.Millisecond, Max: time.Second, Jitter: full}
	now := time.Unix(1000, 0)
	if !b.Ready(now) {
		t.Fatal("Ready() of a fresh Backoff = false, want true")
	}
	for i, want := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, time.Second} {
		b.Failed(now)
		if b.Ready(now.Add(want-time.Nanosecond)) || !b.Ready(now.Add(want)) {
			t.Errorf("failure %d at t: Ready from t+%v, want t+%v", i+1, b.at.Sub(now), want)
		}
	}
	b.Reset()
	if !b.Ready(now) {
		t.Error("Ready(t) after a Reset = false, want true")
	}
	b.Failed(now)
	if got := b.at.Sub(now); got != 250*time.Millisecond {
		t.Errorf("first failure after a Reset: Ready from t+%v, want t+250ms", got)
	}
}

func TestSleep_ReportsWhetherTheContextIsLive(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) || !Sleep(context.Background(), 0) {
		t.Error("Sleep(live ctx) = false, want true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) || Sleep(ctx, 0) {
		t.Error("Sleep(ended ctx) = true, want false at once")
	}
}

// An attempt that worked for Max before it failed is a success: the wait
// starts over. One that worked for less, or never, is another failure.
func TestBackoff_ServedResetsOnlyAfterWorkingForMax(t *testing.T) {
	now := time.Unix(1000, 0)
	b := Backoff{First: time.Second, Max: 8 * time.Second, Jitter: full}
	for range 3 {
		b.Next()
	}
	if b.Failures() != 3 {
		t.Fatalf("Failures() after 3 waits = %d, want 3", b.Failures())
	}
	for _, since := range []time.Time{{}, now.Add(-7 * time.Second)} {
		if b.Served(since, now) {
			t.Errorf("Served(worked %v) reset the backoff, want not (under Max)", now.Sub(since))
		}
	}
	if got := b.Next(); got != 8*time.Second || b.Failures() != 4 {
		t.Errorf("Next() after short attempts = %v with %d failures, want 8s and 4", got, b.Failures())
	}
	if !b.Served(now.Add(-8*time.Second), now) {
		t.Error("Served(worked Max) did not reset the backoff")
	}
	if got := b.Next(); got != time.Second || b.Failures() != 1 {
		t.Errorf("Next() after an attempt that served = %v with %d failures, want 1s and 1", got, b.Failures())
	}
	one := Backoff{First: time.Second, Jitter: full} // no Max: First is the bar
	if !one.Served(now.Add(-time.Second), now) {
		t.Error("Served(worked First) with no Max did not reset")
	}
}
