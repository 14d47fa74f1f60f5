// Package hugepage hints the kernel to back large, randomly accessed Go
// slices with transparent huge pages (2 MiB on linux/amd64). A table that
// is read or written at random across tens of megabytes misses the TLB on
// nearly every access with 4 KiB pages and waits for a page walk on top
// of the cache miss; with 2 MiB pages it needs 512× fewer TLB entries.
//
// Advise is only a hint: where huge pages are off, unsupported, or not on
// linux, nothing changes. It helps most when it runs before the memory is
// first touched (a fresh large allocation), since the kernel then faults
// whole huge pages in; memory already backed by small pages is left to the
// kernel's background collapsing. It imports nothing of ours.
//
// # Files
//
//   - hugepage.go: Advise and the whole-page span of a slice.
//   - advise_linux.go: the madvise(MADV_HUGEPAGE) call.
//   - advise_other.go: nothing, elsewhere.
package hugepage
