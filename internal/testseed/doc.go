// Package testseed gives a randomized test its seed the way STYLE.md's
// tests want it: fixed by the test, overridden by the environment variable
// GOINDEX_SEED, and logged when the test fails so that the run can be
// replayed. The packages of goindex/, ffi/ and bridge/ (through
// relaytest.Seed) share it instead of each keeping a copy; it imports
// nothing of ours.
//
// A package whose tests answer to a variable of their own (CKF_SEED,
// RADIX_SEED, …) keeps its helper: this one reads only
// GOINDEX_SEED.
//
// # Files
//
//   - testseed.go: For, Rand.
package testseed
