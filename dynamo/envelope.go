package dynamo

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Encoding says how an event-plane envelope and its payload were encoded.
type Encoding uint8

// The envelope encodings.
const (
	// EncodingMsgpack is the current envelope (G26a → CUR): a msgpack map
	// whose payload is a msgpack RouterEvent.
	EncodingMsgpack Encoding = iota + 1
	// EncodingJSON is the early event-plane envelope: a JSON object whose
	// payload is an array of byte values holding a JSON RouterEvent.
	EncodingJSON
)

// String names the encoding.
func (e Encoding) String() string {
	switch e {
	case EncodingMsgpack:
		return "msgpack"
	case EncodingJSON:
		return "json"
	}
	return "encoding(" + strconv.Itoa(int(e)) + ")"
}

// envelopeFormat names the envelopes in errors.
const envelopeFormat = "event-plane envelope"

// Envelope is one event-plane message (Dynamo's EventEnvelope): publisher
// identity and sequence for gap and duplicate detection, and the encoded
// RouterEvent.
//
// The key set of the newest encoder is [unverified] (dynamo-compat §2.5):
// decoders accept the envelope with and without published_at_ns, with or
// without topic, and skip unknown keys, so a newer field does not break
// ingestion; validate against a captured message before shipping.
type Envelope struct {
	Encoding      Encoding
	Topic         string // "kv-events"; "" when absent
	PublisherID   uint64
	Sequence      uint64 // per publisher, from 0
	PublishedAtMs uint64 // milliseconds since the Unix epoch
	// HasPublishedAtNs and PublishedAtNs carry the optional
	// published_at_ns of some versions.
	HasPublishedAtNs bool
	PublishedAtNs    uint64
	Payload          []byte
}

// DecodeEnvelope decodes an event-plane message's envelope, detecting the
// encoding by its first byte: '{' is the early JSON envelope, a msgpack map
// header (0x80–0x8f, 0xde, 0xdf) the current one. Required keys:
// publisher_id, sequence, published_at, payload. The payload is bin, as
// Dynamo's serialize_bytes writes it, or an array of byte values, rmp-serde's
// default form of Vec<u8>: the rmp-serde version Dynamo pins is [unverified]
// (dynamo-compat §2.5), so both are accepted
// (TestDecodeEnvelope_ToleratesUnknownKeysAndArrayPayload, the goldens).
//
// A message whose first byte is 1 (a msgpack fixint, never an envelope) is
// taken as framed the way Dynamo's ZMQ transport frames its fourth part
// (SplitFrame: version byte 1, u32 big-endian payload length); NATS carries
// the envelope bare (dynamo-current §1.9), so both forms are accepted.
// Errors are *DecodeError.
func DecodeEnvelope(b []byte) (Envelope, error) {
	if len(b) > MaxMessageBytes {
		return Envelope{}, &DecodeError{Format: envelopeFormat, Err: &LimitError{What: "message bytes", Got: len(b), Min: 0, Max: MaxMessageBytes}}
	}
	var env Envelope
	var err error
	if len(b) > 0 && b[0] == frameVersion {
		if b, err = splitFrame(b); err != nil {
			return Envelope{}, &DecodeError{Format: envelopeFormat, Err: at("frame header", err)}
		}
	}
	switch {
	case len(b) > 0 && b[0] == '{':
		env.Encoding = EncodingJSON
		err = decodeJSONEnvelope(b, &env)
	case len(b) > 0 && isMapCode(b[0]):
		env.Encoding = EncodingMsgpack
		m := newMPReader(b)
		err = m.envelope(&env)
		if err == nil {
			err = m.end()
		}
	case len(b) == 0:
		err = malformed("empty message")
	default:
		err = malformed("first byte %#02x is neither '{' nor a msgpack map", b[0])
	}
	if err != nil {
		return Envelope{}, &DecodeError{Format: envelopeFormat, Err: err}
	}
	return env, nil
}

// DecodeMessage decodes an event-plane message: the envelope, then its
// payload as the RouterEvents of the matching encoding. A msgpack payload
// may be one event (v1.3 and older) or a list of them (v1.4 on), see
// DecodeMsgpackEvents; the early JSON envelope carries one JSON event.
func DecodeMessage(b []byte) (Envelope, []RouterEvent, error) {
	env, err := DecodeEnvelope(b)
	if err != nil {
		return Envelope{}, nil, err
	}
	evs, err := env.Events()
	if err != nil {
		return Envelope{}, nil, err
	}
	return env, evs, nil
}

// Events decodes the envelope's payload as KV events (see DecodeMessage).
func (e *Envelope) Events() ([]RouterEvent, error) {
	if e.Encoding == EncodingJSON {
		ev, err := DecodeJSON(e.Payload)
		if err != nil {
			return nil, err
		}
		return []RouterEvent{ev}, nil
	}
	return DecodeMsgpackEvents(e.Payload)
}

