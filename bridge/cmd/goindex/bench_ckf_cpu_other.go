//go:build !linux

package main

import "time"

// threadCPU reports no thread CPU time outside linux; bench ckf then
// leaves its CPU-time ingest rates out.
func threadCPU() time.Duration { return 0 }
