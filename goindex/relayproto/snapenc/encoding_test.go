package snapenc

import (
	"bytes"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto/internal/bucketgen"
	"github.com/goindex/goindex/internal/testseed"
)

func TestEncoding_RoundTripsThroughItsMethods(t *testing.T) {
	rng := testseed.Rand(t, 5)
	for _, e := range []Encoding{Compact, Dense} {
		for _, n := range []int{0, 1, 5, 64} {
			words := bucketgen.AtLoad(rng, n, 0.6)
			payload := e.Append([]byte{0xEE}, words)[1:]
			if got := e.Size(words); got != len(payload) {
				t.Errorf("%v.Size(%d words) = %d, encoded %d", e, n, got, len(payload))
			}
			if max := e.MaxSize(n); len(payload) > max {
				t.Errorf("%v.MaxSize(%d) = %d, below an encoding of %d bytes", e, n, max, len(payload))
			}
			if err := e.Check(n, payload); err != nil {
				t.Fatalf("%v.Check(%d words): %v", e, n, err)
			}
			back := make([]uint64, n)
			if err := e.Decode(back, payload); err != nil || !slices.Equal(back, words) {
				t.Errorf("%v.Decode(%d words) = %v, equal %v", e, n, err, slices.Equal(back, words))
			}
		}
	}
	full := []uint64{^uint64(0), ^uint64(0), ^uint64(0)}
	if got, want := Compact.Size(full), Compact.MaxSize(3); got != want {
		t.Errorf("Compact.Size(3 full words) = %d, MaxSize(3) = %d; want equal", got, want)
	}
}

func TestEncoding_CheckAndDecodeRefuseBadPayloads(t *testing.T) {
	if err := Dense.Check(2, make([]byte, 15)); err == nil {
		t.Errorf("Dense.Check(2 words, 15 bytes) = nil, want an error")
	}
	if err := Compact.Check(3, []byte{0}); err == nil {
		t.Errorf("Compact.Check(3 words, 1 byte) = nil, want an error")
	}
	zeroFP := []byte{0x01, 0, 0} // slot 0 occupied, fingerprint 0
	if err := Compact.Check(1, zeroFP); err != nil {
		t.Fatalf("Compact.Check(size-correct payload) = %v", err)
	}
	if err := Compact.Decode(make([]uint64, 1), zeroFP); err == nil {
		t.Errorf("Compact.Decode(occupied slot holding 0) = nil, want an error")
	}
	if again := Compact.Append(nil, []uint64{0x0000000100000000}); !bytes.Equal(again, []byte{0x04, 1, 0}) {
		t.Errorf("Compact.Append(slot 2 = 1) = % x, want 04 01 00", again)
	}
}

func TestEncoding_ValidAndString(t *testing.T) {
	for _, c := range []struct {
		e     Encoding
		valid bool
		name  string
	}{{Compact, true, "compact"}, {Dense, true, "dense"}, {2, false, "encoding(2)"}} {
		if c.e.Valid() != c.valid || c.e.String() != c.name {
			t.Errorf("Encoding(%d): Valid %v, String %q; want %v, %q", uint8(c.e), c.e.Valid(), c.e.String(), c.valid, c.name)
		}
	}
}
