package cbi1

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/goindex/goindex/internal/testseed"
)

type fixture struct {
	Kind   string      `json:"kind"`
	Epoch  uint64      `json:"epoch"`
	Index  uint32      `json:"index"`
	Count  uint32      `json:"count"`
	Offset uint64      `json:"offset"`
	Words  []uint64    `json:"words"`
	Base   uint64      `json:"base"`
	Images [][2]uint64 `json:"images"`
}

type fixtures struct {
	Seed        uint64             `json:"seed"`
	BucketCount uint64             `json:"bucket_count"`
	DCID        uint64             `json:"dc_id"`
	Frames      map[string]fixture `json:"frames"`
}

func loadFixtures(t *testing.T, dir string) fixtures {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx fixtures
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	return fx
}

// The Python encoder, run now, writes exactly the committed fixtures: the
// testdata is what the spec gives, not a snapshot of our own output.
func TestFixtures_PythonEncoderWritesTheCommittedBytes(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("/usr/bin/python3", "testdata/gen_fixtures.py", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("testdata/gen_fixtures.py (needs Debian's python3 and python3-xxhash, build.sh's DEBS): %v\n%s", err, out)
	}
	entries, _ := os.ReadDir("testdata")
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".cbi1" && e.Name() != "expected.json" {
			continue
		}
		want, _ := os.ReadFile(filepath.Join("testdata", e.Name()))
		got, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("gen_fixtures.py's %s differs from testdata (%v)", e.Name(), err)
		}
	}
}

// Each Python-written frame decodes to what expected.json says, and our
// encoder writes the same bytes from those values.
func TestFixtures_DecodeAndReencodeByteForByte(t *testing.T) {
	fx := loadFixtures(t, "testdata")
	if len(fx.Frames) == 0 {
		t.Fatal("no fixtures")
	}
	var asm Assembly
	for name, want := range fx.Frames {
		src, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := Decode(src)
		if err != nil {
			t.Errorf("Decode(%s): %v", name, err)
			continue
		}
		h := Header{Seed: fx.Seed, BucketCount: fx.BucketCount, DCID: fx.DCID, Epoch: want.Epoch}
		if f.Header != h {
			t.Errorf("Decode(%s) header %+v, want %+v", name, f.Header, h)
		}
		var again []byte
		switch want.Kind {
		case "chunk":
			if c := f.Chunk; c == nil || c.Index != want.Index || c.Count != want.Count || c.Offset != want.Offset || !slices.Equal(c.Words, want.Words) {
				t.Errorf("Decode(%s) chunk %+v, want %+v", name, f.Chunk, want)
				continue
			}
			again, err = AppendSnapshotChunk(nil, h, want.Index, want.Count, want.Offset, want.Words)
		case "delta":
			images := make([]Image, len(want.Images))
			for i, im := range want.Images {
				images[i] = Image{Bucket: uint32(im[0]), Word: im[1]}
			}
			if d := f.Delta; d == nil || d.BaseEpoch != want.Base || !slices.Equal(d.Images, images) {
				t.Errorf("Decode(%s) delta %+v, want base %d images %v", name, f.Delta, want.Base, images)
				continue
			}
			again, err = AppendDelta(nil, h, want.Base, images)
		}
		if err != nil || !bytes.Equal(again, src) {
			t.Errorf("re-encoding %s: %v; bytes differ: %x vs %x", name, err, again, src)
		}
	}
	for _, name := range []string{"snapshot_chunk0.cbi1", "snapshot_chunk1.cbi1"} {
		src, _ := os.ReadFile(filepath.Join("testdata", name))
		f, _ := Decode(src)
		done, err := asm.Add(f)
		if err != nil || done != (name == "snapshot_chunk1.cbi1") {
			t.Errorf("Assembly.Add(%s) = %v, %v", name, done, err)
		}
	}
	if _, words := asm.Snapshot(); uint64(len(words)) != fx.BucketCount {
		t.Errorf("assembled %d words, want %d", len(words), fx.BucketCount)
	}
}

// Random snapshots and deltas round-trip through the encoder and Decode,
// and an Assembly restores every word.
func TestCodec_RandomFramesRoundTrip(t *testing.T) {
	seed := testseed.For(t, 11)
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 200 {
		h := Header{Seed: rng.Uint64(), BucketCount: 1 << (1 + rng.IntN(12)), DCID: rng.Uint64(), Epoch: rng.Uint64()}
		words := make([]uint64, h.BucketCount)
		for i := range words {
			words[i] = rng.Uint64()
		}
		frames, err := SnapshotChunks(nil, h, words, 1+rng.IntN(int(h.BucketCount)))
		if err != nil {
			t.Fatal(err)
		}
		var asm Assembly
		for i, fr := range frames {
			f, err := Decode(fr)
			if err != nil {
				t.Fatalf("Decode(chunk %d): %v (GOINDEX_SEED=%d)", i, err, seed)
			}
			done, err := asm.Add(f)
			if err != nil || done != (i == len(frames)-1) {
				t.Fatalf("Add(chunk %d of %d) = %v, %v (GOINDEX_SEED=%d)", i, len(frames), done, err, seed)
			}
		}
		if got, gotWords := asm.Snapshot(); got != h || !slices.Equal(gotWords, words) {
			t.Fatalf("assembled %+v, want %+v and the same words (GOINDEX_SEED=%d)", got, h, seed)
		}
		images := make([]Image, rng.IntN(50))
		for i := range images {
			images[i] = Image{Bucket: uint32(rng.Uint64N(h.BucketCount)), Word: rng.Uint64()}
		}
		d, err := AppendDelta(nil, h, h.Epoch-1, images)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Decode(d)
		if err != nil || f.Delta == nil || f.Delta.BaseEpoch != h.Epoch-1 || !slices.Equal(f.Delta.Images, images) || f.Header != h {
			t.Fatalf("Decode(delta) = %+v, %v (GOINDEX_SEED=%d)", f, err, seed)
		}
	}
}

