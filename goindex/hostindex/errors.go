package hostindex

import "errors"

// Errors of package hostindex. Event and frame errors carry the indexes'
// own sentinels (radix, ckf, ckfindex, relayproto, follow, shm, score);
// test with errors.Is.
var (
	// ErrConfig reports a config that is malformed, has an unknown key or a
	// value out of range.
	ErrConfig = errors.New("hostindex: bad config")
	// ErrMode reports a call the Index's mode does not offer: KV events on
	// a global index; frames, replicas and RTTs on an exact or ckf one;
	// frames and RTTs on a global index without "dcs" or with a replica
	// attached.
	ErrMode = errors.New("hostindex: not available in this mode")
	// ErrClosed reports a call on a closed Index.
	ErrClosed = errors.New("hostindex: closed")
)
