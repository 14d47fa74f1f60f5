// Package idtable is the id table both of libgoindex.so's ABIs keep their
// objects in: ffi's index handles and ffi/wsplugin's worker-selector
// states. An id is a number the host holds instead of a Go pointer (which
// must never reach it); ids count up from 1 and are never reused, so a
// stale or forged id only misses, and a lookup takes no lock.
//
// # Files
//
//   - table.go: Table, its lock-free Get and its Add and Remove.
package idtable
