package shm

import (
	"fmt"
	"runtime/debug"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/replica"
)

// Lanes is a Writer's bucket region as the lanes' writers use it: the
// replica.Table's lane operations (it implements ingest.LaneTable),
// each run inside a fault guard of the file mapping and, for a file,
// keeping the lane's integrity sums in step with every word it stores
// (integrity.go). A write that faults is lost and recorded as the Writer's
// fault (Writer.Check reports it); Apply, Install and Clear also return it.
// The rule of replica.Table holds: one writer per lane.
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
// It panics if lane is out of range or offset+len(words) > n.
func (l *Lanes) StoreWords(lane int, offset uint64, words []uint64) {
	if l.w.seal == nil {
		l.t.StoreWords(lane, offset, words)
		return
	}
	if n := l.t.Buckets(); uint(lane) >= uint(l.t.Lanes()) || offset > n || uint64(len(words)) > n-offset {
		panic(fmt.Sprintf("shm: %d words at bucket %d of lane %d overrun %d lanes of %d buckets", len(words), offset, lane, l.t.Lanes(), n))
	}
	defer l.w.m.guard(debug.SetPanicOnFault(true), nil)
	l.w.storeChunk(lane, offset, words)
}

// Apply stores each image's word into its bucket of lane. Every index is
// checked first (replica.ErrBadLane, replica.ErrBadImage): on error nothing
// is written.
func (l *Lanes) Apply(lane int, images []ckf.Image) (err error) {
	if l.w.seal == nil {
		return l.t.Apply(lane, images)
	}
	if uint(lane) >= uint(l.t.Lanes()) {
		return fmt.Errorf("%w: lane %d, table has %d", replica.ErrBadLane, lane, l.t.Lanes())
	}
	for i, im := range images {
		if uint64(im.Bucket) >= l.t.Buckets() {
			return fmt.Errorf("%w: lane %d image %d: bucket %d, n = %d", replica.ErrBadImage, lane, i, im.Bucket, l.t.Buckets())
		}
	}
	defer l.w.m.guard(debug.SetPanicOnFault(true), &err)
	l.w.store(lane, 0, nil, images)
	return nil
}

// SetReady sets lane's ready bit, after publishing the lane's fresh sums if
// a snapshot just arrived whole.
func (l *Lanes) SetReady(lane int) {
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	if l.w.seal != nil && uint(lane) < uint(l.t.Lanes()) {
		l.w.sealFresh(lane)
	}
	l.w.ready.Or(1 << uint(lane))
	l.t.SetReady(lane)
}

// ClearReady clears lane's ready bit.
func (l *Lanes) ClearReady(lane int) {
	if l.guarded() {
		defer l.w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	l.w.ready.And(^(1 << uint(lane)))
	l.t.ClearReady(lane)
}

// Install installs a full snapshot of lane: it clears the ready bit, stores
// the n words, then sets the ready bit (replica.Table.Install).
func (l *Lanes) Install(lane int, snapshot []uint64) (err error) {
	if l.w.seal == nil {
		return l.t.Install(lane, snapshot)
	}
	switch {
	case uint(lane) >= uint(l.t.Lanes()):
		return fmt.Errorf("%w: lane %d, table has %d", replica.ErrBadLane, lane, l.t.Lanes())
	case uint64(len(snapshot)) != l.t.Buckets():
		return fmt.Errorf("%w: lane %d snapshot has %d words, want %d", replica.ErrSnapshotSize, lane, len(snapshot), l.t.Buckets())
	}
	defer l.w.m.guard(debug.SetPanicOnFault(true), &err)
	l.ClearReady(lane)
	l.w.storeChunk(lane, 0, snapshot)
	l.SetReady(lane)
	return nil
}

// Clear empties lane: it clears the ready bit, then stores 0 into its n
// words (replica.Table.Clear).
func (l *Lanes) Clear(lane int) (err error) {
	if l.w.seal == nil {
		return l.t.Clear(lane)
	}
	if uint(lane) >= uint(l.t.Lanes()) {
		return fmt.Errorf("%w: lane %d, table has %d", replica.ErrBadLane, lane, l.t.Lanes())
	}
	defer l.w.m.guard(debug.SetPanicOnFault(true), &err)
	l.ClearReady(lane)
	l.w.store(lane, 0, make([]uint64, l.t.Buckets()), nil)
	return nil
}
