package shm

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/internal/testseed"
)

// filled creates a replica file of lanes × buckets with every lane
// installed and its records set, and returns the writer.
func filled(t *testing.T, path string, lanes int, buckets uint64) *Writer {
	t.Helper()
	w := create(t, path, testLayout(lanes, buckets))
	for l := range lanes {
		if err := w.Table().Install(l, laneWords(testseed.For(t, shmSeed), l, buckets)); err != nil {
			t.Fatalf("Install(%d): %v", l, err)
		}
		storeInfo(w, l, sampleInfo(l))
	}
	w.Touch(time.Now())
	return w
}

// search runs one guarded search of r's table (as goindex/follow does) and
// returns the mask of lanes it reported.
func search(r *Reader, q []uint64) (m uint64) {
	s, err := replica.NewSearcher(r.Table(), r.Format(), replica.SearchConfig{})
	if err != nil {
		panic(err)
	}
	if r.Guarded() {
		defer r.Guard(debug.SetPanicOnFault(true))
	}
	_, m = s.SearchLocals(nil, q, ^uint64(0))
	return m
}

// A file truncated under a reader (to its first page, and to nothing)
// turns the reader's accesses into zero values and ErrFault, never a
// crash: lane records, the ready mask, the heartbeat, the retired mark and
// a search through the replica's own row kernels; Check then says so.
func TestReader_FileTruncatedUnderItFaultsIntoErrors(t *testing.T) {
	for _, size := range []int64{4096, 0} {
		path := filepath.Join(t.TempDir(), "replica")
		filled(t, path, 13, 1<<14)
		r := attach(t, path)
		q := make([]uint64, 64)
		for i := range q {
			q[i] = uint64(i)*0x9E3779B97F4A7C15 + 1
		}
		if r.Ready() == 0 || r.Check() != nil || search(r, q) == 0 {
			t.Fatalf("before truncating: Ready %#x, Check %v; want all lanes ready and no error", r.Ready(), r.Check())
		}
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		var ferr *FieldError
		if err := r.Check(); !errors.Is(err, ErrCorrupt) || !errors.As(err, &ferr) || ferr.Field != "size" {
			t.Errorf("truncated to %d: Check() = %v, want ErrCorrupt on size", size, err)
		}
		if m := search(r, q); m != 0 {
			t.Errorf("truncated to %d: search reported lanes %#x, want none", size, m)
		}
		if !errors.Is(r.Faulted(), ErrFault) {
			t.Errorf("truncated to %d: Faulted() after the search = %v, want ErrFault", size, r.Faulted())
		}
		if got := r.Ready(); got != 0 {
			t.Errorf("truncated to %d: Ready() = %#x, want 0", size, got)
		}
		if size == 0 {
			if got := r.Lane(3); got != (LaneInfo{}) || !r.WriterHeartbeat().IsZero() {
				t.Errorf("truncated to 0: Lane(3) = %+v, heartbeat %v; want nothing known", got, r.WriterHeartbeat())
			}
			if stale, err := r.Stale(); stale || err != nil {
				t.Errorf("truncated to 0: Stale() = %v, %v; want false (not replaced)", stale, err)
			}
		}
	}
}

// A writer whose file is truncated under it loses the writes (Apply and
// Install return ErrFault; the record and heartbeat writes record it) and
// Check tells the consumer to rebuild.
func TestWriter_FileTruncatedUnderItFaultsIntoErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	w := filled(t, path, 3, 1<<12)
	if err := w.Check(); err != nil {
		t.Fatalf("Check() of a fresh file = %v", err)
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	if err := w.Check(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Check() after truncation = %v, want ErrCorrupt", err)
	}
	p := w.Format().Probe(kv.ChainHash(1, 2))
	if err := w.Table().Apply(1, []ckf.Image{{Bucket: p.A, Word: 1}}); !errors.Is(err, ErrFault) {
		t.Errorf("Apply past the end = %v, want ErrFault", err)
	}
	if err := w.Table().Install(2, make([]uint64, 1<<12)); !errors.Is(err, ErrFault) {
		t.Errorf("Install past the end = %v, want ErrFault", err)
	}
	w.Table().StoreWords(0, 100, []uint64{1, 2, 3})
	w.Table().SetReady(0)
	if err := w.Check(); !errors.Is(err, ErrFault) {
		t.Errorf("Check() after faulted writes = %v, want ErrFault", err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	w.Touch(time.Now())
	w.SetLoad(0, &Load{ActiveBlocks: 1})
	w.SetRTT(0, time.Millisecond, time.Now())
	w.SetState(0, &LaneState{State: 3})
	if got := w.Lane(0); got.Load.ActiveBlocks != 0 {
		t.Errorf("Lane(0) of an empty file = %+v, want nothing known", got)
	}
}

// The writer's Check sees its path replaced or removed, the file grown, and
// its header scribbled on.
func TestWriter_CheckSeesReplacedRemovedGrownAndScribbledFiles(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		do   func(path string) error
		want error
	}{
		{"replaced", func(path string) error {
			other := filepath.Join(dir, "other")
			w, err := Create(other, testLayout(1, 2))
			if err != nil {
				return err
			}
			w.Close()
			return os.Rename(other, path)
		}, ErrReplaced},
		{"removed", os.Remove, ErrReplaced},
		{"grown", func(path string) error {
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, st.Size()+4096)
		}, ErrCorrupt},
		{"header scribbled", func(path string) error {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte("garbage!"), 24)
			return err
		}, ErrCorrupt},
	} {
		path := filepath.Join(dir, c.name)
		w := filled(t, path, 2, 64)
		if err := c.do(path); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := w.Check(); !errors.Is(err, c.want) {
			t.Errorf("%s: Check() = %v, want %v", c.name, err, c.want)
		}
	}
}
