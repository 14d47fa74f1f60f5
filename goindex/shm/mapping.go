package shm

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/replica"
)

// mapping is one mapped replica file: its header, the whole file as words,
// the lane records and the replica table over the bucket region.
type mapping struct {
	path   string
	file   *os.File
	data   []byte
	words  []uint64
	hdr    header
	format *ckf.Format
	table  *replica.Table
	inode  uint64
	memory bool // an image in Go memory (NewMemory): nothing to unmap or close
	closed bool
	lo, hi uintptr // the mapped address range, for telling its faults from others
	// faulted is the first access that faulted: the file was truncated.
	faulted atomic.Pointer[error]
}

// mapFile checks the header of f (size bytes), read with pread so that a
// file truncated meanwhile is an error rather than a fault, then maps it
// with prot.
func mapFile(path string, f *os.File, size int64, prot int) (*mapping, error) {
	if size < FixedHeaderBytes {
		return nil, &FieldError{Path: path, Field: "size", Reason: fmt.Sprintf("%d bytes, a header needs %d", size, FixedHeaderBytes), Err: ErrForeign}
	}
	if size > int64(int(^uint(0)>>1)) {
		return nil, &FieldError{Path: path, Field: "size", Reason: fmt.Sprintf("%d bytes do not fit the address space", size), Err: ErrCorrupt}
	}
	head := make([]byte, min(size, int64(headerBytes(MaxLanes))))
	n, err := f.ReadAt(head, 0)
	if _, err := parseHeader(path, head[:n], size); err != nil {
		return nil, err
	}
	if err != nil && n < len(head) {
		return nil, fmt.Errorf("shm: read header of %s: %w", path, err)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), prot, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: map %s: %w", path, err)
	}
	m, err := newMapping(path, f, data, size)
	if err != nil {
		_ = syscall.Munmap(data)
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		m.unmap()
		return nil, fmt.Errorf("shm: stat %s: %w", path, err)
	}
	m.inode = st.Ino
	return m, nil
}

// newMapping checks the header of the image data (size bytes: a file
// mapping, or memory when f is nil) and builds the table over its region.
func newMapping(path string, f *os.File, data []byte, size int64) (m *mapping, err error) {
	m = &mapping{path: path, file: f, data: data, memory: f == nil,
		lo: uintptr(unsafe.Pointer(unsafe.SliceData(data))), hi: uintptr(unsafe.Pointer(unsafe.SliceData(data))) + uintptr(len(data))}
	if !m.memory {
		// The file may have shrunk since its header was read.
		defer m.guard(debug.SetPanicOnFault(true), &err)
	}
	if m.hdr, err = parseHeader(path, data, size); err != nil {
		return nil, err
	}
	m.words = unsafe.Slice((*uint64)(unsafe.Pointer(&data[0])), len(data)/8)
	if m.format, err = ckf.NewFormat(m.hdr.seed, m.hdr.buckets); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	region := m.words[m.hdr.headerBytes/8 : (uint64(m.hdr.headerBytes)+m.hdr.regionBytes)/8]
	if m.table, err = replica.NewInRegion(region, replica.Config{Lanes: m.hdr.lanes, Buckets: m.hdr.buckets}); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	return m, nil
}

func (m *mapping) unmap() {
	if m.data != nil && !m.memory {
		_ = syscall.Munmap(m.data)
		m.data, m.words, m.table = nil, nil, nil
	}
}

func (m *mapping) close() error {
	if m.closed {
		return ErrClosed
	}
	m.closed = true
	if m.memory {
		return nil
	}
	m.unmap()
	return m.file.Close()
}

func (m *mapping) lane(l int) []uint64 {
	if l < 0 || l >= m.hdr.lanes {
		panic(fmt.Sprintf("shm: lane %d out of range [0, %d)", l, m.hdr.lanes))
	}
	off := (FixedHeaderBytes + l*LaneMetaBytes) / 8
	return m.words[off : off+LaneMetaBytes/8]
}

// retire marks the file retired: its readers follow the path to the new
// generation. A file truncated meanwhile is past retiring.
func (m *mapping) retire() {
	defer m.guard(debug.SetPanicOnFault(true), nil)
	atomic.StoreUint64(&m.words[offState/8], stateRetired)
}

// retired reports whether the writer marked the file retired (false if
// the read faulted).
func (m *mapping) retired() (r bool) {
	if !m.memory {
		defer m.guard(debug.SetPanicOnFault(true), nil)
	}
	return atomic.LoadUint64(&m.words[offState/8]) == stateRetired
}

// heartbeat returns the writer's heartbeat (zero if the read faulted).
func (m *mapping) heartbeat() (t time.Time) {
	if !m.memory {
		defer m.guard(debug.SetPanicOnFault(true), nil)
	}
	return fromUnixNano(atomic.LoadUint64(&m.words[offHeartbeat/8]))
}

// Info describes a replica file's immutable header.
type Info struct {
	Path             string
	Generation       uint64 // layout generation: +1 on every Create at the path
	Seed             uint64
	Buckets          uint64
	Domain           uint64
	ConsumerInstance uint64
	Created          time.Time
	DCs              []uint64 // DC id per lane
	HeaderBytes      int      // offset of the bucket region
	RegionBytes      uint64   // size of the bucket region (replica.RegionWords × 8)
}

func (m *mapping) info() Info {
	h := &m.hdr
	return Info{Path: m.path, Generation: h.generation, Seed: h.seed, Buckets: h.buckets, Domain: h.domain,
		ConsumerInstance: h.consumer, Created: h.created, DCs: append([]uint64(nil), h.dcs...),
		HeaderBytes: h.headerBytes, RegionBytes: h.regionBytes}
}

// check re-validates a file mapping: the file is not shorter than its
// header says (exact: not another size at all), and its immutable header
// still hashes to the checksum it had when mapped. It returns nil for an
// in-memory image.
func (m *mapping) check(exact bool) (err error) {
	if m.memory {
		return nil
	}
	if m.closed {
		return ErrClosed
	}
	if err := m.faultErr(); err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(m.file.Fd()), &st); err != nil {
		return fmt.Errorf("shm: stat %s: %w", m.path, err)
	}
	want := int64(m.hdr.headerBytes) + int64(m.hdr.regionBytes)
	if st.Size < want || exact && st.Size != want {
		return &FieldError{Path: m.path, Field: "size", Reason: fmt.Sprintf("%d bytes, the header says %d", st.Size, want), Err: ErrCorrupt}
	}
	defer m.guard(debug.SetPanicOnFault(true), &err)
	if got := checksum(m.data, m.hdr.lanes); got != m.hdr.checksum || binary.LittleEndian.Uint64(m.data[offChecksum:]) != m.hdr.checksum {
		return &FieldError{Path: m.path, Field: "checksum", Offset: offChecksum, Reason: "the header changed after it was mapped", Err: ErrCorrupt}
	}
	return nil
}
