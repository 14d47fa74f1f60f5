package snapenc

import (
	"errors"
	"fmt"
	"strconv"
)

// Encoding is how a snapshot chunk's words travel on the wire.
type Encoding uint8

// Snapshot encodings. Both round-trip every word byte for byte.
const (
	// Compact stores a 4-bit slot-occupancy mask per bucket (two buckets per
	// byte) followed by the non-zero 16-bit fingerprints, LE: (0.5 + 8α)
	// bytes per bucket at load α, i.e. 2 + 0.125/α bytes per block (spec §8
	// open problem 2). It is the default.
	Compact Encoding = 0
	// Dense stores every word as LE u64: 8 bytes per bucket (upstream CBI1).
	Dense Encoding = 1
)

// errInvalid is wrapped by every error of Check and Decode.
var errInvalid = errors.New("snapenc: invalid payload")

// String names e.
func (e Encoding) String() string {
	switch e {
	case Compact:
		return "compact"
	case Dense:
		return "dense"
	}
	return "encoding(" + strconv.FormatUint(uint64(e), 10) + ")"
}

// Valid reports whether e is Compact or Dense. The other methods are
// defined only for a valid encoding.
func (e Encoding) Valid() bool { return e == Compact || e == Dense }

// Size returns the payload size of words in e.
func (e Encoding) Size(words []uint64) int {
	if e == Dense {
		return denseBytes(len(words))
	}
	return compactBytes(words)
}

// MaxSize returns the largest payload of count words in e (for compact:
// every slot occupied), the bound a decoder checks before it allocates.
func (e Encoding) MaxSize(count int) int {
	if e == Dense {
		return denseBytes(count)
	}
	return (count+1)/2 + 8*count
}

// Append appends the encoding of words to dst.
func (e Encoding) Append(dst []byte, words []uint64) []byte {
	if e == Dense {
		return appendDense(dst, words)
	}
	return appendCompact(dst, words)
}

// Check reports why payload cannot be the encoding of count words, looking
// only at its size and (compact) occupancy masks, so that it can run
// before the words are allocated; nil when Decode may be called.
func (e Encoding) Check(count int, payload []byte) error {
	if e == Dense {
		if want := denseBytes(count); len(payload) != want {
			return fmt.Errorf("%w: dense payload is %d bytes, want %d", errInvalid, len(payload), want)
		}
		return nil
	}
	if reason := checkCompact(count, payload); reason != "" {
		return fmt.Errorf("%w: %s", errInvalid, reason)
	}
	return nil
}

// Decode fills dst (len(dst) words) from a payload that passed Check, and
// reports a payload that another word sequence would encode to instead
// (a compact occupied slot holding fingerprint 0); dst is then partly
// written. A payload that decodes re-encodes to exactly the same bytes.
func (e Encoding) Decode(dst []uint64, payload []byte) error {
	if e == Dense {
		decodeDense(dst, payload)
		return nil
	}
	if reason := decodeCompact(dst, payload); reason != "" {
		return fmt.Errorf("%w: %s", errInvalid, reason)
	}
	return nil
}
