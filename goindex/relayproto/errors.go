package relayproto

import (
	"errors"
	"fmt"
)

// Frame decoding and encoding errors. Decoders return them inside a
// *FrameError that says where the problem was found.
var (
	// ErrMalformed reports bytes that are not a well-formed frame.
	ErrMalformed = errors.New("relayproto: malformed frame")
	// ErrChecksum reports a body whose XXH3 checksum differs from the header's.
	ErrChecksum = errors.New("relayproto: frame checksum mismatch")
	// ErrTooLarge reports a frame or field over one of the named limits
	// (MaxFrameBytes, MaxDeltaImages, MaxChunkWords).
	ErrTooLarge = errors.New("relayproto: frame exceeds a size limit")
	// ErrVersion reports a frame written with an unsupported wire version.
	ErrVersion = errors.New("relayproto: unsupported wire version")
)

// Identity and manifest errors.
var (
	// ErrBadFormat reports a Format that is not format_version 1 with 16-bit
	// fingerprints, 4 slots and a power-of-two bucket count in [2, 2^24].
	ErrBadFormat = errors.New("relayproto: bad format")
	// ErrBadManifest reports a Manifest with no lanes, too many lanes, a
	// duplicate owner or an owner outside the manifest's domain.
	ErrBadManifest = errors.New("relayproto: bad manifest")
	// ErrBadConfig reports an invalid publisher or consumer configuration.
	ErrBadConfig = errors.New("relayproto: bad config")
)

// Assignment errors: assign refuses and changes nothing.
var (
	// ErrWrongFormat means the producer's format differs from the manifest's.
	ErrWrongFormat = errors.New("relayproto: format differs from the manifest")
	// ErrForeignLease means a lease names another consumer instance or lane.
	ErrForeignLease = errors.New("relayproto: lease names another consumer or lane")
	// ErrForeignPool means the producer's pool is not the lane's owner.
	ErrForeignPool = errors.New("relayproto: pool is not the lane's owner")
	// ErrStaleEpoch means an assignment epoch is not above the last one
	// accepted on the lane (or, for a publisher, above its current lease).
	ErrStaleEpoch = errors.New("relayproto: assignment epoch is not above the last accepted")
	// ErrUnclaimed means the lane has no ingestor.
	ErrUnclaimed = errors.New("relayproto: lane is not claimed")
	// ErrClaimed means another ingestor already holds the lane.
	ErrClaimed = errors.New("relayproto: lane is already claimed")
)

// Publisher errors. A fenced publisher wraps ErrFenced and the reason's
// sentinel, so errors.Is works for both.
var (
	// ErrFenced means the publisher refuses to publish until a new lease
	// (or, on a fan-out stream, a stored snapshot) clears its fence.
	ErrFenced = errors.New("relayproto: publisher is fenced")
	// ErrSequenceExhausted means the next sequence would overflow u64; a new
	// producer generation is needed.
	ErrSequenceExhausted = errors.New("relayproto: sequence exhausted")
	// ErrDeliveryUncertain means the sink failed, so the consumer may or may
	// not hold the last delta.
	ErrDeliveryUncertain = errors.New("relayproto: delivery uncertain")
	// ErrLeaseStalled means the lease was retired because its consumer stalled.
	ErrLeaseStalled = errors.New("relayproto: lease stalled")
	// ErrNoLease means the call needs a lease and the publisher holds none.
	ErrNoLease = errors.New("relayproto: no lease")
)

// Consumer errors.
var (
	// ErrLaneFaulted is wrapped by every *LaneError.
	ErrLaneFaulted = errors.New("relayproto: lane faulted")
	// ErrNotRetained means a DeltaLog no longer holds the delta a lane needs.
	ErrNotRetained = errors.New("relayproto: deltas no longer retained")
)

// FrameError is a frame that could not be encoded or decoded. Lane is the
// physical lane the frame was routed to, or -1 when it is not known (a
// frame is only routed after it decodes). Offset is the byte offset into the
// frame where the problem was found.
type FrameError struct {
	Lane   int
	Offset int
	Reason string
	Err    error // ErrMalformed, ErrChecksum, ErrTooLarge, ErrVersion or ErrBadFormat
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
	return fmt.Sprintf("relayproto: lane %d faulted: %v (installed %d, message %d)", e.Lane, e.Outcome, e.Installed, e.Sequence)
}

// Unwrap returns ErrLaneFaulted.
func (e *LaneError) Unwrap() error { return ErrLaneFaulted }
