package hugepage

import "unsafe"

// Size is the transparent huge page size Advise aligns to: 2 MiB on
// linux/amd64 and on most linux/arm64 kernels.
const Size = 2 << 20

// Advise asks the kernel to back the whole huge pages inside s's memory
// with transparent huge pages. Memory outside them (the unaligned head and
// tail) keeps its pages; a slice smaller than two huge pages may contain
// none. Errors are ignored: the advice changes speed, never contents.
func Advise[T any](s []T) {
	if len(s) == 0 {
		return
	}
	var zero T
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	lo, hi := wholePages(start, uintptr(len(s))*unsafe.Sizeof(zero))
	if lo < hi {
		advise(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(s)), lo-start)), hi-lo))
	}
}

// wholePages returns the bounds [lo, hi) of the huge pages that lie wholly
// inside [start, start+n); lo ≥ hi when there is none.
func wholePages(start, n uintptr) (lo, hi uintptr) {
	return (start + Size - 1) &^ (Size - 1), (start + n) &^ (Size - 1)
}
