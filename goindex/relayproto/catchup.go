package relayproto

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// DeltaLog is a durable, ordered log of one producer stream's deltas (for
// example a JetStream stream), which lets a lagging lane catch up instead of
// re-snapshotting (spec §5.3 lag policy [EXT], §8 open problems 1 and 3).
type DeltaLog interface {
	// AppendDeltas appends to dst, in sequence order, up to max retained
	// deltas with sequence > after, and returns dst. It returns
	// ErrNotRetained (possibly wrapped) when the delta with sequence
	// after+1 was discarded, and dst unchanged with a nil error when the
	// log holds nothing newer. The appended deltas may share memory with
	// the log; the caller only reads their images.
	AppendDeltas(dst []Delta, after uint64, max int) ([]Delta, error)
}

// ApplyDeltas applies a run of deltas as if by calling Delta on each in
// order, and returns how many were applied and the outcome of the last one
// examined. Each delta first passes rules 1, 2 and 7–11 against the
// sequence the run has reached; their images are then merged (the last
// writer of each bucket wins) and stored once, in ascending bucket order.
// Stale deltas in the run are skipped. At the first delta that faults, the
// valid prefix is stored, installed moves to its end, and the lane faults:
// the faulting delta writes nothing.
func (l *Lane) ApplyDeltas(ds []Delta) (int, Outcome) {
	reached := l.installed
	merged := l.merged[:0]
	applied, last := 0, Outcome(0)
	for i := range ds {
		d := &ds[i]
		o := l.checkDelta(d, reached)
		if o == Applied {
			merged = append(merged, d.Images...)
			reached = d.Sequence
			applied++
			l.note(Applied)
			last = o
			continue
		}
		if o.Faults() {
			l.storeMerged(merged, reached)
			return applied, l.fault(o, d.Sequence)
		}
		last = l.note(o)
	}
	l.storeMerged(merged, reached)
	return applied, last
}

// storeMerged keeps the last image of every bucket in merged (a stable sort
// by bucket keeps sequence order within a bucket), stores them and sets
// installed.
func (l *Lane) storeMerged(merged []Image, reached uint64) {
	slices.SortStableFunc(merged, func(a, b Image) int { return cmp.Compare(a.Bucket, b.Bucket) })
	out := merged[:0]
	for i, im := range merged {
		if i+1 < len(merged) && merged[i+1].Bucket == im.Bucket {
			continue
		}
		out = append(out, im)
	}
	if len(out) > 0 {
		l.table.ApplyImages(l.index, out)
	}
	l.merged = out[:0]
	l.installed = reached
}

// CatchUp brings a READY lane forward from installed+1 with the deltas log
// still retains, at most batch deltas per log call (0 means 256), until the
// log holds nothing newer. The lane
// keeps its state throughout; it reads the log on behalf of its current
// lease. When the deltas it needs are gone the lane faults with
// DeltasNotRetained and must re-snapshot. A log error leaves the lane as it
// was at the last applied delta and is returned.
func (l *Lane) CatchUp(log DeltaLog, batch int) (int, Outcome, error) {
	if batch <= 0 {
		batch = 256
	}
	switch l.state {
	case StateAwaiting:
		return 0, l.note(AwaitingSnapshot), nil
	case StateReady:
	default:
		return 0, l.note(ForeignLease), nil
	}
	applied, last := 0, Outcome(0)
	for {
		ds, err := log.AppendDeltas(l.logBuf[:0], l.installed, batch)
		if errors.Is(err, ErrNotRetained) {
			return applied, l.fault(DeltasNotRetained, l.installed+1), nil
		}
		if err != nil {
			return applied, last, fmt.Errorf("lane %d catch-up after %d: %w", l.index, l.installed, err)
		}
		l.logBuf = ds[:0]
		if len(ds) == 0 {
			return applied, last, nil
		}
		for i := range ds {
			ds[i].Lease = l.lease
		}
		n, o := l.ApplyDeltas(ds)
		applied, last = applied+n, o
		if o.Faults() || n == 0 {
			// A fault ends the catch-up; so does a batch that moved nothing
			// (a log that breaks its contract must not spin us forever).
			return applied, last, nil
		}
	}
}
