// Package backoff spaces the attempts at something that keeps failing: a
// relay, NATS, an API server or a socket that is down. Each failure's
// step doubles, from First up to Max, and a success starts over from
// First, so a fault that clears at once is retried at once while an
// outage costs a logarithmic number of attempts, not one every First.
//
// The wait actually taken is jittered ("equal jitter"): half the step
// plus a random part of the other half, between step/2 and step. Retriers
// that failed together (a consumer's 13 lanes when their NATS server went
// down) then spread their next attempts instead of retrying in lockstep,
// and none waits less than half its step. The jitter source is a field,
// so tests fix it.
//
// A Backoff serves a loop that sleeps (Next, then Sleep) as well as one
// that polls on a tick (Failed, then Ready). Served decides whether an
// attempt that worked for a while before it failed was a success (it
// worked for Max), and Failures counts the failures in a row. It is not safe for
// concurrent use: each retrying goroutine keeps its own. It imports
// nothing of ours.
//
// Non-goals: no attempt limit or total deadline (the callers retry until
// their context ends), and no retry loop of its own (callers log,
// count and decide what a success is).
//
// # Files
//
//   - backoff.go: Backoff, Sleep.
//
// # Tests
//
// The tests prove that with a fixed jitter source the waits double from
// First to Max and stay there, start over from First after a Reset, lie
// between half the step and the step, and that the poll form is ready
// exactly when the wait has passed; that Served resets only after an
// attempt that worked for Max, and Failures counts the waits since a
// reset; and that Sleep returns at once for an ended context.
package backoff
