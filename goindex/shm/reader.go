package shm

import (
	"fmt"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/replica"
)

// Reader is a read-only mapping of a replica file, for the router library:
// search its Table with a replica.Searcher, read lane metadata, and check
// Stale now and then. All its methods are safe for concurrent use, except
// Close, which must wait until no search uses the Table.
type Reader struct {
	m      *mapping
	shared bool // Writer.Reader: the writer owns the mapping
}

// Attach maps the replica file at path read-only after checking its magic,
// version, checksum and sizes. A file that is not a replica file is
// ErrForeign; one of another layout version is ErrVersion; a damaged or
// truncated one is ErrCorrupt; each comes as a *FieldError naming the field.
func Attach(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("shm: attach: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: attach: %w", err)
	}
	m, err := mapFile(path, f, st.Size(), syscall.PROT_READ)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Reader{m: m}, nil
}

// Table returns the replica table over the mapping. It is read-only: only
// Ready, Word, AppendLane, Probe and searches may be used (a store faults).
func (r *Reader) Table() *replica.Table { return r.m.table }

// Format returns the file's addressing format, for replica.NewSearcher.
func (r *Reader) Format() *ckf.Format { return r.m.format }

// Info returns the file's header.
func (r *Reader) Info() Info { return r.m.info() }

// Ready returns the ready-lane mask (the replica's ready word); 0 if the
// read faulted.
func (r *Reader) Ready() (m uint64) {
	if !r.m.memory {
		defer r.m.guard(debug.SetPanicOnFault(true), nil)
	}
	return r.m.table.Ready()
}

// Lane returns lane l's metadata; the zero LaneInfo (nothing known) if the
// read faulted. It panics if l is out of range.
func (r *Reader) Lane(l int) (info LaneInfo) {
	w := r.m.lane(l)
	if !r.m.memory {
		defer r.m.guard(debug.SetPanicOnFault(true), nil)
	}
	return loadLane(w)
}

// WriterHeartbeat returns the last time the writer called Touch (zero if
// never, or if the read faulted).
func (r *Reader) WriterHeartbeat() time.Time { return r.m.heartbeat() }

// Stale reports whether a newer generation replaced this mapping's file:
// the writer marked it retired, or the path now names another file (a writer
// that crashed before marking). Attach again to follow it.
func (r *Reader) Stale() (bool, error) {
	if r.m.memory {
		return false, nil
	}
	if r.m.retired() {
		return true, nil
	}
	var st syscall.Stat_t
	if err := syscall.Stat(r.m.path, &st); err != nil {
		return false, fmt.Errorf("shm: stat %s: %w", r.m.path, err)
	}
	return st.Ino != r.m.inode, nil
}

// Check re-validates the mapping before a window of accesses: the file is
// still as long as its header says and its header unchanged. An error
// (ErrCorrupt as a *FieldError, ErrFault, or the stat's) means the file was
// damaged in place: stop reading it and Attach the path again. An
// in-memory reader always passes.
func (r *Reader) Check() error { return r.m.check(false) }

// Close unmaps the file. A reader from Writer.Reader has nothing to close.
func (r *Reader) Close() error {
	if r.shared {
		return nil
	}
	return r.m.close()
}
