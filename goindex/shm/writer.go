package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/replica"
)

// Writer is the consumer's read-write mapping of a replica file. Its table's
// lanes follow the replica's rule (one writer per lane). A lane record has
// three groups of words, each with one writer: SetState (the lane's
// ingestor), SetRTT and SetLoad. Touch may be called from anywhere. Close
// must not run concurrently with other calls.
type Writer struct {
	m *mapping
}

// Create writes a new replica file for l at path and maps it read-write:
// the file is written beside path under a temporary name and renamed into
// place, so a reader never sees a partial header. Its generation is one
// more than the replica file it replaces (1 if there was none); that file is
// then marked retired, which tells its readers to Attach again. Create
// refuses to replace a file that is not a valid replica file (ErrForeign,
// ErrVersion, ErrCorrupt): delete it by hand. Every word of the new region
// is zero: no lane is ready.
func Create(path string, l Layout) (*Writer, error) {
	if err := l.validate(); err != nil {
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	prev, err := openPrevious(path)
	if err != nil {
		return nil, err
	}
	generation := uint64(1)
	if prev != nil {
		generation = prev.hdr.generation + 1
		defer prev.close()
	}
	words, _ := replica.RegionWords(l.replicaConfig())
	size := int64(headerBytes(len(l.DCs))) + int64(words)*8

	tmp := path + ".tmp." + strconv.FormatUint(generation, 10) + "." + strconv.Itoa(os.Getpid())
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	fail := func(err error) (*Writer, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		return fail(fmt.Errorf("shm: size %s to %d bytes: %w", tmp, size, err))
	}
	hdr := make([]byte, headerBytes(len(l.DCs)))
	writeHeader(hdr, &l, generation, time.Now())
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return fail(fmt.Errorf("shm: write header of %s: %w", tmp, err))
	}
	m, err := mapFile(path, f, size, syscall.PROT_READ|syscall.PROT_WRITE)
	if err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		m.unmap()
		return fail(fmt.Errorf("shm: rename %s into place: %w", tmp, err))
	}
	if prev != nil {
		atomic.StoreUint64(&prev.words[offState/8], stateRetired)
	}
	return &Writer{m: m}, nil
}

// openPrevious maps the replica file at path read-write so Create can retire
// it, or returns nil when there is none.
func openPrevious(path string) (*mapping, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("shm: open existing %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: stat existing %s: %w", path, err)
	}
	m, err := mapFile(path, f, st.Size(), syscall.PROT_READ|syscall.PROT_WRITE)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: refusing to replace %s: %w", path, err)
	}
	return m, nil
}

// Resize replaces the file with a new generation of layout l (say, a new
// bucket count or lane set) and closes w; readers see w's file retired and
// Attach the new one. On error w stays open and unchanged.
func (w *Writer) Resize(l Layout) (*Writer, error) {
	switch {
	case w.m.closed:
		return nil, ErrClosed
	case w.m.memory:
		return nil, fmt.Errorf("%w: an in-memory image has no path to replace", ErrBadLayout)
	}
	nw, err := Create(w.m.path, l)
	if err != nil {
		return nil, err
	}
	w.Close()
	return nw, nil
}

// Table returns the replica table over the file's bucket region.
func (w *Writer) Table() *replica.Table { return w.m.table }

// Format returns the file's addressing format.
func (w *Writer) Format() *ckf.Format { return w.m.format }

// Info returns the file's header.
func (w *Writer) Info() Info { return w.m.info() }

// Lane returns lane l's metadata as stored. It panics if l is out of range.
func (w *Writer) Lane(l int) LaneInfo { return loadLane(w.m.lane(l)) }

// SetState stores the protocol words of lane l's record, one atomic store
// per field. It belongs to the lane's ingestor. It panics if l is out of
// range.
func (w *Writer) SetState(l int, s *LaneState) { storeState(w.m.lane(l), s) }

// SetRTT stores lane l's last round trip and when it was measured. It
// belongs to the lane's RTT prober. It panics if l is out of range.
func (w *Writer) SetRTT(l int, rtt time.Duration, at time.Time) { storeRTT(w.m.lane(l), rtt, at) }

// SetLoad stores lane l's last load report. It belongs to the lane's load
// receiver. It panics if l is out of range.
func (w *Writer) SetLoad(l int, load *Load) { storeLoad(w.m.lane(l), load) }

// Touch records now as the writer's heartbeat, so readers can tell a live
// consumer from one that died with the file in place.
func (w *Writer) Touch(now time.Time) {
	atomic.StoreUint64(&w.m.words[offHeartbeat/8], unixNano(now))
}

// Close unmaps the file; the file stays for its readers.
func (w *Writer) Close() error { return w.m.close() }
