package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/internal/testseed"
)

// childEnv names the file a child process attaches to (see TestMain).
const childEnv = "GOINDEX_SHM_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(runChild(path))
	}
	os.Exit(m.Run())
}

// shmSeed is the randomized tests' default seed (testseed.For).
const shmSeed = 20261202

func testLayout(lanes int, buckets uint64) Layout {
	l := Layout{Seed: ckf.DefaultSeed, Buckets: buckets, Domain: 7, ConsumerInstance: 99}
	for i := range lanes {
		l.DCs = append(l.DCs, uint64(100+i))
	}
	return l
}

func create(t *testing.T, path string, l Layout) *Writer {
	t.Helper()
	w, err := Create(path, l)
	if err != nil {
		t.Fatalf("Create(%s, %d lanes × %d buckets): %v", path, len(l.DCs), l.Buckets, err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func attach(t *testing.T, path string) *Reader {
	t.Helper()
	r, err := Attach(path)
	if err != nil {
		t.Fatalf("Attach(%s): %v", path, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// laneWords returns deterministic random words for lane l of a file.
func laneWords(seed uint64, lane int, n uint64) []uint64 {
	rng := rand.New(rand.NewPCG(seed, uint64(lane)))
	w := make([]uint64, n)
	for i := range w {
		if rng.IntN(3) > 0 {
			w[i] = rng.Uint64()
		}
	}
	return w
}

func sampleInfo(l int) LaneInfo {
	at := time.Unix(1700000000, int64(l)*1000)
	return LaneInfo{State: 3, Incarnation: 11 + uint64(l), LayoutGeneration: 2, Epoch: 5, Installed: 40 + uint64(l), Latest: 41 + uint64(l),
		AppliedAt: at, RTT: time.Duration(1234+l) * time.Microsecond, RTTAt: at,
		Load: Load{At: at, ReceivedAt: at.Add(time.Millisecond), ActiveBlocks: 1000, QueuedPrefillTokens: 2000, ActiveDecodeBlocks: 300,
			LiveWorkers: 4, CapacityBlocks: 1 << 20, PrefillTokensPerMs: 12.5, QueueTokensPerMs: 50, DecodeBlocksPerMs: 0.25,
			StoredBlocks: 90000 + uint64(l), Incarnation: 11 + uint64(l)},
		Faults: 1, Snapshots: 2, Deltas: 77}
}

// storeInfo writes every group of info into lane l.
func storeInfo(w *Writer, l int, info LaneInfo) {
	w.SetState(l, &LaneState{State: info.State, Incarnation: info.Incarnation, LayoutGeneration: info.LayoutGeneration,
		Epoch: info.Epoch, Installed: info.Installed, Latest: info.Latest, AppliedAt: info.AppliedAt,
		Faults: info.Faults, Snapshots: info.Snapshots, Deltas: info.Deltas})
	w.SetRTT(l, info.RTT, info.RTTAt)
	w.SetLoad(l, &info.Load)
}

func TestWriterReader_SecondMappingSeesBucketsReadyAndLanes(t *testing.T) {
	seed := testseed.For(t, shmSeed)
	path := filepath.Join(t.TempDir(), "replica")
	for _, lanes := range []int{1, 3, 13, 64} {
		t.Run(fmt.Sprintf("lanes=%d", lanes), func(t *testing.T) {
			l := testLayout(lanes, 256)
			w := create(t, path, l)
			r := attach(t, path)
			if got := r.Ready(); got != 0 {
				t.Errorf("fresh file Ready() = %#x, want 0", got)
			}
			want := make([][]uint64, lanes)
			for i := range lanes {
				want[i] = laneWords(seed, i, l.Buckets)
				if err := w.Table().Install(i, want[i]); err != nil {
					t.Fatalf("Install(lane %d): %v", i, err)
				}
				storeInfo(w, i, sampleInfo(i))
			}
			w.Touch(time.Unix(1700000001, 0))
			if got, all := r.Ready(), ^uint64(0)>>(64-lanes); got != all {
				t.Errorf("Ready() = %#x, want %#x", got, all)
			}
			for i := range lanes {
				if got := r.Table().AppendLane(nil, i); !slices.Equal(got, want[i]) {
					t.Errorf("reader lane %d words differ from the writer's", i)
				}
				info := sampleInfo(i)
				info.DC = l.DCs[i]
				if got := r.Lane(i); got != info {
					t.Errorf("reader Lane(%d) = %+v, want %+v", i, got, info)
				}
			}
			if got := r.WriterHeartbeat(); !got.Equal(time.Unix(1700000001, 0)) {
				t.Errorf("WriterHeartbeat() = %v, want 1700000001s", got)
			}
			if got := r.Info(); got.Buckets != l.Buckets || got.Seed != l.Seed || got.Domain != 7 || got.ConsumerInstance != 99 || !slices.Equal(got.DCs, l.DCs) {
				t.Errorf("Info() = %+v, want the layout %+v", got, l)
			}
			// An image applied through the writer is visible to a search
			// of the read-only mapping.
			f := r.Format()
			h := uint64(0x42B9B85973626CC1)
			p := f.Probe(h)
			if err := w.Table().Apply(0, []ckf.Image{{Bucket: p.A, Word: uint64(p.FP)}}); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			s, err := replica.NewSearcher(r.Table(), f, replica.SearchConfig{Mode: replica.Linear})
			if err != nil {
				t.Fatalf("NewSearcher: %v", err)
			}
			depth, m := s.Search(nil, []uint64{h}, 1)
			if m != 1 || depth[0] != 1 {
				t.Errorf("Search(%#x) on the reader = depth %v mask %#x, want depth 1 on lane 0", h, depth, m)
			}
		})
	}
}

func TestLayout_FieldsAtDocumentedOffsets(t *testing.T) {
	seed := testseed.For(t, shmSeed)
	path := filepath.Join(t.TempDir(), "replica")
	l := testLayout(13, 64)
	w := create(t, path, l)
	words := make([][]uint64, 13)
	for i := range words {
		words[i] = laneWords(seed, i, l.Buckets)
		if err := w.Table().Install(i, words[i]); err != nil {
			t.Fatalf("Install(%d): %v", i, err)
		}
	}
	w.Table().ClearReady(4)
	info := sampleInfo(2)
	storeInfo(w, 2, info)
	w.Touch(time.Unix(0, 12345))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read file: %v", err)
	}
	le := binary.LittleEndian
	u64 := func(off int) uint64 { return le.Uint64(raw[off:]) }
	u32 := func(off int) uint32 { return le.Uint32(raw[off:]) }
	const H = 12288        // 256 + 13·(256 + 576) = 11072 rounds up to three pages
	const I = 256 + 13*256 // lane 0's integrity block
	regionWords, _ := replica.RegionWords(replica.Config{Lanes: 13, Buckets: 64})
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"version @8", uint64(u32(8)), 2},
		{"H @12", uint64(u32(12)), H},
		{"generation @16", u64(16), 1},
		{"seed @24", u64(24), ckf.DefaultSeed},
		{"buckets @32", u64(32), 64},
		{"lanes @40", uint64(u32(40)), 13},
		{"row words @44", uint64(u32(44)), 16},
		{"region bytes @48", u64(48), uint64(regionWords) * 8},
		{"domain @56", u64(56), 7},
		{"consumer @64", u64(64), 99},
		{"state @88", u64(88), 0},
		{"heartbeat @96", u64(96), 12345},
		{"lane 5 DC @256+5·256", u64(256 + 5*256), 105},
		{"lane 2 installed @256+2·256+40", u64(256 + 2*256 + 40), info.Installed},
		{"lane 2 RTT µs @256+2·256+64", u64(256 + 2*256 + 64), uint64(info.RTT / time.Microsecond)},
		{"lane 2 deltas @256+2·256+176", u64(256 + 2*256 + 176), info.Deltas},
		{"lane 2 load stored blocks @256+2·256+184", u64(256 + 2*256 + 184), info.Load.StoredBlocks},
		{"lane 2 load incarnation @256+2·256+192", u64(256 + 2*256 + 192), info.Load.Incarnation},
		{"lane 2 reserved @256+2·256+200", u64(256 + 2*256 + 200), 0},
		{"lane 3 integrity version @I+3·576 (even at rest; an Install: store and seal)", u64(I + 3*576), 4},
		{"lane 3 seals @I+3·576+8", u64(I + 3*576 + 8), 1},
		{"lane 3 segment 5 sum @I+3·576+64+5·8 (K = 64 segments of 1 bucket)", u64(I + 3*576 + 64 + 5*8), mix(5, words[3][5])},
		{"ready mask @H", u64(H), (1<<13 - 1) &^ (1 << 4)},
		{"file size", uint64(len(raw)), uint64(H + regionWords*8)},
	}
	if string(raw[:8]) != "GOIXREPL" {
		t.Errorf("magic = %q, want GOIXREPL", raw[:8])
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d (%#x), want %d (%#x)", c.name, c.got, c.got, c.want, c.want)
		}
	}
	for b := range 64 {
		for lane := range 13 {
			if got, want := u64(H+64+8*(b*16+lane)), words[lane][b]; got != want {
				t.Fatalf("word(bucket %d, lane %d) @H+64+8·(b·16+l) = %#x, want %#x", b, lane, got, want)
			}
		}
	}
}

func TestCreate_NewGenerationRetiresOldFileAndReadersFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	w1 := create(t, path, testLayout(2, 64))
	if err := w1.Table().Install(1, laneWords(1, 1, 64)); err != nil {
		t.Fatalf("Install: %v", err)
	}
	r1 := attach(t, path)
	if stale, err := r1.Stale(); stale || err != nil {
		t.Fatalf("Stale() on the current file = %v, %v; want false", stale, err)
	}
	w2, err := w1.Resize(testLayout(3, 128))
	if err != nil {
		t.Fatalf("Resize: %v", err)
	}
	defer w2.Close()
	if stale, err := r1.Stale(); !stale || err != nil {
		t.Errorf("Stale() after Resize = %v, %v; want true", stale, err)
	}
	// The old mapping keeps working for in-flight searches.
	if got := r1.Ready(); got != 0b10 {
		t.Errorf("old mapping Ready() after Resize = %#b, want 0b10", got)
	}
	r2 := attach(t, path)
	if got := r2.Info(); got.Generation != 2 || got.Buckets != 128 || len(got.DCs) != 3 {
		t.Errorf("new file Info() = generation %d, %d buckets, %d lanes; want 2, 128, 3", got.Generation, got.Buckets, len(got.DCs))
	}
	if got := r2.Ready(); got != 0 {
		t.Errorf("new generation Ready() = %#b, want 0", got)
	}
	if err := w1.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("Close() of a resized writer = %v, want ErrClosed", err)
	}
	if _, err := w1.Resize(testLayout(1, 2)); !errors.Is(err, ErrClosed) {
		t.Errorf("Resize() of a closed writer = %v, want ErrClosed", err)
	}
	// A path replaced without the retired mark (a writer that crashed after
	// the rename) is still detected through the inode.
	tmp := path + ".other"
	w3 := create(t, tmp, testLayout(1, 2))
	w3.Close()
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if stale, err := r2.Stale(); !stale || err != nil {
		t.Errorf("Stale() after the path was replaced = %v, %v; want true", stale, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp.") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestAttach_RejectsForeignShortCorruptAndOtherVersionFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	w := create(t, good, testLayout(3, 64))
	w.Close()
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(slices.Clone(raw)) }
	cases := []struct {
		name  string
		bytes []byte
		want  error
		field string
	}{
		{"empty", nil, ErrForeign, "size"},
		{"short header", raw[:100], ErrForeign, "size"},
		{"foreign magic", mutate(func(b []byte) []byte { copy(b, "ELF\x7f1234"); return b }), ErrForeign, "magic"},
		{"text file", []byte(strings.Repeat("hello world\n", 100)), ErrForeign, "magic"},
		{"other version", mutate(func(b []byte) []byte { b[8] = 1; return b }), ErrVersion, "version"},
		{"flipped seed bit", mutate(func(b []byte) []byte { b[24] ^= 1; return b }), ErrCorrupt, "checksum"},
		{"flipped lane DC", mutate(func(b []byte) []byte { b[256+256] ^= 4; return b }), ErrCorrupt, "checksum"},
		{"lanes out of range", mutate(func(b []byte) []byte { b[40] = 65; return b }), ErrCorrupt, "lanes"},
		{"truncated region", raw[:len(raw)-8], ErrCorrupt, "size"},
		{"truncated lane records", raw[:300], ErrCorrupt, "size"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.WriteFile(path, c.bytes, 0o644); err != nil {
			t.Fatalf("write: %v", err)
		}
		r, err := Attach(path)
		if err == nil {
			r.Close()
			t.Errorf("Attach(%s) = nil error, want %v", c.name, c.want)
			continue
		}
		var fe *FieldError
		if !errors.Is(err, c.want) || !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("Attach(%s) = %v, want %v on field %q", c.name, err, c.want, c.field)
		}
		// The consumer owns its path: Create replaces the damaged file, says
		// what it was, and continues its generation when its header names one.
		nw, err := Create(path, testLayout(1, 2))
		if err != nil {
			t.Errorf("Create over %s = %v, want the file replaced", c.name, err)
			continue
		}
		wantGen := uint64(1)
		if len(c.bytes) >= 24 && string(c.bytes[:8]) == magic && c.bytes[8] == LayoutVersion {
			wantGen = 2 // the damaged file's generation was 1
		}
		if !errors.Is(nw.Replaced(), c.want) || nw.Info().Generation != wantGen {
			t.Errorf("Create over %s: Replaced() = %v, generation %d; want %v and %d", c.name, nw.Replaced(), nw.Info().Generation, c.want, wantGen)
		}
		nw.Close()
		if r, err := Attach(path); err != nil {
			t.Errorf("Attach after Create over %s = %v", c.name, err)
		} else {
			r.Close()
		}
	}
	if _, err := Create(dir, testLayout(1, 2)); err == nil || errors.Is(err, ErrBadLayout) {
		t.Errorf("Create over a directory = %v, want a refusal", err)
	}
	if _, err := Attach(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("Attach(missing) = nil error")
	}
	for _, l := range []Layout{testLayout(0, 64), testLayout(65, 64), testLayout(2, 3), testLayout(2, 1<<25)} {
		if _, err := Create(filepath.Join(dir, "bad-layout"), l); !errors.Is(err, ErrBadLayout) {
			t.Errorf("Create(%d lanes, %d buckets) = %v, want ErrBadLayout", len(l.DCs), l.Buckets, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp.") || e.Name() == "bad-layout" {
			t.Errorf("file %s left behind by a failed Create", e.Name())
		}
	}
}

// runChild is the child process of TestChildProcess_ReadsWriterUpdates: it
// attaches, checks the first set of words, waits for lane 0's installed
// sequence to reach 2, checks the second set, and reports through its exit
// status and stderr.
func runChild(path string) int {
	r, err := Attach(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child attach:", err)
		return 3
	}
	defer r.Close()
	seed, _ := strconv.ParseUint(os.Getenv(childEnv+"_SEED"), 10, 64)
	check := func(round uint64) bool {
		for lane := range r.Info().DCs {
			if got, want := r.Table().AppendLane(nil, lane), laneWords(seed+round, lane, r.Info().Buckets); !slices.Equal(got, want) {
				fmt.Fprintf(os.Stderr, "child: round %d lane %d words differ\n", round, lane)
				return false
			}
		}
		return true
	}
	if !check(1) {
		return 4
	}
	fmt.Println("round1")
	deadline := time.Now().Add(20 * time.Second)
	for r.Lane(0).Installed < 2 {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "child: lane 0 never reached sequence 2")
			return 5
		}
		time.Sleep(time.Millisecond)
	}
	if !check(2) {
		return 6
	}
	return 0
}

func TestChildProcess_ReadsWriterUpdates(t *testing.T) {
	seed := testseed.For(t, shmSeed)
	path := filepath.Join(t.TempDir(), "replica")
	l := testLayout(4, 512)
	w := create(t, path, l)
	install := func(round uint64) {
		for lane := range 4 {
			if err := w.Table().Install(lane, laneWords(seed+round, lane, l.Buckets)); err != nil {
				t.Fatalf("Install: %v", err)
			}
		}
	}
	install(1)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path, childEnv+"_SEED="+strconv.FormatUint(seed, 10))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("pipe: %v", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	buf := make([]byte, len("round1\n"))
	if _, err := stdout.Read(buf); err != nil || string(buf) != "round1\n" {
		cmd.Wait()
		t.Fatalf("child's first round: read %q, %v; stderr: %s", buf, err, stderr.String())
	}
	install(2)
	w.SetState(0, &LaneState{Installed: 2})
	if err := cmd.Wait(); err != nil {
		t.Errorf("child process: %v; stderr: %s", err, stderr.String())
	}
}

// An in-memory image reads as a file does: the writer's lanes, records and
// ready bits through Writer.Reader, generation 0, no path; Resize refuses.
func TestNewMemory_ReadsAsAFile(t *testing.T) {
	l := testLayout(3, 64)
	w, err := NewMemory(l)
	if err != nil {
		t.Fatalf("NewMemory: %v", err)
	}
	words := laneWords(testseed.For(t, shmSeed), 1, l.Buckets)
	if err := w.Table().Install(1, words); err != nil {
		t.Fatalf("Install: %v", err)
	}
	storeInfo(w, 1, sampleInfo(1))
	r := w.Reader()
	want := sampleInfo(1)
	want.DC = l.DCs[1]
	if got := r.Lane(1); got != want {
		t.Errorf("Lane(1) = %+v, want %+v", got, want)
	}
	if got := r.Table().AppendLane(nil, 1); r.Ready() != 2 || !slices.Equal(got, words) {
		t.Errorf("Ready() = %#x and lane 1's words differ, want 0x2 and the installed words", r.Ready())
	}
	if info := r.Info(); info.Generation != 0 || info.Path != "" || !slices.Equal(info.DCs, l.DCs) {
		t.Errorf("Info() = %+v, want generation 0, no path, the layout's DCs", info)
	}
	if stale, err := r.Stale(); stale || err != nil {
		t.Errorf("Stale() = %v, %v; want false, nil", stale, err)
	}
	if _, err := w.Resize(l); !errors.Is(err, ErrBadLayout) {
		t.Errorf("Resize of an in-memory image = %v, want ErrBadLayout", err)
	}
	if err := r.Close(); err != nil || w.Close() != nil || w.Close() != ErrClosed {
		t.Errorf("closing the shared reader and the writer twice: want nil, nil, ErrClosed")
	}
	if _, err := NewMemory(Layout{Buckets: 64}); !errors.Is(err, ErrBadLayout) {
		t.Errorf("NewMemory(no lanes) = %v, want ErrBadLayout", err)
	}
}

// TestLayout_LoadCounterLeavesOlderReadersWordsAlone writes one lane's
// load without and with the stored-blocks counter: the record's words 0–22
// (all a reader before the counter reads) are byte for byte the same, the
// counter and its incarnation sit in words 23 and 24, the other reserved
// words stay zero, and a record whose words 23–24 are zero, as every
// writer before the counter left them, reads as "counter unknown".
func TestLayout_LoadCounterLeavesOlderReadersWordsAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	w := create(t, path, testLayout(3, 64))
	r := attach(t, path)
	record := func() []byte {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read file: %v", err)
		}
		return raw[256+1*256 : 256+2*256]
	}
	info := sampleInfo(1)
	counted := info.Load
	info.Load.StoredBlocks, info.Load.Incarnation = 0, 0
	storeInfo(w, 1, info)
	before := record()
	if got := r.Lane(1).Load; got.StoredBlocks != 0 || got.Incarnation != 0 {
		t.Errorf("Lane(1).Load from a record without the counter = stored %d incarnation %d, want 0 0", got.StoredBlocks, got.Incarnation)
	}
	if tail := before[23*8:]; !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Errorf("record words 23–31 without a counter = % x, want zero (as files before the counter)", tail)
	}
	w.SetLoad(1, &counted)
	after := record()
	if !bytes.Equal(after[:23*8], before[:23*8]) {
		t.Errorf("the counter changed words 0–22 of the record:\n% x\n% x", before[:23*8], after[:23*8])
	}
	le := binary.LittleEndian
	if got, inc := le.Uint64(after[23*8:]), le.Uint64(after[24*8:]); got != counted.StoredBlocks || inc != counted.Incarnation {
		t.Errorf("words 23, 24 = %d, %d; want %d, %d", got, inc, counted.StoredBlocks, counted.Incarnation)
	}
	if tail := after[25*8:]; !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Errorf("record words 25–31 = % x, want zero", tail)
	}
	if got := r.Lane(1).Load; got != counted {
		t.Errorf("Lane(1).Load = %+v, want %+v", got, counted)
	}
}
