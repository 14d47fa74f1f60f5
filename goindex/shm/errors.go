package shm

import (
	"errors"
	"fmt"
)

// Errors of package shm. Attach and Create wrap them with the path and the
// offending field; test with errors.Is. A call that fails leaves no mapping
// open and, for Create, no new file at the path (a temporary file it wrote
// is removed).
var (
	// ErrForeign reports a file that is not a replica file: its magic is
	// wrong or it is shorter than the fixed header.
	ErrForeign = errors.New("shm: not a replica file")
	// ErrVersion reports a replica file of a layout version this package
	// does not read.
	ErrVersion = errors.New("shm: unsupported layout version")
	// ErrCorrupt reports a replica file whose header checksum does not
	// match, whose sizes disagree with each other, or that is shorter than
	// its header says.
	ErrCorrupt = errors.New("shm: corrupt replica file")
	// ErrBadLayout reports a Layout that cannot be created (lanes, bucket
	// count or DC list out of range).
	ErrBadLayout = errors.New("shm: bad layout")
	// ErrClosed reports a call on a closed Writer or Reader.
	ErrClosed = errors.New("shm: closed")
	// ErrFault reports an access to a mapping that faulted: the file lost
	// pages under it (it was truncated).
	ErrFault = errors.New("shm: mapped access faulted")
	// ErrReplaced reports a Writer whose path no longer names its file:
	// another file was renamed over it, or it was removed.
	ErrReplaced = errors.New("shm: replica file replaced")
)

// FieldError says which header field of a file at which byte offset made
// Attach reject it; it wraps ErrForeign, ErrVersion or ErrCorrupt.
type FieldError struct {
	Path   string
	Field  string
	Offset int
	Reason string
	Err    error
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: %s: %s at byte %d: %s", e.Err, e.Path, e.Field, e.Offset, e.Reason)
}

// Unwrap returns the sentinel.
func (e *FieldError) Unwrap() error { return e.Err }
