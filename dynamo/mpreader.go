package dynamo

import (
	"bytes"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// mpReader walks msgpack values with strict types and limits. It wraps the
// library Decoder around a bytes.Reader, which the Decoder reads without
// buffering, so r.Len() is exactly what is left: every declared length is
// checked against it (and a named limit) before anything is allocated.
type mpReader struct {
	r *bytes.Reader
	d *msgpack.Decoder
}

func newMPReader(b []byte) *mpReader {
	r := bytes.NewReader(b)
	return &mpReader{r: r, d: msgpack.NewDecoder(r)}
}

// peek returns the next code without consuming it.
func (m *mpReader) peek() (byte, error) {
	c, err := m.d.PeekCode()
	if err != nil {
		return 0, malformed("truncated input")
	}
	return c, nil
}

// nextNil consumes a nil and reports true, or reports false and consumes
// nothing.
func (m *mpReader) nextNil() (bool, error) {
	c, err := m.peek()
	if err != nil || c != msgpcode.Nil {
		return false, err
	}
	_, _ = m.r.ReadByte()
	return true, nil
}

func isStrCode(c byte) bool { return msgpcode.IsString(c) }
func isBinCode(c byte) bool { return msgpcode.IsBin(c) }

func isNilCode(c byte) bool { return c == msgpcode.Nil }

func isMapCode(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isArrayCode(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isIntCode(c byte) bool {
	switch c {
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return true
	}
	return msgpcode.IsFixedNum(c)
}

func isSignedCode(c byte) bool {
	switch c {
	case msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return true
	}
	return c >= msgpcode.NegFixedNumLow
}

// codeName names a msgpack code's type for error messages.
func codeName(c byte) string {
	switch {
	case c == msgpcode.Nil:
		return "nil"
	case c == msgpcode.False || c == msgpcode.True:
		return "bool"
	case isIntCode(c):
		return "integer"
	case c == msgpcode.Float || c == msgpcode.Double:
		return "float"
	case msgpcode.IsString(c):
		return "string"
	case msgpcode.IsBin(c):
		return "bin"
	case isArrayCode(c):
		return "array"
	case isMapCode(c):
		return "map"
	case msgpcode.IsExt(c):
		return "ext"
	}
	return "invalid code"
}

func wrongType(want string, c byte) error {
	return malformed("want %s, got %s", want, codeName(c))
}

// containerLen reads a map (isMap) or array header and checks its length
// against max and against the bytes left (every entry takes at least one
// byte per value).
func (m *mpReader) containerLen(isMap bool, max int) (int, error) {
	c, err := m.peek()
	if err != nil {
		return 0, err
	}
	var n int
	what := "array length"
	if isMap {
		what = "map length"
		if !isMapCode(c) {
			return 0, wrongType("map", c)
		}
		n, err = m.d.DecodeMapLen()
	} else {
		if !isArrayCode(c) {
			return 0, wrongType("array", c)
		}
		n, err = m.d.DecodeArrayLen()
	}
	if err != nil {
		return 0, malformed("truncated %s", what)
	}
	if n > max {
		return 0, &LimitError{What: what, Got: n, Min: 0, Max: max}
	}
	per := 1
	if isMap {
		per = 2
	}
	if n > m.r.Len()/per {
		return 0, malformed("%s %d exceeds the %d bytes left", what, n, m.r.Len())
	}
	return n, nil
}

func (m *mpReader) mapLen(max int) (int, error)   { return m.containerLen(true, max) }
func (m *mpReader) arrayLen(max int) (int, error) { return m.containerLen(false, max) }

// rawLen reads a str (wantStr) or bin header and checks the length against
// max and the bytes left.
func (m *mpReader) rawLen(wantStr bool, max int) (int, error) {
	c, err := m.peek()
	if err != nil {
		return 0, err
	}
	if wantStr && !msgpcode.IsString(c) {
		return 0, wrongType("string", c)
	}
	if !wantStr && !msgpcode.IsBin(c) {
		return 0, wrongType("bin", c)
	}
	n, err := m.d.DecodeBytesLen()
	if err != nil {
		return 0, malformed("truncated length")
	}
	if n > max {
		return 0, &LimitError{What: "string bytes", Got: n, Min: 0, Max: max}
	}
	if n > m.r.Len() {
		return 0, malformed("length %d exceeds the %d bytes left", n, m.r.Len())
	}
	return n, nil
}

// readRaw reads n bytes into a fresh slice; n ≤ r.Len() was checked.
func (m *mpReader) readRaw(n int) []byte {
	b := make([]byte, n)
	_, _ = io.ReadFull(m.r, b)
	return b
}

// str reads a string of at most MaxStringBytes.
func (m *mpReader) str() (string, error) {
	n, err := m.rawLen(true, MaxStringBytes)
	if err != nil {
		return "", err
	}
	return string(m.readRaw(n)), nil
}

// optStr reads nil (→ "", false) or a string.
func (m *mpReader) optStr() (string, bool, error) {
	if isNil, err := m.nextNil(); err != nil || isNil {
		return "", false, err
	}
	s, err := m.str()
	return s, err == nil, err
}

// anyStr reads a value of any type: a string comes back with isString
// set, anything else is skipped (a tolerant enum field, whose other values
// make its event unsupported rather than the message malformed).
func (m *mpReader) anyStr() (s string, isString bool, err error) {
	c, err := m.peek()
	if err != nil {
		return "", false, err
	}
	if !isStrCode(c) {
		return "", false, m.skip()
	}
	s, err = m.str()
	return s, err == nil, err
}

// present reads a uint64 into *v, setting *seen when it decoded (a
// required field's presence).
func (m *mpReader) present(v *uint64, seen *bool) error {
	x, err := m.u64()
	*v, *seen = x, err == nil
	return err
}

// optU64 reads nil (nothing set) or a uint64 into *v, setting *has.
func (m *mpReader) optU64(v *uint64, has *bool) error {
	if isNil, err := m.nextNil(); err != nil || isNil {
		return err
	}
	return m.present(v, has)
}

// mapKey reads a string map key.
func (m *mpReader) mapKey() (string, error) {
	k, err := m.str()
	return k, at("map key", err)
}

// bin reads a bin of at most max bytes.
func (m *mpReader) bin(max int) ([]byte, error) {
	n, err := m.rawLen(false, max)
	if err != nil {
		return nil, err
	}
	return m.readRaw(n), nil
}

// intBits reads any msgpack integer and returns its 64 bits (a signed
// value is bit-reinterpreted) and whether it was encoded as negative.
func (m *mpReader) intBits() (bits uint64, negative bool, err error) {
	c, err := m.peek()
	if err != nil {
		return 0, false, err
	}
	if !isIntCode(c) {
		return 0, false, wrongType("integer", c)
	}
	if isSignedCode(c) {
		v, err := m.d.DecodeInt64()
		if err != nil {
			return 0, false, malformed("truncated integer")
		}
		return uint64(v), v < 0, nil
	}
	v, err := m.d.DecodeUint64()
	if err != nil {
		return 0, false, malformed("truncated integer")
	}
	return v, false, nil
}

// uint reads a non-negative integer no larger than max.
func (m *mpReader) uint(max uint64) (uint64, error) {
	v, neg, err := m.intBits()
	if err != nil {
		return 0, err
	}
	if neg {
		return 0, malformed("want unsigned integer, got %d", int64(v))
	}
	if v > max {
		return 0, malformed("integer %d exceeds %d", v, max)
	}
	return v, nil
}

func (m *mpReader) u64() (uint64, error) { return m.uint(math.MaxUint64) }

func (m *mpReader) u32() (uint32, error) {
	v, err := m.uint(math.MaxUint32)
	return uint32(v), err
}

// float reads a float32, float64 or integer as float64.
func (m *mpReader) float() (float64, error) {
	c, err := m.peek()
	if err != nil {
		return 0, err
	}
	switch {
	case c == msgpcode.Float || c == msgpcode.Double:
		v, err := m.d.DecodeFloat64()
		if err != nil {
			return 0, malformed("truncated float")
		}
		return v, nil
	case isIntCode(c):
		v, neg, err := m.intBits()
		if neg {
			return float64(int64(v)), err
		}
		return float64(v), err
	}
	return 0, wrongType("number", c)
}

// skip skips one value of any type, refusing to nest deeper than
// MaxNesting.
func (m *mpReader) skip() error { return m.skipDepth(0) }

func (m *mpReader) skipDepth(depth int) error {
	c, err := m.peek()
	if err != nil {
		return err
	}
	switch {
	case isMapCode(c) || isArrayCode(c):
		if depth >= MaxNesting {
			return &LimitError{What: "nesting depth", Got: depth + 1, Min: 0, Max: MaxNesting}
		}
		n, err := m.containerLen(isMapCode(c), math.MaxInt32)
		if err != nil {
			return err
		}
		if isMapCode(c) {
			n *= 2
		}
		for range n {
			if err := m.skipDepth(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		n, err := m.rawLen(msgpcode.IsString(c), math.MaxInt32)
		if err != nil {
			return err
		}
		_, _ = m.r.Seek(int64(n), io.SeekCurrent)
		return nil
	}
	if err := m.d.Skip(); err != nil {
		return malformed("cannot skip %s value", codeName(c))
	}
	return nil
}

// capacity returns how many of n declared elements, each encoded in at least
// minBytes, the bytes left can hold: the capacity to allocate for elements
// much larger decoded than encoded, so that a length prefix with junk after
// it costs memory in proportion to the input, not to the claim.
func (m *mpReader) capacity(n, minBytes int) int { return min(n, m.r.Len()/minBytes) }

// mark returns the reader's position, for rewind. The Decoder keeps no
// buffered bytes of its own, so rewinding the bytes.Reader rewinds it too.
func (m *mpReader) mark() int64 { return m.r.Size() - int64(m.r.Len()) }

// rewind returns the reader to a position from mark.
func (m *mpReader) rewind(pos int64) { _, _ = m.r.Seek(pos, io.SeekStart) }

// end checks that no bytes follow the top-level value.
func (m *mpReader) end() error {
	if m.r.Len() != 0 {
		return malformed("%d trailing bytes", m.r.Len())
	}
	return nil
}

// mpWriter writes msgpack in the smallest encodings, as rmp-serde does
// (compact integers, fixstr/str8/16/32, fixmap/map16/32, bin8/16/32). It
// writes into a bytes.Buffer, whose writes cannot fail, so the Encoder's
// error results are dropped here, in one place.
type mpWriter struct {
	buf *bytes.Buffer
	e   *msgpack.Encoder
}

func newMPWriter(dst []byte) *mpWriter {
	buf := bytes.NewBuffer(dst)
	e := msgpack.NewEncoder(buf)
	e.UseCompactInts(true)
	return &mpWriter{buf: buf, e: e}
}

func (w *mpWriter) mapLen(n int)   { _ = w.e.EncodeMapLen(n) }
func (w *mpWriter) arrayLen(n int) { _ = w.e.EncodeArrayLen(n) }
func (w *mpWriter) str(s string)   { _ = w.e.EncodeString(s) }
func (w *mpWriter) uint(v uint64)  { _ = w.e.EncodeUint(v) }
func (w *mpWriter) null()          { _ = w.e.EncodeNil() }
func (w *mpWriter) bin(b []byte)   { _ = w.e.EncodeBytesLen(len(b)); _, _ = w.buf.Write(b) }
func (w *mpWriter) bytes() []byte  { return w.buf.Bytes() }
func (w *mpWriter) optUint(ok bool, v uint64) {
	if ok {
		w.uint(v)
	} else {
		w.null()
	}
}
