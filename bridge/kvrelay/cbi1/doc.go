// Package cbi1 is the codec of CBI1 ("Cuckoo Bucket Images v1"), the
// payload of Dynamo's Pool Relay gRPC contract (FilterUpdate.payload of
// dynamo.kvrelay.v1): absolute CKF bucket words with the filter's format
// repeated, so a decoder rejects drift before it applies a word.
//
// # Layout (all integers little-endian)
//
// A 48-byte header, then a body:
//
//	 0  [4]  magic "CBI1"
//	 4  u16  wire version (1)
//	 6  u16  flags: 1 snapshot chunk, 2 delta
//	 8  u8   fingerprint bits (16)
//	 9  u8   slots per bucket (4)
//	10  u16  format version (1)
//	12  u64  seed
//	20  u64  bucket count (a power of two in [2, 2^24])
//	28  u64  dc id
//	36  u64  epoch (the frame's sequence)
//	44  u32  body checksum: the low 32 bits of unseeded XXH3-64 of the body
//
// A snapshot chunk's body is chunk index u32, chunk count u32, bucket offset
// u64, then its bucket words (u64 each, at most MaxChunkWords). A delta's
// body is base epoch u64, image count u32, then per image the bucket u32
// and its absolute word u64 (at most MaxDeltaImages). No frame exceeds
// MaxFrameBytes. An Assembly takes the chunks of one snapshot in order,
// contiguous from bucket 0 to the bucket count, all of one epoch.
//
// Decode checks every field before it allocates, and every length against
// the named limits: nothing a peer sends can make it panic or allocate
// more than the frame's own size. A failed decode returns a *FormatError
// wrapping ErrMalformed or ErrChecksum and leaves nothing behind.
//
// Non-goals: sequencing and identity live in the enclosing FilterUpdate;
// the dc id and format here are only checked against it by the caller.
//
// Files:
//   - cbi1.go: the header, AppendSnapshotChunk, AppendDelta, Decode,
//     Assembly.
//   - errors.go: ErrMalformed, ErrChecksum, FormatError.
//
// The tests decode and re-encode fixtures written by an independent Python
// encoder (testdata/gen_fixtures.py, from the protocol README, with
// python3-xxhash for the checksum) byte for byte, run the encoder against
// Decode on random frames, reject every malformed variant of a valid frame,
// assemble snapshots, and run the fuzz target's seed corpus.
package cbi1
