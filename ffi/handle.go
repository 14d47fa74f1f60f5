package main

import (
	"sync"
	"sync/atomic"

	"github.com/goindex/goindex/ffi/internal/idtable"
	"github.com/goindex/goindex/goindex/hostindex"
	"github.com/goindex/goindex/goindex/kv"
)

// registry is the process's handle table, the package's one piece of
// mutable state (STYLE.md), and the detail of the last failed goindex_open.
type registry struct {
	idtable.Table[handle]

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
