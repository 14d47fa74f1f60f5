package kv

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// ChainSeed is the XXH3 seed of Dynamo's sequence-hash chain. It is fixed even
// when local hashes were salted with a LoRA name or cache namespace.
const ChainSeed = 1337

// ChainHash returns the sequence hash of a block whose parent has sequence
// hash prev and whose own local hash is local:
// XXH3-64(LE64(prev) ‖ LE64(local), seed 1337).
func ChainHash(prev, local uint64) uint64 {
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[0:8], prev)
	binary.LittleEndian.PutUint64(buf[8:16], local)
	return xxh3.HashSeed(buf[:], ChainSeed)
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
