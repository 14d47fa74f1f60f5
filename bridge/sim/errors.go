package sim

import "errors"

// Errors of package sim. Each is returned wrapped with the detail the caller
// lacks; test with errors.Is.
var (
	// ErrConfig reports an invalid Config: a value outside its documented
	// range, an unknown policy or site, a router site outside the DCs.
	ErrConfig = errors.New("sim: bad config")
	// ErrGrid reports an RTT matrix that does not parse or breaks a rule
	// (size limits, symmetry, zero diagonal) or an unknown site name.
	ErrGrid = errors.New("sim: bad grid")
	// ErrWorkload reports a trace that cannot be simulated: no requests, or
	// ids the block mapping refuses.
	ErrWorkload = errors.New("sim: bad workload")
	// ErrEngine reports that the engine path disagreed with itself during a
	// run: a lane faulted or refused a frame, a frame failed to encode, a
	// lane did not converge to its producer's words, or a cached prefix
	// changed under a running prefill. It means a bug, never bad input; the
	// run stops and its results are discarded.
	ErrEngine = errors.New("sim: engine path failed")
)
