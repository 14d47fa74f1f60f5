package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "goindex.h"
*/
import "C"

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/goindex/goindex/goindex/hostindex"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/score"
)

// Every export below runs the same four steps (STYLE.md): the deferred
// guard, then the handle and argument checks, then one call into
// goindex/hostindex, then the error-to-code mapping of errors.go. The
// parameter types are the header's own (goindex_in_u64 and friends), so the
// prototypes cgo writes are textually those of include/goindex.h.

// Go names of the header's types, so that Go code which cannot say C (the
// package's tests) can call the exports with Go memory.
type (
	cU64       = C.uint64_t
	cU32       = C.uint32_t
	cSize      = C.size_t
	cChar      = C.char
	cDouble    = C.double
	inU64      = C.goindex_in_u64
	inU8       = C.goindex_in_u8
	inSize     = C.goindex_in_size
	inChar     = C.goindex_in_char
	overlapC   = C.goindex_overlap
	candidateC = C.goindex_candidate
	requestC   = C.goindex_score_request
	resultC    = C.goindex_score_result
	countersC  = C.goindex_counters
)

// guard is each export's deferred first step: a panic becomes
// GOINDEX_EINTERNAL, its detail recorded on the handle (id 0: goindex_open's
// slot).
func guard(rc *status, id uint64, call string) {
	r := recover()
	if r == nil {
		return
	}
	err := fmt.Errorf("%w: panic: %v", errInternal, r)
	if id == 0 {
		*rc = handles.failOpen(err)
		return
	}
	if h := handles.Get(id); h != nil {
		*rc = h.fail(call, err)
		return
	}
	*rc = code(err)
}

// view returns the host array p[0:n] as a Go slice of E without copying. The
// slice aliases host memory: it is valid during the call only, so what an
// index may keep (stored and removed events) is copied first, and only
// Match, which reads its query during the call, sees a view.
func view[E, T any](p *T, n C.size_t, limit uint64, what string) ([]E, error) {
	if n == 0 {
		return nil, nil
	}
	if p == nil {
		return nil, fmt.Errorf("%w: %s is NULL with length %d", errInvalid, what, uint64(n))
	}
	if uint64(n) > limit {
		return nil, fmt.Errorf("%w: %s length %d over %d", errTooBig, what, uint64(n), limit)
	}
	return unsafe.Slice((*E)(unsafe.Pointer(p)), int(n)), nil
}

// output checks an output triple (buffer, capacity, written).
func output[T any](p *T, capacity C.size_t, written *C.size_t, what string) error {
	if written == nil {
		return fmt.Errorf("%w: written is NULL", errInvalid)
	}
	if p == nil && capacity > 0 {
		return fmt.Errorf("%w: %s is NULL with capacity %d", errInvalid, what, uint64(capacity))
	}
	return nil
}

// room stores need in *written and reports errBuffer when need exceeds
// capacity.
func room(need int, capacity cSize, written *cSize, what string) error {
	*written = cSize(need)
	if uint64(need) > uint64(capacity) {
		return fmt.Errorf("%w: %s needs %d entries, capacity %d", errBuffer, what, need, uint64(capacity))
	}
	return nil
}

// result maps err to a status code, recording it when it is a failure.
func (h *handle) result(call string, err error) status {
	if err != nil {
		return h.fail(call, err)
	}
	return C.GOINDEX_OK
}

func member(worker cU64, rank cU32) kv.Member {
	return kv.Member{Worker: uint64(worker), Rank: uint32(rank)}
}

//export goindex_abi_version
func goindex_abi_version() C.uint32_t { return C.GOINDEX_ABI_VERSION }

//export goindex_open
func goindex_open(configJSON *C.goindex_in_char, configLen C.size_t, handleOut *C.uint64_t) (rc C.int) {
	defer guard(&rc, 0, "goindex_open")
	if handleOut == nil {
		return handles.failOpen(fmt.Errorf("%w: handle_out is NULL", errInvalid))
	}
	src, err := view[byte](configJSON, configLen, C.GOINDEX_MAX_CONFIG_BYTES, "config_json")
	if err != nil {
		return handles.failOpen(err)
	}
	cfg, err := hostindex.ParseConfig(src)
	if err != nil {
		return handles.failOpen(err)
	}
	ix, err := hostindex.Open(cfg)
	if err != nil {
		return handles.failOpen(err)
	}
	*handleOut = C.uint64_t(handles.Add(&handle{ix: ix}))
	return C.GOINDEX_OK
}

