package wsplugin

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include "goindex.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/goindex/goindex/dynamo/selector"
	"github.com/goindex/goindex/ffi/internal/idtable"
)

// The Go side of Dynamo's worker-selector plugin (dynamo-compat §5a;
// include/goindex.h lists the four layouts and where each comes from). The
// descriptor and its four callbacks live in plugin.c, in C memory as the
// host requires; each callback turns the opaque state pointer into its
// number and calls one of the exports below, which run the ABI's four
// steps like the goindex_* calls: a recover guard, the state and argument
// checks, one call into dynamo/selector, and the mapping of the outcome to
// a status. select fails open: whatever it cannot use is USE_DEFAULT with
// the reason in the error buffer, never a status that fails the request.

// wsStatus is a DYNAMO_WS_* status as the callbacks return it.
type wsStatus = C.int32_t

// Go names of the plugin's C types, for the package's tests.
type (
	wsInput     = C.dynamo_ws_input
	wsRowInput  = C.dynamo_ws_row_input
	wsCandidate = C.dynamo_ws_candidate
	wsColumns   = C.dynamo_ws_columns
	wsLoad      = C.dynamo_ws_load
	wsCapacity  = C.dynamo_ws_capacity
	wsErrorBuf  = C.dynamo_ws_error_buffer
	wsU8        = C.uint8_t
)

var (
	// errPluginInput: create's or required_candidate_inputs' arguments are
	// malformed (DYNAMO_WS_INVALID_INPUT).
	errPluginInput = errors.New("goindex plugin: invalid input")
	// errUnfamiliar: select's input is not one the plugin can use (an
	// unknown layout, a NULL or misaligned pointer, a size out of range);
	// it answers USE_DEFAULT.
	errUnfamiliar = errors.New("goindex plugin: use default")
)

// states holds the live plugin states, the package's one piece of mutable
// state (STYLE.md); the host holds a state's id cast to a pointer.
var states idtable.Table[pluginState]

// pluginState is one plugin state: the selector of one Dynamo router
// (decode or prefill, with its replica when the config names one) and its
// scratch. Dynamo serializes select per state; mu makes concurrent misuse
// safe too.
type pluginState struct {
	sel   *selector.Selector
	mu    sync.Mutex
	cands []selector.Candidate // scratch, under mu
}

// maxRouterRole is the largest router_role Dynamo passes to create (0
// unknown, 1 decode, 2 prefill); the cost model is the same for all.
const maxRouterRole = 2

// wsGuard is create's and required_candidate_inputs' deferred first step:
// a panic becomes DYNAMO_WS_PANICKED with its message in eb.
func wsGuard(rc *wsStatus, eb *wsErrorBuf) {
	if r := recover(); r != nil {
		*rc = wsFail(eb, C.DYNAMO_WS_PANICKED, fmt.Errorf("goindex plugin: panic: %v", r))
	}
}

// selectGuard is select's: a panic becomes DYNAMO_WS_USE_DEFAULT, so a bug
// of ours costs the request its cache-aware choice, not its answer.
func selectGuard(rc *wsStatus, eb *wsErrorBuf) {
	if r := recover(); r != nil {
		*rc = wsFail(eb, C.DYNAMO_WS_USE_DEFAULT, fmt.Errorf("goindex plugin: panic: %v", r))
	}
}

// wsFail writes err's message into the host's error buffer, at most its
// capacity and cut at a UTF-8 boundary, sets written, and returns code. A
// NULL buffer (or NULL ptr) gets nothing.
func wsFail(eb *wsErrorBuf, code wsStatus, err error) wsStatus {
	if eb == nil {
		return code
	}
	eb.written = 0
	if eb.ptr == nil || eb.capacity == 0 {
		return code
	}
	msg := err.Error()
	n := min(uint64(len(msg)), uint64(eb.capacity))
	for n > 0 && n < uint64(len(msg)) && !utf8.RuneStart(msg[n]) {
		n--
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(eb.ptr)), n), msg[:n])
	eb.written = C.size_t(n)
	return code
}

// invalid is wsFail with DYNAMO_WS_INVALID_INPUT for an error it formats.
func invalid(eb *wsErrorBuf, format string, args ...any) wsStatus {
	return wsFail(eb, C.DYNAMO_WS_INVALID_INPUT, fmt.Errorf("%w: "+format, append([]any{errPluginInput}, args...)...))
}

// unfamiliar is an errUnfamiliar error it formats.
func unfamiliar(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUnfamiliar}, args...)...)
}

