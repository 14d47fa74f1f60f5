package ckf

import "errors"

// ErrBadFormat reports an invalid addressing format or sizing request.
var ErrBadFormat = errors.New("ckf: bad format")

// Producer errors. Each is returned wrapped with the member and block it
// concerns; test with errors.Is.
var (
	// ErrBadConfig reports an invalid producer Config.
	ErrBadConfig = errors.New("ckf: bad config")
	// ErrBadEvent reports an event whose shape is invalid (kv.Event.Validate
	// failed); it is rejected before admission and changes nothing.
	ErrBadEvent = errors.New("ckf: bad event")
	// ErrParentBlockNotFound reports a Stored event whose parent is not in
	// the member's lineage; the whole event changes nothing.
	ErrParentBlockNotFound = errors.New("ckf: parent block not found")
	// ErrInvalidBlockSequence reports a Stored event that would remap a
	// source block to a different canonical hash, or that has a non-zero
	// start position without a parent; the whole event changes nothing.
	ErrInvalidBlockSequence = errors.New("ckf: invalid block sequence")
	// ErrOwnershipDegreeOverflow reports a Stored event that would push a
	// canonical's owner count past 2^32−1; the whole event changes nothing.
	ErrOwnershipDegreeOverflow = errors.New("ckf: ownership degree overflow")
	// ErrCapacityExhausted reports that at least one block of a Stored event
	// was tracked exactly but not admitted to the filter (a pre-commit
	// physical omission, spec §4.7): its lineage and owner count are
	// committed, the filter bytes are unchanged, and nothing is fenced.
	ErrCapacityExhausted = errors.New("ckf: capacity exhausted")
	// ErrInvariantViolation reports that a final-owner removal found no copy
	// of the canonical's fingerprint in its buckets. The block's state is
	// restored and the producer is fenced: it needs a generation rebuild.
	ErrInvariantViolation = errors.New("ckf: indexer invariant violation")
	// ErrFenced reports a mutation of a fenced producer; it changes nothing.
	ErrFenced = errors.New("ckf: producer fenced")
)
