package trace

import (
	"fmt"

	"github.com/goindex/goindex/dynamo"
)

// TokensPerID is the prompt span of one Mooncake hash id.
const TokensPerID = 512

// DefaultBlockSize is the KV block size a Mapper uses unless told otherwise:
// one block per hash id.
const DefaultBlockSize = TokensPerID

// Scheme says how a Mapper turns hash ids into KV blocks. Both schemes make
// the tokens of an id its value truncated to u32, repeated; they differ in how
// many tokens an id stands for. At block size 512 they agree.
type Scheme uint8

const (
	// Split keeps an id's 512 tokens: the id becomes 512/bs blocks of bs
	// tokens each, all of the id's value, so the trace's prefix sharing keeps
	// its token depth at any block size. The 512/bs blocks of one id have the
	// same local hash (their tokens are equal); their sequence hashes differ
	// by position. The block size must divide 512.
	Split Scheme = iota
	// PerID is upstream mooncake_bench's mapping (dynamo-compat §6 step 4):
	// every id is one block of bs tokens of its value, whatever bs is, so
	// the prompt has one block per id and token depth scales with bs.
	PerID
)

// String names the scheme as ParseScheme accepts it.
func (s Scheme) String() string {
	switch s {
	case Split:
		return "split"
	case PerID:
		return "per-id"
	}
	return fmt.Sprintf("scheme(%d)", uint8(s))
}

// ParseScheme parses "split" or "per-id".
func ParseScheme(name string) (Scheme, error) {
	for _, s := range []Scheme{Split, PerID} {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown scheme %q (want split or per-id)", ErrConfig, name)
}

// MapperConfig configures a Mapper.
type MapperConfig struct {
	BlockSize int    // KV block size in tokens; optional; default: DefaultBlockSize
	Scheme    Scheme // optional; default: Split
}

// Mapper turns a request's hash ids into Dynamo local block hashes
// (tokens_hash, seed 1337) through the real hashing path: it builds each
// id's tokens and hashes them with dynamo.Hasher. A Mapper reuses a token
// buffer, so it is not safe for concurrent use; NewMapper is cheap.
type Mapper struct {
	hasher *dynamo.Hasher
	scheme Scheme
	perID  int      // blocks per id
	tokens []uint32 // one block's tokens, rewritten per id
}

// NewMapper returns a Mapper for cfg.
func NewMapper(cfg MapperConfig) (*Mapper, error) {
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	perID := 1
	switch cfg.Scheme {
	case Split:
		if cfg.BlockSize < 1 || cfg.BlockSize > TokensPerID || TokensPerID%cfg.BlockSize != 0 {
			return nil, fmt.Errorf("%w: block size %d must divide %d in the split scheme", ErrConfig, cfg.BlockSize, TokensPerID)
		}
		perID = TokensPerID / cfg.BlockSize
	case PerID:
	default:
		return nil, fmt.Errorf("%w: unknown scheme %d", ErrConfig, cfg.Scheme)
	}
	h, err := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: cfg.BlockSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return &Mapper{hasher: h, scheme: cfg.Scheme, perID: perID, tokens: make([]uint32, cfg.BlockSize)}, nil
}

// BlockSize returns the KV block size in tokens.
func (m *Mapper) BlockSize() int { return m.hasher.BlockSize() }

// BlocksPerID returns how many KV blocks one hash id becomes.
func (m *Mapper) BlocksPerID() int { return m.perID }

// AppendLocals appends the local hash of every block of the prompt whose hash
// ids are ids to dst and returns it: BlocksPerID() hashes per id, in prompt
// order. Ids above 2^32 − 1 are truncated to u32 as upstream does, so id
// 2^32+5 hashes like id 5.
func (m *Mapper) AppendLocals(dst []uint64, ids []uint64) []uint64 {
	for _, id := range ids {
		for i := range m.tokens {
			m.tokens[i] = uint32(id)
		}
		dst = m.hasher.AppendLocal(dst, m.tokens)
		// Every block of an id has the same tokens, hence the same hash.
		for range m.perID - 1 {
			dst = append(dst, dst[len(dst)-1])
		}
	}
	return dst
}
