package wsplugin

/*
#include "goindex.h"
*/
import "C"

import (
	"unsafe"

	"github.com/goindex/goindex/dynamo/selector"
)

// pluginWorkerCosts is goindex_worker_costs (plugin.c turns the opaque
// state into its number): the per-worker cost of Dynamo's compile-time
// scorer (dynamo/rust/goindex-scorer) over a plugin state, the same
// selector, rates and replica, one cost per worker instead of one choice.
// It has no handle to record a detail on, so a failure is its GOINDEX_*
// code alone (a panic: GOINDEX_EINTERNAL).
//
//export pluginWorkerCosts
func pluginWorkerCosts(state C.uint64_t, blockSize C.uint32_t, isl C.uint64_t, workers *C.goindex_worker, n C.size_t,
	costs *C.double, degraded *C.uint32_t, note *wsErrorBuf) (rc C.int) {
	defer func() {
		if recover() != nil {
			rc = C.GOINDEX_EINTERNAL
		}
	}()
	st := states.Get(uint64(state))
	switch {
	case st == nil:
		return C.GOINDEX_EHANDLE
	case degraded == nil, blockSize == 0:
		return C.GOINDEX_EINVAL
	case n > C.GOINDEX_MAX_CANDIDATES:
		return C.GOINDEX_ETOOBIG
	case n > 0 && (workers == nil || costs == nil):
		return C.GOINDEX_EINVAL // workers or costs is NULL with n > 0
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
			return C.GOINDEX_EINVAL
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
		return C.GOINDEX_EINVAL
	}
	if why != nil {
		*degraded = 1
		wsFail(note, 0, why)
	}
	return C.GOINDEX_OK
}
