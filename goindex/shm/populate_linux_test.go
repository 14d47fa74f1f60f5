package shm

import (
	"errors"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestCreate_BacksEveryPage: Create leaves no page of the new file to be
// faulted in by the consumer's first stores (a cold resync's install path),
// and the words it backed are zero.
func TestCreate_BacksEveryPage(t *testing.T) {
	probe, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	err = unix.Madvise(probe, unix.MADV_POPULATE_WRITE)
	_ = unix.Munmap(probe)
	if errors.Is(err, unix.EINVAL) {
		t.Skipf("kernel without MADV_POPULATE_WRITE (Linux < 5.14): %v", err)
	}
	w := create(t, filepath.Join(t.TempDir(), "replica"), testLayout(13, 1<<14))
	data := w.m.data
	vec := make([]byte, (len(data)+unix.Getpagesize()-1)/unix.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	missing := 0
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d pages of a new %d-byte file are not resident after Create", missing, len(vec), len(data))
	}
	for i, word := range w.m.rows() {
		if word != 0 {
			t.Fatalf("row word %d = %#x after Create, want 0", i, word)
		}
	}
}
