package selector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/goindex/goindex/goindex/score"
)

// Candidate input bits (Dynamo's CandidateInput flags, §5a).
const (
	InputIdentity     uint64 = 1 << 0
	InputCachedTokens uint64 = 1 << 1
	InputCacheTiers   uint64 = 1 << 2
	InputLoad         uint64 = 1 << 3
	InputCapacity     uint64 = 1 << 4
	InputRouting      uint64 = 1 << 5
	InputDefaultCost  uint64 = 1 << 6
	InputDefaultKV    uint64 = 1 << 7
	InputDefaultDecod uint64 = 1 << 8
)

// Unavailable is Dynamo's u64::MAX marker for a capacity it does not know.
const Unavailable = ^uint64(0)

// MaxConfigBytes bounds the plugin config.
const MaxConfigBytes = 64 << 10

// ErrBadConfig reports an invalid plugin config.
var ErrBadConfig = errors.New("selector: bad config")

// ErrBadInput reports candidate input the host should not have sent.
var ErrBadInput = errors.New("selector: bad input")

// Config is the plugin's JSON configuration.
type Config struct {
	Policy             string  `json:"policy"`                // optional; default: "ttft"
	PrefillTokensPerMs float64 `json:"prefill_tokens_per_ms"` // optional; default: 20
	QueueTokensPerMs   float64 `json:"queue_tokens_per_ms"`   // optional; default: prefill rate
	DecodeBlocksPerMs  float64 `json:"decode_blocks_per_ms"`  // optional; default: 1
	Credit             float64 `json:"credit"`                // optional; default: 1
}

// ParseConfig parses the config bytes Dynamo passes to create (empty means
// defaults).
func ParseConfig(b []byte) (Config, error) {
	var c Config
	if len(b) > MaxConfigBytes {
		return c, fmt.Errorf("%w: %d bytes over %d", ErrBadConfig, len(b), MaxConfigBytes)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return c, nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if d.More() {
		return c, fmt.Errorf("%w: trailing data after the JSON object", ErrBadConfig)
	}
	return c, nil
}

// Request is the per-request part of Dynamo's input.
type Request struct {
	BlockSize uint32
	ISLTokens uint64
}

// Candidate is one worker of Dynamo's columnar input; Has* mirror the
// columns the host provided.
type Candidate struct {
	WorkerID uint64
	DPRank   uint32

	HasCachedTokens bool
	CachedTokens    uint64 // effective cached tokens

	HasLoad                bool
	ActivePrefillTokens    uint64
	ActiveDecodeBlocks     uint64
	AdditionalActiveBlocks uint64

	HasCapacity   bool
	TotalKVBlocks uint64 // Unavailable when unknown
}

// Decision is Select's answer.
type Decision struct {
	Index      int  // chosen candidate, when !UseDefault
	UseDefault bool // run Dynamo's default selector instead
}

// Selector holds one plugin state's configuration.
type Selector struct {
	cfg    Config
	policy score.Policy
	mu     sync.Mutex
	byBS   map[uint32]*score.Scorer // scorers per block size
	cands  []score.Candidate
}

// New validates cfg and returns a Selector. Role (0 unknown, 1 decode,
// 2 prefill) does not change the cost model: prefill cost dominates both.
func New(cfg Config) (*Selector, error) {
	name := cfg.Policy
	if name == "" {
		name = "ttft"
	}
	p, err := score.ParsePolicy(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if p == score.RoundRobin || p == score.SingleDC {
		return nil, fmt.Errorf("%w: policy %q makes no sense inside one DC", ErrBadConfig, name)
	}
	s := &Selector{cfg: cfg, policy: p, byBS: map[uint32]*score.Scorer{}}
	if _, err := s.scorer(16); err != nil {
		return nil, err
	}
	return s, nil
}

// RequiredInputs returns the candidate columns the policy reads.
func (s *Selector) RequiredInputs() uint64 {
	need := InputIdentity | InputLoad
	if s.policy != score.LoadOnly {
		need |= InputCachedTokens
	}
	if s.policy == score.TTFT {
		need |= InputCapacity
	}
	return need
}

func (s *Selector) scorer(blockSize uint32) (*score.Scorer, error) {
	if sc := s.byBS[blockSize]; sc != nil {
		return sc, nil
	}
	sc, err := score.New(score.Config{
		Policy: s.policy, BlockSize: int(blockSize),
		PrefillTokensPerMs: s.cfg.PrefillTokensPerMs, QueueTokensPerMs: s.cfg.QueueTokensPerMs,
		DecodeBlocksPerMs: s.cfg.DecodeBlocksPerMs, Credit: s.cfg.Credit,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	s.byBS[blockSize] = sc
	return sc, nil
}

// Select picks a candidate. Missing columns the policy needs, or no
// candidates, give UseDefault.
func (s *Selector) Select(req Request, cands []Candidate) (Decision, error) {
	if len(cands) == 0 {
		return Decision{UseDefault: true}, nil
	}
	if req.BlockSize == 0 {
		return Decision{}, fmt.Errorf("%w: block size 0", ErrBadInput)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, err := s.scorer(req.BlockSize)
	if err != nil {
		return Decision{}, err
	}
	need := s.RequiredInputs()
	s.cands = s.cands[:0]
	for _, c := range cands {
		if !c.HasLoad || (need&InputCachedTokens != 0 && !c.HasCachedTokens) {
			return Decision{UseDefault: true}, nil
		}
		cand := score.Candidate{
			ID: c.WorkerID, Rank: c.DPRank,
			CachedBlocks:        int(c.CachedTokens / uint64(req.BlockSize)),
			HasLoad:             true,
			ActivePrefillTokens: c.ActivePrefillTokens,
			ActiveDecodeBlocks:  c.ActiveDecodeBlocks + c.AdditionalActiveBlocks,
			HasRTT:              true, // one DC: the router is next door
		}
		if c.HasCapacity && c.TotalKVBlocks != Unavailable {
			cand.HasCapacity, cand.CapacityBlocks = true, c.TotalKVBlocks
		}
		s.cands = append(s.cands, cand)
	}
	isl := int(min(req.ISLTokens, uint64(1)<<40))
	r, err := sc.Score(score.Request{ISLTokens: isl}, s.cands, nil)
	if errors.Is(err, score.ErrNoCandidate) {
		return Decision{UseDefault: true}, nil
	}
	if err != nil {
		return Decision{}, err
	}
	return Decision{Index: r.Index}, nil
}
