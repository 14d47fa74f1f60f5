package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/snapenc"
	"github.com/zeebo/xxh3"
)

// Frame layout and limits. Encoders refuse and decoders reject anything
// above the limits (these and relayproto.MaxDeltaImages,
// relayproto.MaxChunkWords), decoders before allocating.
const (
	// headerBytes is the fixed frame header: magic "GIRF", wire version u8,
	// frame type u8, two reserved zero bytes, body length LE u32, checksum
	// LE u32 (the low 32 bits of unseeded XXH3-64 of the body, as upstream
	// CBI1). Upstream's CBI1 header is 48 bytes.
	headerBytes = 16
	// Version is the frame layout version this package writes and reads.
	Version = 1
	// MaxFrameBytes bounds a whole frame: upstream's gRPC message limit.
	MaxFrameBytes = 8 << 20
)

const frameMagic = "GIRF"

// checksum is the low 32 bits of unseeded XXH3-64 of the body.
func checksum(body []byte) uint32 { return uint32(xxh3.Hash(body)) }

// appendFrame appends the header of type t, lets body append the body, then
// fills in the length and checksum. On error dst is returned unchanged.
func appendFrame(dst []byte, t relayproto.FrameType, body func(*bodyWriter)) ([]byte, error) {
	start := len(dst)
	dst = append(dst, frameMagic...)
	dst = append(dst, Version, byte(t), 0, 0)
	dst = append(dst, make([]byte, 8)...)
	bw := newBodyWriter(dst)
	body(bw)
	dst = bw.finish()
	n := len(dst) - start
	if n > MaxFrameBytes {
		return dst[:start], &FrameError{Lane: -1, Offset: n, Reason: fmt.Sprintf("%v frame is %d bytes, limit %d", t, n, MaxFrameBytes), Err: ErrTooLarge}
	}
	b := dst[start+headerBytes:]
	binary.LittleEndian.PutUint32(dst[start+8:], uint32(len(b)))
	binary.LittleEndian.PutUint32(dst[start+12:], checksum(b))
	return dst, nil
}

func encodeError(t relayproto.FrameType, err error, format string, args ...any) error {
	return &FrameError{Lane: -1, Reason: fmt.Sprintf("%v: ", t) + fmt.Sprintf(format, args...), Err: err}
}

// checkEnvelope refuses what the decoder would reject in every frame: an
// invalid format, or a lease with epoch 0 or a lane ≥ MaxLanes.
func checkEnvelope(t relayproto.FrameType, id *relayproto.ProducerIdentity, l relayproto.Lease) error {
	if err := id.Format.Validate(); err != nil {
		return encodeError(t, relayproto.ErrBadFormat, "%v", err)
	}
	if !l.IsZero() && (l.Epoch == 0 || l.Lane >= relayproto.MaxLanes) {
		return encodeError(t, ErrMalformed, "%v: epochs start at 1 and lanes are < %d", l, relayproto.MaxLanes)
	}
	return nil
}

// appendSnapshot appends s as one snapshot-chunk frame to dst. It refuses a
// chunk of more than MaxChunkWords words, an unknown encoding, an invalid
// format or lease; dst is then returned unchanged.
func appendSnapshot(dst []byte, s *relayproto.Snapshot) ([]byte, error) {
	if len(s.Words) > relayproto.MaxChunkWords {
		return dst, encodeError(relayproto.FrameSnapshot, ErrTooLarge, "%d words, limit %d per chunk", len(s.Words), relayproto.MaxChunkWords)
	}
	if !s.Encoding.Valid() {
		return dst, encodeError(relayproto.FrameSnapshot, ErrMalformed, "unknown %v", s.Encoding)
	}
	if err := checkEnvelope(relayproto.FrameSnapshot, &s.Identity, s.Lease); err != nil {
		return dst, err
	}
	return appendFrame(dst, relayproto.FrameSnapshot, func(bw *bodyWriter) {
		bw.array(snapshotFields)
		bw.identity(&s.Identity)
		bw.lease(s.Lease)
		bw.uint(s.Sequence)
		bw.uint(s.Total)
		bw.uint(s.Offset)
		bw.uint(uint64(s.Encoding))
		bw.uint(uint64(len(s.Words)))
		bw.binHeader(s.Encoding.Size(s.Words))
		bw.w.b = s.Encoding.Append(bw.w.b, s.Words)
	})
}

