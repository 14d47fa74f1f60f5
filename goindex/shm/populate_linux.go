package shm

import "golang.org/x/sys/unix"

// populate asks the kernel to back every page of a new file's mapping at
// once (madvise MADV_POPULATE_WRITE, Linux 5.14+): one system call in place
// of a page fault on each 4 KiB page at its first store, which a cold
// resync would otherwise take on its install path (one fault per page per
// file: a 16-lane, 2^22-bucket table is 131,072 faults). The words stay
// zero. It is a hint: on an older kernel, or where the pages cannot all be
// had now (a full /dev/shm), the stores fault the pages in as before and
// the writer's fault guard handles a page that cannot be backed.
func populate(data []byte) {
	if len(data) > 0 {
		_ = unix.Madvise(data, unix.MADV_POPULATE_WRITE)
	}
}
