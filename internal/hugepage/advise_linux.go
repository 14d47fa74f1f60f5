package hugepage

import "golang.org/x/sys/unix"

// advise marks mem MADV_HUGEPAGE.
func advise(mem []byte) { _ = unix.Madvise(mem, unix.MADV_HUGEPAGE) }
