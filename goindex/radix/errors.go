package radix

import (
	"errors"
	"fmt"

	"github.com/goindex/goindex/goindex/kv"
)

// ErrInvalidEvent reports an event whose shape is wrong (nil, zero kind,
// fields of another kind). Such an event changes nothing.
var ErrInvalidEvent = errors.New("radix: invalid event")

// ErrParentNotFound reports a store whose parent external hash the member
// does not hold (Dynamo's ParentBlockNotFound). The whole event is rejected.
var ErrParentNotFound = errors.New("radix: parent block not found")

// ErrInvalidBlockSequence reports a store whose parent hash equals one of
// its blocks, or that names the same block twice (Dynamo's
// InvalidBlockSequence). The whole event is rejected.
var ErrInvalidBlockSequence = errors.New("radix: invalid block sequence")

// ErrConflictingBlock reports a store that would give one of the member's
// external hashes a second position in the tree, or a second external hash
// to a position the member already holds. Every (member, external hash)
// names exactly one node and every (member, node) carries exactly one
// external hash; the whole event is rejected. Engines that derive external
// hashes from the token prefix (all that Dynamo supports) never trigger it.
var ErrConflictingBlock = errors.New("radix: conflicting block")

// ErrBlockNotFound reports a removal of an external hash the member does not
// hold (Dynamo's BlockNotFound). Returned as a *RemoveError, which says how
// much of the event was applied.
var ErrBlockNotFound = errors.New("radix: block not found")

// ErrCapacity reports a store that would need more tree nodes than a 32-bit
// node id can name. The whole event is rejected.
var ErrCapacity = errors.New("radix: node capacity exhausted")

// BlockError is the typed form of a rejected store: which member and event,
// the external hash at fault (the parent for ErrParentNotFound, a block
// otherwise) and the sentinel it wraps. A store that returns a BlockError
// changed nothing.
type BlockError struct {
	Member  kv.Member
	EventID uint64
	Hash    uint64
	Err     error
}

// Error describes the rejection.
func (e *BlockError) Error() string {
	return fmt.Sprintf("%v (member %v, event %d, block %d)", e.Err, e.Member, e.EventID, e.Hash)
}

// Unwrap returns the sentinel, for errors.Is.
func (e *BlockError) Unwrap() error { return e.Err }

// RemoveError is the typed form of a removal that named hashes the member
// does not hold. With the default (CUR) behaviour every known hash of the
// event was still removed: Removed counts them, Missing counts the unknown
// ones and First is the first unknown hash. With Config.StopAtUnknownRemoval
// (G2025) the event stopped at First: the hashes before it were removed
// (Removed of them), the rest were not looked at and Missing is 1.
type RemoveError struct {
	Member  kv.Member
	EventID uint64
	First   uint64
	Missing int
	Removed int
}

// Error describes the partial removal.
func (e *RemoveError) Error() string {
	return fmt.Sprintf("%v (member %v, event %d, block %d; %d unknown, %d removed)",
		ErrBlockNotFound, e.Member, e.EventID, e.First, e.Missing, e.Removed)
}

// Unwrap returns ErrBlockNotFound, for errors.Is.
func (e *RemoveError) Unwrap() error { return ErrBlockNotFound }
