package main

/*
#include "goindex.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/goindex/goindex/dynamo/selector"
)

// pluginWorkerCosts is goindex_worker_costs (plugin.c turns the opaque
// state into its number): the per-worker cost of Dynamo's compile-time
// scorer (dynamo/rust/goindex-scorer) over a plugin state, the same
// selector, rates and replica, one cost per worker instead of one choice.
//
//export pluginWorkerCosts
func pluginWorkerCosts(state C.uint64_t, blockSize C.uint32_t, isl C.uint64_t, workers *C.goindex_worker, n C.size_t,
	costs *C.double, degraded *C.uint32_t, note *wsErrorBuf) (rc C.int) {
	defer func() {
		if r := recover(); r != nil {
			rc = code(fmt.Errorf("%w: goindex_worker_costs: panic: %v", errInternal, r))
		}
	}()
	st := handles.plugins.get(uint64(state))
	switch {
	case st == nil:
		return code(fmt.Errorf("%w: %#x is not a live plugin state", errHandle, uint64(state)))
	case degraded == nil:
		return code(fmt.Errorf("%w: degraded is NULL", errInvalid))
	case blockSize == 0:
		return code(fmt.Errorf("%w: block_size 0", errInvalid))
	case n > C.GOINDEX_MAX_CANDIDATES:
		return code(fmt.Errorf("%w: %d workers over %d", errTooBig, uint64(n), C.GOINDEX_MAX_CANDIDATES))
	case n > 0 && (workers == nil || costs == nil):
		return code(fmt.Errorf("%w: workers or costs is NULL with %d workers", errInvalid, uint64(n)))
	}
	*degraded = 0
	if n == 0 {
		return C.GOINDEX_OK
	}
	in, out := unsafe.Slice(workers, int(n)), unsafe.Slice((*float64)(unsafe.Pointer(costs)), int(n))
	st.mu.Lock()
	defer st.mu.Unlock()
	cands := st.cands[:0]
	for i := range in {
		w := &in[i]
		if w.reserved != 0 {
			return code(fmt.Errorf("%w: workers[%d].reserved is %d, want 0", errInvalid, i, uint32(w.reserved)))
		}
		c := selector.Candidate{HasCachedTokens: true, CachedTokens: uint64(w.cached_tokens)}
		if w.flags&C.GOINDEX_CAND_LOAD != 0 {
			c.HasLoad, c.ActivePrefillTokens, c.ActiveDecodeBlocks = true, uint64(w.active_prefill_tokens), uint64(w.active_decode_blocks)
		}
		if w.flags&C.GOINDEX_CAND_CAPACITY != 0 {
			c.HasCapacity, c.TotalKVBlocks = true, uint64(w.capacity_blocks)
		}
		cands = append(cands, c)
	}
	st.cands = cands
	why, err := st.sel.Costs(selector.Request{BlockSize: uint32(blockSize), ISLTokens: uint64(isl)}, cands, out)
	if err != nil {
		return code(fmt.Errorf("%w: %w", errInvalid, err))
	}
	if why != nil {
		*degraded = 1
		wsFail(note, 0, why)
	}
	return C.GOINDEX_OK
}
