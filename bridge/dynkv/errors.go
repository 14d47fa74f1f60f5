package dynkv

import (
	"errors"
	"fmt"
)

// Code is one of the dynkv module's error names. The module replies the
// bare name ("-DYNKV_MISSING_PARENT"), and so does the server.
type Code string

// The module's error names (its C source, dynkv_*.c), each sent by the
// commands listed.
const (
	CodeInvalidEvent             Code = "DYNKV_INVALID_EVENT"                  // APPLY, APPLY_OWNED
	CodeMissingParent            Code = "DYNKV_MISSING_PARENT"                 // APPLY, APPLY_OWNED
	CodeConflictingBlock         Code = "DYNKV_CONFLICTING_BLOCK"              // APPLY, APPLY_OWNED
	CodeWorkerCleanupPending     Code = "DYNKV_WORKER_CLEANUP_PENDING"         // writes of a worker whose lease cleanup is pending
	CodeGenerationExhausted      Code = "DYNKV_GENERATION_EXHAUSTED"           // ticket counter at its maximum
	CodeInvalidMatch             Code = "DYNKV_INVALID_MATCH"                  // MATCH, MATCH_PRIMARY
	CodeNotPrimary               Code = "DYNKV_NOT_PRIMARY"                    // MATCH_PRIMARY on a replica (never here)
	CodeInvalidSelect            Code = "DYNKV_INVALID_SELECT"                 // SELECT
	CodeInvalidWorker            Code = "DYNKV_INVALID_WORKER"                 // worker/rank arguments of the rank commands
	CodeInvalidReplace           Code = "DYNKV_INVALID_REPLACE"                // REPLACE_RANK_IF_GENERATION
	CodeStaleGeneration          Code = "DYNKV_STALE_GENERATION"               // REPLACE_RANK_IF_GENERATION
	CodeWorkerRetired            Code = "DYNKV_WORKER_RETIRED"                 // registrations
	CodeWorkerOwned              Code = "DYNKV_WORKER_OWNED"                   // registrations
	CodeInvalidRegistration      Code = "DYNKV_INVALID_REGISTRATION"           // REGISTER_WORKER_RANKS
	CodeStaleRegistration        Code = "DYNKV_STALE_REGISTRATION_GENERATION"  // REGISTER_WORKER_RANKS v3
	CodeLifecycleExhausted       Code = "DYNKV_LIFECYCLE_GENERATION_EXHAUSTED" // registration token counter at its maximum
	CodeInvalidWorkerLease       Code = "DYNKV_INVALID_WORKER_LEASE"           // RENEW_WORKER_LEASE, UNREGISTER_WORKER
	CodeStaleWorkerOwner         Code = "DYNKV_STALE_WORKER_OWNER"             // APPLY_OWNED, RENEW_WORKER_LEASE, UNREGISTER_WORKER
	CodeInvalidWorkerOwner       Code = "DYNKV_INVALID_WORKER_OWNER"           // APPLY_OWNED's nonce argument
	CodeUnregisteredRank         Code = "DYNKV_UNREGISTERED_WORKER_RANK"       // APPLY_OWNED
	CodeReplicationFailed        Code = "DYNKV_REPLICATION_FAILED"             // a leased registration refused after its preflight
	CodeInvalidGCRequest         Code = "DYNKV_INVALID_GC_REQUEST"             // GC
	CodeGCFutureWatermark        Code = "DYNKV_GC_FUTURE_WATERMARK"            // GC
	CodeInvalidGCState           Code = "DYNKV_INVALID_GC_STATE"               // GC: a plan the state contradicts (never expected)
	CodeGCCommitInvariant        Code = "DYNKV_GC_COMMIT_INVARIANT_FAILED"     // GC: a planned transition refused (never expected)
	CodeRestoreLoadingOnly       Code = "DYNKV_RESTORE_LOADING_ONLY"           // RESTORE from a client
	CodeApplyOwnedAtInternalOnly Code = "DYNKV_APPLY_OWNED_AT_INTERNAL_ONLY"   // APPLY_OWNED_AT from a client
	CodeWorkerLeaseApplyInternal Code = "DYNKV_WORKER_LEASE_APPLY_INTERNAL_ONLY"
	CodeGCApplyInternalOnly      Code = "DYNKV_GC_APPLY_INTERNAL_ONLY"
	CodeAdmitApplyInternalOnly   Code = "DYNKV_ADMIT_APPLY_INTERNAL_ONLY"
	CodeInvalidReserve           Code = "DYNKV_INVALID_RESERVE"     // SELECT_RESERVE
	CodeInvalidCandidate         Code = "DYNKV_INVALID_CANDIDATE"   // SELECT_RESERVE: a capacity the module does not own
	CodeRequestConflict          Code = "DYNKV_REQUEST_CONFLICT"    // SELECT_RESERVE: a reservation id reused for another request
	CodeInvalidRelease           Code = "DYNKV_INVALID_RELEASE"     // RELEASE
	CodeInvalidRenew             Code = "DYNKV_INVALID_RENEW"       // RENEW
	CodeReservationExpired       Code = "DYNKV_RESERVATION_EXPIRED" // RELEASE, RENEW of a reservation that ended
)

// ErrBadBacking reports an invalid Backing (an unknown index name, or a CKF
// size ckf.BucketCount refuses).
var ErrBadBacking = errors.New("dynkv: bad backing index")

// ErrBadAnnounce reports a Config.SentinelAnnounce that is not host:port.
var ErrBadAnnounce = errors.New("dynkv: bad sentinel announce address")

// ErrTooManyKeys reports a write that would create one more index than
// MaxKeys allows.
var ErrTooManyKeys = fmt.Errorf("dynkv: more than %d keys", MaxKeys)

// Error is a dynkv command failure: the module's error name.
type Error struct{ Code Code }

func (e *Error) Error() string { return string(e.Code) }

// Is matches another *Error with the same code, so errors.Is(err,
// &Error{Code: CodeMissingParent}) works.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// codeErr returns the *Error of code.
func codeErr(code Code) *Error { return &Error{Code: code} }

// CodeOf returns err's module error name, or "" for errors of other kinds.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