//export goindex_close
func goindex_close(handle C.uint64_t) (rc C.int) {
	defer guard(&rc, uint64(handle), "goindex_close")
	h := handles.Remove(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	h.ix.Close()
	return C.GOINDEX_OK
}

//export goindex_insert
func goindex_insert(handle C.uint64_t, workerID C.uint64_t, dpRank C.uint32_t, eventID C.uint64_t,
	parentHash *C.goindex_in_u64, externalHashes *C.goindex_in_u64,
	localHashes *C.goindex_in_u64, nBlocks C.size_t) (rc C.int) {
	const call = "goindex_insert"
	defer guard(&rc, uint64(handle), call)
	return insert(call, uint64(handle), member(workerID, dpRank), eventID, parentHash, externalHashes, nBlocks,
		viewLocals(localHashes, nBlocks))
}

//export goindex_insert_tokens
func goindex_insert_tokens(handle C.uint64_t, workerID C.uint64_t, dpRank C.uint32_t, eventID C.uint64_t,
	parentHash *C.goindex_in_u64, externalHashes *C.goindex_in_u64, nBlocks C.size_t,
	tokens *C.goindex_in_u32, nTokens C.size_t,
	loraName *C.goindex_in_char, loraLen C.size_t,
	cacheNamespace *C.goindex_in_char, namespaceLen C.size_t) (rc C.int) {
	const call = "goindex_insert_tokens"
	defer guard(&rc, uint64(handle), call)
	return insert(call, uint64(handle), member(workerID, dpRank), eventID, parentHash, externalHashes, nBlocks,
		hashLocals(tokens, nTokens, loraName, loraLen, cacheNamespace, namespaceLen))
}

// localsOf gives an insert's local hashes for its external hashes ext.
type localsOf func(h *handle, ext []uint64) ([]uint64, error)

// viewLocals is goindex_insert's: the host's array, checked and viewed.
func viewLocals(localHashes *C.goindex_in_u64, n C.size_t) localsOf {
	return func(*handle, []uint64) ([]uint64, error) {
		return view[uint64](localHashes, n, C.GOINDEX_MAX_BLOCKS, "local_hashes")
	}
}

// hashLocals is goindex_insert_tokens's: the hashes of the blocks' tokens,
// which must cover every block.
func hashLocals(tokens *C.goindex_in_u32, nTokens C.size_t, loraName *C.goindex_in_char, loraLen C.size_t,
	cacheNamespace *C.goindex_in_char, namespaceLen C.size_t) localsOf {
	return func(h *handle, ext []uint64) ([]uint64, error) {
		toks, lora, ns, err := tokenArgs(tokens, nTokens, loraName, loraLen, cacheNamespace, namespaceLen)
		if err != nil {
			return nil, err
		}
		bs := h.ix.Config().BlockSize
		need := len(ext) * bs
		if len(toks) < need {
			return nil, fmt.Errorf("%w: %d blocks of %d tokens need %d tokens, got %d", errInvalid, len(ext), bs, need, len(toks))
		}
		return h.ix.HashTokens(nil, toks[:need], lora, ns)
	}
}

// insert is goindex_insert's and goindex_insert_tokens's steps after the
// guard: the handle, the external hashes, their local hashes, and the
// stored event, built in Go memory, applied.
func insert(call string, id uint64, m kv.Member, eventID C.uint64_t, parentHash *C.goindex_in_u64,
	externalHashes *C.goindex_in_u64, nBlocks C.size_t, locals localsOf) C.int {
	h := handles.Get(id)
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	ext, err := view[uint64](externalHashes, nBlocks, C.GOINDEX_MAX_BLOCKS, "external_hashes")
	if err != nil {
		return h.fail(call, err)
	}
	loc, err := locals(h, ext)
	if err != nil {
		return h.fail(call, err)
	}
	ev := storedEvent(m, uint64(eventID), (*uint64)(unsafe.Pointer(parentHash)), ext, loc)
	return h.result(call, h.ix.Apply(ev))
}

// tokenArgs checks and views the token array and the two salt names.
func tokenArgs(tokens *C.goindex_in_u32, nTokens C.size_t, loraName *C.goindex_in_char, loraLen C.size_t,
	cacheNamespace *C.goindex_in_char, namespaceLen C.size_t) (toks []uint32, lora, ns string, err error) {
	if toks, err = view[uint32](tokens, nTokens, C.GOINDEX_MAX_TOKENS, "tokens"); err != nil {
		return nil, "", "", err
	}
	l, err := view[byte](loraName, loraLen, C.GOINDEX_MAX_NAME_BYTES, "lora_name")
	if err != nil {
		return nil, "", "", err
	}
	n, err := view[byte](cacheNamespace, namespaceLen, C.GOINDEX_MAX_NAME_BYTES, "cache_namespace")
	if err != nil {
		return nil, "", "", err
	}
	return toks, string(l), string(n), nil
}

// storedEvent builds a stored event in Go memory: the host's arrays are
// copied, so the index may keep what it is given.
func storedEvent(m kv.Member, eventID uint64, parent *uint64, ext, locals []uint64) *kv.Event {
	ev := &kv.Event{Member: m, EventID: eventID, Kind: kv.Stored, Blocks: make([]kv.Block, len(ext))}
	if parent != nil {
		ev.HasParent, ev.Parent = true, *parent
	}
	for i := range ext {
		ev.Blocks[i] = kv.Block{External: ext[i], Local: locals[i]}
	}
	return ev
}

//export goindex_remove
func goindex_remove(handle C.uint64_t, workerID C.uint64_t, dpRank C.uint32_t, eventID C.uint64_t,
	externalHashes *C.goindex_in_u64, n C.size_t) (rc C.int) {
	const call = "goindex_remove"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	ext, err := view[uint64](externalHashes, n, C.GOINDEX_MAX_BLOCKS, "external_hashes")
	if err != nil {
		return h.fail(call, err)
	}
	ev := &kv.Event{Member: member(workerID, dpRank), EventID: uint64(eventID), Kind: kv.Removed, Removed: slices.Clone(ext)}
	return h.result(call, h.ix.Apply(ev))
}

//export goindex_clear
func goindex_clear(handle C.uint64_t, workerID C.uint64_t, dpRank C.uint32_t, eventID C.uint64_t) (rc C.int) {
	const call = "goindex_clear"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	ev := &kv.Event{Member: member(workerID, dpRank), EventID: uint64(eventID), Kind: kv.Cleared}
	return h.result(call, h.ix.Apply(ev))
}

//export goindex_remove_worker
func goindex_remove_worker(handle C.uint64_t, workerID C.uint64_t) (rc C.int) {
	const call = "goindex_remove_worker"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	return h.result(call, h.ix.RemoveWorker(uint64(workerID)))
}

//export goindex_remove_rank
func goindex_remove_rank(handle C.uint64_t, workerID C.uint64_t, dpRank C.uint32_t) (rc C.int) {
	const call = "goindex_remove_rank"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	return h.result(call, h.ix.RemoveMember(member(workerID, dpRank)))
}

//export goindex_hash_tokens
func goindex_hash_tokens(handle C.uint64_t, tokens *C.goindex_in_u32, nTokens C.size_t,
	loraName *C.goindex_in_char, loraLen C.size_t,
	cacheNamespace *C.goindex_in_char, namespaceLen C.size_t,
	out *C.uint64_t, capacity C.size_t, written *C.size_t) (rc C.int) {
	const call = "goindex_hash_tokens"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	toks, lora, ns, err := tokenArgs(tokens, nTokens, loraName, loraLen, cacheNamespace, namespaceLen)
	if err == nil {
		err = output(out, capacity, written, "out")
	}
	if err == nil {
		err = room(len(toks)/h.ix.Config().BlockSize, capacity, written, "out")
	}
	if err != nil {
		return h.fail(call, err)
	}
	locals, err := h.ix.HashTokens(nil, toks, lora, ns)
	if err != nil {
		return h.fail(call, err)
	}
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(out)), len(locals)), locals)
	return C.GOINDEX_OK
}

