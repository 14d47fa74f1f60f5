package ckf

import "math/bits"

// XXH3-64 constants for inputs of 4–8 bytes: the two 64-bit words of the
// default secret at byte offsets 8 and 16, and the rrmxmx multiplier.
const (
	xxh3Secret8  = 0x1cad21f72c81017c
	xxh3Secret16 = 0xdb979083e96dd4de
	xxh3MulMX    = 0x9fb21c651e98df25
)

// Hash8 returns XXH3-64 of LE64(x) with a 64-bit seed, bit-identical to
// xxh3.HashSeed on those 8 bytes, without the library's generic length
// dispatch. It is the len 4–8 path of XXH3: for exactly 8 bytes the "first
// and last 4 bytes" it mixes are x's low and high halves, so the keyed input
// is x rotated by 32. Small enough for the compiler to inline: 2.1 ns a
// hash against 8.7 ns for the library call it replaces on the probe path
// (BenchmarkHash8, one run on the 2-core EPYC).
func Hash8(x, seed uint64) uint64 { return hash8Keyed(x, hash8Key(seed)) }

// hash8Key is the part of Hash8 that depends only on the seed: the secret
// words folded with the byte-swapped seed. A Format keeps it, so its probes
// skip that work and ProbeFast stays small enough to inline.
func hash8Key(seed uint64) uint64 {
	seed ^= uint64(bits.ReverseBytes32(uint32(seed))) << 32
	return (xxh3Secret8 ^ xxh3Secret16) - seed
}

// hash8Keyed is Hash8 with the seed already folded into key (hash8Key).
func hash8Keyed(x, key uint64) uint64 {
	h := bits.RotateLeft64(x, 32) ^ key
	h ^= bits.RotateLeft64(h, 49) ^ bits.RotateLeft64(h, 24)
	h *= xxh3MulMX
	h ^= h>>35 + 8
	h *= xxh3MulMX
	return h ^ h>>28
}

// ProbeFast returns the same Probe as Probe(h), computing the address hash
// with the inlined Hash8 instead of a library call, and taking the alternate
// bucket from the precomputed delta table (no second hash). The query hot
// path (package replica) uses it and its batch form ProbesFast; the
// randomized test holds both equal to Probe.
func (f *Format) ProbeFast(h uint64) Probe { return f.probeOf(hash8Keyed(h, f.key)) }

// ProbesFast sets dst[i] = ProbeFast(hashes[i]) for every i < len(dst).
// On amd64 with AVX-512 it hashes 8 positions per vector (probes8: 2.7×
// the scalar loop's rate, BenchmarkProbesFast impl=batch vs batch-scalar);
// elsewhere the scalar loop has the hash inlined (ProbeFast itself is too
// large for the compiler to inline at a call site: a call per position
// costs more than the hash). It panics if hashes is shorter than dst.
func (f *Format) ProbesFast(dst []Probe, hashes []uint64) {
	hashes = hashes[:len(dst)]
	if vectorProbes {
		for len(dst) > 0 {
			n := min(len(dst), 8)
			probes8(&dst[0], &hashes[0], n, f.key, f.mask32, f.delta)
			dst, hashes = dst[n:], hashes[n:]
		}
		return
	}
	f.probesScalar(dst, hashes)
}

// probesScalar is ProbesFast one position after another: the portable path,
// and the reference the vector one is held to.
func (f *Format) probesScalar(dst []Probe, hashes []uint64) {
	hashes = hashes[:len(dst)]
	for i, h := range hashes {
		dst[i] = f.probeOf(hash8Keyed(h, f.key))
	}
}

// primary returns h's fingerprint and bucket A as ProbeFast would, leaving
// B zero: the producer's table derives B only when it needs it (most
// insertions and removals settle in A), which saves a delta-table load.
func (f *Format) primary(h uint64) Probe {
	m := hash8Keyed(h, f.key)
	fp := uint16(m)
	fp += uint16(b2u(fp == 0))
	return Probe{FP: fp, A: uint32(m>>16) & f.mask32}
}

// probeOf turns the address hash m = XXH3(LE64(h), seed) into the probe
// (spec §2 steps 2–5, with the delta table for step 4).
func (f *Format) probeOf(m uint64) Probe {
	fp := uint16(m)
	fp += uint16(b2u(fp == 0))
	a := uint32(m>>16) & f.mask32
	return Probe{FP: fp, A: a, B: a ^ f.delta[fp]}
}

// b2u converts a bool to 0 or 1 without a branch (the compiler emits SETcc).
func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
