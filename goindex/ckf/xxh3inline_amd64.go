package ckf

import "golang.org/x/sys/cpu"

// vectorProbes says ProbesFast runs probes8: the CPU has AVX512F,
// AVX512DQ (for VPMULLQ), AVX2 and BMI2 and the OS saves the vector state,
// which x/sys/cpu checks.
var vectorProbes = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX2 && cpu.X86.HasBMI2

// probes8 sets dst[0:n] to the probes of hashes[0:n], 0 < n ≤ 8, as
// probeOf(hash8Keyed(h, key)) with the bucket mask and delta table of a
// Format: the 8 hashes in one ZMM register (VPROLQ, VPTERNLOGQ, VPMULLQ
// for XXH3's rrmxmx steps), the fingerprints' deltas by one gather, and
// the 12-byte probes interleaved by two VPERMI2D and written by masked
// stores, so nothing beyond dst[n-1] or hashes[n-1] is read or written.
// TestFormat_ProbesFastEqualsScalar holds it equal to probesScalar.
//
//go:noescape
func probes8(dst *Probe, hashes *uint64, n int, key uint64, mask uint32, delta *[1 << 16]uint32)
