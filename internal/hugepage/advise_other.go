//go:build !linux

package hugepage

// advise does nothing outside linux: there is no portable huge page hint.
func advise([]byte) {}
