package kvrelay

import (
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
)

var (
	// ErrContract reports a peer of another contract: a wrong marker or
	// protocol version (FAILED_PRECONDITION on the wire).
	ErrContract = errors.New("kvrelay: contract mismatch")
	// ErrInvalid reports a message that breaks the contract's rules (an
	// unspecified enum, an empty subscriber id, a frame out of sequence).
	ErrInvalid = errors.New("kvrelay: invalid message")
	// ErrPoolNotFound reports a subscription to a pool the relay does not
	// publish.
	ErrPoolNotFound = errors.New("kvrelay: pool not found")
	// ErrProducerChanged reports a subscription to a producer generation
	// the relay no longer publishes.
	ErrProducerChanged = errors.New("kvrelay: producer changed")
	// ErrUnavailable reports a publication that cannot be followed now
	// (UNAVAILABLE / PUBLICATION_UNAVAILABLE on the wire): the subscriber
	// retries from a fresh snapshot.
	ErrUnavailable = errors.New("kvrelay: publication unavailable")
	// ErrLagged reports a subscriber that fell too far behind the
	// publication (RESOURCE_EXHAUSTED / SUBSCRIBER_LAGGED on the wire).
	ErrLagged = errors.New("kvrelay: subscriber lagged")
)

// ErrorReasonTrailer is the trailer carrying a relay error's symbolic
// RelayErrorReason name.
const ErrorReasonTrailer = "kv-relay-error-reason"

// relayError is the gRPC status of a relay error, with its reason trailer
// set on the stream.
func relayError(stream grpc.ServerStream, code codes.Code, reason pb.RelayErrorReason, format string, args ...any) error {
	if stream != nil {
		stream.SetTrailer(metadata.Pairs(ErrorReasonTrailer, reason.String()))
	}
	return status.Errorf(code, format, args...)
}

// Reason returns the RelayErrorReason of a relay's error from its trailer,
// or RELAY_ERROR_REASON_UNSPECIFIED when absent or unknown.
func Reason(trailer metadata.MD) pb.RelayErrorReason {
	for _, v := range trailer.Get(ErrorReasonTrailer) {
		if r, ok := pb.RelayErrorReason_value[v]; ok {
			return pb.RelayErrorReason(r)
		}
	}
	return pb.RelayErrorReason_RELAY_ERROR_REASON_UNSPECIFIED
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func contractError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrContract}, args...)...)
}
