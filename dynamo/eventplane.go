package dynamo

import (
	"encoding/binary"
	"strings"
)

// The binary frame of Dynamo's event transport (its frame module,
// dynamo-current §1.4): a version byte, frameVersion, the payload length as a
// big-endian u32, then the payload. Bytes after the payload are ignored, as
// upstream's decoder ignores them.
const (
	frameVersion     = 1
	frameHeaderBytes = 5
)

// PlaneFrames is the part count of one message of Dynamo's ZMQ event plane:
// topic, publisher id, sequence, framed envelope.
const PlaneFrames = 4

// planeFormat names the ZMQ event-plane message in errors.
const planeFormat = "zmq event-plane message"

// splitFrame returns the payload of a framed message: version 1, at least
// the announced length after the header (ErrFrameHeader otherwise).
func splitFrame(b []byte) ([]byte, error) {
	if len(b) < frameHeaderBytes {
		return nil, detailed(ErrFrameHeader, "of %d bytes, want %d", len(b), frameHeaderBytes)
	}
	if b[0] != frameVersion {
		return nil, detailed(ErrFrameHeader, "version %d, want %d", b[0], frameVersion)
	}
	n := binary.BigEndian.Uint32(b[1:frameHeaderBytes])
	if rest := len(b) - frameHeaderBytes; uint64(n) > uint64(rest) {
		return nil, detailed(ErrFrameHeader, "announces %d payload bytes, %d follow", n, rest)
	}
	return b[frameHeaderBytes : frameHeaderBytes+int(n)], nil
}

// PlaneMessage is one message of Dynamo's ZMQ event plane (dynamo-current
// §1.3): the topic of frame 0, the publisher id and sequence of frames 1
// and 2 (8-byte big-endian each), and the envelope of frame 3 (5-byte frame
// header, then the msgpack EventEnvelope). Its payload is left encoded:
// Envelope.Events or DecodeActiveLoad read it, by topic.
type PlaneMessage struct {
	Topic       string
	PublisherID uint64
	Sequence    uint64
	Envelope    Envelope
}

// DecodePlane decodes one ZMQ event-plane message. It checks the frame
// count (ErrFrameCount), the identity frames' sizes and the frame header
// (ErrFrameHeader) and decodes the envelope; it does not compare the
// identities (CheckIdentity does). Errors are *DecodeError.
func DecodePlane(frames [][]byte) (PlaneMessage, error) {
	if len(frames) != PlaneFrames {
		return PlaneMessage{}, &DecodeError{Format: planeFormat, Err: detailed(ErrFrameCount, "%d, want %d", len(frames), PlaneFrames)}
	}
	if len(frames[0]) > MaxStringBytes {
		return PlaneMessage{}, &DecodeError{Format: planeFormat, Err: &LimitError{What: "topic bytes", Got: len(frames[0]), Min: 0, Max: MaxStringBytes}}
	}
	for i, what := range []string{"publisher id", "sequence"} {
		if n := len(frames[1+i]); n != 8 {
			return PlaneMessage{}, &DecodeError{Format: planeFormat, Err: detailed(ErrFrameHeader, "%s frame of %d bytes, want 8", what, n)}
		}
	}
	if len(frames[3]) > MaxMessageBytes+frameHeaderBytes {
		return PlaneMessage{}, &DecodeError{Format: planeFormat, Err: &LimitError{What: "message bytes", Got: len(frames[3]), Min: 0, Max: MaxMessageBytes + frameHeaderBytes}}
	}
	body, err := splitFrame(frames[3])
	if err != nil {
		return PlaneMessage{}, &DecodeError{Format: planeFormat, Err: err}
	}
	if len(body) > 0 && body[0] == frameVersion {
		// DecodeEnvelope would take a second header: one is the format.
		return PlaneMessage{}, &DecodeError{Format: planeFormat, Err: detailed(ErrFrameHeader, "framed twice")}
	}
	env, err := DecodeEnvelope(body)
	if err != nil {
		return PlaneMessage{}, err
	}
	return PlaneMessage{Topic: string(frames[0]), PublisherID: binary.BigEndian.Uint64(frames[1]),
		Sequence: binary.BigEndian.Uint64(frames[2]), Envelope: env}, nil
}

// CheckIdentity compares what a ZMQ event-plane message says of itself
// with what it must be, as Dynamo's validated per-publisher source does
// (dynamo-current §1.3): frames 1 and 2 equal the envelope's publisher_id
// and sequence; the envelope's topic is topic; frame 0 is topic (direct
// mode) or scope's subject of topic (broker mode, and accepted in direct
// mode too: which form older direct publishers put in frame 0 is
// [unverified], so both are taken); and, when publisher is not 0 (the id
// discovery registered), the publisher id is publisher. A mismatch returns
// ErrIdentity with what differed.
func (m *PlaneMessage) CheckIdentity(scope Scope, topic string, publisher uint64) error {
	e := &m.Envelope
	switch {
	case m.PublisherID != e.PublisherID:
		return detailed(ErrIdentity, "frame publisher id %d, envelope %d", m.PublisherID, e.PublisherID)
	case m.Sequence != e.Sequence:
		return detailed(ErrIdentity, "frame sequence %d, envelope %d", m.Sequence, e.Sequence)
	case e.Topic != topic:
		return detailed(ErrIdentity, "envelope topic %q, want %q", e.Topic, topic)
	case m.Topic != topic && !(scope.Namespace != "" && m.Topic == scope.Subject(topic)):
		return detailed(ErrIdentity, "frame topic %q, want %q", m.Topic, topic)
	case publisher != 0 && m.PublisherID != publisher:
		return detailed(ErrIdentity, "publisher id %d, discovered %d", m.PublisherID, publisher)
	}
	return nil
}

// PlaneTopic returns the bare topic of a broker-mode frame 0 (the scoped
// subject "namespace.….<topic>") or frame 0 itself when it has no dot.
func PlaneTopic(frameTopic string) string {
	return frameTopic[strings.LastIndexByte(frameTopic, '.')+1:]
}
