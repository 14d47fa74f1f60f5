package dynkv

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Log rewrites: the log is replaced by the engine's state image followed by
// the records appended since (aof.go describes the file). SAVE runs one
// and answers once it is durable; BGSAVE, BGREWRITEAOF and the automatic
// trigger run one in the background. The automatic trigger is Valkey's:
// once the log is over the minimum size (auto-aof-rewrite-min-size) and
// has grown by the percentage (auto-aof-rewrite-percentage; 0 turns it
// off) over its size after the last rewrite (or at start).

// Automatic rewrite defaults (Valkey's).
const (
	DefaultAutoRewritePercentage = 100
	DefaultAutoRewriteMinSize    = 64 << 20
)

// Rewrite stages, where a test's hook may stop a rewrite as a crash would.
const (
	stageImage   = "image"   // the temporary file holds the image's first part
	stageTail    = "tail"    // it holds the image and the records appended meanwhile
	stageSynced  = "synced"  // it holds every record and is synced, not yet renamed
	stageRenamed = "renamed" // it replaced the log; the server still appends to the old file
)

// errRewriteRunning reports a rewrite asked for while one runs.
var errRewriteRunning = errors.New("dynkv: a log rewrite is already in progress")

// rewriter runs one log rewrite at a time for a Server and keeps what INFO
// and CONFIG report of them.
type rewriter struct {
	mu      sync.Mutex // closing, and wg.Add against Close's wg.Wait
	closing bool
	wg      sync.WaitGroup
	running atomic.Bool

	done     atomic.Int64 // rewrites completed
	failed   atomic.Bool  // the last rewrite failed
	lastSave atomic.Int64 // unix time of the last completed rewrite (the start before one)
	base     atomic.Int64 // log size after the last rewrite (at open before one)
	percent  atomic.Int64 // auto-aof-rewrite-percentage; 0: no automatic rewrite
	minSize  atomic.Int64 // auto-aof-rewrite-min-size

	// hook, in tests, runs at each stage; an error stops the rewrite there
	// and leaves the files as a crash would.
	hook func(stage string) error
}

// claim takes the rewriter for one rewrite; false when one runs or the
// server is closing.
func (rw *rewriter) claim() bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.closing || !rw.running.CompareAndSwap(false, true) {
		return false
	}
	rw.wg.Add(1)
	return true
}

// close refuses further rewrites and waits for the running one.
func (rw *rewriter) close() {
	rw.mu.Lock()
	rw.closing = true
	rw.mu.Unlock()
	rw.wg.Wait()
}

func (rw *rewriter) stage(name string) error {
	if rw.hook == nil {
		return nil
	}
	return rw.hook(name)
}

// rewriteLog runs one rewrite (SAVE); errRewriteRunning if one runs. Without
// a log there is nothing to rewrite.
func (s *Server) rewriteLog() error {
	if s.log == nil {
		return nil
	}
	if !s.rw.claim() {
		return errRewriteRunning
	}
	return s.runRewrite()
}

// rewriteInBackground starts a rewrite (BGSAVE, BGREWRITEAOF, the automatic
// trigger); false if one runs. Without a log it does nothing.
func (s *Server) rewriteInBackground() bool {
	if s.log == nil {
		return true
	}
	if !s.rw.claim() {
		return false
	}
	go s.runRewrite()
	return true
}

// autoRewrite starts a background rewrite when the log has grown past the
// automatic trigger.
func (s *Server) autoRewrite() {
	percent := s.rw.percent.Load()
	if percent <= 0 || s.rw.running.Load() {
		return
	}
	size, base := s.log.Size(), max(s.rw.base.Load(), 1)
	if size > s.rw.minSize.Load() && size*100/base-100 >= percent {
		s.rewriteInBackground()
	}
}

// runRewrite rewrites the log, the rewriter claimed: the image is taken
// while no write command runs, the records appended meanwhile are copied
// without holding them up, and the last ones, the sync and the rename
// happen while they wait again.
func (s *Server) runRewrite() error {
	defer s.rw.wg.Done()
	defer s.rw.running.Store(false)
	s.logMu.Lock()
	img := s.engine.image()
	base := s.log.Size()
	s.logMu.Unlock()
	tmp, err := s.log.writeRewrite(img, base, &s.rw)
	if err == nil {
		s.logMu.Lock()
		err = s.log.finishRewrite(tmp, &s.rw)
		s.logMu.Unlock()
	}
	s.rw.failed.Store(err != nil)
	if err != nil {
		return err
	}
	s.rw.done.Add(1)
	s.rw.lastSave.Store(time.Now().Unix())
	s.rw.base.Store(s.log.Size())
	return nil
}

