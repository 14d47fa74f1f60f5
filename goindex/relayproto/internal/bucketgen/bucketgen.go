package bucketgen

import "math/rand/v2"

// Word returns a packed bucket word with each slot occupied with
// probability 1/2 by a non-zero fingerprint.
func Word(rng *rand.Rand) uint64 {
	var w uint64
	for s := range 4 {
		if rng.IntN(2) == 0 {
			w |= uint64(1+rng.IntN(0xFFFF)) << (16 * s)
		}
	}
	return w
}

// AtLoad returns n packed words with each slot occupied with probability
// load, as a table at that load factor looks.
func AtLoad(rng *rand.Rand, n int, load float64) []uint64 {
	words := make([]uint64, n)
	for i := range words {
		for s := range 4 {
			if rng.Float64() < load {
				words[i] |= uint64(1+rng.IntN(0xFFFF)) << (16 * s)
			}
		}
	}
	return words
}
