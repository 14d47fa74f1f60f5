package cbi1

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode and an Assembly: each input is
// a frame or an error, never a panic, and a decoded frame re-encodes to
// the same bytes. The seed corpus is the Python fixtures.
func FuzzDecode(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.cbi1")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		fr, err := Decode(src)
		if err != nil {
			return
		}
		var again []byte
		switch {
		case fr.Chunk != nil:
			var a Assembly
			_, _ = a.Add(fr)
			again, err = AppendSnapshotChunk(nil, fr.Header, fr.Chunk.Index, fr.Chunk.Count, fr.Chunk.Offset, fr.Chunk.Words)
		case fr.Delta != nil:
			again, err = AppendDelta(nil, fr.Header, fr.Delta.BaseEpoch, fr.Delta.Images)
		default:
			t.Fatalf("Decode(%x) returned neither a chunk nor a delta", src)
		}
		if err != nil || string(again) != string(src) {
			t.Fatalf("re-encoding a decoded frame: %v, %x != %x", err, again, src)
		}
	})
}
