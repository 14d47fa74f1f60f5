//go:build !linux

package ckf

import "time"

// threadCPU reports no thread CPU time outside linux; BenchmarkIngest then
// reports no CPU-time rate.
func threadCPU() time.Duration { return 0 }
