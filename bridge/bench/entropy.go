package bench

import "math"

// fingerprintValues is how many values a resident slot can hold: a
// fingerprint is 16 bits and 0 marks an empty slot.
const fingerprintValues = 1<<16 - 1

// contentBits is the information in a lane's CKF table, in bits: the
// least any encoding can spend on it, given only the fingerprints'
// uniformity. A bucket word (four 16-bit slots, 0 empty) holds a multiset of
// k fingerprints whose slot order carries nothing, log2 C(V+k−1, k) bits
// with V = fingerprintValues, and the table's occupancies cost their
// empirical entropy per bucket on top. Dividing by the resident blocks
// gives the floor under every snapshot encoding's bytes per block.
func contentBits(words []uint64) float64 {
	if len(words) == 0 {
		return 0
	}
	var counts [5]float64
	for _, w := range words {
		k := 0
		for s := 0; s < 64; s += 16 {
			if w>>s&0xFFFF != 0 {
				k++
			}
		}
		counts[k]++
	}
	buckets := float64(len(words))
	var bits float64
	for k, n := range counts {
		if n == 0 {
			continue
		}
		p := n / buckets
		bits += n * (multisetBits(k) - math.Log2(p))
	}
	return bits
}

// multisetBits is log2 C(V+k−1, k): the multisets of k fingerprints.
func multisetBits(k int) float64 {
	v := float64(fingerprintValues)
	top, _ := math.Lgamma(v + float64(k))
	bottom, _ := math.Lgamma(float64(k) + 1)
	rest, _ := math.Lgamma(v)
	return (top - bottom - rest) / math.Ln2
}
