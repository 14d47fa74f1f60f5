//go:build !linux

package bench

import (
	"errors"
	"time"
)

const (
	thpEnabled = ""
	thpShmem   = ""
)

// cpuModel is unknown outside linux.
func cpuModel() string { return "" }

// hugePagePolicy is unknown outside linux.
func hugePagePolicy(string) string { return "" }

// threadCPU reports no thread CPU time outside linux; the CKF benchmark
// then leaves its CPU-time ingest rates out.
func threadCPU() time.Duration { return 0 }

// processCPU reports no process CPU time outside linux.
func processCPU() time.Duration { return 0 }

// hugeBacked is unknown (-1) outside linux.
func hugeBacked([]uint64) int64 { return -1 }

// mapWords returns n zeroed words on the Go heap for huge (the kernel's
// default pages) and refuses !huge: outside linux there is no portable way
// to ask for either page size.
func mapWords(n int, huge bool) ([]uint64, func(), error) {
	if !huge {
		return nil, nil, errors.New("bench: small-page mappings need linux")
	}
	return make([]uint64, n), func() {}, nil
}

// availableBytes is unknown (0) outside linux.
func availableBytes() uint64 { return 0 }
