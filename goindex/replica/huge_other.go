//go:build !linux

package replica

// adviseHugePages does nothing outside linux: there is no portable
// transparent huge page hint.
func adviseHugePages([]uint64) {}
