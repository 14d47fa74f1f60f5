package relayproto

import (
	"fmt"

	"github.com/goindex/goindex/goindex/ckf"
)

// MaxLanes is the most lanes a consumer (and its Manifest) may have: the
// replica's ready mask is one u64 (spec §6 [EXT]: D ≤ 64).
const MaxLanes = 64

// DomainID names an indexer domain: the namespace inside which block hashes
// are comparable (model, KV block size, hash format, salting) and routing
// scope. A consumer serves exactly one domain.
type DomainID uint64

// DCID is a data center's stable id.
type DCID uint64

// PoolID is one (domain, DC) pair. Each pool has exactly one producer and one
// publication stream; two live producers of one pool are fenced, never merged.
type PoolID struct {
	Domain DomainID
	DC     DCID
}

// String formats p for logs.
func (p PoolID) String() string { return fmt.Sprintf("pool(domain %d, dc %d)", p.Domain, p.DC) }

// Format is the CKF layout a producer publishes and every lane of a consumer
// shares (spec §1): format_version 1, the addressing seed, a power-of-two
// bucket count in [2, 2^24], 16-bit fingerprints and 4 slots per bucket. It
// is immutable for a producer generation; there is no online resize.
type Format struct {
	Version         uint16
	Seed            uint64
	Buckets         uint64
	FingerprintBits uint8
	SlotsPerBucket  uint8
}

// NewFormat returns the version-1 format for seed and bucket count n, or
// ErrBadFormat when n is not a power of two in [2, 2^24].
func NewFormat(seed, n uint64) (Format, error) {
	f := Format{Version: ckf.FormatVersion, Seed: seed, Buckets: n, FingerprintBits: ckf.FingerprintBits, SlotsPerBucket: ckf.SlotsPerBucket}
	return f, f.Validate()
}

// FormatOf returns the wire format of a ckf addressing format.
func FormatOf(f *ckf.Format) Format {
	return Format{Version: ckf.FormatVersion, Seed: f.Seed(), Buckets: f.Buckets(), FingerprintBits: ckf.FingerprintBits, SlotsPerBucket: ckf.SlotsPerBucket}
}

// Validate reports ErrBadFormat unless f is a version-1 packed format.
func (f Format) Validate() error {
	switch {
	case f.Version != ckf.FormatVersion:
		return fmt.Errorf("%w: format_version %d, want %d", ErrBadFormat, f.Version, ckf.FormatVersion)
	case f.FingerprintBits != ckf.FingerprintBits:
		return fmt.Errorf("%w: %d-bit fingerprints, want %d", ErrBadFormat, f.FingerprintBits, ckf.FingerprintBits)
	case f.SlotsPerBucket != ckf.SlotsPerBucket:
		return fmt.Errorf("%w: %d slots per bucket, want %d", ErrBadFormat, f.SlotsPerBucket, ckf.SlotsPerBucket)
	case f.Buckets < ckf.MinBuckets || f.Buckets > ckf.MaxBuckets || f.Buckets&(f.Buckets-1) != 0:
		return fmt.Errorf("%w: bucket count %d is not a power of two in [%d, %d]", ErrBadFormat, f.Buckets, ckf.MinBuckets, ckf.MaxBuckets)
	}
	return nil
}

// ProducerIdentity names one producer generation of a pool (spec §1). The
// incarnation changes on every relay start; the layout generation changes
// when the exact state is rebuilt from nothing or the format changes. Any
// change forces a new snapshot on every lane.
type ProducerIdentity struct {
	Pool             PoolID
	Incarnation      uint64
	LayoutGeneration uint64
	Format           Format
}

// Lease binds one producer stream to one consumer lane (spec §1). The
// consumer issues it; epochs strictly increase per (consumer instance, lane),
// including across retirements, and start at 1: the zero Lease (epoch 0)
// means "no lease", which is what fan-out messages carry on the wire.
type Lease struct {
	ConsumerInstance uint64
	Lane             uint8
	Epoch            uint64
}

// IsZero reports whether l is the zero Lease, i.e. no lease.
func (l Lease) IsZero() bool { return l == Lease{} }

// String formats l for logs.
func (l Lease) String() string {
	return fmt.Sprintf("lease(consumer %d, lane %d, epoch %d)", l.ConsumerInstance, l.Lane, l.Epoch)
}

// Manifest is a consumer's immutable lane plan (spec §1): its instance id,
// the one domain and format it serves, and the pool that owns each physical
// lane (Lanes[i] owns lane i). Valid manifests have 1..MaxLanes lanes, no
// duplicate owner, and every owner in Domain.
type Manifest struct {
	ConsumerInstance uint64
	Domain           DomainID
	Format           Format
	Lanes            []PoolID
}

// Validate reports why m breaks a rule (wrapping ErrBadFormat when its
// format does), or nil.
func (m *Manifest) Validate() error {
	if err := m.Format.Validate(); err != nil {
		return fmt.Errorf("%w: %w", errBadManifest, err)
	}
	if len(m.Lanes) == 0 || len(m.Lanes) > MaxLanes {
		return fmt.Errorf("%w: %d lanes, want 1..%d", errBadManifest, len(m.Lanes), MaxLanes)
	}
	seen := make(map[PoolID]int, len(m.Lanes))
	for i, p := range m.Lanes {
		if p.Domain != m.Domain {
			return fmt.Errorf("%w: lane %d owner %v is outside domain %d", errBadManifest, i, p, m.Domain)
		}
		if j, dup := seen[p]; dup {
			return fmt.Errorf("%w: lanes %d and %d are both owned by %v", errBadManifest, j, i, p)
		}
		seen[p] = i
	}
	return nil
}
