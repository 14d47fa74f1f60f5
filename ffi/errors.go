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
	"github.com/goindex/goindex/goindex/score"
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
