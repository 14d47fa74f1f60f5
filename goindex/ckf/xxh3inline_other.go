//go:build !amd64

package ckf

// vectorProbes is false outside amd64: ProbesFast runs the scalar loop.
const vectorProbes = false

// probes8 is never called outside amd64 (vectorProbes is false).
func probes8(dst *Probe, hashes *uint64, n int, key uint64, mask uint32, delta *[1 << 16]uint32) {
	panic("ckf: probes8 without AVX-512")
}