// putOverlaps writes overlaps into the host's buffer p, which has room.
func putOverlaps(p *overlapC, overlaps []kv.Overlap) {
	if len(overlaps) == 0 {
		return
	}
	dst := unsafe.Slice(p, len(overlaps))
	for i, o := range overlaps {
		dst[i] = overlapC{id: cU64(o.Member.Worker), rank: cU32(o.Member.Rank), blocks: cU32(o.Blocks)}
	}
}

// putSorted writes o into the host's buffer p, which has room, in (id,
// rank) order. Up to InsertionSortMax entries it is SortMembers's insertion
// sort done while converting, into p: one pass over the entries instead of a
// sort and a copy (goindex_probe, BenchmarkProbe impl=abi).
func putSorted(p *overlapC, o []kv.Overlap) {
	if len(o) == 0 {
		return
	}
	if len(o) > hostindex.InsertionSortMax {
		hostindex.SortMembers(o)
		putOverlaps(p, o)
		return
	}
	dst := unsafe.Slice(p, len(o))
	for i, v := range o {
		e := overlapC{id: cU64(v.Member.Worker), rank: cU32(v.Member.Rank), blocks: cU32(v.Blocks)}
		j := i
		for ; j > 0 && (e.id < dst[j-1].id || e.id == dst[j-1].id && e.rank < dst[j-1].rank); j-- {
			dst[j] = dst[j-1]
		}
		dst[j] = e
	}
}

