package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/replica"
)

// Limits of CKF's cells.
const (
	MaxCKFCells  = 16
	MaxCKFBlocks = 1 << 26 // ckf.BucketCount's ceiling is 2^24 buckets
	// AutoRadix as CKFConfig.RadixMaxBlocks builds the radix indexes of a
	// cell when the machine's available memory holds them.
	AutoRadix = -1
)

// CKFConfig configures CKF: the CKF replica against our exact radix index
// and per-lane filters on identical data, one cell per (lanes, blocks per
// lane).
type CKFConfig struct {
	// TracePath is the Mooncake JSONL trace the universe is copied from.
	TracePath string
	// Lanes lists the lane counts, each in [1, 64].
	Lanes []int
	// Blocks lists the blocks per lane, each in [1, MaxCKFBlocks]; a cell
	// runs for every (blocks, lanes) pair, at most MaxCKFCells.
	Blocks []int
	// RadixMaxBlocks skips the radix indexes of a cell above lanes ×
	// blocks member blocks; AutoRadix builds them when the available
	// memory holds them (about 40 bytes of heap per member block each).
	RadixMaxBlocks int
	// SkipChurnedRadix leaves out the churned-heap radix index (the same
	// content with its nodes at random ids). optional; default: built
	SkipChurnedRadix bool
	// SkipSmallPages leaves out the copy of the replica table on 4 KiB
	// pages timed next to the huge-page one. optional; default: timed
	SkipSmallPages bool
	// BlockSize is the KV block size in tokens, a divisor of
	// trace.TokensPerID. optional; default: trace.DefaultBlockSize
	BlockSize int
	// Queries is the number of timed queries per structure and cell, in
	// [1, MaxQueries].
	Queries int
	// Seed seeds the lanes' walks and the queries.
	Seed uint64
	// Sequential times each structure in its own pass over all queries
	// instead of query by query in turn. optional; default: interleaved
	Sequential bool
	// Progress receives a line a second during long phases. optional
	Progress io.Writer
}

func (c *CKFConfig) validate() error {
	c.BlockSize = cmp.Or(c.BlockSize, trace.DefaultBlockSize)
	for _, d := range c.Lanes {
		if d < 1 || d > replica.MaxLanes {
			return fmt.Errorf("%w: %d lanes, want 1..%d", ErrConfig, d, replica.MaxLanes)
		}
	}
	for _, n := range c.Blocks {
		if n < 1 || n > MaxCKFBlocks {
			return fmt.Errorf("%w: %d blocks per lane, want 1..%d", ErrConfig, n, MaxCKFBlocks)
		}
	}
	switch cells := len(c.Lanes) * len(c.Blocks); {
	case cells == 0 || cells > MaxCKFCells:
		return fmt.Errorf("%w: %d cells, want 1..%d", ErrConfig, cells, MaxCKFCells)
	case c.Queries < 1 || c.Queries > MaxQueries:
		return fmt.Errorf("%w: queries %d, want 1..%d", ErrConfig, c.Queries, MaxQueries)
	case c.BlockSize < 1 || trace.TokensPerID%c.BlockSize != 0:
		return fmt.Errorf("%w: block size %d does not divide %d", ErrConfig, c.BlockSize, trace.TokensPerID)
	case c.RadixMaxBlocks < AutoRadix:
		return fmt.Errorf("%w: radix max blocks %d", ErrConfig, c.RadixMaxBlocks)
	}
	return nil
}

// CKF runs every cell: it fills each lane from the trace's universe,
// feeds the same events to every structure, times the structures on the
// same queries (interleaved unless Sequential) and checks every answer
// against the engines' caches. A run whose answers fail their checks still
// returns its report, which Check then fails.
func CKF(ctx context.Context, cfg CKFConfig) (*CKFReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	reqs, err := readTrace(cfg.TracePath)
	if err != nil {
		return nil, err
	}
	rep := &CKFReport{Benchmark: "ckf", Trace: cfg.TracePath, Requests: len(reqs), BlockSize: cfg.BlockSize, Seed: cfg.Seed,
		Interleaved: !cfg.Sequential, Machine: ReadMachine()}
	u := newUniverse(reqs, cfg.BlockSize)
	for _, n := range cfg.Blocks {
		for _, d := range cfg.Lanes {
			cell, err := runCKFCell(ctx, u, &cfg, d, n)
			if err != nil {
				return nil, fmt.Errorf("bench ckf: lanes=%d blocks=%d: %w", d, n, err)
			}
			rep.Cells = append(rep.Cells, *cell)
		}
	}
	return rep, nil
}
