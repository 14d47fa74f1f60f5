package relay

import (
	"errors"
	"fmt"
)

// Errors of package relay; test with errors.Is.
var (
	// ErrBadConfig reports an invalid Config or PoolConfig.
	ErrBadConfig = errors.New("relay: bad config")
	// ErrSuperseded reports that another relay took over a pool: the delta
	// log moved under this relay's feet and the pool's owner record names a
	// newer incarnation. The pool stops publishing (it is fenced, never
	// merged with the other producer).
	ErrSuperseded = errors.New("relay: pool taken over by another relay")
	// ErrClosed reports a call on a relay that is not running.
	ErrClosed = errors.New("relay: closed")
	// ErrLagged reports a Watch dropped because it fell its buffer behind
	// the pool's publication.
	ErrLagged = errors.New("relay: watch fell behind the publication")
	// ErrUnknownPool reports a domain the relay does not serve.
	ErrUnknownPool = errors.New("relay: unknown pool")
	// ErrTooLarge reports an inbound control message (an Info reply or a
	// worker load sample) over its size limit.
	ErrTooLarge = errors.New("relay: message too large")
	// ErrMalformed reports an inbound control message that does not decode.
	ErrMalformed = errors.New("relay: malformed message")
	// ErrCheckpoint reports a checkpoint file that is not one, is damaged
	// (its checksum), or is another pool's or format's: the pool starts
	// empty instead of restoring it.
	ErrCheckpoint = errors.New("relay: bad checkpoint")
	// ErrCheckpointVersion reports a checkpoint of another layout version
	// (it wraps ErrCheckpoint).
	ErrCheckpointVersion = fmt.Errorf("%w: another version", ErrCheckpoint)
	// errNATSDown reports a JetStream call not made because the NATS
	// connection is down (the pool fences and recovers once it is back).
	errNATSDown = errors.New("relay: NATS connection down")
)

// PoolError is a failure of one pool; other pools keep running.
type PoolError struct {
	Domain uint64
	DC     uint64
	Err    error
}

func (e *PoolError) Error() string {
	return fmt.Sprintf("relay: pool %d/%d: %v", e.Domain, e.DC, e.Err)
}

// Unwrap returns the cause.
func (e *PoolError) Unwrap() error { return e.Err }