// probeStackEntries is how many entries goindex_probe's stack buffer holds:
// zeroing 32 × 24 bytes costs less than the pool's Get and Put, 64 as much
// (tests/c/bench.c, BENCHMARKS.md).
const probeStackEntries = 32

//export goindex_probe
func goindex_probe(handle C.uint64_t, localHashes *C.goindex_in_u64, n C.size_t,
	out *C.goindex_overlap, capacity C.size_t, written *C.size_t) (rc C.int) {
	const call = "goindex_probe"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	// view's and output's checks, inline; probeArgsError words a failure.
	if localHashes == nil && n != 0 || uint64(n) > C.GOINDEX_MAX_BLOCKS || written == nil || out == nil && capacity != 0 {
		return h.fail(call, probeArgsError(localHashes, n, out, capacity, written))
	}
	ix := h.ix
	// A view of the host's query (Match only reads it during the call). The
	// entries go to a stack buffer; once one result has outgrown it (Match
	// then allocated), the handle's probes use the pooled scratch instead.
	locals := unsafe.Slice((*uint64)(unsafe.Pointer(localHashes)), int(n))
	var stack [probeStackEntries]kv.Overlap
	var found []kv.Overlap
	var s *scratch
	if h.wideProbes.Load() {
		s = h.getScratch()
		s.overlaps = ix.Match(s.overlaps[:0], locals)
		found = s.overlaps // found must never flow into s: stack would move to the heap
	} else if found = ix.Match(stack[:0], locals); len(found) > probeStackEntries {
		h.wideProbes.Store(true)
	}
	ix.CountProbe()
	if err := room(len(found), capacity, written, "out"); err != nil {
		return h.fail(call, err)
	}
	putSorted(out, found)
	if s != nil {
		h.putScratch(s) // a panic drops s instead, which only costs the pool one
	}
	return C.GOINDEX_OK
}

// probeArgsError is the error of a failed goindex_probe argument check.
func probeArgsError(localHashes *C.goindex_in_u64, n C.size_t, out *C.goindex_overlap, capacity C.size_t, written *C.size_t) error {
	if _, err := view[uint64](localHashes, n, C.GOINDEX_MAX_BLOCKS, "local_hashes"); err != nil {
		return err
	}
	return output(out, capacity, written, "out")
}

// maxNameBytes is GOINDEX_MAX_NAME_BYTES, for the package's tests.
const maxNameBytes = C.GOINDEX_MAX_NAME_BYTES

// maxBatchBlocks bounds the hashes of one goindex_probe_batch (header:
// GOINDEX_MAX_BLOCKS * 16).
const maxBatchBlocks = C.GOINDEX_MAX_BLOCKS * 16

