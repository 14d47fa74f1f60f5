package hostindex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/goindex/score"
)

// Config is an Index's JSON config, goindex_open's (include/goindex.h
// documents every key). Every field is optional; ParseConfig starts from
// DefaultConfig.
type Config struct {
	Mode                  string   `json:"mode"`                     // optional; default: "exact"
	Lanes                 int      `json:"lanes"`                    // optional; default: 64 (ckf only)
	ExpectedBlocksPerLane uint64   `json:"expected_blocks_per_lane"` // optional; default: 1048576
	Buckets               uint64   `json:"buckets"`                  // optional; default: 0 (from expected_blocks_per_lane; global only)
	BlockSize             int      `json:"block_size"`               // optional; default: 16
	ClearScope            string   `json:"clear_scope"`              // optional; default: "rank"
	Seed                  uint64   `json:"seed"`                     // optional; default: ckf.DefaultSeed
	MaxKicks              int      `json:"max_kicks"`                // optional; default: 500
	Domain                uint64   `json:"domain"`                   // optional; default: 0 (global only)
	ConsumerInstance      uint64   `json:"consumer_instance"`        // optional; default: 0 (global only)
	DCs                   []uint64 `json:"dcs"`                      // optional; default: none (global: the lanes fed by frames)
	MaxStalenessMs        float64  `json:"max_staleness_ms"`         // optional; default: 5000
	ReplicaCheckMs        float64  `json:"replica_check_ms"`         // optional; default: 100
	Policy                string   `json:"policy"`                   // optional; default: "ttft"
	PrefillTokensPerMs    float64  `json:"prefill_tokens_per_ms"`    // optional; default: 20
	QueueTokensPerMs      float64  `json:"queue_tokens_per_ms"`      // optional; default: 0 (the prefill rate)
	DecodeBlocksPerMs     float64  `json:"decode_blocks_per_ms"`     // optional; default: 50
	DefaultDC             uint64   `json:"default_dc"`               // optional; default: 0 (the first lane or candidate)

	// Clock is the time a global index stamps and ages signals with (not
	// in the JSON: for tests); optional; default: time.Now.
	Clock func() time.Time `json:"-"`
}

// Config ranges from include/goindex.h.
const (
	maxLanes    = 64   // one bit per lane in the ckf and replica lane masks
	maxMaxKicks = 4096 // bounds the worst-case insertion time
	// MaxIntervalMs bounds max_staleness_ms, replica_check_ms and a
	// measured RTT (one day), so that each fits a time.Duration with room
	// to spare.
	MaxIntervalMs = 24 * 3600 * 1000
)

// policies maps the config's policy names to score policies; the ABI
// offers these four (GOINDEX_POLICY_TTFT .. GOINDEX_POLICY_CREDIT).
var policies = map[string]score.Policy{
	"ttft": score.TTFT, "prefix-then-load": score.PrefixThenLoad, "load-only": score.LoadOnly, "credit": score.Credit,
}

// DefaultConfig returns the config of an empty JSON object.
func DefaultConfig() Config {
	return Config{
		Mode:                  "exact",
		Lanes:                 maxLanes,
		ExpectedBlocksPerLane: 1 << 20,
		BlockSize:             16,
		ClearScope:            "rank",
		Seed:                  ckf.DefaultSeed,
		MaxKicks:              500,
		MaxStalenessMs:        5000,
		ReplicaCheckMs:        100,
		Policy:                "ttft",
		PrefillTokensPerMs:    20,
		DecodeBlocksPerMs:     50,
	}
}

