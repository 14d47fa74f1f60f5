package obs

import "errors"

// ErrBadConfig reports an unknown log format or level, or a metrics
// address that cannot be listened on.
var ErrBadConfig = errors.New("obs: bad config")

// ErrNotReady is wrapped by every readiness check's failure; the message
// says why (no pool set up, no lane ready, no DC eligible).
var ErrNotReady = errors.New("not ready")
