package relay

import (
	"math"
	"slices"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
)

// workerState is what the relay knows of one worker's liveness and load:
// its latest goindex WorkerLoad sample, and Dynamo's ActiveLoad per dp rank
// merged field by field (workers and routers each send some of the fields;
// a nil field keeps the last known value).
type workerState struct {
	seen    time.Time
	sampled time.Time // the last load sample, either kind; zero: none yet
	sample  WorkerLoad
	hasLd   bool
	ranks   map[uint32]*rankLoad
	// by are the present sources whose departure is reported
	// (Source.ReportsGone) that fed the worker, at most
	// maxSourcesPerWorker; present says its instance record is present
	// (KindWorkerPresent). Either holds the worker live however long it is
	// silent.
	by      []*Source
	present bool
}

// held reports whether something that says the worker is there holds it
// live, whatever its silence.
func (w *workerState) held() bool { return w.present || len(w.by) > 0 }

// rankLoad is one dp rank's Dynamo ActiveLoad as its senders told it:
// the worker's own samples (those carrying kv_used_blocks) and each
// router's view (routers send their scheduler's decode and prefill load
// without it, dynamo-current §3), kept apart so that neither overwrites
// the other.
type rankLoad struct {
	own   dynamo.ActiveLoad
	views []routerView
}

// routerView is the latest ActiveLoad one router (publisher pub) sent for
// a rank, and when.
type routerView struct {
	pub                   uint64
	at                    time.Time
	decode, prefill       uint64
	hasDecode, hasPrefill bool
}

// maxRouterViews bounds the router views kept per rank: a deployment runs
// a few frontend replicas; past the bound a new router's view replaces the
// oldest.
const maxRouterViews = 16

// routerViewLife is how many live windows a router's view counts without
// a newer one. Routers send a view only when it changes, and a busy one
// changes with every request, so a view this old is a departed router's
// (its last, possibly non-zero, load) or an idle one's (zero, which counts
// nothing): dropping it bounds what a crashed frontend leaves behind.
const routerViewLife = 6

// maxRanksPerWorker bounds the dp ranks kept per worker: real deployments
// run a few dozen; forged rank numbers cannot grow a worker past it.
const maxRanksPerWorker = 256

// maxWorkers bounds the live-worker table (the same reasoning as
// maxPublishers: workers are event publishers); a flood of made-up worker
// ids in load samples cannot grow it past this.
const maxWorkers = maxPublishers

// maxSourcesPerWorker bounds the sources holding one worker: Dynamo feeds
// a worker through two publishers (kv-events and kv_metrics, each with its
// own publisher id), and a restarted worker's new ones may arrive before
// the old ones' KindGone; 8 leaves room for both and more.
const maxSourcesPerWorker = 8

// maxHeldPerSource bounds the workers one source holds. A Dynamo publisher
// speaks for one worker (its dp ranks share the worker id); past the bound
// a source's further workers are tracked by the live window alone, so a
// source sending a flood of forged worker ids can pin at most this many
// entries of the worker table, and the rest of the flood is forgotten after
// the window as before.
const maxHeldPerSource = 64

// loadTracker aggregates the pool's workers into load reports. It runs on
// the pool's writer goroutine.
type loadTracker struct {
	workers map[uint64]*workerState
	// holds counts the workers each present source holds (workerState.by);
	// a source's entry goes with its last held worker or its release.
	holds  map[*Source]int
	window time.Duration
	swept  time.Time // last sweep of the full table by worker
	// replicaSync says the routers share their active sequences
	// (Dynamo's router_replica_sync): each router's view is then the
	// whole load and views are merged by their maximum; without it (the
	// default, as Dynamo's) each view holds only its router's requests and
	// views are summed.
	replicaSync bool
	// refused counts samples and events of new workers not tracked because
	// the table was full of live ones.
	refused uint64
	// stored counts the blocks of every store event applied since the
	// pool started (LoadReport.StoredBlocks).
	stored uint64
}

func newLoadTracker(window time.Duration, replicaSync bool) *loadTracker {
	return &loadTracker{workers: map[uint64]*workerState{}, holds: map[*Source]int{}, window: window, replicaSync: replicaSync}
}

// worker returns worker id's state, adding it unless the table is full of
// workers live within the window or held (then nil).
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

// forget drops the workers silent for longer than the window that nothing
// holds.
func (t *loadTracker) forget(now time.Time) {
	for id, w := range t.workers {
		if !w.held() && now.Sub(w.seen) > t.window {
			delete(t.workers, id)
		}
	}
}

// drop forgets worker id at once: it is known to be gone (its instance
// record went), so its capacity and queue leave the next report instead of
// counting until the live window passes.
func (t *loadTracker) drop(id uint64) {
	w := t.workers[id]
	if w == nil {
		return
	}
	for _, src := range w.by {
		t.unhold(src)
	}
	delete(t.workers, id)
}

