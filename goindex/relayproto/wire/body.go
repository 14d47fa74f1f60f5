package wire

import (
	"bytes"
	"fmt"
	"io"
	"math"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Frame bodies are msgpack arrays with positional fields (wire version 1):
//
//	identity  [domain, dc, incarnation, layout_generation, format_version, seed, bucket_count, fingerprint_bits, slots_per_bucket]
//	lease     nil (fan-out) | [consumer_instance, lane, assignment_epoch]
//	Snapshot  [identity, lease, sequence, total, offset, encoding, count, payload bin]
//	Delta     [identity, lease, base, sequence, images bin (count × LE u32 bucket ‖ LE u64 word)]
//	Drain     [identity, lease, expected_sequence]
//	Heartbeat [identity, lease, sequence]
//	Load      [identity, sequence, timestamp_unix_ns, interval_ms, active_blocks, queued_prefill_tokens,
//	           active_decode_blocks, live_workers, capacity_blocks, prefill_tokens_per_ms f64,
//	           queue_tokens_per_ms f64, decode_blocks_per_ms f64 (, stored_blocks)]
//
// A load report's stored_blocks (LoadReport.StoredBlocks) is written only
// when it is not 0, so a report without it is byte for byte the 12-field
// body decoders before it accept (they reject any other field count: the
// relay publishes the 13-field form on its own subject); a 13-field body
// holding 0 is not canonical and is rejected.
// Integers use msgpack's shortest unsigned encoding; bulk data travels as
// one bin so that it is bounded before anything is allocated and read
// without per-element msgpack overhead.
const (
	identityFields  = 9
	leaseFields     = 3
	snapshotFields  = 8
	deltaFields     = 5
	drainFields     = 3
	heartbeatFields = 3
	loadFields      = 12 // without stored_blocks (0: unknown)
	loadFieldsAll   = 13 // with stored_blocks
	imageBytes      = 12 // LE u32 bucket + LE u64 word, as upstream CBI1
)

// appendWriter is an io.Writer and io.ByteWriter that appends to b; it never
// fails, so msgpack's encoder writes to it directly, without buffering.
type appendWriter struct{ b []byte }

// Write appends p.
func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// WriteByte appends c.
func (w *appendWriter) WriteByte(c byte) error {
	w.b = append(w.b, c)
	return nil
}

// bodyWriter encodes one frame body. Its writer cannot fail, so the
// encoder's error results are always nil and are not checked.
type bodyWriter struct {
	w   appendWriter
	enc *msgpack.Encoder
}

func newBodyWriter(dst []byte) *bodyWriter {
	bw := &bodyWriter{w: appendWriter{b: dst}, enc: msgpack.GetEncoder()}
	bw.enc.Reset(&bw.w)
	return bw
}

// finish returns the encoded bytes and releases the encoder.
func (bw *bodyWriter) finish() []byte {
	msgpack.PutEncoder(bw.enc)
	bw.enc = nil
	return bw.w.b
}

func (bw *bodyWriter) array(n int)     { _ = bw.enc.EncodeArrayLen(n) }
func (bw *bodyWriter) uint(v uint64)   { _ = bw.enc.EncodeUint(v) }
func (bw *bodyWriter) float(v float64) { _ = bw.enc.EncodeFloat64(v) }
func (bw *bodyWriter) binHeader(n int) { _ = bw.enc.EncodeBytesLen(n) }

func (bw *bodyWriter) identity(id *relayproto.ProducerIdentity) {
	bw.array(identityFields)
	bw.uint(uint64(id.Pool.Domain))
	bw.uint(uint64(id.Pool.DC))
	bw.uint(id.Incarnation)
	bw.uint(id.LayoutGeneration)
	bw.uint(uint64(id.Format.Version))
	bw.uint(id.Format.Seed)
	bw.uint(id.Format.Buckets)
	bw.uint(uint64(id.Format.FingerprintBits))
	bw.uint(uint64(id.Format.SlotsPerBucket))
}

func (bw *bodyWriter) lease(l relayproto.Lease) {
	if l.IsZero() {
		_ = bw.enc.EncodeNil()
		return
	}
	bw.array(leaseFields)
	bw.uint(l.ConsumerInstance)
	bw.uint(uint64(l.Lane))
	bw.uint(l.Epoch)
}

// bodyReader decodes one frame body held in memory. Every failure is a
// *FrameError carrying the byte offset in the frame.
type bodyReader struct {
	body []byte
	base int // offset of body within the frame
	r    bytes.Reader
	dec  *msgpack.Decoder
}

func (br *bodyReader) reset(body []byte, base int) {
	br.body, br.base = body, base
	br.r.Reset(body)
	if br.dec == nil {
		br.dec = msgpack.NewDecoder(&br.r)
	} else {
		br.dec.Reset(&br.r)
	}
}

func (br *bodyReader) offset() int { return br.base + len(br.body) - br.r.Len() }

func (br *bodyReader) fail(err error, format string, args ...any) error {
	return &FrameError{Lane: -1, Offset: br.offset(), Reason: fmt.Sprintf(format, args...), Err: err}
}

func (br *bodyReader) peek(what string) (byte, error) {
	c, err := br.dec.PeekCode()
	if err != nil {
		return 0, br.fail(ErrMalformed, "%s: %v", what, err)
	}
	return c, nil
}

// array reads an array header of exactly want elements.
func (br *bodyReader) array(want int, what string) error {
	_, err := br.arrayOf(what, want, want)
	return err
}

// arrayOf reads an array header of lo to hi elements and returns its
// length.
func (br *bodyReader) arrayOf(what string, lo, hi int) (int, error) {
	c, err := br.peek(what)
	if err != nil {
		return 0, err
	}
	if !msgpcode.IsFixedArray(c) && c != msgpcode.Array16 && c != msgpcode.Array32 {
		return 0, br.fail(ErrMalformed, "%s: not an array (code 0x%02x)", what, c)
	}
	n, err := br.dec.DecodeArrayLen()
	if err != nil {
		return 0, br.fail(ErrMalformed, "%s: %v", what, err)
	}
	if n < lo || n > hi {
		if lo == hi {
			return 0, br.fail(ErrMalformed, "%s has %d fields, want %d", what, n, lo)
		}
		return 0, br.fail(ErrMalformed, "%s has %d fields, want %d to %d", what, n, lo, hi)
	}
	return n, nil
}

// uint reads an unsigned integer ≤ limit. Signed and nil encodings are
// rejected: a negative value must never become a huge unsigned one.
func (br *bodyReader) uint(limit uint64, what string) (uint64, error) {
	c, err := br.peek(what)
	if err != nil {
		return 0, err
	}
	if c > msgpcode.PosFixedNumHigh && c != msgpcode.Uint8 && c != msgpcode.Uint16 && c != msgpcode.Uint32 && c != msgpcode.Uint64 {
		return 0, br.fail(ErrMalformed, "%s: not an unsigned integer (code 0x%02x)", what, c)
	}
	v, err := br.dec.DecodeUint64()
	if err != nil {
		return 0, br.fail(ErrMalformed, "%s: %v", what, err)
	}
	if v > limit {
		return 0, br.fail(ErrMalformed, "%s %d exceeds %d", what, v, limit)
	}
	return v, nil
}

// count reads an element count ≤ limit; a larger one is ErrTooLarge.
func (br *bodyReader) count(limit int, what string) (int, error) {
	v, err := br.uint(math.MaxUint64, what)
	if err != nil {
		return 0, err
	}
	if v > uint64(limit) {
		return 0, br.fail(ErrTooLarge, "%s %d exceeds the limit %d", what, v, limit)
	}
	return int(v), nil
}

// float reads a finite, non-negative float64.
func (br *bodyReader) float(what string) (float64, error) {
	c, err := br.peek(what)
	if err != nil {
		return 0, err
	}
	if c != msgpcode.Double {
		return 0, br.fail(ErrMalformed, "%s: not a float64 (code 0x%02x)", what, c)
	}
	v, err := br.dec.DecodeFloat64()
	if err != nil {
		return 0, br.fail(ErrMalformed, "%s: %v", what, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, br.fail(ErrMalformed, "%s %v is not a finite rate ≥ 0", what, v)
	}
	return v, nil
}

// bin returns the contents of a bin of at most limit bytes, without copying
// (the slice aliases the frame).
func (br *bodyReader) bin(limit int, what string) ([]byte, error) {
	c, err := br.peek(what)
	if err != nil {
		return nil, err
	}
	if c != msgpcode.Bin8 && c != msgpcode.Bin16 && c != msgpcode.Bin32 {
		return nil, br.fail(ErrMalformed, "%s: not a bin (code 0x%02x)", what, c)
	}
	n, err := br.dec.DecodeBytesLen()
	if err != nil {
		return nil, br.fail(ErrMalformed, "%s: %v", what, err)
	}
	if n > limit {
		return nil, br.fail(ErrTooLarge, "%s is %d bytes, limit %d", what, n, limit)
	}
	if n > br.r.Len() {
		return nil, br.fail(ErrMalformed, "%s is %d bytes, %d remain", what, n, br.r.Len())
	}
	start := len(br.body) - br.r.Len()
	if _, err := br.r.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, br.fail(ErrMalformed, "%s: %v", what, err)
	}
	return br.body[start : start+n], nil
}

func (br *bodyReader) identity(id *relayproto.ProducerIdentity) error {
	if err := br.array(identityFields, "identity"); err != nil {
		return err
	}
	var v [identityFields]uint64
	limits := [identityFields]uint64{math.MaxUint64, math.MaxUint64, math.MaxUint64, math.MaxUint64, math.MaxUint16, math.MaxUint64, math.MaxUint64, math.MaxUint8, math.MaxUint8}
	names := [identityFields]string{"domain", "dc", "incarnation", "layout generation", "format version", "seed", "bucket count", "fingerprint bits", "slots per bucket"}
	for i := range v {
		var err error
		if v[i], err = br.uint(limits[i], names[i]); err != nil {
			return err
		}
	}
	*id = relayproto.ProducerIdentity{
		Pool:             relayproto.PoolID{Domain: relayproto.DomainID(v[0]), DC: relayproto.DCID(v[1])},
		Incarnation:      v[2],
		LayoutGeneration: v[3],
		Format:           relayproto.Format{Version: uint16(v[4]), Seed: v[5], Buckets: v[6], FingerprintBits: uint8(v[7]), SlotsPerBucket: uint8(v[8])},
	}
	if err := id.Format.Validate(); err != nil {
		return br.fail(relayproto.ErrBadFormat, "%v", err)
	}
	return nil
}

func (br *bodyReader) lease(l *relayproto.Lease) error {
	c, err := br.peek("lease")
	if err != nil {
		return err
	}
	if c == msgpcode.Nil {
		*l = relayproto.Lease{}
		return br.dec.Skip()
	}
	if err := br.array(leaseFields, "lease"); err != nil {
		return err
	}
	instance, err := br.uint(math.MaxUint64, "consumer instance")
	if err != nil {
		return err
	}
	lane, err := br.uint(relayproto.MaxLanes-1, "lane")
	if err != nil {
		return err
	}
	epoch, err := br.uint(math.MaxUint64, "assignment epoch")
	if err != nil {
		return err
	}
	if epoch == 0 {
		return br.fail(ErrMalformed, "lease epoch 0 (epochs start at 1; fan-out frames carry nil)")
	}
	*l = relayproto.Lease{ConsumerInstance: instance, Lane: uint8(lane), Epoch: epoch}
	return nil
}

// end checks that the body has no trailing bytes.
func (br *bodyReader) end() error {
	if br.r.Len() != 0 {
		return br.fail(ErrMalformed, "%d trailing bytes after the body", br.r.Len())
	}
	return nil
}
