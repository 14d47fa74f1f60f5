package trace

import (
	"fmt"
	"math"
	"math/bits"
)

// Transform limits: they keep a mistyped factor from asking for terabytes.
const (
	// MaxStretch bounds the length-stretch factor.
	MaxStretch = 1 << 10
	// MaxDuplicate bounds the duplication factor.
	MaxDuplicate = 1 << 16
)

// Stretch returns reqs with every prompt made f times longer, as upstream's
// mooncake_bench does: id h becomes the run h·f, h·f+1, …, h·f+f−1, so
// sharing between requests keeps its shape at f times the depth.
// InputLength is scaled by f too. f = 1 returns reqs unchanged. reqs is not
// modified; on error nothing is returned.
func Stretch(reqs []Request, f int) ([]Request, error) {
	if f < 1 || f > MaxStretch {
		return nil, fmt.Errorf("%w: stretch factor %d not in [1, %d]", ErrConfig, f, MaxStretch)
	}
	if f == 1 {
		return reqs, nil
	}
	uf := uint64(f)
	if MaxID(reqs) > (math.MaxUint64-(uf-1))/uf {
		return nil, fmt.Errorf("%w: stretch by %d of id %d", ErrIDOverflow, f, MaxID(reqs))
	}
	out := make([]Request, len(reqs))
	for i, r := range reqs {
		ids := make([]uint64, 0, len(r.HashIDs)*f)
		for _, h := range r.HashIDs {
			for k := uint64(0); k < uf; k++ {
				ids = append(ids, h*uf+k)
			}
		}
		r.HashIDs = ids
		r.InputLength = int(min(int64(r.InputLength)*int64(f), maxLength))
		out[i] = r
	}
	return out, nil
}

// Duplicate returns reqs with every request followed by d−1 copies, as
// upstream's mooncake_bench does to reach larger scales: copy k (0 ≤ k < d)
// adds (MaxID(reqs)+1)·k to every id, so copy 0 is the original and copies
// never share a block with each other while each keeps the original's
// sharing structure. Copies keep the original's timestamp and lengths and
// come right after it: r0c0, r0c1, …, r1c0, …. d = 1 returns reqs
// unchanged. reqs is not modified; on error nothing is returned.
func Duplicate(reqs []Request, d int) ([]Request, error) {
	if d < 1 || d > MaxDuplicate {
		return nil, fmt.Errorf("%w: duplication factor %d not in [1, %d]", ErrConfig, d, MaxDuplicate)
	}
	if d == 1 {
		return reqs, nil
	}
	maxID := MaxID(reqs)
	span := maxID + 1
	hi, lo := bits.Mul64(span, uint64(d-1))
	if span == 0 || hi != 0 || lo > math.MaxUint64-maxID {
		return nil, fmt.Errorf("%w: duplicate by %d with max id %d", ErrIDOverflow, d, maxID)
	}
	out := make([]Request, 0, len(reqs)*d)
	for _, r := range reqs {
		for k := range uint64(d) {
			c := r
			c.HashIDs = make([]uint64, len(r.HashIDs))
			for j, h := range r.HashIDs {
				c.HashIDs[j] = h + span*k
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// MaxID returns the largest hash id in reqs, or 0 when there is none.
func MaxID(reqs []Request) uint64 {
	var m uint64
	for _, r := range reqs {
		for _, h := range r.HashIDs {
			m = max(m, h)
		}
	}
	return m
}

// Partition assigns requests to workers uniformly at random from a seed,
// replacing upstream's StdRng partition (default seed 42), whose exact
// assignment cannot be reproduced outside Rust: the same seed gives a
// different, but equally uniform, assignment here.
//
// The assignment is a pure function of (seed, request index), so a trace can
// be partitioned while streaming, in any order, and the same index always
// lands on the same worker:
//
//	x      = splitmix64(seed + (index+1)·0x9E3779B97F4A7C15)
//	worker = ⌊x · Workers / 2^64⌋    (the high word of the 128-bit product)
//
// splitmix64 is Steele, Lea and Flood's finalizer (the one Java's
// SplittableRandom uses); the multiply-shift maps it onto [0, Workers) with a
// bias below Workers/2^64.
type Partition struct {
	workers uint64
	seed    uint64
}

// NewPartition returns a Partition over workers ≥ 1 workers.
func NewPartition(workers int, seed uint64) (Partition, error) {
	if workers < 1 {
		return Partition{}, fmt.Errorf("%w: %d workers, want at least 1", ErrConfig, workers)
	}
	return Partition{workers: uint64(workers), seed: seed}, nil
}

// Workers returns the number of workers.
func (p Partition) Workers() int { return int(p.workers) }

// Worker returns the worker, in [0, Workers()), of the request at index.
func (p Partition) Worker(index uint64) int {
	hi, _ := bits.Mul64(splitmix64(p.seed+(index+1)*golden64), p.workers)
	return int(hi)
}

// golden64 is 2^64/φ, splitmix64's increment.
const golden64 = 0x9E3779B97F4A7C15

func splitmix64(x uint64) uint64 {
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}
