package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is the wait before each retry of something failing: steps of
// First, 2×First, 4×First… up to Max, each taken as step/2 plus
// Jitter(step/2). The zero step is First; Reset returns to it.
type Backoff struct {
	// First is the step after a success or at the start; required.
	First time.Duration
	// Max caps the step; optional; default (or below First): First.
	Max time.Duration
	// Jitter returns a duration in [0, d] for d > 0; optional; default:
	// uniform in [0, d) (math/rand/v2).
	Jitter func(d time.Duration) time.Duration

	step  time.Duration // the next step; 0: First
	at    time.Time     // when Ready turns true (poll form)
	waits int           // Next's calls since the last Reset
}

// Next returns the wait before the next attempt after a failed one and
// doubles the step for the one after, up to Max.
func (b *Backoff) Next() time.Duration {
	most := max(b.Max, b.First)
	step := min(max(b.step, b.First), most)
	b.step = step + min(step, most-step) // 2×step, capped without overflow
	b.waits++
	half := step / 2
	if half <= 0 {
		return step
	}
	jitter := b.Jitter
	if jitter == nil {
		jitter = rand.N[time.Duration]
	}
	return step - half + jitter(half)
}

// Reset records a success: the next wait is First's again, and Ready is
// true.
func (b *Backoff) Reset() { b.step, b.at, b.waits = 0, time.Time{}, 0 }

// Failures returns how many waits Next has returned since the last Reset:
// the failures in a row.
func (b *Backoff) Failures() int { return b.waits }

// Served records the end, at now, of an attempt that started working at
// since (zero: it never did). One that worked for at least Max counts as
// a success and resets the backoff; a shorter one does not, so something
// that fails soon after each start (a subscription whose every install
// faults) keeps backing off. It reports whether it reset.
func (b *Backoff) Served(since, now time.Time) bool {
	if since.IsZero() || now.Sub(since) < max(b.Max, b.First) {
		return false
	}
	b.Reset()
	return true
}

// Failed records a failed attempt at now for a loop that polls: Ready
// turns true after the wait Next returns.
func (b *Backoff) Failed(now time.Time) { b.at = now.Add(b.Next()) }

// Ready reports whether an attempt may be made at now: no failure since
// the last Reset, or the wait after the last one has passed.
func (b *Backoff) Ready(now time.Time) bool { return !now.Before(b.at) }

// Sleep waits d, or less if ctx ends first; it reports whether ctx is
// still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
