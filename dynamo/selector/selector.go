package selector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"time"

	"github.com/goindex/goindex/goindex/score"
)

// Candidate input bits (Dynamo's CandidateInputs / WorkerInputs flags; the
// fork d18d569's CandidateSignalGroups are bits 0–5 of the same set).
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

// maxStalenessMs bounds max_staleness_ms (one day), so it fits a
// time.Duration with room to spare.
const maxStalenessMs = 24 * 3600 * 1000

// maxScorers bounds the scorers a Selector caches, one per block size
// seen: a host that varied the block size per request would otherwise grow
// the cache without bound. Past it, Select builds a scorer per call.
const maxScorers = 8

// Config is the plugin's JSON configuration.
type Config struct {
	Policy             string  `json:"policy"`                // optional; default: "ttft"
	PrefillTokensPerMs float64 `json:"prefill_tokens_per_ms"` // optional; default: 20
	QueueTokensPerMs   float64 `json:"queue_tokens_per_ms"`   // optional; default: prefill rate
	DecodeBlocksPerMs  float64 `json:"decode_blocks_per_ms"`  // optional; default: 1
	Credit             float64 `json:"credit"`                // optional; default: 1
	// Replica is the absolute path of `goindex consume`'s replica file;
	// with it the rates come from this DC's load report there and a
	// missing or stale replica makes Select answer UseDefault.
	Replica string `json:"replica"` // optional; default: "" (the rates above)
	// DC is this router's DC id in the replica (relay --dc).
	DC *uint64 `json:"dc"` // required with replica
	// MaxStalenessMs is the oldest load report of DC the replica may hold.
	MaxStalenessMs float64 `json:"max_staleness_ms"` // optional; default: 5000
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
	return c, c.validate()
}

// Staleness returns MaxStalenessMs in milliseconds with its default.
func (c *Config) Staleness() float64 {
	if c.MaxStalenessMs == 0 {
		return 5000
	}
	return c.MaxStalenessMs
}

func (c *Config) validate() error {
	switch {
	case c.Replica != "" && !filepath.IsAbs(c.Replica):
		return fmt.Errorf("%w: replica %q is not an absolute path", ErrBadConfig, c.Replica)
	case c.Replica != "" && c.DC == nil:
		return fmt.Errorf("%w: replica needs dc, this router's DC id in it", ErrBadConfig)
	case c.Replica == "" && c.DC != nil:
		return fmt.Errorf("%w: dc is only read with replica", ErrBadConfig)
	case math.IsNaN(c.MaxStalenessMs) || c.MaxStalenessMs < 0 || c.MaxStalenessMs > maxStalenessMs:
		return fmt.Errorf("%w: max_staleness_ms %v out of [0, %d]", ErrBadConfig, c.MaxStalenessMs, maxStalenessMs)
	}
	return nil
}

// Request is the per-request part of Dynamo's input.
type Request struct {
	BlockSize uint32
	ISLTokens uint64
}

// Candidate is one worker of Dynamo's input; Has* mirror the signals the
// host provided (the row layout provides all of them).
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

// DCRates is the throughput goindex's relay measured for this DC, as its
// last load report in the replica gives it.
type DCRates struct {
	PrefillTokensPerMs float64 // one request's prefill on one worker; 0 unmeasured
	QueueTokensPerMs   float64 // the whole DC's queue drain; 0 unmeasured
	DecodeBlocksPerMs  float64 // the whole DC's decode block release; 0 unmeasured
	LiveWorkers        uint64  // workers the relay heard from lately
}

// Source gives this DC's rates for one selection. An error (the replica is
// missing, or its DC lane not ready or stale) makes Select answer
// UseDefault with it as the reason.
type Source interface {
	DCRates() (DCRates, error)
}

// Decision is Select's answer.
type Decision struct {
	Index      int   // chosen candidate, when !UseDefault
	UseDefault bool  // run Dynamo's default selector instead
	Why        error // why UseDefault (ErrUseDefault or a Source's error)
}

// Selector holds one plugin state's configuration.
type Selector struct {
	cfg    Config
	policy score.Policy
	src    Source
	owned  *Replica // the Source Open made, closed by Close
	mu     sync.Mutex
	byBS   map[uint32]*score.Scorer // scorers per block size, at most maxScorers
	cands  []score.Candidate
}

// New validates cfg and returns a Selector; src (nil without a replica)
// supplies the DC's measured rates. Role (0 unknown, 1 decode, 2 prefill)
// does not change the cost model: prefill cost dominates both.
func New(cfg Config, src Source) (*Selector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Replica != "" && src == nil {
		return nil, fmt.Errorf("%w: replica %s has no source", ErrBadConfig, cfg.Replica)
	}
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
	s := &Selector{cfg: cfg, policy: p, src: src, byBS: map[uint32]*score.Scorer{}}
	if _, err := s.scorer(16); err != nil {
		return nil, err
	}
	return s, nil
}

