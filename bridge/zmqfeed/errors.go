package zmqfeed

import "errors"

// ErrBadConfig reports an invalid PlaneConfig, EngineConfig or broker url.
var ErrBadConfig = errors.New("zmqfeed: bad config")