// hold makes src, when its departure is reported, hold w live until src's
// release; a worker at maxSourcesPerWorker or a source at maxHeldPerSource
// takes no more (the worker is still tracked by the window).
func (t *loadTracker) hold(w *workerState, src *Source) {
	if src == nil || !src.ReportsGone || slices.Contains(w.by, src) {
		return
	}
	if len(w.by) >= maxSourcesPerWorker || t.holds[src] >= maxHeldPerSource {
		return
	}
	w.by = append(w.by, src)
	t.holds[src]++
}

// holdWorker is hold for worker id if it is tracked.
func (t *loadTracker) holdWorker(id uint64, src *Source) {
	if w := t.workers[id]; w != nil {
		t.hold(w, src)
	}
}

// unhold counts one hold of src less.
func (t *loadTracker) unhold(src *Source) {
	if t.holds[src]--; t.holds[src] <= 0 {
		delete(t.holds, src)
	}
}

// release ends src's holds: it is gone (KindGone). Its workers fall back
// to the window, counted from their last message, rather than leaving at
// once: one fed by other sources too (its other publisher, goindex
// WorkerLoad samples, NATS without discovery) keeps counting as those
// sources say, and a worker whose last message is older than the window —
// an idle one, the case holds exist for — leaves at the next report. So a
// departure never reports less than the window alone did.
func (t *loadTracker) release(src *Source) {
	n := t.holds[src]
	if n == 0 {
		return
	}
	delete(t.holds, src)
	for _, w := range t.workers {
		if i := slices.Index(w.by, src); i >= 0 {
			w.by = slices.Delete(w.by, i, i+1)
			if n--; n == 0 {
				return
			}
		}
	}
}

// present takes a KindWorkerPresent from src: worker id is held live until
// src's release when src reports its going (a KV event source record), or
// else until the worker's drop (its instance record, broker mode's
// liveness).
func (t *loadTracker) present(id uint64, src *Source, now time.Time) {
	w := t.worker(id, now)
	if w == nil {
		return
	}
	if src != nil && src.ReportsGone {
		t.hold(w, src)
	} else {
		w.present = true
	}
	if w.seen.IsZero() {
		w.seen = now
	}
}

// sawEvent marks e's worker live at now, held by src while src is present
// (when its departure is reported), and counts the blocks e stores: every
// block of every store event, one already cached included, as the
// simulator's routers count a DC's inserts (score.InsertRate), whether or
// not the worker's table had room.
func (t *loadTracker) sawEvent(e *kv.Event, now time.Time, src *Source) {
	if e.Kind == kv.Stored {
		t.stored += uint64(len(e.Blocks))
	}
	if w := t.worker(e.Member.Worker, now); w != nil {
		w.seen = now
		t.hold(w, src)
	}
}

// sample keeps worker s.WorkerID's latest load sample.
func (t *loadTracker) sample(s WorkerLoad, now time.Time) {
	if w := t.worker(s.WorkerID, now); w != nil {
		w.seen, w.sampled, w.sample, w.hasLd = now, now, s, true
	}
}

// active merges Dynamo's ActiveLoad sample l, sent by publisher pub and
// heard from src (nil: a source the pool does not follow), into its
// worker's rank. Samples heard on namespace scope (older releases;
// knownOnly) may come from other components' workers, so they count only
// for workers this pool already saw events from. A sample carrying
// kv_used_blocks is the worker's own (routers send their scheduler view
// without it, dynamo-current §3), and only such a sample makes src hold
// the worker: a router's publisher must not keep a departed worker live
// until the router goes. Any other sample is router pub's view of the
// rank.
func (t *loadTracker) active(l dynamo.ActiveLoad, pub uint64, now time.Time, knownOnly bool, src *Source) {
	var w *workerState
	if knownOnly {
		w = t.workers[l.WorkerID]
	} else {
		w = t.worker(l.WorkerID, now)
	}
	if w == nil {
		return
	}
	w.seen, w.sampled = now, now
	if l.HasKVUsedBlocks {
		t.hold(w, src)
	}
	if w.ranks == nil {
		w.ranks = map[uint32]*rankLoad{}
	}
	r := w.ranks[l.DpRank]
	if r == nil {
		if len(w.ranks) >= maxRanksPerWorker {
			t.refused++
			return
		}
		r = &rankLoad{}
		w.ranks[l.DpRank] = r
	}
	if l.HasKVUsedBlocks {
		r.own.HasKVUsedBlocks, r.own.KVUsedBlocks = true, l.KVUsedBlocks
		if l.HasActiveDecodeBlocks {
			r.own.HasActiveDecodeBlocks, r.own.ActiveDecodeBlocks = true, l.ActiveDecodeBlocks
		}
		if l.HasActivePrefillToks {
			r.own.HasActivePrefillToks, r.own.ActivePrefillTokens = true, l.ActivePrefillTokens
		}
		return
	}
	v := r.view(pub)
	v.at = now
	if l.HasActiveDecodeBlocks {
		v.hasDecode, v.decode = true, l.ActiveDecodeBlocks
	}
	if l.HasActivePrefillToks {
		v.hasPrefill, v.prefill = true, l.ActivePrefillTokens
	}
}

