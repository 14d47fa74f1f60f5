package parity

import (
	"errors"
	"fmt"
)

// ErrConfig reports an invalid Config or fill request; nothing changed.
var ErrConfig = errors.New("parity: invalid config")

// ErrDiverged reports that the CKF index and the exact ownership it projects
// disagree about what an event did (one rejected it, the other did not), or
// that the CKF's resident count differs from the study's accounting. The
// study's figures would no longer measure the filter, so the study stops:
// the event in question has been applied to both indexes as far as each
// accepted it.
var ErrDiverged = errors.New("parity: ckf index diverged from exact ownership")

// ErrNoLane reports a stored event for a new member while every CKF lane
// holds a member (raise Config.Lanes); the exact index has already applied
// the event, the CKF index has not.
var ErrNoLane = errors.New("parity: no free ckf lane")

// ErrLineTooLong reports an event-log line longer than MaxLogLineBytes.
var ErrLineTooLong = errors.New("parity: event log line too long")

// LineError is an event-log line that did not decode: the 1-based line
// number and the cause (ErrLineTooLong, a *dynamo.DecodeError, a kv shape
// error or the read error).
type LineError struct {
	Line int
	Err  error
}

// Error formats the error with its line number.
func (e *LineError) Error() string {
	return fmt.Sprintf("parity: event log line %d: %v", e.Line, e.Err)
}

// Unwrap returns the cause.
func (e *LineError) Unwrap() error { return e.Err }
