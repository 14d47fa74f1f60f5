package dynkv

import (
	"errors"
	"fmt"
)

// Code is one of the dynkv module's error names, sent as the first word of a
// RESP error reply ("-DYNKV_MISSING_PARENT parent 0x… not active for 1/0").
type Code string

// The module's error names (dynamo-compat §5b).
const (
	CodeInvalidEvent          Code = "DYNKV_INVALID_EVENT"
	CodeMissingParent         Code = "DYNKV_MISSING_PARENT"
	CodeConflictingBlock      Code = "DYNKV_CONFLICTING_BLOCK"
	CodeWorkerCleanupPending  Code = "DYNKV_WORKER_CLEANUP_PENDING"
	CodeGenerationExhausted   Code = "DYNKV_GENERATION_EXHAUSTED"
	CodeInvalidMatch          Code = "DYNKV_INVALID_MATCH"
	CodeNotPrimary            Code = "DYNKV_NOT_PRIMARY"
	CodeStaleGeneration       Code = "DYNKV_STALE_GENERATION"
	CodeInvalidReplace        Code = "DYNKV_INVALID_REPLACE"
	CodeWorkerRetired         Code = "DYNKV_WORKER_RETIRED"
	CodeWorkerOwned           Code = "DYNKV_WORKER_OWNED"
	CodeStaleWorkerOwner      Code = "DYNKV_STALE_WORKER_OWNER"
	CodeUnregisteredWorkerRnk Code = "DYNKV_UNREGISTERED_WORKER_RANK"
	CodeInvalidArgument       Code = "DYNKV_INVALID_ARGUMENT"
	CodeInvalidSelect         Code = "DYNKV_INVALID_SELECT"
	CodeInvalidRegistration   Code = "DYNKV_INVALID_REGISTRATION"
	CodeUnsupported           Code = "DYNKV_UNSUPPORTED"
	CodeInternalOnly          Code = "DYNKV_INTERNAL_COMMAND"
)

// ErrBadBacking reports an invalid Backing (an unknown index name, or a CKF
// size ckf.BucketCount refuses).
var ErrBadBacking = errors.New("dynkv: bad backing index")

// Error is a dynkv failure with the module's error name and a detail.
type Error struct {
	Code   Code
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return string(e.Code)
	}
	return string(e.Code) + " " + e.Detail
}

// Is matches another *Error with the same code, so errors.Is(err,
// &Error{Code: CodeMissingParent}) works.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code && t.Detail == ""
}

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// CodeOf returns err's module error name, or "" for errors of other kinds.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
