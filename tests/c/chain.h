/* chain.h: the block identities the C test and benchmark give the index.
 *
 * Local hashes are the listed values themselves (dynamo-compat §3.5's
 * convention). External hashes are opaque per-member keys to the index
 * (§2.1: "never recomputed"), so instead of the XXH3 router chain the tests
 * use any injective function of the chain prefix: here the SplitMix64
 * finalizer of spec §3.7 folded over the prefix. The same fold is in
 * tests/python and tests/gohost, so every suite stores the same events. */
#ifndef GOINDEX_TEST_CHAIN_H
#define GOINDEX_TEST_CHAIN_H

#include <stddef.h>
#include <stdint.h>

/* chain_root is the fold's start value (spec §3.7's hash_parts seed). */
#define CHAIN_ROOT 0xD1B54A32D192ED03ull

static inline uint64_t mix64(uint64_t z) {
	z ^= z >> 30;
	z *= 0xBF58476D1CE4E5B9ull;
	z ^= z >> 27;
	z *= 0x94D049BB133111EBull;
	z ^= z >> 31;
	return z;
}

/* chain_next is the external hash of a block with local hash local below a
 * block whose external hash is prev (CHAIN_ROOT at the root). */
static inline uint64_t chain_next(uint64_t prev, uint64_t local) { return mix64(prev ^ mix64(local)); }

/* chain fills ext[i] with the external hash of locals[0..i]. */
static inline void chain(const uint64_t *locals, size_t n, uint64_t *ext) {
	uint64_t prev = CHAIN_ROOT;
	for (size_t i = 0; i < n; i++) ext[i] = prev = chain_next(prev, locals[i]);
}

#endif