// view returns router pub's view of the rank, adding it (in place of the
// oldest when maxRouterViews are kept).
func (r *rankLoad) view(pub uint64) *routerView {
	for i := range r.views {
		if r.views[i].pub == pub {
			return &r.views[i]
		}
	}
	if len(r.views) < maxRouterViews {
		r.views = append(r.views, routerView{pub: pub})
		return &r.views[len(r.views)-1]
	}
	oldest := 0
	for i := range r.views {
		if r.views[i].at.Before(r.views[oldest].at) {
			oldest = i
		}
	}
	r.views[oldest] = routerView{pub: pub}
	return &r.views[oldest]
}

// load returns the rank's decode blocks and queued prefill tokens, after
// dropping router views not renewed since cutoff: decode blocks are the
// worker's own active_decode_blocks when it sent them, else the routers'
// views merged (summed, or their maximum with sync), else the worker's KV
// occupancy; prefill tokens the routers' views merged, else the worker's
// own.
func (r *rankLoad) load(cutoff time.Time, sync bool) (decode, prefill uint64) {
	r.views = slices.DeleteFunc(r.views, func(v routerView) bool { return v.at.Before(cutoff) })
	var hasDecode, hasPrefill bool
	merge := func(acc, v uint64) uint64 {
		if sync {
			return max(acc, v)
		}
		return addSaturating(acc, v)
	}
	for _, v := range r.views {
		if v.hasDecode {
			hasDecode, decode = true, merge(decode, v.decode)
		}
		if v.hasPrefill {
			hasPrefill, prefill = true, merge(prefill, v.prefill)
		}
	}
	switch {
	case r.own.HasActiveDecodeBlocks:
		decode = r.own.ActiveDecodeBlocks
	case !hasDecode:
		decode = r.own.KVUsedBlocks
	}
	if !hasPrefill {
		prefill = r.own.ActivePrefillTokens
	}
	return decode, prefill
}

// forgetViews drops the views router pub sent: its publisher is gone.
func (t *loadTracker) forgetViews(pub uint64) {
	for _, w := range t.workers {
		for _, r := range w.ranks {
			r.views = slices.DeleteFunc(r.views, func(v routerView) bool { return v.pub == pub })
		}
	}
}

// Coverage is how much of a load report its live workers' own samples
// make: Sampled of its LiveWorkers sent a load sample (the others count
// for liveness and configured capacity only), the oldest of those samples
// at Oldest (zero when none).
type Coverage struct {
	Sampled uint32
	Oldest  time.Time
}

// fill sums the live workers' samples into r, sets its stored-blocks
// counter, forgets workers silent for longer than the window that nothing
// holds, uses perWorkerCapacity for live workers that sent no capacity,
// and says how many live workers' samples it summed.
func (t *loadTracker) fill(r *relayproto.LoadReport, now time.Time, perWorkerCapacity uint64) (cov Coverage) {
	t.forget(now)
	cutoff := now.Add(-routerViewLife * t.window)
	r.StoredBlocks = t.stored
	for _, w := range t.workers {
		r.LiveWorkers++
		if !w.sampled.IsZero() {
			cov.Sampled++
			if cov.Oldest.IsZero() || w.sampled.Before(cov.Oldest) {
				cov.Oldest = w.sampled
			}
		}
		capacity := perWorkerCapacity
		if w.hasLd {
			r.QueuedPrefillTokens = addSaturating(r.QueuedPrefillTokens, w.sample.QueuedPrefillTokens)
			r.ActiveDecodeBlocks = addSaturating(r.ActiveDecodeBlocks, w.sample.ActiveDecodeBlocks)
			if w.sample.CapacityBlocks > 0 {
				capacity = w.sample.CapacityBlocks
			}
		} else {
			// Dynamo's ActiveLoad when the worker sends no goindex sample
			// (one source per worker, never both summed).
			for _, rk := range w.ranks {
				decode, prefill := rk.load(cutoff, t.replicaSync)
				r.QueuedPrefillTokens = addSaturating(r.QueuedPrefillTokens, prefill)
				r.ActiveDecodeBlocks = addSaturating(r.ActiveDecodeBlocks, decode)
			}
		}
		r.CapacityBlocks = addSaturating(r.CapacityBlocks, capacity)
	}
	return cov
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
