package dynamo

import (
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/zeebo/xxh3"
)

// DefaultHashSeed is the XXH3 seed of Dynamo's local block hash when neither a
// LoRA adapter nor a cache namespace salts it.
const DefaultHashSeed uint64 = 1337

// Pad-value constants of multimodal scheme 2 (SGLang's
// MultimodalItem._compute_pad_value, adopted by Dynamo): a pad token is
// padShift + the low 30 bits of the mm hash.
const (
	padShift    = 1_000_000
	padHashMask = 1<<30 - 1
)

// SaltedSeed returns the local-hash seed for a request:
// 1337 + XXH3(lora, seed 0) + XXH3(namespace, seed 1), each term present only
// for a non-empty string, additions wrapping mod 2^64 (dynamo-compat §1.3).
// It is Dynamo's compute_salt_hash(cache_namespace, lora_name)
// (lib/kv-hashing/src/salt.rs), which lib/kv-router/src/protocols.rs
// block_hash_seed seeds tokens_hash with, whether the namespace came from an
// event's cache_salt or from the tag in its extra_keys.
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

// PadValue returns the pad token that multimodal scheme 2 substitutes for an
// image placeholder run: 1,000,000 + (mmHash & (2^30 − 1)), as u32.
func PadValue(mmHash uint64) uint32 { return uint32(padShift + mmHash&padHashMask) }

// MMIdentifierHash maps a multimodal identifier to its u64 mm hash
// (dynamo-compat §1.4): a 64-character hex digest (vLLM's canonical form)
// maps to the value of its first 16 hex digits, any other non-empty
// identifier to XXH3-64(identifier, seed 0). ok is false for "".
func MMIdentifierHash(id string) (hash uint64, ok bool) {
	if h, ok := hexDigestHash(id); ok {
		return h, true
	}
	if id == "" {
		return 0, false
	}
	return xxh3.HashString(id), true
}

// hexDigestHash returns the first 16 hex digits of a 64-digit hex digest.
func hexDigestHash(id string) (uint64, bool) {
	if len(id) != 64 {
		return 0, false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return 0, false
		}
	}
	h, err := strconv.ParseUint(id[:16], 16, 64)
	return h, err == nil
}

// Hasher cuts token ids into Dynamo KV blocks and hashes them. The zero value
// is not usable; build one with NewHasher. A Hasher is immutable and safe for
// concurrent use.
//
// A block without multimodal objects hashes its tokens as little-endian u32
// with the (salted) seed. A block with objects uses one of two schemes
// (dynamo-compat §1.4): scheme 1 appends the block's mm hashes sorted
// ascending as little-endian u64; scheme 2 (PadImageTokens) replaces the
// n-th run of ImageTokenID with PadValue of the n-th mm hash (clamped to the
// last) and appends nothing.
type Hasher struct {
	blockSize  int
	seed       uint64
	eagle      bool
	padImage   bool
	imageToken uint32
}

// HasherConfig configures a Hasher.
type HasherConfig struct {
	BlockSize int    // tokens per KV block; required, in [1, MaxBlockSize]
	LoRA      string // optional; default: none (base model)
	Namespace string // optional cache namespace (cache_salt); default: none
	// Eagle hashes windows of BlockSize+1 tokens with stride BlockSize
	// (EAGLE speculative decoding); optional; default: false.
	Eagle bool
	// PadImageTokens selects multimodal scheme 2 for blocks that carry mm
	// hashes; optional; default: false (scheme 1, appended mm hashes).
	PadImageTokens bool
	// ImageTokenID is the model's image placeholder token, used only with
	// PadImageTokens; optional; default: 0.
	ImageTokenID uint32
}

// NewHasher returns a Hasher for cfg.
func NewHasher(cfg HasherConfig) (*Hasher, error) {
	if cfg.BlockSize <= 0 || cfg.BlockSize > MaxBlockSize {
		return nil, &LimitError{What: "block size", Got: cfg.BlockSize, Min: 1, Max: MaxBlockSize}
	}
	return &Hasher{
		blockSize:  cfg.BlockSize,
		seed:       SaltedSeed(cfg.LoRA, cfg.Namespace),
		eagle:      cfg.Eagle,
		padImage:   cfg.PadImageTokens,
		imageToken: cfg.ImageTokenID,
	}, nil
}

// BlockSize returns the tokens per block.
func (h *Hasher) BlockSize() int { return h.blockSize }

// Seed returns the (salted) local-hash seed.
func (h *Hasher) Seed() uint64 { return h.seed }

// Window returns how many tokens one block hashes: BlockSize, or
// BlockSize+1 in EAGLE mode.
func (h *Hasher) Window() int {
	if h.eagle {
		return h.blockSize + 1
	}
	return h.blockSize
}

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
	return h.AppendLocalMM(dst, tokens, nil)
}

