package follow

import (
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/shm"
)

// TestFollower_CarriedLanesAnswerThroughAGrowingReplica grows a 2-lane
// replica to 3 lanes the way the consumer adds a DC (shm.Writer.
// ResizeCarrying) while searches run through a follower that checks the
// path on every call and verifies in the background, as route and the
// library do: every search, in either generation, finds both lanes' full
// depth; the new generation's carried lanes pass verification (none is
// left out) and the added lane answers nothing until it is installed.
func TestFollower_CarriedLanesAnswerThroughAGrowingReplica(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	w := writeFile(t, path, []uint64{10, 20}, []int{4, 9})
	f := New(path, Config{CheckEvery: -1, VerifyEvery: 1e7})
	defer f.Close()
	if err := f.Attach(); err != nil {
		t.Fatalf("Attach: %v", err)
	}
	var wg sync.WaitGroup
	var stop atomic.Bool // the resize failed: stop searching
	for range 2 {
		wg.Go(func() {
			deadline := time.Now().Add(time.Minute)
			for after := 0; after < 200 && !stop.Load(); {
				if time.Now().After(deadline) {
					t.Errorf("searches never reached generation 2 (the grown replica)")
					return
				}
				v := f.Acquire()
				got, gen := depths(t, v), v.Generation()
				v.Release()
				if got[10] != 4 || got[20] != 9 {
					t.Errorf("generation %d: depths %v, want 10:4 and 20:9 throughout", gen, got)
					return
				}
				if gen == 2 {
					after++
				}
			}
		})
	}
	nw, err := w.ResizeCarrying(shm.Layout{Seed: ckf.DefaultSeed, Buckets: buckets, Domain: 1, ConsumerInstance: 2,
		DCs: []uint64{10, 20, 30}}, 0b11)
	if err != nil {
		stop.Store(true)
		wg.Wait()
		t.Fatalf("ResizeCarrying(+DC 30): %v", err)
	}
	defer nw.Close()
	wg.Wait()
	if failed := f.Verify(); failed != 0 {
		t.Errorf("Verify() after growing = %#b, want no lane failing", failed)
	}
	v := f.Acquire()
	defer v.Release()
	if got := v.Ready(); got != 0b11 || v.Bad() != 0 {
		t.Errorf("grown view: Ready %#b, Bad %#b; want 0b11, 0", got, v.Bad())
	}
	if got := depths(t, v); got[30] != 0 {
		t.Errorf("the added lane answers depth %d before it is installed, want 0", got[30])
	}
}
