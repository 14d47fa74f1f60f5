package cbi1

import (
	"errors"
	"fmt"
)

var (
	// ErrMalformed reports a frame that breaks the layout or a limit.
	ErrMalformed = errors.New("cbi1: malformed frame")
	// ErrChecksum reports a body whose checksum does not match the header's.
	ErrChecksum = errors.New("cbi1: body checksum mismatch")
)

// FormatError says which field of a frame is wrong and where.
type FormatError struct {
	Field  string // the field, as the layout names it
	Offset int    // its byte offset in the frame
	Reason string
	Err    error // ErrMalformed or ErrChecksum
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%v: %s at byte %d: %s", e.Err, e.Field, e.Offset, e.Reason)
}

// Unwrap returns ErrMalformed or ErrChecksum.
func (e *FormatError) Unwrap() error { return e.Err }

func malformed(field string, offset int, format string, args ...any) error {
	return &FormatError{Field: field, Offset: offset, Reason: fmt.Sprintf(format, args...), Err: ErrMalformed}
}
