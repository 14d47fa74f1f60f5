package hugepage

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/goindex/goindex/internal/doccheck"
)

func TestDoc_FileMapMatchesDirectory(t *testing.T) { doccheck.FileMap(t, ".") }

func TestWholePages_AreInsideAndAligned(t *testing.T) {
	for _, c := range []struct{ start, n, lo, hi uintptr }{
		{0, 2 * Size, 0, 2 * Size},
		{1, 2 * Size, Size, 2 * Size},
		{Size - 8, Size + 8, Size, 2 * Size},
		{Size - 8, Size + 7, Size, Size}, // ends short of the next boundary: none
		{3*Size + 4096, 5 * Size, 4 * Size, 8 * Size},
		{4096, 4096, Size, 0},
	} {
		lo, hi := wholePages(c.start, c.n)
		if lo != c.lo || hi != c.hi {
			t.Errorf("wholePages(%#x, %#x) = [%#x, %#x), want [%#x, %#x)", c.start, c.n, lo, hi, c.lo, c.hi)
		}
		if lo < hi && (lo < c.start || hi > c.start+c.n || lo%Size != 0 || hi%Size != 0) {
			t.Errorf("wholePages(%#x, %#x) = [%#x, %#x): not whole pages inside the range", c.start, c.n, lo, hi)
		}
	}
}

// TestAdvise_MarksTheMappingOnLinux checks, where the kernel has
// transparent huge pages, that the memory of an advised slice lies in a
// mapping whose VmFlags carry "hg" (MADV_HUGEPAGE), and that Advise leaves
// the contents alone.
func TestAdvise_MarksTheMappingOnLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge page advice is linux-only")
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skipf("kernel without transparent huge pages: %v", err)
	}
	s := make([]uint32, 3*Size/4) // 3 huge pages of bytes: at least two whole ones
	for i := range s {
		s[i] = uint32(i)
	}
	Advise(s)
	for i := range s {
		if s[i] != uint32(i) {
			t.Fatalf("s[%d] = %d after Advise, want %d", i, s[i], i)
		}
	}
	lo, _ := wholePages(uintptr(unsafe.Pointer(&s[0])), uintptr(len(s))*4)
	flags := vmFlags(t, lo)
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("mapping of %#x has VmFlags %q, want hg (MADV_HUGEPAGE)", lo, flags)
	}
	runtime.KeepAlive(s)
}

// vmFlags returns the VmFlags line of the mapping of /proc/self/smaps that
// holds addr (each mapping opens with a "from-to perms …" line).
func vmFlags(t *testing.T, addr uintptr) string {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	inside := false
	for _, line := range strings.Split(string(smaps), "\n") {
		var from, to uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &from, &to); n == 2 {
			inside = from <= addr && addr < to
		} else if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && inside {
			return strings.TrimSpace(flags)
		}
	}
	t.Fatalf("no mapping of /proc/self/smaps holds %#x", addr)
	return ""
}