// appendDelta appends d as a delta frame to dst. It refuses more than
// MaxDeltaImages images or an invalid format or lease. It does not check the
// protocol rules (non-empty, indices < n and unique): the lane does.
func appendDelta(dst []byte, d *relayproto.Delta) ([]byte, error) {
	if len(d.Images) > relayproto.MaxDeltaImages {
		return dst, encodeError(relayproto.FrameDelta, ErrTooLarge, "%d images, limit %d", len(d.Images), relayproto.MaxDeltaImages)
	}
	if err := checkEnvelope(relayproto.FrameDelta, &d.Identity, d.Lease); err != nil {
		return dst, err
	}
	return appendFrame(dst, relayproto.FrameDelta, func(bw *bodyWriter) {
		bw.array(deltaFields)
		bw.identity(&d.Identity)
		bw.lease(d.Lease)
		bw.uint(d.Base)
		bw.uint(d.Sequence)
		bw.binHeader(imageBytes * len(d.Images))
		for _, im := range d.Images {
			bw.w.b = binary.LittleEndian.AppendUint32(bw.w.b, im.Bucket)
			bw.w.b = binary.LittleEndian.AppendUint64(bw.w.b, im.Word)
		}
	})
}

// appendDrainMarker appends m as a drain-marker frame to dst.
func appendDrainMarker(dst []byte, m *relayproto.DrainMarker) ([]byte, error) {
	if err := checkEnvelope(relayproto.FrameDrainMarker, &m.Identity, m.Lease); err != nil {
		return dst, err
	}
	return appendFrame(dst, relayproto.FrameDrainMarker, func(bw *bodyWriter) {
		bw.array(drainFields)
		bw.identity(&m.Identity)
		bw.lease(m.Lease)
		bw.uint(m.Expected)
	})
}

// appendHeartbeat appends h as a heartbeat frame to dst.
func appendHeartbeat(dst []byte, h *relayproto.Heartbeat) ([]byte, error) {
	if err := checkEnvelope(relayproto.FrameHeartbeat, &h.Identity, h.Lease); err != nil {
		return dst, err
	}
	return appendFrame(dst, relayproto.FrameHeartbeat, func(bw *bodyWriter) {
		bw.array(heartbeatFields)
		bw.identity(&h.Identity)
		bw.lease(h.Lease)
		bw.uint(h.Sequence)
	})
}

// appendLoadReport appends r as a load-report frame to dst. Rates must be
// finite and ≥ 0.
func appendLoadReport(dst []byte, r *relayproto.LoadReport) ([]byte, error) {
	if err := checkEnvelope(relayproto.FrameLoadReport, &r.Identity, relayproto.Lease{}); err != nil {
		return dst, err
	}
	for _, v := range [...]float64{r.PrefillTokensPerMs, r.QueueTokensPerMs, r.DecodeBlocksPerMs} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return dst, encodeError(relayproto.FrameLoadReport, ErrMalformed, "rate %v is not a finite rate ≥ 0", v)
		}
	}
	return appendFrame(dst, relayproto.FrameLoadReport, func(bw *bodyWriter) {
		if r.StoredBlocks == 0 {
			bw.array(loadFields)
		} else {
			bw.array(loadFieldsAll)
		}
		bw.identity(&r.Identity)
		bw.uint(r.Sequence)
		bw.uint(r.TimestampUnixNano)
		bw.uint(uint64(r.IntervalMs))
		bw.uint(r.ActiveBlocks)
		bw.uint(r.QueuedPrefillTokens)
		bw.uint(r.ActiveDecodeBlocks)
		bw.uint(uint64(r.LiveWorkers))
		bw.uint(r.CapacityBlocks)
		bw.float(r.PrefillTokensPerMs)
		bw.float(r.QueueTokensPerMs)
		bw.float(r.DecodeBlocksPerMs)
		if r.StoredBlocks != 0 {
			bw.uint(r.StoredBlocks)
		}
	})
}

