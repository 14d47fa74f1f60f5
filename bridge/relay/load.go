package relay

import (
	"time"

	"github.com/goindex/goindex/goindex/relayproto"
)

// workerState is what the relay knows of one worker's liveness and load.
type workerState struct {
	seen   time.Time
	sample WorkerLoad
	hasLd  bool
}

// loadTracker aggregates the pool's workers into load reports. It runs on
// the pool's writer goroutine.
type loadTracker struct {
	workers map[uint64]*workerState
	window  time.Duration
}

func newLoadTracker(window time.Duration) *loadTracker {
	return &loadTracker{workers: map[uint64]*workerState{}, window: window}
}

func (t *loadTracker) worker(id uint64) *workerState {
	w := t.workers[id]
	if w == nil {
		w = &workerState{}
		t.workers[id] = w
	}
	return w
}

// sawEvent marks worker id live at now.
func (t *loadTracker) sawEvent(id uint64, now time.Time) { t.worker(id).seen = now }

// sample keeps worker s.WorkerID's latest load sample.
func (t *loadTracker) sample(s WorkerLoad, now time.Time) {
	w := t.worker(s.WorkerID)
	w.seen, w.sample, w.hasLd = now, s, true
}

// fill sums the live workers' samples into r, forgets workers silent for
// longer than the window, and uses perWorkerCapacity for live workers that
// sent no capacity.
func (t *loadTracker) fill(r *relayproto.LoadReport, now time.Time, perWorkerCapacity uint64) {
	for id, w := range t.workers {
		if now.Sub(w.seen) > t.window {
			delete(t.workers, id)
			continue
		}
		r.LiveWorkers++
		capacity := perWorkerCapacity
		if w.hasLd {
			r.QueuedPrefillTokens += w.sample.QueuedPrefillTokens
			r.ActiveDecodeBlocks += w.sample.ActiveDecodeBlocks
			if w.sample.CapacityBlocks > 0 {
				capacity = w.sample.CapacityBlocks
			}
		}
		r.CapacityBlocks += capacity
	}
}