//export goindex_probe_batch
func goindex_probe_batch(handle C.uint64_t, localHashes *C.goindex_in_u64, lengths *C.goindex_in_size,
	nQueries C.size_t, out *C.goindex_overlap, capacity C.size_t,
	counts *C.size_t, written *C.size_t) (rc C.int) {
	const call = "goindex_probe_batch"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	lens, err := view[C.size_t](lengths, nQueries, C.GOINDEX_MAX_BATCH, "lengths")
	if err == nil {
		_, err = view[C.size_t](counts, nQueries, C.GOINDEX_MAX_BATCH, "counts")
	}
	if err == nil {
		err = output(out, capacity, written, "out")
	}
	if err != nil {
		return h.fail(call, err)
	}
	s := h.getScratch()
	defer h.putScratch(s)
	s.lens = s.lens[:0]
	total := uint64(0)
	for q, n := range lens {
		if uint64(n) > C.GOINDEX_MAX_BLOCKS {
			return h.fail(call, fmt.Errorf("%w: lengths[%d] = %d over %d", errTooBig, q, uint64(n), C.GOINDEX_MAX_BLOCKS))
		}
		total += uint64(n)
		s.lens = append(s.lens, int(n))
	}
	if total > maxBatchBlocks {
		return h.fail(call, fmt.Errorf("%w: the batch holds %d hashes, over %d", errTooBig, total, maxBatchBlocks))
	}
	locals, err := view[uint64](localHashes, C.size_t(total), maxBatchBlocks, "local_hashes")
	if err != nil {
		return h.fail(call, err)
	}
	s.overlaps, s.ends = h.ix.ProbeBatch(s.overlaps[:0], s.ends[:0], locals, s.lens)
	if len(lens) > 0 {
		cs, start := unsafe.Slice(counts, len(lens)), 0
		for q, end := range s.ends {
			cs[q], start = C.size_t(end-start), end
		}
	}
	if err := room(len(s.overlaps), capacity, written, "out"); err != nil {
		return h.fail(call, err)
	}
	putOverlaps(out, s.overlaps)
	return C.GOINDEX_OK
}

// scoreQueryOf checks a goindex_score_request and converts it to Go memory.
func scoreQueryOf(h *handle, r *C.goindex_in_score_request) (*hostindex.ScoreQuery, error) {
	if uint64(r.struct_size) < C.sizeof_goindex_score_request {
		return nil, fmt.Errorf("%w: request struct_size %d, want %d", errInvalid, uint32(r.struct_size), C.sizeof_goindex_score_request)
	}
	q := &hostindex.ScoreQuery{Policy: h.ix.DefaultPolicy(), Temperature: float64(r.temperature), Seed: uint64(r.random_seed)}
	switch p := uint32(r.policy); {
	case p > C.GOINDEX_POLICY_CREDIT:
		return nil, fmt.Errorf("%w: policy %d", errInvalid, p)
	case p != C.GOINDEX_POLICY_DEFAULT:
		q.Policy = score.Policy(p) // score's numbers are the header's
	}
	if math.IsNaN(q.Temperature) || math.IsInf(q.Temperature, 0) || q.Temperature < 0 {
		return nil, fmt.Errorf("%w: temperature %g must be finite and >= 0", errInvalid, q.Temperature)
	}
	if uint64(r.isl_tokens) > C.GOINDEX_MAX_TOKENS {
		return nil, fmt.Errorf("%w: isl_tokens %d over %d", errTooBig, uint64(r.isl_tokens), C.GOINDEX_MAX_TOKENS)
	}
	q.ISLTokens = int(r.isl_tokens)
	var err error
	if q.Locals, err = view[uint64](r.local_hashes, r.n_hashes, C.GOINDEX_MAX_BLOCKS, "local_hashes"); err != nil {
		return nil, err
	}
	cands, err := view[C.goindex_candidate](r.candidates, r.n_candidates, C.GOINDEX_MAX_CANDIDATES, "candidates")
	if err != nil {
		return nil, err
	}
	q.Members = r.candidates == nil
	q.Cands = make([]score.Candidate, len(cands))
	for i := range cands {
		if q.Cands[i], err = candidateOf(&cands[i]); err != nil {
			return nil, fmt.Errorf("candidates[%d]: %w", i, err)
		}
	}
	return q, nil
}

// candFlags is every GOINDEX_CAND_* bit.
const candFlags = C.GOINDEX_CAND_LOAD | C.GOINDEX_CAND_CAPACITY | C.GOINDEX_CAND_RTT

func candidateOf(c *C.goindex_candidate) (score.Candidate, error) {
	flags := uint32(c.flags)
	if flags&^candFlags != 0 {
		return score.Candidate{}, fmt.Errorf("%w: unknown flags %#x", errInvalid, flags&^candFlags)
	}
	rtt := float64(c.rtt_ms)
	if flags&C.GOINDEX_CAND_RTT != 0 && (math.IsNaN(rtt) || math.IsInf(rtt, 0) || rtt < 0) {
		return score.Candidate{}, fmt.Errorf("%w: rtt_ms %g must be finite and >= 0", errInvalid, rtt)
	}
	return score.Candidate{
		ID: uint64(c.id), Rank: uint32(c.rank),
		HasLoad:             flags&C.GOINDEX_CAND_LOAD != 0,
		ActivePrefillTokens: uint64(c.active_prefill_tokens),
		ActiveDecodeBlocks:  uint64(c.active_decode_blocks),
		HasCapacity:         flags&C.GOINDEX_CAND_CAPACITY != 0,
		CapacityBlocks:      uint64(c.capacity_blocks),
		HasRTT:              flags&C.GOINDEX_CAND_RTT != 0,
		RTTms:               rtt,
	}, nil
}

