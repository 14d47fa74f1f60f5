package ingest

import (
	"errors"
	"fmt"
)

// Assignment errors: Lane.Assign refuses with one of them and changes
// nothing. These three name what a caller can act on (route the lease to
// the owner's lane, rebuild with the manifest's format, take a higher
// epoch); a lease for another consumer or lane, or an unclaimed lane, is
// a bug of the caller and reported without a sentinel of its own.
var (
	// ErrWrongFormat means the producer's format differs from the manifest's.
	ErrWrongFormat = errors.New("ingest: format differs from the manifest")
	// ErrForeignPool means the producer's pool is not the lane's owner.
	ErrForeignPool = errors.New("ingest: pool is not the lane's owner")
	// ErrStaleEpoch means an assignment epoch is not above the last one
	// accepted on the lane.
	ErrStaleEpoch = errors.New("ingest: assignment epoch is not above the last accepted")
)

var (
	// errForeignLease means a lease names another consumer instance or lane.
	errForeignLease = errors.New("ingest: lease names another consumer or lane")
	// errUnclaimed means the lane has no ingestor.
	errUnclaimed = errors.New("ingest: lane is not claimed")
	// errClaimed means another ingestor already holds the lane.
	errClaimed = errors.New("ingest: lane is already claimed")
	// errBadConfig reports a table that cannot hold the manifest's lanes.
	errBadConfig = errors.New("ingest: bad config")
)

// ErrLaneFaulted is wrapped by every *LaneError.
var ErrLaneFaulted = errors.New("ingest: lane faulted")

// LaneError is a message that faulted its lane. The lane is FAULTED, its
// ready bit is clear, and its Disposition holds the same facts.
type LaneError struct {
	Lane      int
	Outcome   Outcome
	Installed uint64 // the lane's installed sequence when it faulted
	Sequence  uint64 // the message's sequence (snapshot N, delta sequence, drain expected, heartbeat sequence)
}

// Error describes the fault with the lane, outcome and sequences.
func (e *LaneError) Error() string {
	return fmt.Sprintf("ingest: lane %d faulted: %v (installed %d, message %d)", e.Lane, e.Outcome, e.Installed, e.Sequence)
}

// Unwrap returns ErrLaneFaulted.
func (e *LaneError) Unwrap() error { return ErrLaneFaulted }
