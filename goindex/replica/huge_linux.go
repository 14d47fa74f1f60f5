package replica

import (
	"syscall"
	"unsafe"
)

// hugePageBytes is the transparent huge page size on linux/amd64 and most
// linux/arm64 kernels.
const hugePageBytes = 2 << 20

// adviseHugePages asks the kernel to back the whole 2 MiB pages inside
// words with transparent huge pages (madvise MADV_HUGEPAGE). A search
// touches rows at random across the table, so with 4 KiB pages nearly
// every line it reads also misses the TLB and waits for a page walk; with
// 2 MiB pages a 64 MiB table needs 32 TLB entries instead of 16,384. It is
// a hint: where the kernel has huge pages off, or refuses, nothing changes,
// so its error is ignored.
func adviseHugePages(words []uint64) {
	if len(words) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(&words[0]))
	end := start + uintptr(len(words))*8
	lo := (start + hugePageBytes - 1) &^ (hugePageBytes - 1)
	hi := end &^ (hugePageBytes - 1)
	if hi <= lo {
		return
	}
	// start is 8-byte aligned, so lo is a whole number of words in.
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[(lo-start)/8])), hi-lo)
	_ = syscall.Madvise(mem, syscall.MADV_HUGEPAGE)
}
