package dynamo

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// DefaultHashSeed is the XXH3 seed of Dynamo's local block hash when neither a
// LoRA adapter nor a cache namespace salts it.
const DefaultHashSeed uint64 = 1337

// SaltedSeed returns the local-hash seed for a request:
// 1337 + XXH3(lora, seed 0) + XXH3(namespace, seed 1), each term present only
// for a non-empty string, additions wrapping mod 2^64 (dynamo-compat §1.3).
func SaltedSeed(lora, namespace string) uint64 {
	s := DefaultHashSeed
	if lora != "" {
		s += xxh3.HashString(lora)
	}
	if namespace != "" {
		s += xxh3.HashStringSeed(namespace, 1)
	}
	return s
}

// Hasher cuts token ids into Dynamo KV blocks and hashes them. The zero value
// is not usable; build one with NewHasher. A Hasher is immutable and safe for
// concurrent use.
type Hasher struct {
	blockSize int
	seed      uint64
	eagle     bool
}

// HasherConfig configures a Hasher.
type HasherConfig struct {
	BlockSize int    // tokens per KV block; required, > 0
	LoRA      string // optional; default: none (base model)
	Namespace string // optional cache namespace (cache_salt); default: none
	// Eagle hashes windows of BlockSize+1 tokens with stride BlockSize
	// (EAGLE speculative decoding); optional; default: false.
	Eagle bool
}

// NewHasher returns a Hasher for cfg.
func NewHasher(cfg HasherConfig) (*Hasher, error) {
	if cfg.BlockSize <= 0 || cfg.BlockSize > MaxBlockSize {
		return nil, &LimitError{What: "block size", Got: cfg.BlockSize, Max: MaxBlockSize}
	}
	return &Hasher{blockSize: cfg.BlockSize, seed: SaltedSeed(cfg.LoRA, cfg.Namespace), eagle: cfg.Eagle}, nil
}

// BlockSize returns the tokens per block.
func (h *Hasher) BlockSize() int { return h.blockSize }

// Seed returns the (salted) local-hash seed.
func (h *Hasher) Seed() uint64 { return h.seed }

// Blocks returns how many full blocks n tokens make; a trailing partial
// block is not counted.
func (h *Hasher) Blocks(n int) int {
	if h.eagle {
		if n < 1 {
			return 0
		}
		return (n - 1) / h.blockSize
	}
	return n / h.blockSize
}

// AppendLocal appends the local hash (tokens_hash) of every full block of
// tokens to dst and returns it. Tokens are hashed as little-endian u32.
func (h *Hasher) AppendLocal(dst []uint64, tokens []uint32) []uint64 {
	window := h.blockSize
	if h.eagle {
		window++
	}
	n := h.Blocks(len(tokens))
	buf := make([]byte, 4*window)
	for b := 0; b < n; b++ {
		start := b * h.blockSize
		for i, t := range tokens[start : start+window] {
			binary.LittleEndian.PutUint32(buf[4*i:], t)
		}
		dst = append(dst, xxh3.HashSeed(buf, h.seed))
	}
	return dst
}

// LocalHash returns the local hash of exactly one block's tokens with seed
// (no windowing); it is the primitive under AppendLocal.
func LocalHash(tokens []uint32, seed uint64) uint64 {
	buf := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[4*i:], t)
	}
	return xxh3.HashSeed(buf, seed)
}