//export dynamoSelectorCreate
func dynamoSelectorCreate(cfg *C.goindex_in_u8, cfgLen C.size_t, role C.uint32_t, stateOut *C.uint64_t, eb *wsErrorBuf) (rc wsStatus) {
	defer wsGuard(&rc, eb)
	if stateOut == nil {
		return invalid(eb, "state_out is NULL")
	}
	*stateOut = 0
	if uint32(role) > maxRouterRole {
		return invalid(eb, "router_role %d (want 0 unknown, 1 decode or 2 prefill)", uint32(role))
	}
	switch {
	case cfg == nil && cfgLen > 0:
		return invalid(eb, "config is NULL with length %d", uint64(cfgLen))
	case uint64(cfgLen) > selector.MaxConfigBytes:
		return invalid(eb, "config length %d over %d", uint64(cfgLen), selector.MaxConfigBytes)
	}
	c, err := selector.ParseConfig(unsafe.Slice((*byte)(unsafe.Pointer(cfg)), int(cfgLen)))
	if err != nil {
		return invalid(eb, "%v", err)
	}
	st := &pluginState{}
	if st.sel, err = selector.Open(c); err != nil {
		return invalid(eb, "%v", err)
	}
	*stateOut = C.uint64_t(states.Add(st))
	return C.DYNAMO_WS_OK
}

