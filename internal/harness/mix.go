package harness

// mix is the 64-bit finalizer of splitmix64 (dynamo-compat §3.7): three
// xor-shifts and two odd multiplications, wrapping. It is a bijection, so
// distinct inputs never collide.
func mix(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xBF58476D1CE4E5B9
	z ^= z >> 27
	z *= 0x94D049BB133111EB
	z ^= z >> 31
	return z
}

// hashPartsInit is the fold's starting accumulator (§3.7's hash_parts).
const hashPartsInit = 0xD1B54A32D192ED03

// hashParts folds its parts into one well-mixed value:
// acc = mix(acc ^ mix(p)) for each part p, from hashPartsInit. The generator
// derives every local hash and length from it, so a pool depends only on the
// seed and the part's coordinates, never on the order of generation.
func hashParts(parts ...uint64) uint64 {
	acc := uint64(hashPartsInit)
	for _, p := range parts {
		acc = mix(acc ^ mix(p))
	}
	return acc
}