// ParseConfig decodes and checks a config. Empty input means every default.
// Unknown keys, trailing data and out-of-range values are ErrConfig.
func ParseConfig(src []byte) (Config, error) {
	cfg := DefaultConfig()
	if len(src) > 0 {
		dec := json.NewDecoder(bytes.NewReader(src))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return Config{}, fmt.Errorf("%w: data after the config object", ErrConfig)
		}
	}
	if err := cfg.Check(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Check validates every field, whatever the mode, so that a config stays
// valid when only its mode changes.
func (c *Config) Check() error {
	switch c.Mode {
	case "exact", "ckf", "global":
	default:
		return fmt.Errorf("%w: mode %q (want exact, ckf or global)", ErrConfig, c.Mode)
	}
	if c.Lanes < 1 || c.Lanes > maxLanes {
		return fmt.Errorf("%w: lanes %d out of range [1, %d]", ErrConfig, c.Lanes, maxLanes)
	}
	if _, err := ckf.BucketCount(c.ExpectedBlocksPerLane); err != nil {
		return fmt.Errorf("%w: expected_blocks_per_lane: %v", ErrConfig, err)
	}
	if c.Buckets != 0 {
		if _, err := ckf.NewFormat(c.Seed, c.Buckets); err != nil {
			return fmt.Errorf("%w: buckets: %v", ErrConfig, err)
		}
	}
	if c.BlockSize < 1 || c.BlockSize > dynamo.MaxBlockSize {
		return fmt.Errorf("%w: block_size %d out of range [1, %d]", ErrConfig, c.BlockSize, dynamo.MaxBlockSize)
	}
	if c.ClearScope != "rank" && c.ClearScope != "worker" {
		return fmt.Errorf("%w: clear_scope %q (want rank or worker)", ErrConfig, c.ClearScope)
	}
	if c.MaxKicks < 1 || c.MaxKicks > maxMaxKicks {
		return fmt.Errorf("%w: max_kicks %d out of range [1, %d]", ErrConfig, c.MaxKicks, maxMaxKicks)
	}
	if len(c.DCs) > replica.MaxLanes {
		return fmt.Errorf("%w: dcs lists %d DCs, at most %d", ErrConfig, len(c.DCs), replica.MaxLanes)
	}
	for i, dc := range c.DCs {
		for j := range i {
			if c.DCs[j] == dc {
				return fmt.Errorf("%w: dcs lists DC %d twice (lanes %d and %d)", ErrConfig, dc, j, i)
			}
		}
	}
	if !(c.MaxStalenessMs > 0 && c.MaxStalenessMs <= MaxIntervalMs) {
		return fmt.Errorf("%w: max_staleness_ms %g out of range (0, %d]", ErrConfig, c.MaxStalenessMs, MaxIntervalMs)
	}
	if !(c.ReplicaCheckMs >= 0 && c.ReplicaCheckMs <= MaxIntervalMs) {
		return fmt.Errorf("%w: replica_check_ms %g out of range [0, %d]", ErrConfig, c.ReplicaCheckMs, MaxIntervalMs)
	}
	if _, ok := policies[c.Policy]; !ok {
		return fmt.Errorf("%w: policy %q (want ttft, prefix-then-load, load-only or credit)", ErrConfig, c.Policy)
	}
	if !(c.PrefillTokensPerMs > 0) || !(c.DecodeBlocksPerMs > 0) || math.IsInf(c.PrefillTokensPerMs, 0) || math.IsInf(c.DecodeBlocksPerMs, 0) {
		return fmt.Errorf("%w: prefill_tokens_per_ms %g and decode_blocks_per_ms %g must be finite and > 0", ErrConfig, c.PrefillTokensPerMs, c.DecodeBlocksPerMs)
	}
	if !(c.QueueTokensPerMs >= 0) || math.IsInf(c.QueueTokensPerMs, 0) {
		return fmt.Errorf("%w: queue_tokens_per_ms %g must be finite and >= 0 (0: the prefill rate)", ErrConfig, c.QueueTokensPerMs)
	}
	return nil
}

// buckets returns the global mode's bucket count: "buckets" when set, else
// the sizing of expected_blocks_per_lane (what `goindex relay` does with
// its expected blocks, so the defaults of both agree).
func (c *Config) buckets() uint64 {
	if c.Buckets != 0 {
		return c.Buckets
	}
	n, _ := ckf.BucketCount(c.ExpectedBlocksPerLane) // Check accepted it
	return n
}

func (c *Config) maxStaleness() time.Duration {
	return time.Duration(c.MaxStalenessMs * float64(time.Millisecond))
}

func (c *Config) replicaCheck() time.Duration {
	return time.Duration(c.ReplicaCheckMs * float64(time.Millisecond))
}
