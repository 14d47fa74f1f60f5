package main

/*
#include "goindex.h"
*/
import "C"

import (
	"errors"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/ckfindex"
	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/hostindex"
	"github.com/goindex/goindex/goindex/radix"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/goindex/shm"
)

// The ABI layer's own sentinels, for its argument checks; the engine's
// errors carry their packages' sentinels.
var (
	// errInvalid: a NULL pointer with a nonzero length, a NULL output, a bad
	// enum value, flag or struct_size, or a non-finite number.
	errInvalid = errors.New("ffi: invalid argument")
	// errHandle: the handle is unknown or was closed.
	errHandle = errors.New("ffi: unknown or closed handle")
	// errTooBig: a length exceeds one of the GOINDEX_MAX_* limits.
	errTooBig = errors.New("ffi: length over limit")
	// errBuffer: an output buffer is too small; *written holds the need.
	errBuffer = errors.New("ffi: output buffer too small")
	// errInternal: a recovered panic.
	errInternal = errors.New("ffi: internal error")
)

// status is a GOINDEX_* status code as the exports return it.
type status = C.int

// codes is the one table from errors to status codes; the first row whose
// error matches (errors.Is) gives the code. An error no row matches
// reports GOINDEX_EINTERNAL.
var codes = []struct {
	err  error
	code status
}{
	{errInvalid, C.GOINDEX_EINVAL},
	{errHandle, C.GOINDEX_EHANDLE},
	{hostindex.ErrClosed, C.GOINDEX_EHANDLE},
	{hostindex.ErrConfig, C.GOINDEX_ECONFIG},
	{errTooBig, C.GOINDEX_ETOOBIG},
	{errBuffer, C.GOINDEX_EBUFFER},
	{hostindex.ErrMode, C.GOINDEX_EMODE},
	{follow.ErrFrameRejected, C.GOINDEX_EFRAME},
	{follow.ErrUnknownDC, C.GOINDEX_EINVAL},
	{follow.ErrNoReplica, C.GOINDEX_EREPLICA},
	{shm.ErrForeign, C.GOINDEX_EREPLICA},
	{shm.ErrVersion, C.GOINDEX_EREPLICA},
	{shm.ErrCorrupt, C.GOINDEX_EREPLICA},
	{errInternal, C.GOINDEX_EINTERNAL},
	{radix.ErrParentNotFound, C.GOINDEX_EPARENT},
	{ckf.ErrParentBlockNotFound, C.GOINDEX_EPARENT},
	{radix.ErrInvalidBlockSequence, C.GOINDEX_ESEQUENCE},
	{radix.ErrConflictingBlock, C.GOINDEX_ESEQUENCE},
	{ckf.ErrInvalidBlockSequence, C.GOINDEX_ESEQUENCE},
	{radix.ErrBlockNotFound, C.GOINDEX_ENOTFOUND},
	{ckfindex.ErrBlockNotFound, C.GOINDEX_ENOTFOUND},
	{ckf.ErrCapacityExhausted, C.GOINDEX_ECAPACITY},
	{ckfindex.ErrNoFreeLane, C.GOINDEX_ECAPACITY},
	{radix.ErrCapacity, C.GOINDEX_ECAPACITY},
	{score.ErrNoCandidate, C.GOINDEX_ENOCANDIDATE},
	{wire.ErrMalformed, C.GOINDEX_EFRAME},
	{wire.ErrChecksum, C.GOINDEX_EFRAME},
	{wire.ErrTooLarge, C.GOINDEX_EFRAME},
	{wire.ErrVersion, C.GOINDEX_EFRAME},
	{relayproto.ErrBadFormat, C.GOINDEX_EFRAME},
	{ingest.ErrWrongFormat, C.GOINDEX_EFRAME},
	{ingest.ErrLaneFaulted, C.GOINDEX_EFRAME},
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
