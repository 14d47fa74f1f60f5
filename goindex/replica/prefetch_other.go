//go:build !amd64

package replica

// prefetchLines is touchLines where there is no prefetch helper.
func prefetchLines(rows []uint64, offsets []uint32) { touchLines(rows, offsets) }