// AppendFrame appends m as a frame to dst (dispatching on its type).
func AppendFrame(dst []byte, m relayproto.Message) ([]byte, error) {
	switch m := m.(type) {
	case *relayproto.Snapshot:
		return appendSnapshot(dst, m)
	case *relayproto.Delta:
		return appendDelta(dst, m)
	case *relayproto.DrainMarker:
		return appendDrainMarker(dst, m)
	case *relayproto.Heartbeat:
		return appendHeartbeat(dst, m)
	case *relayproto.LoadReport:
		return appendLoadReport(dst, m)
	}
	return dst, &FrameError{Lane: -1, Reason: fmt.Sprintf("unknown message %T", m), Err: ErrMalformed}
}

// header is a checked frame header.
type header struct {
	t    relayproto.FrameType
	body []byte
	rest []byte
}

func headerError(err error, offset int, format string, args ...any) error {
	return &FrameError{Lane: -1, Offset: offset, Reason: fmt.Sprintf(format, args...), Err: err}
}

// parseHeader checks the header of the frame at the start of src, its length
// limit and its checksum, and splits off the body and the rest of src.
func parseHeader(src []byte) (header, error) {
	if len(src) < headerBytes {
		return header{}, headerError(ErrMalformed, len(src), "%d bytes, a header needs %d", len(src), headerBytes)
	}
	if string(src[:4]) != frameMagic {
		return header{}, headerError(ErrMalformed, 0, "bad magic %q", src[:4])
	}
	if src[4] != Version {
		return header{}, headerError(ErrVersion, 4, "wire version %d, want %d", src[4], Version)
	}
	t := relayproto.FrameType(src[5])
	if t < relayproto.FrameSnapshot || t > relayproto.FrameLoadReport {
		return header{}, headerError(ErrMalformed, 5, "unknown frame type %d", src[5])
	}
	if src[6] != 0 || src[7] != 0 {
		return header{}, headerError(ErrMalformed, 6, "reserved header bytes are not zero")
	}
	n := binary.LittleEndian.Uint32(src[8:])
	if n > MaxFrameBytes-headerBytes {
		return header{}, headerError(ErrTooLarge, 8, "body of %d bytes, limit %d", n, MaxFrameBytes-headerBytes)
	}
	if uint64(len(src)-headerBytes) < uint64(n) {
		return header{}, headerError(ErrMalformed, len(src), "truncated: body of %d bytes, %d present", n, len(src)-headerBytes)
	}
	body := src[headerBytes : headerBytes+int(n)]
	if got, want := checksum(body), binary.LittleEndian.Uint32(src[12:]); got != want {
		return header{}, headerError(ErrChecksum, 12, "body checksum 0x%08x, header says 0x%08x", got, want)
	}
	return header{t: t, body: body, rest: src[headerBytes+int(n):]}, nil
}

// Decoder decodes frames into messages it owns and reuses, so that steady
// decoding allocates nothing beyond growing those messages' slices. A
// message returned by Decode is valid until the next call. A Decoder is not
// safe for concurrent use; the zero value is ready.
type Decoder struct {
	br        bodyReader
	snapshot  relayproto.Snapshot
	delta     relayproto.Delta
	drain     relayproto.DrainMarker
	heartbeat relayproto.Heartbeat
	load      relayproto.LoadReport
}

// Decode decodes the frame at the start of src and returns its message and
// the rest of src.
func (d *Decoder) Decode(src []byte) (relayproto.Message, []byte, error) {
	h, err := parseHeader(src)
	if err != nil {
		return nil, src, err
	}
	d.br.reset(h.body, headerBytes)
	var m relayproto.Message
	switch h.t {
	case relayproto.FrameSnapshot:
		m, err = &d.snapshot, d.br.snapshot(&d.snapshot)
	case relayproto.FrameDelta:
		m, err = &d.delta, d.br.delta(&d.delta)
	case relayproto.FrameDrainMarker:
		m, err = &d.drain, d.br.drainMarker(&d.drain)
	case relayproto.FrameHeartbeat:
		m, err = &d.heartbeat, d.br.heartbeat(&d.heartbeat)
	case relayproto.FrameLoadReport:
		m, err = &d.load, d.br.loadReport(&d.load)
	}
	if err != nil {
		return nil, src, err
	}
	return m, h.rest, nil
}