// rewriteFile is a rewrite's temporary file: its size and how much of the
// log it holds.
type rewriteFile struct {
	f      *os.File
	size   int64 // bytes written
	copied int64 // the log's records up to this offset are in it
}

// writeRewrite writes the image (taken when the log held base bytes) and
// the records appended since into a new temporary file beside the log.
func (l *Log) writeRewrite(img []byte, base int64, rw *rewriter) (*rewriteFile, error) {
	f, err := os.OpenFile(l.path+rewriteSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dynkv: rewrite: %w", err)
	}
	t := &rewriteFile{f: f, copied: base}
	w := bufio.NewWriterSize(f, 1<<20)
	var rec []byte
	write := func(args ...[]byte) error {
		rec = appendRecord(rec[:0], args)
		_, err := w.Write(rec)
		t.size += int64(len(rec))
		return err
	}
	for off := 0; off < len(img); off += imageChunkBytes {
		if err := write([]byte(imageChunk), img[off:min(off+imageChunkBytes, len(img))]); err != nil {
			return nil, t.abandon(err)
		}
		if off == 0 {
			if err := w.Flush(); err != nil {
				return nil, t.abandon(err)
			}
			if err := rw.stage(stageImage); err != nil {
				return nil, err
			}
		}
	}
	sum := binary.BigEndian.AppendUint32(nil, crc32.Checksum(img, crcTable))
	if err := write([]byte(imageEnd), binary.BigEndian.AppendUint64(nil, uint64(len(img))), sum); err != nil {
		return nil, t.abandon(err)
	}
	if err := w.Flush(); err != nil {
		return nil, t.abandon(err)
	}
	l.mu.Lock()
	src, end := l.f, l.size
	l.mu.Unlock()
	if err := t.copyFrom(src, end); err != nil {
		return nil, t.abandon(err)
	}
	if err := rw.stage(stageTail); err != nil {
		return nil, err
	}
	return t, nil
}

// copyFrom appends the log's bytes from t.copied to end (records already
// written to src: reading them needs no lock).
func (t *rewriteFile) copyFrom(src *os.File, end int64) error {
	n, err := io.Copy(t.f, io.NewSectionReader(src, t.copied, end-t.copied))
	t.size += n
	t.copied += n
	if err == nil && t.copied != end {
		err = fmt.Errorf("log shorter than %d bytes", end)
	}
	return err
}

// abandon removes the temporary file of a failed rewrite.
func (t *rewriteFile) abandon(err error) error {
	t.f.Close()
	os.Remove(t.f.Name())
	return fmt.Errorf("dynkv: rewrite: %w", err)
}

// finishRewrite copies the records appended since writeRewrite, syncs the
// temporary file, renames it over the log, syncs the directory and appends
// to it from then on. The caller holds up write commands meanwhile.
func (l *Log) finishRewrite(t *rewriteFile, rw *rewriter) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return t.abandon(errors.New("the log is closed"))
	}
	if err := l.w.Flush(); err != nil {
		return t.abandon(err)
	}
	if err := t.copyFrom(l.f, l.size); err != nil {
		return t.abandon(err)
	}
	if err := t.f.Sync(); err != nil {
		return t.abandon(err)
	}
	if err := rw.stage(stageSynced); err != nil {
		return err
	}
	if err := os.Rename(t.f.Name(), l.path); err != nil {
		return t.abandon(err)
	}
	if err := rw.stage(stageRenamed); err != nil {
		return err
	}
	old := l.f
	l.f, l.size = t.f, t.size
	l.w.Reset(t.f)
	old.Close()
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		return fmt.Errorf("dynkv: rewrite: the log was replaced but its directory not synced: %w", err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ParseMemory reads a size as Valkey's configuration does: bytes, or a
// number with a unit k, m, g (powers of 1000) or kb, mb, gb (powers of
// 1024), in any case.
func ParseMemory(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}}
	lower, mul := strings.ToLower(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			lower, mul = strings.TrimSuffix(lower, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(lower, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mul {
		return 0, fmt.Errorf("dynkv: memory size %q: want bytes or a number with k, kb, m, mb, g or gb", s)
	}
	return n * mul, nil
}
