package follow

import "errors"

// Errors of package follow. Attach failures of files that are not valid
// replicas carry shm's sentinels (ErrForeign, ErrVersion, ErrCorrupt)
// instead of ErrNoReplica; test with errors.Is.
var (
	// ErrNoReplica reports a replica file that cannot be opened (missing,
	// unreadable), or that no replica is attached.
	ErrNoReplica = errors.New("follow: no replica")
	// ErrStale reports a replica whose writer stopped beating.
	ErrStale = errors.New("follow: replica writer stale")
	// ErrBadConfig reports a Feed manifest that cannot be built (no DCs,
	// duplicates, a bad format).
	ErrBadConfig = errors.New("follow: bad feed config")
	// ErrFrameRejected reports a relay frame a Feed refused: it faulted
	// its lane, its snapshot chunk was out of order, or its producer cannot
	// take the lane. Frames that do not decode carry relayproto's
	// sentinels instead.
	ErrFrameRejected = errors.New("follow: relay frame rejected")
	// ErrUnknownDC reports a DC id that has no lane.
	ErrUnknownDC = errors.New("follow: unknown DC")
)