// Decode decodes the frame at the start of src into a new message and
// returns it with the rest of src.
func Decode(src []byte) (relayproto.Message, []byte, error) {
	return new(Decoder).Decode(src)
}

// decodeTyped decodes the frame at the start of src, which must be of type
// t, with fn, and returns the rest of src.
func decodeTyped(src []byte, t relayproto.FrameType, fn func(*bodyReader) error) ([]byte, error) {
	h, err := parseHeader(src)
	if err != nil {
		return src, err
	}
	if h.t != t {
		return src, headerError(ErrMalformed, 5, "frame is a %v, want a %v", h.t, t)
	}
	var br bodyReader
	br.reset(h.body, headerBytes)
	if err := fn(&br); err != nil {
		return src, err
	}
	return h.rest, nil
}

// decodeSnapshot decodes the snapshot-chunk frame at the start of src into
// dst, reusing dst.Words, and returns the rest of src. On error *dst may
// hold part of the frame.
func decodeSnapshot(dst *relayproto.Snapshot, src []byte) ([]byte, error) {
	return decodeTyped(src, relayproto.FrameSnapshot, func(br *bodyReader) error { return br.snapshot(dst) })
}

// decodeDelta decodes the delta frame at the start of src into dst, reusing
// dst.Images, and returns the rest of src. On error *dst may hold part of
// the frame.
func decodeDelta(dst *relayproto.Delta, src []byte) ([]byte, error) {
	return decodeTyped(src, relayproto.FrameDelta, func(br *bodyReader) error { return br.delta(dst) })
}

// decodeDrainMarker decodes the drain-marker frame at the start of src into
// dst and returns the rest of src.
func decodeDrainMarker(dst *relayproto.DrainMarker, src []byte) ([]byte, error) {
	return decodeTyped(src, relayproto.FrameDrainMarker, func(br *bodyReader) error { return br.drainMarker(dst) })
}

// decodeHeartbeat decodes the heartbeat frame at the start of src into dst
// and returns the rest of src.
func decodeHeartbeat(dst *relayproto.Heartbeat, src []byte) ([]byte, error) {
	return decodeTyped(src, relayproto.FrameHeartbeat, func(br *bodyReader) error { return br.heartbeat(dst) })
}

// DecodeLoadReport decodes the load-report frame at the start of src into
// dst and returns the rest of src.
func DecodeLoadReport(dst *relayproto.LoadReport, src []byte) ([]byte, error) {
	return decodeTyped(src, relayproto.FrameLoadReport, func(br *bodyReader) error { return br.loadReport(dst) })
}

func (br *bodyReader) snapshot(s *relayproto.Snapshot) error {
	if err := br.array(snapshotFields, "snapshot"); err != nil {
		return err
	}
	if err := br.identity(&s.Identity); err != nil {
		return err
	}
	if err := br.lease(&s.Lease); err != nil {
		return err
	}
	var err error
	if s.Sequence, err = br.uint(math.MaxUint64, "sequence"); err != nil {
		return err
	}
	if s.Total, err = br.uint(ckf.MaxBuckets, "total"); err != nil {
		return err
	}
	if s.Offset, err = br.uint(ckf.MaxBuckets, "offset"); err != nil {
		return err
	}
	enc, err := br.uint(uint64(snapenc.Dense), "encoding")
	if err != nil {
		return err
	}
	s.Encoding = snapenc.Encoding(enc)
	count, err := br.count(relayproto.MaxChunkWords, "word count")
	if err != nil {
		return err
	}
	at := br.offset()
	payload, err := br.bin(s.Encoding.MaxSize(count), "snapshot payload")
	if err != nil {
		return err
	}
	if err := s.Encoding.Check(count, payload); err != nil {
		return br.fail(ErrMalformed, "%v", err)
	}
	if err := br.end(); err != nil {
		return err
	}
	s.Words = growWords(s.Words, count)
	if err := s.Encoding.Decode(s.Words, payload); err != nil {
		return &FrameError{Lane: -1, Offset: at, Reason: err.Error(), Err: ErrMalformed}
	}
	return nil
}

