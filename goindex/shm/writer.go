package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
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
	m        *mapping
	replaced error    // why the file Create replaced was unusable
	seal     *sealing // the lanes' integrity sums; nil for an in-memory image
	// ready is the ready mask as the lanes' writers set it (Lanes), which
	// RepairReady restores when the file's copy was damaged.
	ready atomic.Uint64
}

// Create writes a new replica file for l at path and maps it read-write:
// the file is written beside path under a temporary name and renamed into
// place, so a reader never sees a partial header, and a live file is never
// truncated or shrunk (its readers keep their mapping of it). Its
// generation is one more than the replica file it replaces (1 if there was
// none); that file is then marked retired, which tells its readers to
// Attach again. The path belongs to the consumer: a file there that is not
// a valid replica (truncated, corrupt, foreign, another version) is
// replaced as well, its generation continued when its header still names
// one, and Replaced says what it was; only a directory or another
// non-regular file is refused. Every word of the new region is zero: no
// lane is ready.
func Create(path string, l Layout) (*Writer, error) { return createAfter(path, l, 0) }

// createAfter is Create whose generation is also above after (the generation of
// the file a rebuild replaces, which a damaged file may no longer name).
func createAfter(path string, l Layout, after uint64) (*Writer, error) {
	if err := l.validate(); err != nil {
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	prev, generation, damage, err := previous(path)
	if err != nil {
		return nil, err
	}
	if prev != nil {
		defer prev.close()
	}
	generation = max(generation, after) + 1
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
	populate(m.data)
	if err := os.Rename(tmp, path); err != nil {
		m.unmap()
		return fail(fmt.Errorf("shm: rename %s into place: %w", tmp, err))
	}
	if prev != nil {
		prev.retire()
	}
	return &Writer{m: m, replaced: damage, seal: newSealing(len(l.DCs), l.Buckets)}, nil
}

// previous looks at the file Create replaces: it maps a valid replica file
// read-write (to retire it) and returns its generation; for a file that is
// not one it returns the generation its header still names (0 unless its
// magic and version are intact) and why it is unusable. Only a path that cannot be looked at, or names a
// directory or another non-regular file, is an error.
func previous(path string) (prev *mapping, generation uint64, damage, err error) {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, nil, nil
	case err != nil:
		return nil, 0, nil, fmt.Errorf("shm: look at existing %s: %w", path, err)
	case !st.Mode().IsRegular() && st.Mode()&fs.ModeSymlink == 0:
		return nil, 0, nil, fmt.Errorf("shm: refusing to replace %s: a %v, not a replica file", path, st.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("shm: open existing %s: %w", path, err)
	}
	if fst, err := f.Stat(); err == nil {
		if m, err := mapFile(path, f, fst.Size(), syscall.PROT_READ|syscall.PROT_WRITE); err == nil {
			return m, m.hdr.generation, nil, nil
		} else {
			damage = err
		}
	} else {
		damage = err
	}
	var head [offGeneration + 8]byte
	if n, _ := f.ReadAt(head[:], 0); n == len(head) && string(head[offMagic:offMagic+len(magic)]) == magic &&
		binary.LittleEndian.Uint32(head[offVersion:]) == LayoutVersion {
		generation = binary.LittleEndian.Uint64(head[offGeneration:])
	}
	f.Close()
	return nil, generation, damage, nil
}

// RepairReady compares the file's ready mask with the one the lanes'
// writers set through Lanes and, when bytes written behind the writer's
// back changed it, writes the right one back (unless a lane's writer
// changed it meanwhile: the next call will). It returns the lanes whose bit
// was wrong (bits past the last lane are cleared and not returned). The segment sums do not cover the mask (it is no lane's
// word); this does, for the writer. An in-memory image always passes.
func (w *Writer) RepairReady() (wrong uint64) {
	if w.m.memory {
		return 0
	}
	defer w.m.guard(debug.SetPanicOnFault(true), nil)
	word := &w.m.words[w.m.hdr.headerBytes/8] // the region's ready word
	want, got := w.ready.Load(), atomic.LoadUint64(word)
	if want == got || !atomic.CompareAndSwapUint64(word, got, want) {
		return 0
	}
	// Junk may have set bits past the last lane too: cleared, not named.
	return (want ^ got) & (^uint64(0) >> (64 - w.m.hdr.lanes))
}

// Replaced returns why the file Create replaced was not a valid replica
// file (nil when there was none, or a valid one), for the consumer's log.
func (w *Writer) Replaced() error { return w.replaced }

// Resize replaces the file with a new generation of layout l (say, a new
// bucket count or lane set, or the same layout to rebuild a damaged file)
// and closes w; readers see w's file retired (or another file at the path)
// and Attach the new one. The new generation is above w's even when the
// path no longer names w's file. On error w stays open and unchanged.
func (w *Writer) Resize(l Layout) (*Writer, error) {
	switch {
	case w.m.closed:
		return nil, ErrClosed
	case w.m.memory:
		return nil, fmt.Errorf("%w: an in-memory image has no path to replace", ErrBadLayout)
	}
	nw, err := createAfter(w.m.path, l, w.m.hdr.generation)
	if err != nil {
		return nil, err
	}
	w.Close()
	return nw, nil
}

// Table returns the lanes of the file's bucket region as their writers use
// them (ingest.LaneTable), each write guarded against a fault of the
// mapping.
func (w *Writer) Table() *Lanes { return &Lanes{w: w, t: w.m.table} }

// Format returns the file's addressing format.
func (w *Writer) Format() *ckf.Format { return w.m.format }

// Info returns the file's header.
func (w *Writer) Info() Info { return w.m.info() }

// Lane returns lane l's metadata as stored (the zero LaneInfo if the read
// faulted). It panics if l is out of range.
func (w *Writer) Lane(l int) (info LaneInfo) {
	rec := w.m.lane(l)
	if !w.m.memory {
		defer w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	return loadLane(rec)
}

// SetState stores the protocol words of lane l's record, one atomic store
// per field. It belongs to the lane's ingestor. It panics if l is out of
// range.
func (w *Writer) SetState(l int, s *LaneState) {
	if !w.m.memory {
		defer w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	storeState(w.m.lane(l), s)
}

// SetRTT stores lane l's last round trip and when it was measured. It
// belongs to the lane's RTT prober. It panics if l is out of range.
func (w *Writer) SetRTT(l int, rtt time.Duration, at time.Time) {
	if !w.m.memory {
		defer w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	storeRTT(w.m.lane(l), rtt, at)
}

// SetLoad stores lane l's last load report. It belongs to the lane's load
// receiver. It panics if l is out of range.
func (w *Writer) SetLoad(l int, load *Load) {
	if !w.m.memory {
		defer w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	storeLoad(w.m.lane(l), load)
}

// Touch records now as the writer's heartbeat, so readers can tell a live
// consumer from one that died with the file in place.
func (w *Writer) Touch(now time.Time) {
	if !w.m.memory {
		defer w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	atomic.StoreUint64(&w.m.words[offHeartbeat/8], unixNano(now))
}

// Check tells whether the file is still the one w publishes: its path names
// it (else ErrReplaced), it has exactly the size its header says and an
// unchanged header (else ErrCorrupt), and no write faulted (ErrFault). On
// an error the consumer rebuilds the file (Create). An in-memory image
// always passes.
func (w *Writer) Check() error {
	if w.m.memory {
		return nil
	}
	if err := w.Faulted(); err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(w.m.path, &st); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrReplaced, w.m.path, err)
	}
	if st.Ino != w.m.inode {
		return fmt.Errorf("%w: %s names another file", ErrReplaced, w.m.path)
	}
	return w.m.check(true)
}

// Close unmaps the file; the file stays for its readers.
func (w *Writer) Close() error { return w.m.close() }
