package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
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
func Create(path string, l Layout) (*Writer, error) { return createAfter(path, l, 0, nil) }

// createAfter is Create whose generation is also above after (the generation of
// the file a rebuild replaces, which a damaged file may no longer name) and
// which, when fill is not nil, has fill write the new file before it is
// renamed into place.
func createAfter(path string, l Layout, after uint64, fill func(*Writer) error) (*Writer, error) {
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
	w := &Writer{m: m, replaced: damage, seal: newSealing(len(l.DCs), l.Buckets)}
	if fill != nil {
		if err := fill(w); err != nil {
			m.unmap()
			return fail(err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		m.unmap()
		return fail(fmt.Errorf("shm: rename %s into place: %w", tmp, err))
	}
	if prev != nil {
		prev.retire()
	}
	return w, nil
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
	nw, err := createAfter(w.m.path, l, w.m.hdr.generation, nil)
	if err != nil {
		return nil, err
	}
	w.Close()
	return nw, nil
}

// ResizeCarrying is Resize that carries the lanes of the mask carry into
// the new generation: before the new file is renamed into place, each
// carried lane's words (its sums sealed afresh from them), its record and
// its ready bit are copied from w's file. Readers that attach the new
// generation therefore find those lanes as w held them, ready if they were,
// never a window with fewer of them ready; a lane added to the layout
// (growing a consumer) costs only its own resync. l must keep w's seed and
// bucket count and each carried lane's DC at its index (ErrBadLayout).
// The carried lanes' writers must not write w while it runs. On error w
// stays open and unchanged and no new file is left.
func (w *Writer) ResizeCarrying(l Layout, carry uint64) (*Writer, error) {
	switch {
	case w.m.closed:
		return nil, ErrClosed
	case w.m.memory:
		return nil, fmt.Errorf("%w: an in-memory image has no path to replace", ErrBadLayout)
	}
	old := w.m.hdr
	if l.Seed != old.seed || l.Buckets != old.buckets {
		return nil, fmt.Errorf("%w: carrying lanes of seed %#x × %d buckets into seed %#x × %d", ErrBadLayout,
			old.seed, old.buckets, l.Seed, l.Buckets)
	}
	for m := carry; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if i >= old.lanes || i >= len(l.DCs) || l.DCs[i] != old.dcs[i] {
			return nil, fmt.Errorf("%w: lane %d cannot be carried: it is not the same DC in both layouts", ErrBadLayout, i)
		}
	}
	nw, err := createAfter(w.m.path, l, w.m.hdr.generation, func(nw *Writer) error { return w.carryInto(nw, carry) })
	if err != nil {
		return nil, err
	}
	w.Close()
	return nw, nil
}

// carryInto copies the lanes of carry from w's file into nw's (not yet
// renamed into place): words, record and ready bit.
func (w *Writer) carryInto(nw *Writer, carry uint64) error {
	src, dst := w.Table(), nw.Table()
	ready := src.Ready()
	if err := w.copyRows(nw, carry); err != nil {
		return fmt.Errorf("shm: carry lanes %#b: %w", carry, err)
	}
	for m := carry; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		// SetReady seals the lane's sums that copyRows summed; nobody maps
		// the new file yet, so a lane that was not ready may have its bit
		// cleared again.
		dst.SetReady(i)
		if ready&(1<<uint(i)) == 0 {
			dst.ClearReady(i)
		}
		rec, err := w.record(i)
		if err != nil {
			return fmt.Errorf("shm: carry lane %d: %w", i, err)
		}
		if err := nw.setRecord(i, &rec); err != nil {
			return fmt.Errorf("shm: carry lane %d: %w", i, err)
		}
	}
	return nil
}

// copyRows copies the words of the lanes of carry from w's bucket region
// into nw's in one pass over the rows (the lanes' columns interleave in
// every row, so copying them lane by lane read and wrote each line once a
// lane: 13 passes over 416 MiB for 13 lanes of 2^22 buckets), summing each
// lane's integrity segments as a snapshot arriving whole would; the
// lanes' SetReady then seals those sums. Both files have the same buckets;
// their rows may differ in width (a row grows a cache line per 8 lanes).
func (w *Writer) copyRows(nw *Writer, carry uint64) (err error) {
	defer nw.m.guard(debug.SetPanicOnFault(true), &err)
	defer w.m.guard(debug.SetPanicOnFault(true), &err)
	src, dst := w.m.rows(), nw.m.rows()
	from, to := uint64(w.m.hdr.stride), uint64(nw.m.hdr.stride)
	n, shift := nw.m.hdr.buckets, nw.m.segShift()
	var lanes []int
	for m := carry; m != 0; m &= m - 1 {
		l := bits.TrailingZeros64(m)
		lanes = append(lanes, l)
		f := &nw.seal.fresh[l]
		f.active, f.next = true, n
		clear(f.sums)
	}
	// A segment at a time, each lane's share summed in acc.
	var acc [MaxLanes]uint64
	for seg := range uint64(segments(n)) {
		clear(acc[:len(lanes)])
		for b := seg << shift; b < (seg+1)<<shift; b++ {
			in, out := src[b*from:b*from+from], dst[b*to:b*to+to]
			for k, l := range lanes {
				word := atomic.LoadUint64(&in[l])
				out[l] = word // nw is not mapped by anyone else yet
				acc[k] += mix(b, word)
			}
		}
		for k, l := range lanes {
			nw.seal.fresh[l].sums[seg] = acc[k]
		}
	}
	return nil
}

// record loads lane l's record words, one atomic load each.
func (w *Writer) record(l int) (rec [LaneMetaBytes / 8]uint64, err error) {
	src := w.m.lane(l)
	if !w.m.memory {
		defer w.m.guard(debug.SetPanicOnFault(true), &err)
	}
	for k := range rec {
		rec[k] = atomic.LoadUint64(&src[k])
	}
	return rec, nil
}

// setRecord stores rec into lane l's record, all but the DC id (word 0,
// fixed by the header's checksum), one atomic store each.
func (w *Writer) setRecord(l int, rec *[LaneMetaBytes / 8]uint64) (err error) {
	dst := w.m.lane(l)
	if !w.m.memory {
		defer w.m.guard(debug.SetPanicOnFault(true), &err)
	}
	for k := lwDC + 1; k < len(rec); k++ {
		atomic.StoreUint64(&dst[k], rec[k])
	}
	return nil
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
