package shm

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestResizeCarrying_ReadersNeverSeeFewerReadyLanes grows a 2-lane file to
// 3 lanes, carrying lanes 0 and 1, while a reader follows the path the way
// routers do (Stale, then Attach again) and checks every mapping it holds:
// lanes 0 and 1 are always ready with their words, and the new generation
// holds their records and verifiable sums, with lane 2 empty and not ready.
func TestResizeCarrying_ReadersNeverSeeFewerReadyLanes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	const n = 256
	w := create(t, path, testLayout(2, n))
	want := [][]uint64{laneWords(3, 0, n), laneWords(3, 1, n)}
	for l, words := range want {
		if err := w.Table().Install(l, words); err != nil {
			t.Fatalf("Install(lane %d): %v", l, err)
		}
		w.SetState(l, &LaneState{State: 3, Incarnation: uint64(10 + l), Epoch: 2, Installed: uint64(40 + l), Latest: 50,
			AppliedAt: time.Unix(1700000000, 0)})
		w.SetRTT(l, time.Duration(l+1)*time.Millisecond, time.Unix(1700000001, 0))
	}

	var stop atomic.Bool
	var seen atomic.Uint64 // generations the reader checked
	var wg sync.WaitGroup
	readerDone := make(chan struct{})
	wg.Go(func() {
		defer close(readerDone)
		r, err := Attach(path)
		if err != nil {
			t.Errorf("Attach: %v", err)
			return
		}
		defer func() { r.Close() }()
		for !stop.Load() || r.Info().Generation < 2 {
			if got := r.Ready(); got&0b11 != 0b11 {
				t.Errorf("generation %d: Ready() = %#b, want lanes 0 and 1 ready", r.Info().Generation, got)
				return
			}
			for l, words := range want {
				if got := r.Table().AppendLane(nil, l); !slices.Equal(got, words) {
					t.Errorf("generation %d: lane %d's words differ from the installed ones", r.Info().Generation, l)
					return
				}
			}
			seen.Store(r.Info().Generation)
			if stale, _ := r.Stale(); stale {
				nr, err := Attach(path)
				if err != nil {
					t.Errorf("Attach after Stale: %v", err)
					return
				}
				r.Close()
				r = nr
			}
		}
	})
	for seen.Load() < 1 {
		select {
		case <-readerDone: // it failed (reported): waiting would hang
			t.FailNow()
		case <-time.After(time.Millisecond):
		}
	}
	nw, err := w.ResizeCarrying(testLayout(3, n), 0b11)
	if err != nil {
		t.Fatalf("ResizeCarrying(3 lanes, carry 0b11): %v", err)
	}
	defer nw.Close()
	stop.Store(true)
	wg.Wait()

	r := attach(t, path)
	if got := r.Info().Generation; got != 2 {
		t.Errorf("Info().Generation = %d, want 2", got)
	}
	if got := r.Ready(); got != 0b11 {
		t.Errorf("Ready() = %#b, want 0b11 (lane 2 not ready)", got)
	}
	if got := r.Table().AppendLane(nil, 2); slices.ContainsFunc(got, func(w uint64) bool { return w != 0 }) {
		t.Errorf("lane 2 of the new generation holds words, want none")
	}
	for l := range 2 {
		got := r.Lane(l)
		if got.DC != uint64(100+l) || got.Incarnation != uint64(10+l) || got.Installed != uint64(40+l) ||
			got.Epoch != 2 || got.RTT != time.Duration(l+1)*time.Millisecond {
			t.Errorf("Lane(%d) after carrying = %+v, want its record carried", l, got)
		}
	}
	for seg := range r.Segments() {
		if bad, busy := r.VerifySegment(seg, 0b111); bad|busy != 0 {
			t.Errorf("VerifySegment(%d) = bad %#b, busy %#b; want the carried sums to hold", seg, bad, busy)
		}
		if bad, busy := nw.VerifySegment(seg, 0b111); bad|busy != 0 {
			t.Errorf("writer VerifySegment(%d) = bad %#b, busy %#b; want its own sums to hold", seg, bad, busy)
		}
	}
	// The writer's ready copy holds the carried lanes: nothing to repair.
	if wrong := nw.RepairReady(); wrong != 0 {
		t.Errorf("RepairReady() = %#b after carrying, want 0", wrong)
	}
}

// TestResizeCarrying_RefusesAnotherFormatOrMovedLane checks that lanes are
// carried only into a layout of the same format with the same DC at each
// carried index, and that a refusal leaves the writer open and the file in
// place.
func TestResizeCarrying_RefusesAnotherFormatOrMovedLane(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	w := create(t, path, testLayout(2, 64))
	moved := testLayout(3, 64)
	moved.DCs[1] = 999
	reseeded := testLayout(3, 64)
	reseeded.Seed++
	for name, l := range map[string]Layout{"buckets": testLayout(3, 128), "seed": reseeded, "moved lane": moved} {
		if _, err := w.ResizeCarrying(l, 0b11); !errors.Is(err, ErrBadLayout) {
			t.Errorf("ResizeCarrying(%s changed) = %v, want ErrBadLayout", name, err)
		}
	}
	// Lane 0 alone may be carried into the layout that moved lane 1.
	nw, err := w.ResizeCarrying(moved, 0b01)
	if err != nil {
		t.Fatalf("ResizeCarrying(lane 1 moved, carry lane 0): %v", err)
	}
	defer nw.Close()
	if got := bits.OnesCount64(nw.Table().Ready()); got != 0 {
		t.Errorf("Ready() = %d lanes, want 0 (lane 0 was not ready)", got)
	}
}

// BenchmarkResizeCarrying times adding a lane to a file of 13 lanes whose
// words are all carried: the copy a consumer makes while its serving lanes
// pause (bridge/consume). Lanes of 2^20 buckets (about 2.5M blocks at the
// relay's load) and 2^22 (about 10M); the file is in /dev/shm where there
// is one, as a consumer's usually is.
func BenchmarkResizeCarrying(b *testing.B) {
	for _, buckets := range []uint64{1 << 20, 1 << 22} {
		b.Run(fmt.Sprintf("lanes=13/buckets=%d", buckets), func(b *testing.B) {
			dir := b.TempDir()
			if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
				d, err := os.MkdirTemp("/dev/shm", "goindex-bench-")
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { os.RemoveAll(d) })
				dir = d
			}
			path := filepath.Join(dir, "replica")
			l := testLayout(13, buckets)
			grown := testLayout(14, buckets)
			b.SetBytes(int64(buckets) * 8 * 13)
			words := make([][]uint64, 13)
			for lane := range words {
				words[lane] = laneWords(uint64(lane), lane, buckets)
			}
			for b.Loop() {
				b.StopTimer()
				w, err := Create(path, l)
				if err != nil {
					b.Fatal(err)
				}
				for lane, ws := range words { // the serving lanes' words, their pages resident
					if err := w.Table().Install(lane, ws); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				nw, err := w.ResizeCarrying(grown, 1<<13-1)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				w.Close()
				nw.Close()
				b.StartTimer()
			}
		})
	}
}
