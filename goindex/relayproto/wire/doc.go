// Package wire is the frame codec of the CKF publication protocol (spec
// ckf-algorithm.md §5.1): it turns the five relayproto messages into
// frames and back, checking every limit before it allocates.
//
// # Wire format
//
// A frame is a 16-byte header (magic "GIRF", wire Version 1, frame type,
// body length, low 32 bits of XXH3-64 of the body) and a msgpack body (see
// body.go for the field layout; a load report's stored-blocks counter is
// an optional 13th field, written only when not 0, so a report without it
// keeps the 12-field layout every older decoder takes). Snapshot words travel in the chunk's
// snapenc encoding, Compact by default. Limits: MaxFrameBytes (8 MiB),
// relayproto.MaxDeltaImages, relayproto.MaxChunkWords and a bucket count of
// at most 2^24, checked before anything is allocated.
//
// # Invariants
//
// Decoders never panic on any input. A frame that decodes re-encodes to
// the same bytes (both snapshot encodings round-trip byte for byte).
// Encoders refuse over-limit input and what the decoder would reject (an
// invalid format, a lease with epoch 0 or a lane ≥ relayproto.MaxLanes, a
// rate that is not a finite number ≥ 0) and then return dst unchanged.
//
// # Errors
//
// Every failure is a *FrameError (ErrMalformed, ErrChecksum, ErrTooLarge,
// ErrVersion, or relayproto.ErrBadFormat) with the byte offset where it was
// found; a failed decode changes nothing but the destination message.
//
// # Concurrency
//
// AppendFrame, Decode and DecodeLoadReport are safe for concurrent use. A
// Decoder reuses its messages and is not: a message it returns is valid
// until its next call.
//
// # Files
//
//   - frame.go: header, limits, checksum, AppendFrame, Decode, Decoder, DecodeLoadReport.
//   - body.go: the msgpack body layout, writer and bounded reader.
//   - errors.go: sentinels and FrameError.
//
// # Tests
//
// The tests prove golden frame bytes (testdata/*.frame) and exact round
// trips; that a load report without the stored-blocks counter is the
// 12-field golden written before the counter, byte for byte, and decodes
// with 0, and that the counter's non-canonical and hostile forms are
// refused; that every bit flip and truncation, a corrupt body and over-limit
// sizes are rejected before allocating; that hostile fields are refused;
// that a Decoder reuses its buffers; fuzz targets that no input panics or
// decodes to something that re-encodes differently; and that this file map
// matches the directory.
package wire
