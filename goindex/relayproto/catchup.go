package relayproto

import (
	"errors"
	"fmt"
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

// ApplyDeltas applies a run of deltas in order, exactly as Delta would one
// by one, stopping at the first delta that faults the lane, and returns how
// many were applied and the outcome of the last one examined (0 for an
// empty run). Stale deltas in the run are skipped.
//
// The lag policy allows merging contiguous deltas (last writer per bucket
// wins) after validation; goindex does not, because it measured slower:
// merging 256 deltas × 48 images over a 4M-bucket lane with a stable sort
// cost 2.0 ms against 63 µs for storing each delta's images in order
// (BenchmarkCatchUp, BENCHMARKS.md). Applying in order already lets the
// last writer win.
func (l *Lane) ApplyDeltas(ds []Delta) (int, Outcome) {
	applied, last := 0, Outcome(0)
	for i := range ds {
		last = l.Delta(&ds[i])
		if last == Applied {
			applied++
		}
		if last.Faults() {
			break
		}
	}
	return applied, last
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
