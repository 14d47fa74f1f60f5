package main

import (
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/tests/c/fixture"
)

// FuzzApplyFrame feeds arbitrary bytes to a global handle's
// goindex_apply_frame, seeded with real relay frames (snapshot chunks, a
// delta, a heartbeat, a drain marker, a load report): every call returns OK
// or GOINDEX_EFRAME, is counted exactly once as applied, ignored or
// rejected, and the handle keeps answering probes.
func FuzzApplyFrame(f *testing.F) {
	format, err := ckf.NewFormat(ckf.DefaultSeed, 64)
	if err != nil {
		f.Fatal(err)
	}
	d, err := fixture.NewDC(0, 3, 1, format, 16)
	if err != nil {
		f.Fatal(err)
	}
	if err := d.Extend(kv.Member{}, fixture.DocB); err != nil {
		f.Fatal(err)
	}
	snap, err := d.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	d.TakeLog()
	for _, fr := range snap {
		f.Add(fr)
	}
	if err := d.Truncate(kv.Member{}, 20); err != nil {
		f.Fatal(err)
	}
	if err := d.Publish(); err != nil {
		f.Fatal(err)
	}
	if err := d.Heartbeat(); err != nil {
		f.Fatal(err)
	}
	if err := d.DrainMarker(0); err != nil {
		f.Fatal(err)
	}
	for _, fr := range d.TakeLog() {
		f.Add(fr)
	}
	lr, err := d.LoadReport(1, 2, 3, 4)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(lr)
	f.Add([]byte{})
	h := openT(f, `{"mode": "global", "dcs": [3, 4], "buckets": 64}`)
	for _, fr := range snap { // the lane starts ready, so deltas and markers reach the state machine
		if rc := applyFrame(h, fr); rc != 0 {
			f.Fatalf("seeding snapshot = %d: %s", rc, lastError(h))
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		before := stats(t, h)
		rc := applyFrame(h, frame)
		if rc != 0 && rc != code(follow.ErrFrameRejected) {
			t.Fatalf("goindex_apply_frame(%d bytes) = %d, want OK or GOINDEX_EFRAME: %s", len(frame), rc, lastError(h))
		}
		after := stats(t, h)
		counted := (after.frames_applied - before.frames_applied) + (after.frames_ignored - before.frames_ignored) + (after.frames_rejected - before.frames_rejected)
		if counted != 1 || (rc != 0) != (after.frames_rejected != before.frames_rejected) {
			t.Fatalf("goindex_apply_frame = %d counted %d times (applied %d→%d, ignored %d→%d, rejected %d→%d), want once, as rejected iff EFRAME",
				rc, counted, before.frames_applied, after.frames_applied, before.frames_ignored, after.frames_ignored, before.frames_rejected, after.frames_rejected)
		}
		probe(t, h, fixture.DocB)
	})
}