func growWords(w []uint64, n int) []uint64 {
	if cap(w) < n {
		return make([]uint64, n)
	}
	return w[:n]
}

func (br *bodyReader) delta(d *relayproto.Delta) error {
	if err := br.array(deltaFields, "delta"); err != nil {
		return err
	}
	if err := br.identity(&d.Identity); err != nil {
		return err
	}
	if err := br.lease(&d.Lease); err != nil {
		return err
	}
	var err error
	if d.Base, err = br.uint(math.MaxUint64, "base"); err != nil {
		return err
	}
	if d.Sequence, err = br.uint(math.MaxUint64, "sequence"); err != nil {
		return err
	}
	payload, err := br.bin(imageBytes*relayproto.MaxDeltaImages, "images")
	if err != nil {
		return err
	}
	if len(payload)%imageBytes != 0 {
		return br.fail(ErrMalformed, "images bin of %d bytes is not a multiple of %d", len(payload), imageBytes)
	}
	n := len(payload) / imageBytes
	if cap(d.Images) < n {
		d.Images = make([]relayproto.Image, n)
	}
	d.Images = d.Images[:n]
	for i := range d.Images {
		p := payload[imageBytes*i:]
		d.Images[i] = relayproto.Image{Bucket: binary.LittleEndian.Uint32(p), Word: binary.LittleEndian.Uint64(p[4:])}
	}
	return br.end()
}

func (br *bodyReader) drainMarker(m *relayproto.DrainMarker) error {
	if err := br.array(drainFields, "drain marker"); err != nil {
		return err
	}
	if err := br.identity(&m.Identity); err != nil {
		return err
	}
	if err := br.lease(&m.Lease); err != nil {
		return err
	}
	var err error
	if m.Expected, err = br.uint(math.MaxUint64, "expected sequence"); err != nil {
		return err
	}
	return br.end()
}

func (br *bodyReader) heartbeat(h *relayproto.Heartbeat) error {
	if err := br.array(heartbeatFields, "heartbeat"); err != nil {
		return err
	}
	if err := br.identity(&h.Identity); err != nil {
		return err
	}
	if err := br.lease(&h.Lease); err != nil {
		return err
	}
	var err error
	if h.Sequence, err = br.uint(math.MaxUint64, "sequence"); err != nil {
		return err
	}
	return br.end()
}

func (br *bodyReader) loadReport(r *relayproto.LoadReport) error {
	n, err := br.arrayOf("load report", loadFields, loadFieldsAll)
	if err != nil {
		return err
	}
	if err := br.identity(&r.Identity); err != nil {
		return err
	}
	var interval, workers uint64
	for _, f := range [...]struct {
		dst   *uint64
		limit uint64
		name  string
	}{
		{&r.Sequence, math.MaxUint64, "sequence"},
		{&r.TimestampUnixNano, math.MaxUint64, "timestamp"},
		{&interval, math.MaxUint32, "interval"},
		{&r.ActiveBlocks, math.MaxUint64, "active blocks"},
		{&r.QueuedPrefillTokens, math.MaxUint64, "queued prefill tokens"},
		{&r.ActiveDecodeBlocks, math.MaxUint64, "active decode blocks"},
		{&workers, math.MaxUint32, "live workers"},
		{&r.CapacityBlocks, math.MaxUint64, "capacity blocks"},
	} {
		if *f.dst, err = br.uint(f.limit, f.name); err != nil {
			return err
		}
	}
	r.IntervalMs, r.LiveWorkers = uint32(interval), uint32(workers)
	for _, f := range [...]struct {
		dst  *float64
		name string
	}{{&r.PrefillTokensPerMs, "prefill rate"}, {&r.QueueTokensPerMs, "queue rate"}, {&r.DecodeBlocksPerMs, "decode rate"}} {
		if *f.dst, err = br.float(f.name); err != nil {
			return err
		}
	}
	r.StoredBlocks = 0
	if n == loadFieldsAll {
		if r.StoredBlocks, err = br.uint(math.MaxUint64, "stored blocks"); err != nil {
			return err
		}
		if r.StoredBlocks == 0 {
			return br.fail(ErrMalformed, "stored blocks 0 is written by leaving the field out")
		}
	}
	return br.end()
}
