package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// The kernel's transparent huge page policies, as sysfs shows them: every
// choice listed, the one in force in brackets.
const (
	thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"
	thpShmem   = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
)

// cpuModel returns /proc/cpuinfo's first "model name", or "".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// hugePagePolicy returns the bracketed choice of a sysfs policy file, or "".
func hugePagePolicy(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	_, rest, ok := bytes.Cut(b, []byte("["))
	if !ok {
		return ""
	}
	v, _, _ := bytes.Cut(rest, []byte("]"))
	return string(v)
}

// threadCPU returns the CPU time the calling OS thread has used (user +
// system), or 0 if the kernel does not report it. The caller locks its
// goroutine to the thread around the interval it measures.
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU returns the CPU time the whole process has used (user +
// system, every thread), or 0 if the kernel does not report it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hugeBacked returns how many bytes of words the kernel backs with
// transparent huge pages: the AnonHugePages of the mappings (smaps) that
// overlap words, each counted at most for its overlap. It is an estimate
// where a mapping holds more than words, and -1 when smaps is unreadable.
func hugeBacked(words []uint64) int64 {
	if len(words) == 0 {
		return 0
	}
	lo := uint64(uintptr(unsafe.Pointer(&words[0])))
	hi := lo + uint64(len(words))*8
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return -1
	}
	defer f.Close()
	var total int64
	var overlap uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if start, end, ok := mappingRange(line); ok {
			overlap = 0
			if s, e := max(start, lo), min(end, hi); s < e {
				overlap = e - s
			}
			continue
		}
		if overlap == 0 || !strings.HasPrefix(line, "AnonHugePages:") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(line, "AnonHugePages:")), " kB"), 10, 64)
		if err == nil {
			total += int64(min(kb<<10, overlap))
		}
	}
	return total
}

// mappingRange parses an smaps header line "start-end perms …".
func mappingRange(line string) (start, end uint64, ok bool) {
	r, _, found := strings.Cut(line, " ")
	a, b, dash := strings.Cut(r, "-")
	if !found || !dash {
		return 0, 0, false
	}
	start, err1 := strconv.ParseUint(a, 16, 64)
	end, err2 := strconv.ParseUint(b, 16, 64)
	return start, end, err1 == nil && err2 == nil
}

// hugePageBytes is the transparent huge page size on linux/amd64.
const hugePageBytes = 2 << 20

// mapWords returns n zeroed words at a 2 MiB boundary in an anonymous
// mapping of their own, which the kernel is told to back with transparent
// huge pages (MADV_HUGEPAGE, huge) or never to (MADV_NOHUGEPAGE): the two
// sides of the huge-pages comparison, each accountable in smaps. free
// releases the mapping.
func mapWords(n int, huge bool) (words []uint64, free func(), err error) {
	mem, err := syscall.Mmap(-1, 0, n*8+hugePageBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, fmt.Errorf("map %d words: %w", n, err)
	}
	skip := (hugePageBytes - int(uintptr(unsafe.Pointer(&mem[0])))%hugePageBytes) % hugePageBytes
	advice := syscall.MADV_NOHUGEPAGE
	if huge {
		advice = syscall.MADV_HUGEPAGE
	}
	// A kernel without THP refuses the advice; the pages are small then,
	// which hugeBacked reports.
	_ = syscall.Madvise(mem[skip:skip+n*8], advice)
	return unsafe.Slice((*uint64)(unsafe.Pointer(&mem[skip])), n), func() { syscall.Munmap(mem) }, nil
}

// availableBytes returns /proc/meminfo's MemAvailable, or 0 if unknown.
func availableBytes() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
