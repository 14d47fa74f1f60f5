package relay

import (
	"math"
	"time"

	"github.com/goindex/goindex/goindex/relayproto"
)

// workerState is what the relay knows of one worker's liveness and load.
type workerState struct {
	seen   time.Time
	sample WorkerLoad
	hasLd  bool
}

// maxWorkers bounds the live-worker table (the same reasoning as
// maxPublishers: workers are event publishers); a flood of made-up worker
// ids in load samples cannot grow it past this.
const maxWorkers = maxPublishers

// loadTracker aggregates the pool's workers into load reports. It runs on
// the pool's writer goroutine.
type loadTracker struct {
	workers map[uint64]*workerState
	window  time.Duration
	swept   time.Time // last sweep of the full table by worker
	// refused counts samples and events of new workers not tracked because
	// the table was full of live ones.
	refused uint64
}

func newLoadTracker(window time.Duration) *loadTracker {
	return &loadTracker{workers: map[uint64]*workerState{}, window: window}
}

// worker returns worker id's state, adding it unless the table is full of
// workers live within the window (then nil).
func (t *loadTracker) worker(id uint64, now time.Time) *workerState {
	if w := t.workers[id]; w != nil {
		return w
	}
	if len(t.workers) >= maxWorkers {
		if now.Sub(t.swept) >= fullSweepEvery {
			t.swept = now
			t.forget(now)
		}
		if len(t.workers) >= maxWorkers {
			t.refused++
			return nil
		}
	}
	w := &workerState{}
	t.workers[id] = w
	return w
}

// forget drops the workers silent for longer than the window.
func (t *loadTracker) forget(now time.Time) {
	for id, w := range t.workers {
		if now.Sub(w.seen) > t.window {
			delete(t.workers, id)
		}
	}
}

// sawEvent marks worker id live at now.
func (t *loadTracker) sawEvent(id uint64, now time.Time) {
	if w := t.worker(id, now); w != nil {
		w.seen = now
	}
}

// sample keeps worker s.WorkerID's latest load sample.
func (t *loadTracker) sample(s WorkerLoad, now time.Time) {
	if w := t.worker(s.WorkerID, now); w != nil {
		w.seen, w.sample, w.hasLd = now, s, true
	}
}

// fill sums the live workers' samples into r, forgets workers silent for
// longer than the window, and uses perWorkerCapacity for live workers that
// sent no capacity.
func (t *loadTracker) fill(r *relayproto.LoadReport, now time.Time, perWorkerCapacity uint64) {
	t.forget(now)
	for _, w := range t.workers {
		r.LiveWorkers++
		capacity := perWorkerCapacity
		if w.hasLd {
			r.QueuedPrefillTokens = addSaturating(r.QueuedPrefillTokens, w.sample.QueuedPrefillTokens)
			r.ActiveDecodeBlocks = addSaturating(r.ActiveDecodeBlocks, w.sample.ActiveDecodeBlocks)
			if w.sample.CapacityBlocks > 0 {
				capacity = w.sample.CapacityBlocks
			}
		}
		r.CapacityBlocks = addSaturating(r.CapacityBlocks, capacity)
	}
}

// addSaturating returns a+b, or 2^64-1 when that overflows: samples come
// from the network, and a wrapped sum of huge ones would make a loaded DC
// look idle.
func addSaturating(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}
