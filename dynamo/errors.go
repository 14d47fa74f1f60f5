package dynamo

import (
	"errors"
	"fmt"
)

// Limits on decoded input. Every decoder checks them before it allocates, so
// a hostile length prefix costs an error, never memory.
const (
	// MaxBlockSize bounds the KV block size in tokens that goindex accepts.
	MaxBlockSize = 1 << 16
	// MaxMessageBytes bounds one wire message (a JSON RouterEvent, an
	// envelope, a ZMQ payload). A 128k-token prompt stored in one event is
	// about 0.7 MB of msgpack, so 32 MiB leaves room for large batches.
	MaxMessageBytes = 32 << 20
	// MaxBlocksPerEvent bounds the blocks of one stored event and the hashes
	// of one removed event; it equals dynkv's per-event count limit.
	MaxBlocksPerEvent = 1 << 20
	// MaxTokensPerEvent bounds the token ids of one engine BlockStored event.
	MaxTokensPerEvent = 1 << 24
	// MaxEventsPerBatch bounds the events of one engine KVEventBatch.
	MaxEventsPerBatch = 1 << 16
	// MaxMMObjectsPerBlock bounds the multimodal objects (or extra keys) of
	// one block and the offset ranges of one object.
	MaxMMObjectsPerBlock = 1 << 12
	// MaxStringBytes bounds every string on the wire (topic, names, tags,
	// multimodal identifiers).
	MaxStringBytes = 1 << 16
	// MaxNesting bounds how deeply unknown msgpack values may nest before the
	// decoder refuses to skip them.
	MaxNesting = 32
)

// Sentinel errors. Decoders wrap them in a *DecodeError; test with errors.Is.
var (
	// ErrUnsupportedResidency reports an event Dynamo's residency rules
	// refuse: a residency_domain explicitly null or not one of "worker" and
	// "cache_owner", or a cache owner's store or remove on the device tier
	// (RouterEvent.TargetsPrimary; ParseResidency for a name).
	ErrUnsupportedResidency = errors.New("dynamo: unsupported residency domain")
	// ErrUnknownStorageTier reports a storage_tier that is not one of
	// "device", "host_pinned", "disk" and "external" (ParseStorageTier,
	// RouterEvent.TargetsPrimary, Validate).
	ErrUnknownStorageTier = errors.New("dynamo: unknown storage tier")
	// ErrByteHash reports a block hash sent as a byte string. Dynamo's ZMQ
	// decoder accepts only integers; ZMQConfig.FoldByteHashes opts in to
	// folding them instead.
	ErrByteHash = errors.New("dynamo: byte-string block hash")
	// ErrFrameCount reports a ZMQ message with the wrong number of parts:
	// an engine batch has three (topic, sequence, payload), an event-plane
	// message four (topic, publisher id, sequence, framed envelope).
	ErrFrameCount = errors.New("dynamo: wrong number of zmq frames")
	// ErrFrameHeader reports an event-plane message whose identity frames
	// are not 8 bytes each or whose envelope frame header is short, of
	// another version, or announces more bytes than follow.
	ErrFrameHeader = errors.New("dynamo: bad event-plane frame")
	// ErrIdentity reports an event-plane message whose frames, envelope and
	// discovered publisher disagree on who sent it or on its topic.
	ErrIdentity = errors.New("dynamo: event-plane identity mismatch")
	// ErrMalformed reports input that does not have the expected shape: a
	// wrong type, a missing required field, an unknown variant or tag,
	// trailing bytes.
	ErrMalformed = errors.New("dynamo: malformed input")
)

// LimitError reports an input over (or under) one of the package's limits.
type LimitError struct {
	What string // what was measured: "block size", "blocks", "message bytes"
	Got  int
	Min  int
	Max  int
}

// Error formats the limit: "dynamo: blocks 5000000 out of range [0, 1048576]".
func (e *LimitError) Error() string {
	return fmt.Sprintf("dynamo: %s %d out of range [%d, %d]", e.What, e.Got, e.Min, e.Max)
}

// DecodeError reports bytes that a decoder rejected. Format names the wire
// form ("json router event", "msgpack envelope", "zmq batch"); Err says
// where and why, and wraps ErrMalformed, a *LimitError or another sentinel.
type DecodeError struct {
	Format string
	Err    error
}

// Error formats the failure as "dynamo: <format>: <path>: <reason>".
func (e *DecodeError) Error() string {
	return "dynamo: " + e.Format + ": " + stripPrefix(e.Err.Error())
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }

// stripPrefix drops a leading "dynamo: " so that a wrapped sentinel does not
// repeat the package name inside a DecodeError message.
func stripPrefix(s string) string {
	const p = "dynamo: "
	for len(s) >= len(p) && s[:len(p)] == p {
		s = s[len(p):]
	}
	return s
}

// malformedError is the concrete form of ErrMalformed: a reason without the
// package prefix, so that paths and formats can be prepended to it.
type malformedError struct{ reason string }

func (e *malformedError) Error() string        { return e.reason }
func (e *malformedError) Is(target error) bool { return target == ErrMalformed }

// malformed returns an error matching ErrMalformed with a reason.
func malformed(format string, args ...any) error {
	return &malformedError{reason: fmt.Sprintf(format, args...)}
}

// detailError adds a detail to a sentinel: "dynamo: unknown storage tier
// \"ssd\"".
type detailError struct {
	sentinel error
	detail   string
}

func (e *detailError) Error() string { return e.sentinel.Error() + " " + e.detail }
func (e *detailError) Unwrap() error { return e.sentinel }

// detailed returns sentinel with a formatted detail appended.
func detailed(sentinel error, format string, args ...any) error {
	return &detailError{sentinel: sentinel, detail: fmt.Sprintf(format, args...)}
}

// pathError prefixes an error with the field path where it happened
// ("event: data: stored: blocks[3]: tokens_hash").
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + stripPrefix(e.err.Error()) }
func (e *pathError) Unwrap() error { return e.err }

// at wraps err (nil stays nil) with one more path element.
func at(path string, err error) error {
	if err == nil {
		return nil
	}
	return &pathError{path: path, err: err}
}