// Open is New with the Source cfg names: a Replica following cfg.Replica
// for DC *cfg.DC with cfg's staleness, or none. Close releases it.
func Open(cfg Config) (*Selector, error) {
	if cfg.Replica == "" {
		return New(cfg, nil)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := NewReplica(cfg.Replica, *cfg.DC, time.Duration(cfg.Staleness()*float64(time.Millisecond)), nil)
	s, err := New(cfg, r)
	if err != nil {
		r.Close()
		return nil, err
	}
	s.owned = r
	return s, nil
}

// Close releases the Replica Open made; a Selector of New has nothing to
// release. A closed Selector's replica is unusable.
func (s *Selector) Close() {
	if s.owned != nil {
		s.owned.Close()
	}
}

// RequiredInputs returns the candidate columns the policy reads. They are
// all within bits 0–5, which every columnar host accepts.
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
	if len(s.byBS) < maxScorers {
		s.byBS[blockSize] = sc
	}
	return sc, nil
}

// useDefault is a UseDefault decision for a reason it formats.
func useDefault(format string, args ...any) Decision {
	return Decision{UseDefault: true, Why: fmt.Errorf("%w: "+format, append([]any{ErrUseDefault}, args...)...)}
}

// Select picks a candidate. No candidates, a signal the policy needs that
// the host did not provide, or an unavailable Source give UseDefault.
func (s *Selector) Select(req Request, cands []Candidate) (Decision, error) {
	if len(cands) == 0 {
		return useDefault("no candidates"), nil
	}
	if req.BlockSize == 0 {
		return Decision{}, fmt.Errorf("%w: block size 0", ErrBadInput)
	}
	var rates DCRates
	if s.src != nil {
		r, err := s.src.DCRates()
		if err != nil {
			return Decision{UseDefault: true, Why: err}, nil
		}
		rates = r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, err := s.scorer(req.BlockSize)
	if err != nil {
		return Decision{}, err
	}
	s.cands = s.cands[:0]
	for i := range cands {
		c, why := s.candidate(&cands[i], req.BlockSize, rates)
		if why != "" {
			return useDefault("candidate %d has %s", i, why), nil
		}
		s.cands = append(s.cands, c)
	}
	r, err := sc.Score(score.Request{ISLTokens: isl(req)}, s.cands, nil)
	if errors.Is(err, score.ErrNoCandidate) {
		return useDefault("no candidate is eligible under policy %s", s.policy), nil
	}
	if err != nil {
		return Decision{}, err
	}
	return Decision{Index: r.Index}, nil
}

// Costs writes each candidate's cost under the policy into dst (ms for
// ttft; blocks for the others), NaN for a candidate missing a signal the
// policy needs. A failing Source does not stop it: the config's rates are
// used and degraded says why. dst must hold len(cands) entries.
func (s *Selector) Costs(req Request, cands []Candidate, dst []float64) (degraded, err error) {
	if req.BlockSize == 0 {
		return nil, fmt.Errorf("%w: block size 0", ErrBadInput)
	}
	if len(dst) < len(cands) {
		return nil, fmt.Errorf("%w: %d costs for %d candidates", ErrBadInput, len(dst), len(cands))
	}
	var rates DCRates
	if s.src != nil {
		if rates, degraded = s.src.DCRates(); degraded != nil {
			rates = DCRates{}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, err := s.scorer(req.BlockSize)
	if err != nil {
		return degraded, err
	}
	for i := range cands {
		dst[i] = math.NaN()
		if c, why := s.candidate(&cands[i], req.BlockSize, rates); why == "" {
			if v, ok := sc.Cost(score.Request{ISLTokens: isl(req)}, c); ok {
				dst[i] = v
			}
		}
	}
	return degraded, nil
}

// isl is the request's prompt length for the scorer, capped far above any
// real prompt so it fits an int.
func isl(req Request) int { return int(min(req.ISLTokens, uint64(1)<<40)) }

// candidate turns c into the scorer's candidate with the DC's rates, or
// names the signal it lacks that the policy needs.
func (s *Selector) candidate(c *Candidate, blockSize uint32, rates DCRates) (score.Candidate, string) {
	switch {
	case !c.HasLoad:
		return score.Candidate{}, "no load"
	case s.RequiredInputs()&InputCachedTokens != 0 && !c.HasCachedTokens:
		return score.Candidate{}, "no cached tokens"
	}
	cand := score.Candidate{
		ID: c.WorkerID, Rank: c.DPRank,
		CachedBlocks:        int(c.CachedTokens / uint64(blockSize)),
		HasLoad:             true,
		ActivePrefillTokens: c.ActivePrefillTokens,
		ActiveDecodeBlocks:  c.ActiveDecodeBlocks + c.AdditionalActiveBlocks,
		HasRTT:              true, // one DC: the router is next door
		PrefillTokensPerMs:  rates.PrefillTokensPerMs,
	}
	if w := float64(rates.LiveWorkers); w > 0 {
		// The DC-wide rates, shared by its live workers.
		cand.QueueTokensPerMs, cand.DecodeBlocksPerMs = rates.QueueTokensPerMs/w, rates.DecodeBlocksPerMs/w
	}
	if c.HasCapacity && c.TotalKVBlocks != Unavailable {
		cand.HasCapacity, cand.CapacityBlocks = true, c.TotalKVBlocks
	}
	return cand, ""
}
