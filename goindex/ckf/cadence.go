package ckf

import "time"

// Publication cadence defaults (spec §4.9): the upstream relay's 16 events
// or 1 ms, which bounds producer-side staleness to about that.
const (
	DefaultBatchEvents = 16
	DefaultFlushAfter  = time.Millisecond
)

// Step tells the caller what a command requires of the publication cadence
// (spec §4.9). The Producer has no clock: the caller owns the timer.
type Step uint8

const (
	// StepContinue: the window stays open; nothing to do.
	StepContinue Step = iota
	// StepArmTimer: this command opened a window that has not reached a
	// boundary; arm a FlushAfter timer and Drain when it fires.
	StepArmTimer
	// StepPublish: a boundary is due now; Drain, publish the batch if there
	// is one, and disarm the timer.
	StepPublish
)

// String names the step.
func (s Step) String() string {
	switch s {
	case StepContinue:
		return "continue"
	case StepArmTimer:
		return "arm-timer"
	case StepPublish:
		return "publish"
	}
	return "step(?)"
}

// admitted counts one applied event in the window and returns the step it
// requires: a boundary once pendingEvents reaches BatchEvents, otherwise a
// timer for the window's first pending event.
func (p *Producer) admitted() Step {
	p.win.pending++
	switch {
	case p.win.pending >= p.batchEvents:
		return StepPublish
	case p.win.pending == 1:
		return StepArmTimer
	}
	return StepContinue
}

// BatchEvents returns N, the pending-event count that makes a boundary due.
func (p *Producer) BatchEvents() int { return p.batchEvents }

// FlushAfter returns how long after a window opens the caller's timer
// should force a boundary.
func (p *Producer) FlushAfter() time.Duration { return p.flushAfter }

// PendingEvents returns the events applied since the last boundary.
func (p *Producer) PendingEvents() int { return p.win.pending }

// DirtyBuckets returns the buckets written since the last boundary,
// including those since written back to their original word.
func (p *Producer) DirtyBuckets() int { return len(p.win.entries) }

// Drain is a publication boundary (spec §4.8): it appends to dst, in
// ascending bucket order, the absolute word of every bucket whose word now
// differs from its word at the previous boundary, and returns dst. Buckets
// written and then restored are dropped (counted as net reversions). If
// nothing changed, dst comes back unchanged: there is no batch, and an
// empty delta must not be published. Drain clears the window and resets
// the pending-event count. A fenced producer publishes nothing: its window
// is discarded.
func (p *Producer) Drain(dst []Image) []Image {
	if p.fence != nil {
		p.win.reset()
		return dst
	}
	before := len(dst)
	dst, reverted := p.win.drain(dst, p.tab.words)
	p.stats.NetReversions += uint64(reverted)
	if emitted := len(dst) - before; emitted > 0 {
		p.stats.EmittedImages += uint64(emitted)
		p.stats.Batches++
	}
	return dst
}
