package main

import (
	"sync"
	"sync/atomic"

	"github.com/goindex/goindex/goindex/hostindex"
	"github.com/goindex/goindex/goindex/kv"
)

// ids is a table of objects under ids that count up from 1 and are never
// reused, so a stale id can only miss. Id n is slot n−1 of a table every
// lookup reads without a lock (an atomic load of the table, then of the
// slot: a sync.Map lookup cost about 25 ns of a 600 ns probe, BenchmarkProbe
// impl=handle) and that add replaces with a larger copy when it is full. A
// removed object's slot stays, nil: 8 bytes per id ever issued.
type ids[T any] struct {
	mu    sync.Mutex // add and remove
	n     int        // ids ever issued, under mu
	table atomic.Pointer[[]atomic.Pointer[T]]
}

// get returns the live object id, or nil.
func (r *ids[T]) get(id uint64) *T {
	t := r.table.Load()
	if t == nil || id-1 >= uint64(len(*t)) { // id 0 wraps and misses
		return nil
	}
	return (*t)[id-1].Load()
}

// add registers v under a fresh id and returns it.
func (r *ids[T]) add(v *T) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var old []atomic.Pointer[T]
	if t := r.table.Load(); t != nil {
		old = *t
	}
	if r.n == len(old) {
		grown := make([]atomic.Pointer[T], max(2*len(old), 16))
		for i := range old {
			grown[i].Store(old[i].Load())
		}
		r.table.Store(&grown)
		old = grown
	}
	r.n++
	old[r.n-1].Store(v)
	return uint64(r.n)
}

// remove unregisters id and returns its object, or nil when id is not live.
func (r *ids[T]) remove(id uint64) *T {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.table.Load()
	if t == nil || id-1 >= uint64(len(*t)) {
		return nil
	}
	return (*t)[id-1].Swap(nil)
}

// registry is the process's handle and plugin-state tables, the one piece
// of package-level mutable state (STYLE.md), and the detail of the last
// failed goindex_open.
type registry struct {
	ids[handle]
	plugins ids[pluginState] // Dynamo worker-selector states (plugin.go)

	openMu  sync.Mutex
	openErr string // detail of the last failed goindex_open (handle 0)
}

var handles registry

// failOpen records err as the last goindex_open failure and returns its code.
func (r *registry) failOpen(err error) status {
	r.openMu.Lock()
	r.openErr = "goindex_open: " + err.Error()
	r.openMu.Unlock()
	return code(err)
}

func (r *registry) openError() string {
	r.openMu.Lock()
	defer r.openMu.Unlock()
	return r.openErr
}

// handle is one open index and the detail of its last failure. errMu
// guards lastErr only, so recording a failure never waits for an event
// call.
type handle struct {
	ix *hostindex.Index

	errMu   sync.Mutex
	lastErr string

	pool sync.Pool // *scratch
	// wideProbes is set once a goindex_probe result had more entries than
	// its stack buffer holds; from then on its probes use the pool.
	wideProbes atomic.Bool
}

// scratch is one call's working memory: a batch's, or a probe's whose
// result outgrew goindex_probe's stack buffer. Handles pool them, so such a
// call whose output fits allocates nothing once the pool is warm.
type scratch struct {
	overlaps []kv.Overlap
	lens     []int // each query's length in locals
	ends     []int // end of each query's entries in overlaps
}

func (h *handle) getScratch() *scratch {
	if s, ok := h.pool.Get().(*scratch); ok {
		return s
	}
	return new(scratch)
}

func (h *handle) putScratch(s *scratch) { h.pool.Put(s) }

// fail records err as the handle's last error, prefixed by the call's name,
// and returns its code.
func (h *handle) fail(call string, err error) status {
	h.errMu.Lock()
	h.lastErr = call + ": " + err.Error()
	h.errMu.Unlock()
	return code(err)
}

func (h *handle) lastError() string {
	h.errMu.Lock()
	defer h.errMu.Unlock()
	return h.lastErr
}
