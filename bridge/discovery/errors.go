package discovery

import "errors"

// Errors of package discovery; test with errors.Is.
var (
	// ErrBadConfig reports an invalid EtcdConfig or KubeConfig.
	ErrBadConfig = errors.New("discovery: bad config")
	// ErrBadRecord reports a discovery record that does not decode (it is
	// skipped and logged, never fatal).
	ErrBadRecord = errors.New("discovery: bad record")
	// ErrNotChannel reports a record that is not an EventChannel.
	ErrNotChannel = errors.New("discovery: not an event channel")
)
