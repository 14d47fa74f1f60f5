package natsutil

import "errors"

// ErrNotReady reports an embedded server that did not accept connections
// within its start timeout.
var ErrNotReady = errors.New("natsutil: server not ready")
