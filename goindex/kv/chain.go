package kv

import "math/bits"

// ChainSeed is the XXH3 seed of Dynamo's sequence-hash chain. It is fixed even
// when local hashes were salted with a LoRA name or cache namespace.
const ChainSeed = 1337

// XXH3-64 constants of the 9–16-byte input path: the default secret's words
// at byte offsets 24, 32, 40 and 48, folded with ChainSeed as XXH3 folds its
// seed, and the final avalanche multiplier.
const (
	chainFlipLo  = (0x1f67b3b7a4a44072 ^ 0x78e5c0cc4ee679cb) + ChainSeed
	chainFlipHi  = (0x2172ffcc7dd05a82 ^ 0x8e2443f7744608b8) - ChainSeed
	avalancheMul = 0x165667919e3779f9
)

// ChainHash returns the sequence hash of a block whose parent has sequence
// hash prev and whose own local hash is local:
// XXH3-64(LE64(prev) ‖ LE64(local), seed 1337). It is XXH3's 16-byte path
// written out with the seed folded into constants, bit-identical to the
// library (TestChainHash_MatchesLibrary) and small enough to inline: the
// chain is one serial dependency per block, and this cuts each link to a
// 128-bit multiply and an avalanche (BenchmarkChainHash: impl=inline vs
// impl=library).
func ChainHash(prev, local uint64) uint64 {
	lo, hi := prev^chainFlipLo, local^chainFlipHi
	mh, ml := bits.Mul64(lo, hi)
	acc := 16 + bits.ReverseBytes64(lo) + hi + (mh ^ ml)
	acc ^= acc >> 37
	acc *= avalancheMul
	return acc ^ acc>>32
}

// AppendChain appends the sequence hashes of locals to dst and returns it.
// With hasParent false the chain starts at the root (seq[0] = local[0]);
// otherwise it continues below the block whose sequence hash is parent.
func AppendChain(dst []uint64, hasParent bool, parent uint64, locals []uint64) []uint64 {
	prev, started := parent, hasParent
	for _, l := range locals {
		if started {
			prev = ChainHash(prev, l)
		} else {
			prev, started = l, true
		}
		dst = append(dst, prev)
	}
	return dst
}
