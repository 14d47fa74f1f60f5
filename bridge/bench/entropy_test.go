package bench

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestContentBits_FullTableIsItsMultisets(t *testing.T) {
	// Every bucket full: the occupancies say nothing, each bucket is a
	// multiset of 4 of 65,535 values: just under 64 − log2(4!) bits.
	words := make([]uint64, 1000)
	for i := range words {
		words[i] = 0x0001_0002_0003_0004 + uint64(i)
	}
	perBucket := contentBits(words) / 1000
	require.InDelta(t, 64-math.Log2(24), perBucket, 0.01)
	require.Less(t, perBucket, 64.0)
}

func TestContentBits_EmptyTableAndOccupancyEntropy(t *testing.T) {
	require.Zero(t, contentBits(nil))
	require.Zero(t, contentBits(make([]uint64, 64)), "all empty: nothing to say")

	// Half the buckets hold one fingerprint, half none: one bit of
	// occupancy per bucket plus log2(65,535) for each fingerprint.
	words := make([]uint64, 64)
	for i := 0; i < len(words); i += 2 {
		words[i] = uint64(i + 1)
	}
	want := 64*1.0 + 32*math.Log2(fingerprintValues)
	require.InDelta(t, want, contentBits(words), 1e-6)
}

func TestContentBits_UnderTheNibbleEncodingAbove16BitsAFingerprint(t *testing.T) {
	// A random table at the relay benchmark's load: the floor lies between
	// what slot order saves (below 16 bits a fingerprint) and the compact
	// encoding's 16 bits plus a 4-bit nibble a bucket.
	seed := uint64(7)
	rng := rand.New(rand.NewPCG(seed, seed))
	words := make([]uint64, 1<<14)
	resident := 0
	for i := range words {
		for s := 0; s < 64; s += 16 {
			if rng.Float64() < 0.6 {
				words[i] |= uint64(1+rng.IntN(fingerprintValues)) << s
				resident++
			}
		}
	}
	perBlock := contentBits(words) / float64(resident)
	require.Greater(t, perBlock, 15.0, "seed %d", seed)
	require.Less(t, perBlock, 16+4/(4*0.6), "seed %d", seed)
}
