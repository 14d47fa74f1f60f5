package selector

import "errors"

var (
	// ErrBadConfig reports an invalid plugin config.
	ErrBadConfig = errors.New("selector: bad config")
	// ErrBadInput reports candidate input the host should not have sent.
	ErrBadInput = errors.New("selector: bad input")
	// ErrUseDefault is the reason of a UseDefault decision the selector
	// made itself (no candidates, a signal not provided, none eligible).
	ErrUseDefault = errors.New("selector: use the host's default")
	// ErrReplicaUnusable is the reason of a UseDefault decision when the
	// config's replica cannot give its DC's rates (a Replica's verdict).
	ErrReplicaUnusable = errors.New("selector: use the host's default: replica")
)
