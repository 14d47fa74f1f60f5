package main

/*
#include "goindex.h"
*/
import "C"

import (
	"errors"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/ckfindex"
	"github.com/goindex/goindex/goindex/radix"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/goindex/shm"
)

// The ABI layer's own sentinels. Each detail a call records wraps one of them
// (or an index's sentinel) so that codes can map it to a status code.
var (
	// errInvalid: a NULL pointer with a nonzero length, a NULL output, a bad
	// enum value, flag or struct_size, or a non-finite number.
	errInvalid = errors.New("ffi: invalid argument")
	// errHandle: the handle is unknown or was closed.
	errHandle = errors.New("ffi: unknown or closed handle")
	// errConfig: the config JSON is malformed, has an unknown key or a value
	// out of range.
	errConfig = errors.New("ffi: bad config")
	// errTooBig: a length exceeds one of the GOINDEX_MAX_* limits.
	errTooBig = errors.New("ffi: length over limit")
	// errBuffer: an output buffer is too small; *written holds the need.
	errBuffer = errors.New("ffi: output buffer too small")
	// errMode: the call is not available in the handle's mode (events on a
	// global handle, frames or a replica on an exact or ckf handle, frames
	// on a handle without "dcs" or with a replica attached).
	errMode = errors.New("ffi: not available in this mode")
	// errFrame: a relay frame was rejected: it faulted its lane, its
	// snapshot chunk was refused, or its producer cannot take the lane.
	// Frames that do not decode carry relayproto's sentinels instead.
	errFrame = errors.New("ffi: relay frame rejected")
	// errReplica: the replica file cannot be opened; files that are not
	// valid replicas carry shm's sentinels instead.
	errReplica = errors.New("ffi: replica cannot be attached")
	// errUnavailable: the feature is not built into this library.
	errUnavailable = errors.New("ffi: not built into this library")
	// errInternal: a recovered panic or an error no row of codes maps.
	errInternal = errors.New("ffi: internal error")
)

// status is a GOINDEX_* status code as the exports return it.
type status = C.int

// codes is the one table from errors to status codes; the first row whose
// error matches (errors.Is) gives the code. An error no row matches is a bug
// in the mapping and reports GOINDEX_EINTERNAL.
var codes = []struct {
	err  error
	code status
}{
	{errInvalid, C.GOINDEX_EINVAL},
	{errHandle, C.GOINDEX_EHANDLE},
	{errConfig, C.GOINDEX_ECONFIG},
	{errTooBig, C.GOINDEX_ETOOBIG},
	{errBuffer, C.GOINDEX_EBUFFER},
	{errMode, C.GOINDEX_EMODE},
	{errFrame, C.GOINDEX_EFRAME},
	{errReplica, C.GOINDEX_EREPLICA},
	{errUnavailable, C.GOINDEX_EUNAVAILABLE},
	{errInternal, C.GOINDEX_EINTERNAL},
	{radix.ErrParentNotFound, C.GOINDEX_EPARENT},
	{ckf.ErrParentBlockNotFound, C.GOINDEX_EPARENT},
	{radix.ErrInvalidBlockSequence, C.GOINDEX_ESEQUENCE},
	{radix.ErrConflictingBlock, C.GOINDEX_ESEQUENCE},
	{ckf.ErrInvalidBlockSequence, C.GOINDEX_ESEQUENCE},
	{radix.ErrBlockNotFound, C.GOINDEX_ENOTFOUND},
	{ckf.ErrCapacityExhausted, C.GOINDEX_ECAPACITY},
	{ckfindex.ErrNoFreeLane, C.GOINDEX_ECAPACITY},
	{radix.ErrCapacity, C.GOINDEX_ECAPACITY},
	{score.ErrNoCandidate, C.GOINDEX_ENOCANDIDATE},
	{relayproto.ErrMalformed, C.GOINDEX_EFRAME},
	{relayproto.ErrChecksum, C.GOINDEX_EFRAME},
	{relayproto.ErrTooLarge, C.GOINDEX_EFRAME},
	{relayproto.ErrVersion, C.GOINDEX_EFRAME},
	{relayproto.ErrBadFormat, C.GOINDEX_EFRAME},
	{relayproto.ErrWrongFormat, C.GOINDEX_EFRAME},
	{relayproto.ErrLaneFaulted, C.GOINDEX_EFRAME},
	{shm.ErrForeign, C.GOINDEX_EREPLICA},
	{shm.ErrVersion, C.GOINDEX_EREPLICA},
	{shm.ErrCorrupt, C.GOINDEX_EREPLICA},
}

// code returns the status code of err (GOINDEX_OK for nil).
func code(err error) status {
	if err == nil {
		return C.GOINDEX_OK
	}
	for _, row := range codes {
		if errors.Is(err, row.err) {
			return row.code
		}
	}
	return C.GOINDEX_EINTERNAL
}
