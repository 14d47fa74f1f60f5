package consume

import (
	"errors"
	"fmt"
)

// errAddingLanes is the cause with which the consumer stops its lanes to
// add lanes: a lane that follows its log then keeps its place (see
// laneRunner.run) and is carried into the new replica generation.
var errAddingLanes = errors.New("consume: adding lanes")

// Errors of package consume; test with errors.Is.
var (
	// ErrBadConfig reports an invalid Config.
	ErrBadConfig = errors.New("consume: bad config")
	// ErrNoRelays reports that discovery found no relay of the domain, or
	// that the format could not be learned from any relay.
	ErrNoRelays = errors.New("consume: no relays")
	// ErrFormatMismatch reports a relay whose format is not the consumer's
	// (every lane of a consumer shares one, spec §1): a lane's, or New's
	// when no discovered relay publishes the format given.
	ErrFormatMismatch = errors.New("consume: relays disagree on the format")
	// ErrSnapshotTooLarge reports a stored snapshot over MaxSnapshotBytes.
	ErrSnapshotTooLarge = errors.New("consume: snapshot too large")
	// ErrSnapshotIncomplete reports a stored snapshot whose chunks do not
	// cover the lane.
	ErrSnapshotIncomplete = errors.New("consume: snapshot incomplete")
	// ErrSnapshotReplaced reports a stored snapshot that the relay replaced
	// (or deleted) while the lane read it: its chunks are gone, so the next
	// subscription reads the new one.
	ErrSnapshotReplaced = errors.New("consume: stored snapshot replaced during its read")
	// ErrJetStreamTimeout reports a DC's JetStream that did not answer a
	// request of a lane's snapshot install, or made no progress reading
	// the stored snapshot, within Config.RequestTimeout (a JetStream API
	// or a leafnode link that hangs while the relay answers pings), or read
	// it slower than the install's total bound.
	ErrJetStreamTimeout = errors.New("consume: timed out waiting for the DC's JetStream")
	// ErrDeltasGone reports that the log no longer holds the deltas after
	// the stored snapshot, so the lane asks the relay for a new one.
	ErrDeltasGone = errors.New("consume: deltas after the snapshot are gone")
	// ErrIntegrity reports a lane whose words in the replica file failed
	// their integrity check (damaged behind the consumer's back): its
	// subscription ends and the next one installs a snapshot.
	ErrIntegrity = errors.New("consume: lane damaged in the replica file")
)

// SyncError is why one subscription of a lane ended (a fault, a bad frame,
// a transport error); the lane then resyncs with a new lease.
type SyncError struct {
	Lane int
	DC   uint64
	Err  error
}

func (e *SyncError) Error() string {
	return fmt.Sprintf("consume: lane %d (dc %d): %v", e.Lane, e.DC, e.Err)
}

// Unwrap returns the cause.
func (e *SyncError) Unwrap() error { return e.Err }
