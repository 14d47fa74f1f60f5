package publish

import "errors"

// A fenced publisher's errors wrap errFenced and the reason's sentinel;
// callers read the reason from Status().Fence, so none is exported.
var (
	// errFenced means the publisher refuses to publish until a new lease
	// (or, on a fan-out stream, a stored snapshot) clears its fence.
	errFenced = errors.New("publish: publisher is fenced")
	// errSequenceExhausted means the next sequence would overflow u64; a
	// new producer generation is needed.
	errSequenceExhausted = errors.New("publish: sequence exhausted")
	// errDeliveryUncertain means the sink failed, so the consumer may or
	// may not hold the last delta.
	errDeliveryUncertain = errors.New("publish: delivery uncertain")
	// errLeaseStalled means the lease was retired because its consumer
	// stalled.
	errLeaseStalled = errors.New("publish: lease stalled")
	// errNoLease means the call needs a lease and the publisher holds none.
	errNoLease = errors.New("publish: no lease")
	// errStaleLease means a new lease for the last lease's consumer lane
	// is not above its epoch: a delayed, stale reassignment.
	errStaleLease = errors.New("publish: lease epoch is not above the last one installed")
	// errBadConfig reports an invalid publisher configuration.
	errBadConfig = errors.New("publish: bad config")
)