// AppendLocalMM is AppendLocal for a multimodal sequence: blockMM[i] holds
// the mm hashes of block i (nil or empty for a text-only block; blocks past
// len(blockMM) are text-only).
func (h *Hasher) AppendLocalMM(dst []uint64, tokens []uint32, blockMM [][]uint64) []uint64 {
	var s blockScratch
	window := h.Window()
	for b := range h.Blocks(len(tokens)) {
		var mm []uint64
		if b < len(blockMM) {
			mm = blockMM[b]
		}
		start := b * h.blockSize
		dst = append(dst, h.hashWindow(&s, tokens[start:start+window], mm))
	}
	return dst
}

// HashBlock returns the local hash of one block: window is hashed as given
// (callers pass Window() tokens) with the block's mm hashes applied by the
// configured scheme; mmHashes may be nil.
func (h *Hasher) HashBlock(window []uint32, mmHashes []uint64) uint64 {
	var s blockScratch
	return h.hashWindow(&s, window, mmHashes)
}

// blockScratch holds the buffers one hashing call reuses across blocks.
type blockScratch struct {
	bytes  []byte
	tokens []uint32
	mm     []uint64
}

func (h *Hasher) hashWindow(s *blockScratch, window []uint32, mm []uint64) uint64 {
	if len(mm) > 0 && h.padImage {
		s.tokens = substitutePads(s.tokens[:0], window, h.imageToken, mm)
		window = s.tokens
		mm = nil
	}
	s.bytes = appendTokenBytes(s.bytes[:0], window)
	if len(mm) > 0 {
		s.mm = append(s.mm[:0], mm...)
		slices.Sort(s.mm)
		for _, m := range s.mm {
			s.bytes = binary.LittleEndian.AppendUint64(s.bytes, m)
		}
	}
	return xxh3.HashSeed(s.bytes, h.seed)
}

// substitutePads appends tokens to dst with the n-th maximal run of
// imageToken replaced by PadValue(mm[n]) (the last mm hash for runs beyond
// len(mm)); mm must not be empty.
func substitutePads(dst, tokens []uint32, imageToken uint32, mm []uint64) []uint32 {
	run, inRun := -1, false
	var pad uint32
	for _, t := range tokens {
		if t != imageToken {
			inRun = false
			dst = append(dst, t)
			continue
		}
		if !inRun {
			inRun = true
			run = min(run+1, len(mm)-1)
			pad = PadValue(mm[run])
		}
		dst = append(dst, pad)
	}
	return dst
}

func appendTokenBytes(dst []byte, tokens []uint32) []byte {
	for _, t := range tokens {
		dst = binary.LittleEndian.AppendUint32(dst, t)
	}
	return dst
}

// MooncakeTokens appends the synthetic tokens of Mooncake trace blocks to
// dst (dynamo-compat §6): each hash id truncated to u32 and repeated
// blockSize times. A blockSize below 1 appends nothing.
func MooncakeTokens(dst []uint32, ids []uint64, blockSize int) []uint32 {
	if blockSize < 1 {
		return dst
	}
	for _, id := range ids {
		for range blockSize {
			dst = append(dst, uint32(id))
		}
	}
	return dst
}

// mooncakeStackBytes is the block byte size up to which AppendMooncakeLocal
// builds its block on the stack: block size 512 (the traces' own) × 4 bytes.
const mooncakeStackBytes = 512 * 4

// AppendMooncakeLocal appends the local hash (seed 1337) of each Mooncake
// hash id's synthetic block to dst and returns it. It is bit-identical to
// hashing MooncakeTokens(nil, ids, blockSize) with a Hasher of blockSize, but
// builds each block by doubling one 4-byte pattern instead of materialising
// tokens (BenchmarkMooncakeLocal). A blockSize outside [1, MaxBlockSize]
// appends nothing.
func AppendMooncakeLocal(dst []uint64, ids []uint64, blockSize int) []uint64 {
	if blockSize < 1 || blockSize > MaxBlockSize {
		return dst
	}
	var stack [mooncakeStackBytes]byte
	buf := stack[:]
	if 4*blockSize > len(buf) {
		buf = make([]byte, 4*blockSize)
	}
	buf = buf[:4*blockSize]
	for _, id := range ids {
		binary.LittleEndian.PutUint32(buf, uint32(id))
		for n := 4; n < len(buf); n *= 2 {
			copy(buf[n:], buf[:n])
		}
		dst = append(dst, xxh3.HashSeed(buf, DefaultHashSeed))
	}
	return dst
}
