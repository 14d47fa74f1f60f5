// Package snapenc encodes a snapshot chunk's bucket words for the wire
// (spec ckf-algorithm.md §8 open problem 2): Dense, every word as LE u64
// (upstream CBI1), and Compact, the default, a 4-bit occupancy mask per
// bucket plus the non-zero 16-bit fingerprints, (0.5 + 8α) bytes per
// bucket against 8.
//
// # Invariants
//
// Both encodings round-trip every word byte for byte, and a payload that
// decodes re-encodes to exactly the same bytes: Check and Decode reject
// every byte string that no word sequence encodes to. Check looks only at
// the payload's size and masks, so a decoder runs it before allocating the
// words; MaxSize bounds a payload before it is read. Nothing panics on any
// payload that passed Check.
//
// # Errors
//
// Check and Decode return an error naming what is wrong; the frame decoder
// (goindex/relayproto/wire) reports it as a malformed frame. Functions are
// pure and safe for concurrent use.
//
// # Files
//
//   - encoding.go: Encoding, its sizes and the dispatch to the codecs.
//   - codec.go: the dense and the branch-free compact codecs.
//
// # Tests
//
// The tests prove exact round trips of both encodings at every load, the
// compact size formula, that non-canonical payloads are rejected, that the
// branch-free fast paths match slow references, and (fuzz) that an accepted
// payload re-encodes to the same bytes.
package snapenc
