package trace

import (
	"errors"
	"fmt"
)

// ErrLineTooLong means a trace line exceeds the reader's MaxLineBytes.
var ErrLineTooLong = errors.New("trace: line too long")

// ErrTooManyIDs means a request carries more hash ids than the reader's
// MaxIDs.
var ErrTooManyIDs = errors.New("trace: too many hash ids")

// ErrMalformed means a trace line is not a valid Mooncake request object
// (bad JSON, a missing or repeated field, a value of the wrong type or out of
// range).
var ErrMalformed = errors.New("trace: malformed request")

// ErrIDOverflow means a transform would push a hash id past 2^64 − 1.
var ErrIDOverflow = errors.New("trace: hash id overflows uint64")

// ErrEmpty means a trace file holds no request.
var ErrEmpty = errors.New("trace: no requests")

// ErrConfig reports an invalid configuration or transform factor.
var ErrConfig = errors.New("trace: invalid config")

// LineError locates a reader failure: Line is the 1-based line number in the
// input and Err (one of the sentinels above, possibly wrapped with detail, or
// the underlying read error) says what went wrong.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%v (line %d)", e.Err, e.Line) }

// Unwrap returns the cause, so errors.Is(err, ErrTooManyIDs) works.
func (e *LineError) Unwrap() error { return e.Err }
