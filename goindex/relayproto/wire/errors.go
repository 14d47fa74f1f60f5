package wire

import (
	"errors"
	"fmt"
)

// Frame decoding and encoding errors. Decoders return them inside a
// *FrameError that says where the problem was found; a frame whose
// identity carries a bad format is reported with relayproto.ErrBadFormat.
var (
	// ErrMalformed reports bytes that are not a well-formed frame.
	ErrMalformed = errors.New("wire: malformed frame")
	// ErrChecksum reports a body whose XXH3 checksum differs from the header's.
	ErrChecksum = errors.New("wire: frame checksum mismatch")
	// ErrTooLarge reports a frame or field over one of the named limits
	// (MaxFrameBytes, relayproto.MaxDeltaImages, relayproto.MaxChunkWords).
	ErrTooLarge = errors.New("wire: frame exceeds a size limit")
	// ErrVersion reports a frame written with an unsupported wire version.
	ErrVersion = errors.New("wire: unsupported wire version")
)

// FrameError is a frame that could not be encoded or decoded. Lane is the
// physical lane the frame was routed to, or -1 when it is not known (a
// frame is only routed after it decodes). Offset is the byte offset into the
// frame where the problem was found.
type FrameError struct {
	Lane   int
	Offset int
	Reason string
	Err    error // ErrMalformed, ErrChecksum, ErrTooLarge, ErrVersion or relayproto.ErrBadFormat
}

// Error describes the frame problem with its sentinel, lane and offset.
func (e *FrameError) Error() string {
	if e.Lane >= 0 {
		return fmt.Sprintf("%v: lane %d, byte %d: %s", e.Err, e.Lane, e.Offset, e.Reason)
	}
	return fmt.Sprintf("%v: byte %d: %s", e.Err, e.Offset, e.Reason)
}

// Unwrap returns the sentinel.
func (e *FrameError) Unwrap() error { return e.Err }