func (m *mpReader) envelope(out *Envelope) error {
	var havePub, haveSeq, haveAt, havePayload bool
	err := m.fields(maxStructFields, func(k string) error {
		var err error
		switch k {
		case "topic":
			out.Topic, err = m.str()
			return err
		case "publisher_id":
			out.PublisherID, err = m.u64()
			havePub = err == nil
			return err
		case "sequence":
			out.Sequence, err = m.u64()
			haveSeq = err == nil
			return err
		case "published_at":
			out.PublishedAtMs, err = m.u64()
			haveAt = err == nil
			return err
		case "published_at_ns":
			if isNil, err := m.nextNil(); err != nil || isNil {
				return err
			}
			out.PublishedAtNs, err = m.u64()
			out.HasPublishedAtNs = err == nil
			return err
		case "payload":
			out.Payload, err = m.payload()
			havePayload = err == nil
			return err
		}
		return m.skip()
	})
	if err != nil {
		return err
	}
	return missingEnvelopeKey(havePub, haveSeq, haveAt, havePayload)
}

func missingEnvelopeKey(havePub, haveSeq, haveAt, havePayload bool) error {
	switch {
	case !havePub:
		return malformed("missing publisher_id")
	case !haveSeq:
		return malformed("missing sequence")
	case !haveAt:
		return malformed("missing published_at")
	case !havePayload:
		return malformed("missing payload")
	}
	return nil
}

// payload reads bin, or an array of byte values.
func (m *mpReader) payload() ([]byte, error) {
	c, err := m.peek()
	if err != nil {
		return nil, err
	}
	if !isArrayCode(c) {
		return m.bin(MaxMessageBytes)
	}
	n, err := m.arrayLen(MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	out := make([]byte, n)
	for i := range out {
		v, err := m.uint(0xff)
		if err != nil {
			return nil, at("payload byte", err)
		}
		out[i] = byte(v)
	}
	return out, nil
}

// jsonEnvelope mirrors the early JSON envelope.
type jsonEnvelope struct {
	Topic         *string       `json:"topic"`
	PublisherID   *jsonU64      `json:"publisher_id"`
	Sequence      *jsonU64      `json:"sequence"`
	PublishedAt   *jsonU64      `json:"published_at"`
	PublishedAtNs *jsonU64      `json:"published_at_ns"`
	Payload       *jsonByteList `json:"payload"`
}

// jsonByteList is serde_json's form of Vec<u8>: an array of integers 0..255.
type jsonByteList []byte

func (v *jsonByteList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return malformed("payload: want an array of byte values")
	}
	rest := bytes.TrimSpace(b[1 : len(b)-1])
	out := make([]byte, 0, len(rest)/2+1)
	for len(rest) > 0 {
		item := rest
		if i := bytes.IndexByte(rest, ','); i >= 0 {
			item, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(item)), 10, 8)
		if err != nil {
			return malformed("payload[%d]: want a byte value 0..255, got %.20s", len(out), bytes.TrimSpace(item))
		}
		out = append(out, byte(n))
	}
	*v = out
	return nil
}

func decodeJSONEnvelope(b []byte, out *Envelope) error {
	var j jsonEnvelope
	if err := json.Unmarshal(b, &j); err != nil {
		return jsonErr(err)
	}
	if j.Topic != nil {
		out.Topic = *j.Topic
	}
	if j.PublisherID != nil {
		out.PublisherID = uint64(*j.PublisherID)
	}
	if j.Sequence != nil {
		out.Sequence = uint64(*j.Sequence)
	}
	if j.PublishedAt != nil {
		out.PublishedAtMs = uint64(*j.PublishedAt)
	}
	if j.PublishedAtNs != nil {
		out.HasPublishedAtNs, out.PublishedAtNs = true, uint64(*j.PublishedAtNs)
	}
	if j.Payload != nil {
		out.Payload = *j.Payload
	}
	return missingEnvelopeKey(j.PublisherID != nil, j.Sequence != nil, j.PublishedAt != nil, j.Payload != nil)
}

// AppendEnvelope appends env as the current msgpack EventEnvelope to dst and
// returns it: a map {topic, publisher_id, sequence, published_at, payload
// (bin)} in that order, plus published_at_ns last when HasPublishedAtNs.
// env.Encoding is ignored; build the payload with AppendMsgpack.
func AppendEnvelope(dst []byte, env *Envelope) []byte {
	w := newMPWriter(dst)
	n := 5
	if env.HasPublishedAtNs {
		n++
	}
	w.mapLen(n)
	w.str("topic")
	w.str(env.Topic)
	w.str("publisher_id")
	w.uint(env.PublisherID)
	w.str("sequence")
	w.uint(env.Sequence)
	w.str("published_at")
	w.uint(env.PublishedAtMs)
	w.str("payload")
	w.bin(env.Payload)
	if env.HasPublishedAtNs {
		w.str("published_at_ns")
		w.uint(env.PublishedAtNs)
	}
	return w.bytes()
}
