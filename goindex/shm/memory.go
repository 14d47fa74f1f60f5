package shm

import (
	"time"
	"unsafe"

	"github.com/goindex/goindex/goindex/replica"
)

// NewMemory builds the image of a replica file for l in this process's
// memory instead of a file: the same header, lane records and bucket region,
// for a consumer whose readers live in the same process (a library handle
// fed relay frames). Its generation is 0 and its path empty; Writer.Reader
// gives readers over it. The image lives on the Go heap, so Close only marks
// the writer closed and the memory stays valid while anything refers to it.
func NewMemory(l Layout) (*Writer, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	words, _ := replica.RegionWords(l.replicaConfig())
	size := headerBytes(len(l.DCs)) + words*8
	// The bucket region must start on a RegionAlignBytes boundary; the
	// header is a whole number of them, so aligning the image is enough.
	buf := make([]uint64, (size+RegionAlignBytes)/8)
	skip := (RegionAlignBytes - int(uintptr(unsafe.Pointer(&buf[0]))%RegionAlignBytes)) % RegionAlignBytes / 8
	data := unsafe.Slice((*byte)(unsafe.Pointer(&buf[skip])), size)
	writeHeader(data, &l, 0, time.Now())
	m, err := newMapping("", nil, data, int64(size))
	if err != nil {
		return nil, err
	}
	return &Writer{m: m}, nil
}

// Reader returns a reader over w's image: searches and lane reads see what
// w writes. It shares w's mapping, so its Close does nothing; it stays
// valid while w is open (for an image from NewMemory, while it is
// referenced).
func (w *Writer) Reader() *Reader { return &Reader{m: w.m, shared: true} }
