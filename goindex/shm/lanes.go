package shm

import (
	"runtime/debug"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/replica"
)

// Lanes is a Writer's bucket region as the lanes' writers use it: the
// replica.Table's lane operations (it implements relayproto.LaneTable),
// each run inside a fault guard of the file mapping. A write that faults is
// lost and recorded as the Writer's fault (Writer.Check reports it); Apply,
// Install and Clear also return it. The rule of replica.Table holds: one
// writer per lane.
type Lanes struct {
	w *Writer
	t *replica.Table
}

// guarded reports whether writes need the fault guard (a file mapping).
func (l *Lanes) guarded() bool { return !l.w.m.memory }

// Lanes returns the number of lanes.
func (l *Lanes) Lanes() int { return l.t.Lanes() }

// Buckets returns the words per lane.
func (l *Lanes) Buckets() uint64 { return l.t.Buckets() }

// Ready returns the ready-lane mask (0 if the read faulted).
func (l *Lanes) Ready() (m uint64) {
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	return l.t.Ready()
}

// Word returns bucket b of lane (0 if the read faulted). It panics if
// either is out of range.
func (l *Lanes) Word(lane int, b uint64) (w uint64) {
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	return l.t.Word(lane, b)
}

// AppendLane appends lane's words to dst (see replica.Table.AppendLane);
// a read that faults leaves dst as it was.
func (l *Lanes) AppendLane(dst []uint64, lane int) (out []uint64) {
	out = dst
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	return l.t.AppendLane(dst, lane)
}

// StoreWords stores words into lane from bucket offset (a snapshot chunk).
func (l *Lanes) StoreWords(lane int, offset uint64, words []uint64) {
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	l.t.StoreWords(lane, offset, words)
}

// Apply stores each image's word into its bucket of lane.
func (l *Lanes) Apply(lane int, images []ckf.Image) (err error) {
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), &err)
	}
	return l.t.Apply(lane, images)
}

// SetReady sets lane's ready bit.
func (l *Lanes) SetReady(lane int) {
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	l.t.SetReady(lane)
}

// ClearReady clears lane's ready bit.
func (l *Lanes) ClearReady(lane int) {
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	l.t.ClearReady(lane)
}

// Install installs a full snapshot of lane (replica.Table.Install).
func (l *Lanes) Install(lane int, snapshot []uint64) (err error) {
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), &err)
	}
	return l.t.Install(lane, snapshot)
}

// Clear empties lane (replica.Table.Clear).
func (l *Lanes) Clear(lane int) (err error) {
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), &err)
	}
	return l.t.Clear(lane)
}
