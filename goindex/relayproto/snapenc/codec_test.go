package snapenc

import (
	"bytes"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto/internal/bucketgen"
	"github.com/goindex/goindex/internal/testseed"
)

func TestSnapcodec_RoundTripsByteExact(t *testing.T) {
	rng := testseed.Rand(t, 2)
	for _, n := range []int{0, 1, 2, 3, 7, 8, 255, 1024, 4097} {
		for _, load := range []float64{0, 0.25, 0.5, 0.8, 1} {
			words := bucketgen.AtLoad(rng, n, load)
			payload := appendCompact([]byte{0xAA}, words)[1:]
			if got := compactBytes(words); got != len(payload) {
				t.Errorf("compactBytes(n=%d, load %.2f) = %d, encoded %d", n, load, got, len(payload))
			}
			if reason := checkCompact(n, payload); reason != "" {
				t.Fatalf("checkCompact(n=%d, load %.2f): %s", n, load, reason)
			}
			got := make([]uint64, n)
			if reason := decodeCompact(got, payload); reason != "" || !slices.Equal(got, words) {
				t.Fatalf("decodeCompact(n=%d, load %.2f) = %q, words differ: %v", n, load, reason, !slices.Equal(got, words))
			}
			if again := appendCompact(nil, got); !bytes.Equal(again, payload) {
				t.Errorf("compact re-encode (n=%d, load %.2f) differs", n, load)
			}
			dense := appendDense(nil, words)
			back := make([]uint64, n)
			decodeDense(back, dense)
			if len(dense) != denseBytes(n) || !slices.Equal(back, words) {
				t.Errorf("dense round trip (n=%d) failed", n)
			}
		}
	}
}

// TestSnapcodec_CompactSizeMatchesTheFormula checks (0.5 + 8α) bytes per
// bucket, i.e. 2 + 0.125/α per block (spec §8 open problem 2): 2.25 B at
// 50% and 2.16 B at 80%, against 4 B and 2.5 B dense.
func TestSnapcodec_CompactSizeMatchesTheFormula(t *testing.T) {
	rng := testseed.Rand(t, 3)
	const n = 1 << 16
	for _, tc := range []struct{ load, compactPerBlock, densePerBlock float64 }{{0.5, 2.25, 4}, {0.8, 2.156, 2.5}} {
		words := bucketgen.AtLoad(rng, n, tc.load)
		blocks := 0
		for _, w := range words {
			blocks += int(occupancy(w)&1 + occupancy(w)>>1&1 + occupancy(w)>>2&1 + occupancy(w)>>3)
		}
		compact := float64(compactBytes(words)) / float64(blocks)
		dense := float64(denseBytes(n)) / float64(blocks)
		if compact < tc.compactPerBlock*0.98 || compact > tc.compactPerBlock*1.02 {
			t.Errorf("compact at load %.1f: %.3f B/block, want ≈ %.3f", tc.load, compact, tc.compactPerBlock)
		}
		if dense < tc.densePerBlock*0.98 || dense > tc.densePerBlock*1.02 {
			t.Errorf("dense at load %.1f: %.3f B/block, want ≈ %.3f", tc.load, dense, tc.densePerBlock)
		}
	}
}

func TestSnapcodec_CompactRejectsNonCanonicalPayloads(t *testing.T) {
	words := []uint64{0x0000000100000000, 0x0002000000000003, 0x0004}
	payload := appendCompact(nil, words) // masks: 0x54? (bucket0 slot2; bucket1 slots 0,3), 0x01
	for _, tc := range []struct {
		name    string
		count   int
		payload []byte
	}{
		{"short of masks", 3, payload[:1]},
		{"padding nibble set", 3, append([]byte{payload[0], payload[1] | 0x10}, payload[2:]...)},
		{"missing fingerprint", 3, payload[:len(payload)-2]},
		{"extra fingerprint", 3, append(bytes.Clone(payload), 1, 0)},
	} {
		if reason := checkCompact(tc.count, tc.payload); reason == "" {
			t.Errorf("checkCompact(%s) accepted % x", tc.name, tc.payload)
		}
	}
	zeroFP := bytes.Clone(payload)
	zeroFP[2], zeroFP[3] = 0, 0
	if checkCompact(3, zeroFP) != "" {
		t.Fatalf("checkCompact rejected a size-correct payload")
	}
	if reason := decodeCompact(make([]uint64, 3), zeroFP); reason == "" {
		t.Errorf("decodeCompact accepted an occupied slot holding fingerprint 0")
	}
}

// Slow references for the branch-free compact codec.

func occupancyRef(w uint64) byte {
	var m byte
	for i := range 4 {
		if uint16(w>>(16*i)) != 0 {
			m |= 1 << i
		}
	}
	return m
}

func appendCompactRef(dst []byte, words []uint64) []byte {
	masks := len(dst)
	dst = append(dst, make([]byte, (len(words)+1)/2)...)
	for i, w := range words {
		m := occupancyRef(w)
		dst[masks+i/2] |= m << (4 * (i & 1))
		for s := range 4 {
			if m&(1<<s) != 0 {
				dst = append(dst, byte(w>>(16*s)), byte(w>>(16*s+8)))
			}
		}
	}
	return dst
}

func TestSnapcodec_FastPathsMatchReferences(t *testing.T) {
	rng := testseed.Rand(t, 4)
	// Every slot value class, on every slot.
	alphabet := []uint64{0, 1, 2, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF}
	for a := range 1 << 12 {
		var w uint64
		for s := range 4 {
			w |= alphabet[a>>(3*s)&7] << (16 * s)
		}
		if got, want := occupancy(w), occupancyRef(w); got != want {
			t.Fatalf("occupancy(%#016x) = %04b, want %04b", w, got, want)
		}
	}
	cases := 3000
	if testing.Short() {
		cases = 500
	}
	for c := range cases {
		n := rng.IntN(70)
		words := bucketgen.AtLoad(rng, n, rng.Float64())
		prefix := []byte{byte(c)}
		got, want := appendCompact(slices.Clone(prefix), words), appendCompactRef(slices.Clone(prefix), words)
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: appendCompact(%d words) = % x, want % x", c, n, got, want)
		}
		back := make([]uint64, n)
		if reason := decodeCompact(back, got[1:]); reason != "" || !slices.Equal(back, words) {
			t.Fatalf("case %d: decodeCompact(%d words): %q, equal %v", c, n, reason, slices.Equal(back, words))
		}
	}
}

// FuzzCompactPayload checks the compact word decoder on its own: any payload
// it accepts re-encodes to exactly the same bytes.
func FuzzCompactPayload(f *testing.F) {
	f.Add(uint16(3), appendCompact(nil, []uint64{0x0000000100000000, 0x0002000000000003, 0x0004}))
	f.Add(uint16(0), []byte{})
	f.Add(uint16(1), []byte{0x0F, 1, 0, 2, 0, 3, 0, 4, 0})
	f.Fuzz(func(t *testing.T, count uint16, payload []byte) {
		if checkCompact(int(count), payload) != "" {
			return
		}
		words := make([]uint64, count)
		if decodeCompact(words, payload) != "" {
			return
		}
		if again := appendCompact(nil, words); !bytes.Equal(again, payload) {
			t.Fatalf("compact payload re-encodes differently:\n% x\n% x", payload, again)
		}
	})
}
