//go:build !amd64

package ckf

// prefetchLines is a hint only; outside amd64 it does nothing, and
// ApplyBatch applies its events as it does on amd64, without the overlap.
func prefetchLines(addrs []uintptr) {}
