package ckfindex

import (
	"errors"
	"fmt"

	"github.com/goindex/goindex/goindex/kv"
)

// ErrNoFreeLane means a stored event named a new member while every lane is
// taken; nothing changed.
var ErrNoFreeLane = errors.New("ckfindex: no free lane for a new member")

// ErrBadConfig reports an invalid Config.
var ErrBadConfig = errors.New("ckfindex: bad config")

// ErrBlockNotFound reports a removal that named blocks the member does not
// hold: they were skipped, the known ones removed (as the radix tree
// reports it). Returned as a *RemoveError.
var ErrBlockNotFound = errors.New("ckfindex: removed block not found")

// RemoveError is a removal that skipped unknown blocks: Missing of its
// blocks were not the member's, Removed were removed.
type RemoveError struct {
	Member  kv.Member
	EventID uint64
	Missing int
	Removed int
}

// Error describes the partial removal.
func (e *RemoveError) Error() string {
	return fmt.Sprintf("%v (member %v, event %d; %d unknown, %d removed)", ErrBlockNotFound, e.Member, e.EventID, e.Missing, e.Removed)
}

// Unwrap returns ErrBlockNotFound, for errors.Is.
func (e *RemoveError) Unwrap() error { return ErrBlockNotFound }