//export goindex_score
func goindex_score(handle C.uint64_t, request *C.goindex_in_score_request, result *C.goindex_score_result) (rc C.int) {
	const call = "goindex_score"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	if request == nil || result == nil {
		return h.fail(call, fmt.Errorf("%w: request or result is NULL", errInvalid))
	}
	// Results of earlier version-1 headers end before flags: they keep the
	// old contract (no fail-open) and get only their 72 bytes.
	size := uint64(result.struct_size)
	if size < scoreResultV1Bytes {
		return h.fail(call, fmt.Errorf("%w: result struct_size %d, want %d", errInvalid, size, C.sizeof_goindex_score_result))
	}
	q, err := scoreQueryOf(h, request)
	if err != nil {
		return h.fail(call, err)
	}
	q.Open = size >= C.sizeof_goindex_score_result
	sc, err := h.ix.Score(q)
	if err != nil {
		return h.fail(call, err)
	}
	result.chosen = C.int32_t(sc.Index)
	result.id, result.rank = C.uint64_t(sc.ID), C.uint32_t(sc.Rank)
	result.eligible = C.uint32_t(sc.Eligible)
	result.cached_blocks = C.uint64_t(sc.CachedBlocks)
	result.cached_tokens = C.uint64_t(sc.CachedTokens)
	result.cost = C.double(sc.Cost)
	result.rtt_ms, result.queue_ms, result.prefill_ms = C.double(sc.Parts.RTTms), C.double(sc.Parts.QueueMs), C.double(sc.Parts.PrefillMs)
	if q.Open {
		result.flags, result.degraded = 0, C.uint32_t(sc.Degraded)
		if sc.Degraded != 0 {
			result.flags = C.GOINDEX_SCORE_DEGRADED
		}
	}
	return C.GOINDEX_OK
}

// scoreResultV1Bytes is goindex_score_result up to prefill_ms, the struct
// of the headers before fail-open scoring.
const scoreResultV1Bytes = C.sizeof_goindex_score_result - 8

//export goindex_apply_frame
func goindex_apply_frame(handle C.uint64_t, frame *C.goindex_in_u8, frameLen C.size_t) (rc C.int) {
	const call = "goindex_apply_frame"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	src, err := view[byte](frame, frameLen, C.GOINDEX_MAX_FRAME_BYTES, "frame")
	if err != nil {
		return h.fail(call, err)
	}
	return h.result(call, h.ix.ApplyFrame(src))
}

//export goindex_set_rtt
func goindex_set_rtt(handle C.uint64_t, dcID C.uint64_t, rttMs C.double) (rc C.int) {
	const call = "goindex_set_rtt"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	ms := float64(rttMs)
	if math.IsNaN(ms) || math.IsInf(ms, 0) || ms < 0 || ms > hostindex.MaxIntervalMs {
		return h.fail(call, fmt.Errorf("%w: rtt_ms %g must be finite and in [0, %d]", errInvalid, ms, hostindex.MaxIntervalMs))
	}
	return h.result(call, h.ix.SetRTT(uint64(dcID), time.Duration(ms*float64(time.Millisecond))))
}

//export goindex_attach_replica
func goindex_attach_replica(handle C.uint64_t, path *C.goindex_in_char, pathLen C.size_t) (rc C.int) {
	const call = "goindex_attach_replica"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	p, err := view[byte](path, pathLen, C.GOINDEX_MAX_NAME_BYTES, "path")
	if err == nil && len(p) == 0 {
		err = fmt.Errorf("%w: path is empty", errInvalid)
	}
	if err == nil && bytes.IndexByte(p, 0) >= 0 {
		err = fmt.Errorf("%w: path holds a NUL byte", errInvalid)
	}
	if err != nil {
		return h.fail(call, err)
	}
	return h.result(call, h.ix.AttachReplica(string(p)))
}

