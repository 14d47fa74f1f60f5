package shm

import (
	"fmt"
	"os"
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
}

// mapFile maps f (size bytes) with prot and checks its header.
func mapFile(path string, f *os.File, size int64, prot int) (*mapping, error) {
	if size < FixedHeaderBytes {
		return nil, &FieldError{Path: path, Field: "size", Reason: fmt.Sprintf("%d bytes, a header needs %d", size, FixedHeaderBytes), Err: ErrForeign}
	}
	if size > int64(int(^uint(0)>>1)) {
		return nil, &FieldError{Path: path, Field: "size", Reason: fmt.Sprintf("%d bytes do not fit the address space", size), Err: ErrCorrupt}
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
func newMapping(path string, f *os.File, data []byte, size int64) (*mapping, error) {
	m := &mapping{path: path, file: f, data: data, memory: f == nil}
	var err error
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

func (m *mapping) retired() bool { return atomic.LoadUint64(&m.words[offState/8]) == stateRetired }

func (m *mapping) heartbeat() time.Time {
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