//export dynamoSelectorSelect
func dynamoSelectorSelect(state C.uint64_t, in *wsInput, out *C.size_t, eb *wsErrorBuf) (rc wsStatus) {
	defer selectGuard(&rc, eb)
	st := states.Get(uint64(state))
	switch {
	case st == nil:
		return wsFail(eb, C.DYNAMO_WS_USE_DEFAULT, unfamiliar("state %#x is not a live plugin state", uint64(state)))
	case in == nil:
		return wsFail(eb, C.DYNAMO_WS_USE_DEFAULT, unfamiliar("input is NULL"))
	case out == nil:
		return wsFail(eb, C.DYNAMO_WS_USE_DEFAULT, unfamiliar("candidate_index_out is NULL"))
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	req, cands, err := st.decode(in)
	if err != nil {
		return wsFail(eb, C.DYNAMO_WS_USE_DEFAULT, err)
	}
	d, err := st.sel.Select(req, cands)
	switch {
	case err != nil:
		return wsFail(eb, C.DYNAMO_WS_USE_DEFAULT, err)
	case d.UseDefault:
		return wsFail(eb, C.DYNAMO_WS_USE_DEFAULT, d.Why)
	case d.Index < 0 || d.Index >= len(cands):
		return wsFail(eb, C.DYNAMO_WS_USE_DEFAULT, fmt.Errorf("goindex plugin: selector chose %d of %d candidates", d.Index, len(cands)))
	}
	*out = C.size_t(d.Index)
	return C.DYNAMO_WS_OK
}

//export dynamoSelectorRequiredInputs
func dynamoSelectorRequiredInputs(state C.uint64_t, inputsOut *C.uint64_t, eb *wsErrorBuf) (rc wsStatus) {
	defer wsGuard(&rc, eb)
	st := states.Get(uint64(state))
	switch {
	case st == nil:
		return invalid(eb, "state %#x is not a live plugin state", uint64(state))
	case inputsOut == nil:
		return invalid(eb, "inputs_out is NULL")
	}
	*inputsOut = C.uint64_t(st.sel.RequiredInputs())
	return C.DYNAMO_WS_OK
}

//export dynamoSelectorDestroy
func dynamoSelectorDestroy(state C.uint64_t) {
	defer func() { _ = recover() }() // destroy has no status to report a panic with
	if st := states.Remove(uint64(state)); st != nil {
		st.sel.Close()
	}
}

// decode tells the input's layout by the word at offset 4 (the row
// layout's candidate_size, 128, or the columnar format, 1), checks it and
// turns it into the selector's candidates (st.cands). Anything else is
// errUnfamiliar.
func (st *pluginState) decode(in *wsInput) (selector.Request, []selector.Candidate, error) {
	req := selector.Request{BlockSize: uint32(in.block_size), ISLTokens: uint64(in.isl_tokens)}
	n := uint64(in.candidate_count)
	switch word := uint32(in.candidate_format); {
	case uint64(in.struct_size) < C.sizeof_dynamo_ws_input:
		return req, nil, unfamiliar("input struct_size %d, v1 has %d", uint32(in.struct_size), C.sizeof_dynamo_ws_input)
	case word != C.DYNAMO_WS_COLUMNAR && word != C.DYNAMO_WS_ROW_CANDIDATE_SIZE:
		return req, nil, unfamiliar("input word @4 is %d: neither a columnar format (%d) nor the row layout's candidate size (%d)",
			word, C.DYNAMO_WS_COLUMNAR, C.DYNAMO_WS_ROW_CANDIDATE_SIZE)
	case n > C.DYNAMO_WS_MAX_CANDIDATES:
		return req, nil, unfamiliar("%d candidates, at most %d", n, C.DYNAMO_WS_MAX_CANDIDATES)
	case n == 0:
		return req, nil, nil
	case word == C.DYNAMO_WS_ROW_CANDIDATE_SIZE:
		cands, err := st.rows((*wsRowInput)(unsafe.Pointer(in)).candidates, n)
		return req, cands, err
	}
	cands, err := st.columns(in.candidate_columns, n)
	return req, cands, err
}

// rows reads the row layout's n candidates; a row holds every signal.
func (st *pluginState) rows(p *wsCandidate, n uint64) ([]selector.Candidate, error) {
	if p == nil {
		return nil, unfamiliar("candidates is NULL with %d candidates", n)
	}
	rows, err := column(p, n, 1, 1, "candidates")
	if err != nil {
		return nil, err
	}
	cands := st.cands[:0]
	for i := range rows {
		r := &rows[i]
		cands = append(cands, selector.Candidate{
			WorkerID: uint64(r.worker_id), DPRank: uint32(r.dp_rank),
			HasCachedTokens: true, CachedTokens: uint64(r.cached_tokens),
			HasLoad: true, ActivePrefillTokens: uint64(r.active_prefill_tokens),
			ActiveDecodeBlocks: uint64(r.active_decode_blocks), AdditionalActiveBlocks: uint64(r.additional_active_blocks),
			HasCapacity: true, TotalKVBlocks: uint64(r.total_kv_blocks),
		})
	}
	st.cands = cands
	return cands, nil
}

// columns reads a columnar table of either size (72 or ≥ 96 bytes; the
// plugin reads only fields both have). A column is provided when its
// provided_inputs bit is set; its pointer must then be non-NULL and
// aligned. A pointer whose bit is clear is ignored; the selector answers
// USE_DEFAULT for a column its policy needs that is not provided.
func (st *pluginState) columns(cols *wsColumns, n uint64) ([]selector.Candidate, error) {
	switch {
	case cols == nil:
		return nil, unfamiliar("candidate_columns is NULL with %d candidates", n)
	case uintptr(unsafe.Pointer(cols))%unsafe.Alignof(*cols) != 0:
		return nil, unfamiliar("candidate_columns at %p is not %d-byte aligned", cols, unsafe.Alignof(*cols))
	case uint32(cols.struct_size) < C.DYNAMO_WS_COLUMNS72_SIZE:
		return nil, unfamiliar("columns struct_size %d, the smallest table has %d", uint32(cols.struct_size), C.DYNAMO_WS_COLUMNS72_SIZE)
	}
	has := uint64(cols.provided_inputs)
	ids, err := column(cols.worker_ids, n, has, selector.InputIdentity, "worker_ids")
	if err != nil {
		return nil, err
	}
	ranks, err := column(cols.dp_ranks, n, has, selector.InputIdentity, "dp_ranks")
	if err != nil {
		return nil, err
	}
	cached, err := column(cols.cached_tokens, n, has, selector.InputCachedTokens, "cached_tokens")
	if err != nil {
		return nil, err
	}
	loads, err := column(cols.loads, n, has, selector.InputLoad, "loads")
	if err != nil {
		return nil, err
	}
	caps, err := column(cols.capacities, n, has, selector.InputCapacity, "capacities")
	if err != nil {
		return nil, err
	}
	cands := st.cands[:0]
	for i := range int(n) {
		var c selector.Candidate
		if ids != nil {
			c.WorkerID = uint64(ids[i])
		}
		if ranks != nil {
			c.DPRank = uint32(ranks[i])
		}
		if cached != nil {
			c.HasCachedTokens, c.CachedTokens = true, uint64(cached[i])
		}
		if loads != nil {
			l := &loads[i]
			c.HasLoad = true
			c.ActivePrefillTokens, c.ActiveDecodeBlocks, c.AdditionalActiveBlocks = uint64(l.active_prefill_tokens), uint64(l.active_decode_blocks), uint64(l.additional_active_blocks)
		}
		if caps != nil {
			c.HasCapacity, c.TotalKVBlocks = true, uint64(caps[i].total_kv_blocks)
		}
		cands = append(cands, c)
	}
	st.cands = cands
	return cands, nil
}

// column returns a provided array's n entries as a view of host memory
// (read during the call only), or nil when it is not provided (bit not in
// has).
func column[T any](p *T, n, has, bit uint64, name string) ([]T, error) {
	if has&bit == 0 {
		return nil, nil
	}
	if p == nil {
		return nil, unfamiliar("%s is provided (bit %#x) but NULL", name, bit)
	}
	var zero T
	if addr := uintptr(unsafe.Pointer(p)); addr%unsafe.Alignof(zero) != 0 {
		return nil, unfamiliar("%s at %#x is not %d-byte aligned", name, addr, unsafe.Alignof(zero))
	}
	return unsafe.Slice(p, n), nil
}
