// Package bucketgen makes random packed CKF bucket words (4 slots of 16-bit
// fingerprints, 0 meaning empty) for the relay protocol's tests and
// benchmarks. It imports nothing of ours, so the snapshot encoding's own
// tests can use it.
//
// # Files
//
//   - bucketgen.go: Word, AtLoad.
package bucketgen
