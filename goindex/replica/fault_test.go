package replica

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/goindex/goindex/goindex/ckf"
)

// A table in a shared file that another process truncates faults on the
// next row read (SIGBUS). With debug.SetPanicOnFault the fault must become
// a recoverable panic in both row kernels, the assembly ones included
// (goindex/shm's fault guard relies on it), and never kill the process.
func TestSearch_FaultOfATruncatedMappingIsRecoverableInEveryKernel(t *testing.T) {
	const lanes, buckets = 16, 1 << 14
	cfg := Config{Lanes: lanes, Buckets: buckets}
	words, err := RegionWords(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ckf.NewFormat(ckf.DefaultSeed, buckets)
	if err != nil {
		t.Fatal(err)
	}
	q := make([]uint64, 64)
	for i := range q {
		q[i] = uint64(i)*0x9E3779B97F4A7C15 + 7
	}
	for name, k := range map[string]rowKernels{"native": nativeKernels(), "go": goKernels} {
		path := filepath.Join(t.TempDir(), "table")
		file, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		size := words * 8
		if err := file.Truncate(int64(size)); err != nil {
			t.Fatal(err)
		}
		data, err := syscall.Mmap(int(file.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		file.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Munmap(data)
		tab, err := NewInRegion(unsafe.Slice((*uint64)(unsafe.Pointer(&data[0])), words), cfg)
		if err != nil {
			t.Fatal(err)
		}
		for l := range lanes {
			tab.SetReady(l)
		}
		s, err := NewSearcher(tab, f, SearchConfig{})
		if err != nil {
			t.Fatal(err)
		}
		s.kern = k
		// Keep the header line's page; the rows beyond it go.
		if err := os.Truncate(path, 4096); err != nil {
			t.Fatal(err)
		}
		p, stack := func() (p any, stack string) {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				p = recover()
				stack = string(debug.Stack())
			}()
			s.SearchLocals(nil, q, ^uint64(0))
			return nil, ""
		}()
		re, ok := p.(runtime.Error)
		addr, hasAddr := p.(interface{ Addr() uintptr })
		lo := uintptr(unsafe.Pointer(&data[0]))
		if !ok || !hasAddr || addr.Addr() < lo+4096 || addr.Addr() >= lo+uintptr(size) {
			t.Errorf("%s kernels: search of a truncated mapping recovered %v (%T), want a runtime.Error fault at an address past the first page", name, p, p)
			continue
		}
		if name == "native" && hasAVX512() && !strings.Contains(stack, "testRowsAVX512") {
			t.Errorf("native kernels: the fault %v did not come from the assembly row test:\n%s", re, stack)
		}
	}
}