//export goindex_stats
func goindex_stats(handle C.uint64_t, stats *C.goindex_counters) (rc C.int) {
	const call = "goindex_stats"
	defer guard(&rc, uint64(handle), call)
	h := handles.Get(uint64(handle))
	if h == nil {
		return C.GOINDEX_EHANDLE
	}
	if stats == nil {
		return h.fail(call, fmt.Errorf("%w: stats is NULL", errInvalid))
	}
	size := uint64(stats.struct_size)
	if size < 8 {
		return h.fail(call, fmt.Errorf("%w: stats struct_size %d is under 8", errInvalid, size))
	}
	c := h.ix.Counters()
	img := C.goindex_counters{
		mode: C.uint32_t(c.Mode), blocks: cU64(c.Blocks), members: cU64(c.Members), lanes_ready: cU64(c.LanesReady),
		memory_bytes: cU64(c.MemoryBytes), capacity_omissions: cU64(c.CapacityOmissions),
		events_applied: cU64(c.EventsApplied), events_rejected: cU64(c.EventsRejected), probes: cU64(c.Probes),
		frames_applied: cU64(c.FramesApplied), frames_rejected: cU64(c.FramesRejected), frames_ignored: cU64(c.FramesIgnored),
		replica_generation: cU64(c.ReplicaGeneration), degraded_scores: cU64(c.DegradedScores),
		replica_state: C.uint32_t(c.ReplicaState), lanes_bad: cU64(c.LanesBad), integrity_failures: cU64(c.IntegrityFailures),
		replica_faults: cU64(c.ReplicaFaults),
	}
	// Fill bytes [4, size) only: struct_size stays the caller's, and an
	// older, shorter struct gets the fields it has.
	n := min(size, C.sizeof_goindex_counters)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(stats)), n)[4:], unsafe.Slice((*byte)(unsafe.Pointer(&img)), n)[4:])
	return C.GOINDEX_OK
}

// errorNames holds goindex_strerror's strings, allocated once in C memory
// and never freed.
var errorNames = func() map[status]*C.char {
	names := map[status]string{
		C.GOINDEX_OK: "ok", C.GOINDEX_EINVAL: "invalid argument", C.GOINDEX_EHANDLE: "unknown or closed handle",
		C.GOINDEX_ECONFIG: "bad configuration", C.GOINDEX_ETOOBIG: "length over limit",
		C.GOINDEX_EBUFFER: "output buffer too small", C.GOINDEX_EPARENT: "parent block not held by the member",
		C.GOINDEX_ESEQUENCE: "invalid block sequence", C.GOINDEX_ENOTFOUND: "some removed blocks were unknown",
		C.GOINDEX_ECAPACITY: "filter capacity exhausted", C.GOINDEX_EMODE: "call not available in this mode",
		C.GOINDEX_EFRAME: "malformed or rejected relay frame", C.GOINDEX_EREPLICA: "replica cannot be attached",
		C.GOINDEX_ENOCANDIDATE: "no eligible candidate", C.GOINDEX_EINTERNAL: "internal error",
		C.GOINDEX_EUNAVAILABLE: "feature not built into this library",
	}
	m := make(map[status]*C.char, len(names))
	for c, s := range names {
		m[c] = C.CString(s)
	}
	return m
}()

// unknownName is goindex_strerror's answer for codes it does not know.
var unknownName = C.CString("unknown error")

//export goindex_strerror
func goindex_strerror(code C.int) *C.goindex_in_char {
	p, ok := errorNames[code]
	if !ok {
		p = unknownName
	}
	return (*inChar)(unsafe.Pointer(p))
}

//export goindex_last_error
func goindex_last_error(handle C.uint64_t, buf *C.char, capacity C.size_t, needed *C.size_t) (rc C.int) {
	defer guard(&rc, uint64(handle), "goindex_last_error")
	if buf == nil && capacity > 0 {
		return C.GOINDEX_EINVAL // not recorded: it would replace the detail asked for
	}
	var msg string
	if handle == 0 {
		msg = handles.openError()
	} else if h := handles.Get(uint64(handle)); h != nil {
		msg = h.lastError()
	} else {
		return C.GOINDEX_EHANDLE
	}
	if needed != nil {
		*needed = C.size_t(len(msg) + 1)
	}
	if capacity == 0 {
		return C.GOINDEX_OK
	}
	n := min(uint64(len(msg)), uint64(capacity)-1)
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), n+1)
	copy(dst, msg[:n])
	dst[n] = 0
	return C.GOINDEX_OK
}