// Every malformed variant of a valid frame is refused with the sentinel
// its defect calls for, and never panics.
func TestDecode_RejectsEveryDefect(t *testing.T) {
	h := Header{Seed: 1, BucketCount: 8, DCID: 3, Epoch: 9}
	chunk, _ := AppendSnapshotChunk(nil, h, 0, 1, 0, make([]uint64, 8))
	delta, _ := AppendDelta(nil, h, 8, []Image{{Bucket: 1, Word: 2}})
	resum := func(b []byte) []byte { return seal(b, 0) }
	edit := func(src []byte, f func(b []byte) []byte) []byte { return f(slices.Clone(src)) }
	le := binary.LittleEndian
	for _, c := range []struct {
		name string
		src  []byte
		want error
	}{
		{"short", chunk[:47], ErrMalformed},
		{"magic", edit(chunk, func(b []byte) []byte { b[0] = 'X'; return b }), ErrMalformed},
		{"wire version", edit(chunk, func(b []byte) []byte { le.PutUint16(b[4:], 2); return b }), ErrMalformed},
		{"flags 3", edit(chunk, func(b []byte) []byte { le.PutUint16(b[6:], 3); return b }), ErrMalformed},
		{"fingerprint bits", edit(chunk, func(b []byte) []byte { b[8] = 8; return b }), ErrMalformed},
		{"slots", edit(chunk, func(b []byte) []byte { b[9] = 2; return b }), ErrMalformed},
		{"format version", edit(chunk, func(b []byte) []byte { le.PutUint16(b[10:], 2); return b }), ErrMalformed},
		{"bucket count 6", edit(chunk, func(b []byte) []byte { le.PutUint64(b[20:], 6); return b }), ErrMalformed},
		{"bucket count 2^25", edit(chunk, func(b []byte) []byte { le.PutUint64(b[20:], 1<<25); return b }), ErrMalformed},
		{"checksum", edit(chunk, func(b []byte) []byte { b[60] ^= 1; return b }), ErrChecksum},
		{"chunk index = count", edit(chunk, func(b []byte) []byte { le.PutUint32(b[48:], 1); return resum(b) }), ErrMalformed},
		{"words past the buckets", edit(chunk, func(b []byte) []byte { le.PutUint64(b[56:], 1); return resum(b) }), ErrMalformed},
		{"odd body", resum(append(slices.Clone(chunk), 0)), ErrMalformed},
		{"no words", resum(slices.Clone(chunk[:64])), ErrMalformed},
		{"delta count too high", edit(delta, func(b []byte) []byte { le.PutUint32(b[56:], 2); return resum(b) }), ErrMalformed},
		{"delta count over the limit", edit(delta, func(b []byte) []byte { le.PutUint32(b[56:], MaxDeltaImages+1); return resum(b) }), ErrMalformed},
		{"delta bucket out of range", edit(delta, func(b []byte) []byte { le.PutUint32(b[60:], 8); return resum(b) }), ErrMalformed},
		{"delta body short", resum(slices.Clone(delta[:50])), ErrMalformed},
		{"frame over the limit", make([]byte, MaxFrameBytes+1), ErrMalformed},
	} {
		_, err := Decode(c.src)
		var fe *FormatError
		if !errors.Is(err, c.want) || !errors.As(err, &fe) {
			t.Errorf("Decode(%s) = %v, want %v as a *FormatError", c.name, err, c.want)
		}
	}
}

// An Assembly refuses out-of-order, gapped, mixed and short snapshots.
func TestAssembly_RefusesBrokenSnapshots(t *testing.T) {
	h := Header{BucketCount: 8, Epoch: 4}
	words := make([]uint64, 8)
	frames, _ := SnapshotChunks(nil, h, words, 2)
	dec := func(b []byte) Frame { f, _ := Decode(b); return f }
	other := h
	other.Epoch = 5
	otherFrames, _ := SnapshotChunks(nil, other, words, 2)
	delta, _ := AppendDelta(nil, h, 3, nil)
	lying, _ := AppendSnapshotChunk(nil, h, 0, 2, 0, words) // two chunks announced, one covers it all
	for name, seq := range map[string][][]byte{
		"starts at chunk 1":       {frames[1]},
		"skips a chunk":           {frames[0], frames[2]},
		"mixes epochs":            {frames[0], otherFrames[1]},
		"a delta inside":          {frames[0], delta},
		"covered before the last": {lying},
	} {
		var a Assembly
		var err error
		for _, fr := range seq {
			if _, err = a.Add(dec(fr)); err != nil {
				break
			}
		}
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Add = %v, want ErrMalformed", name, err)
		}
	}
}
