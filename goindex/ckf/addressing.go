package ckf

import (
	"encoding/binary"
	"fmt"

	"github.com/zeebo/xxh3"
)

// DefaultSeed is upstream Dynamo's default CKF addressing seed.
const DefaultSeed uint64 = 0x5DEECE66D1B54A33

// altDomain separates the alternate-bucket hash from the fingerprint hash.
const altDomain uint64 = 0x9E3779B97F4A7C15

// Layout limits of the packed format (spec §1, §2).
const (
	FormatVersion    = 1
	FingerprintBits  = 16
	SlotsPerBucket   = 4
	MinBuckets       = 2
	MaxBuckets       = 1 << 24
	maxExpectedBlock = (MaxBuckets*16 - 15) / 5 // largest N whose sizing stays ≤ MaxBuckets
)

// Format is the addressing format shared by a producer and every lane of a
// consumer: the seed (which decides fingerprints and alternate buckets) and
// the bucket count (a power of two in [2, 2^24]). Build one with NewFormat;
// it precomputes the alternate-bucket delta of every fingerprint (256 KiB).
// A Format is immutable and safe for concurrent use.
type Format struct {
	seed    uint64
	buckets uint64
	mask    uint64
	delta   *[1 << 16]uint32 // delta[fp] = d(fp) for the bucket count; index 0 unused
	key     uint64           // hash8Key(seed), for ProbeFast
	mask32  uint32           // mask as a uint32 (n ≤ 2^24)
}

// Probe is the address of one canonical hash: its fingerprint and its two
// candidate buckets (A ≠ B, B = A XOR d(FP)).
type Probe struct {
	FP uint16
	A  uint32
	B  uint32
}

// NewFormat returns the format for seed and bucketCount.
func NewFormat(seed, bucketCount uint64) (*Format, error) {
	if bucketCount < MinBuckets || bucketCount > MaxBuckets || bucketCount&(bucketCount-1) != 0 {
		return nil, fmt.Errorf("%w: bucket count %d is not a power of two in [%d, %d]", ErrBadFormat, bucketCount, MinBuckets, MaxBuckets)
	}
	f := &Format{seed: seed, buckets: bucketCount, mask: bucketCount - 1, delta: new([1 << 16]uint32),
		key: hash8Key(seed), mask32: uint32(bucketCount - 1)}
	var buf [2]byte
	for fp := 1; fp < 1<<16; fp++ {
		binary.LittleEndian.PutUint16(buf[:], uint16(fp))
		d := xxh3.HashSeed(buf[:], seed^altDomain) & f.mask
		if d == 0 {
			d = 1
		}
		f.delta[fp] = uint32(d)
	}
	return f, nil
}

// Seed returns the addressing seed.
func (f *Format) Seed() uint64 { return f.seed }

// Buckets returns the bucket count n.
func (f *Format) Buckets() uint64 { return f.buckets }

// Probe returns the fingerprint and candidate buckets of canonical hash h.
func (f *Format) Probe(h uint64) Probe {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], h)
	m := xxh3.HashSeed(buf[:], f.seed)
	fp := uint16(m)
	if fp == 0 {
		fp = 1
	}
	a := uint32((m >> 16) & f.mask)
	return Probe{FP: fp, A: a, B: a ^ f.delta[fp]}
}

// Alt returns the other candidate bucket of fingerprint fp stored in bucket b.
func (f *Format) Alt(b uint32, fp uint16) uint32 { return b ^ f.delta[fp] }

// Delta returns d(fp), the XOR distance between fp's two buckets.
func (f *Format) Delta(fp uint16) uint32 { return f.delta[fp] }

// BucketCount returns the bucket count for expectedBlocks at ≤ 80% design
// load: next_pow2(max(2, ⌊(5N + 15)/16⌋)) (spec §2).
func BucketCount(expectedBlocks uint64) (uint64, error) {
	if expectedBlocks == 0 {
		return 0, fmt.Errorf("%w: expected blocks must be > 0", ErrBadFormat)
	}
	if expectedBlocks > maxExpectedBlock {
		return 0, fmt.Errorf("%w: expected blocks %d need more than %d buckets", ErrBadFormat, expectedBlocks, MaxBuckets)
	}
	want := max(2, (5*expectedBlocks+15)/16)
	n := uint64(1)
	for n < want {
		n <<= 1
	}
	return n, nil
}
