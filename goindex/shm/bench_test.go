package shm

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
)

// BenchmarkVerify is one segment of the default consumer file (13 lanes of
// 2^19 buckets: 64 segments of 1 MiB of rows) checked against its
// published sums, what each tick of a verifier reads; MiB/s is the rate.
func BenchmarkVerify(b *testing.B) {
	path := filepath.Join(b.TempDir(), "replica")
	const lanes, n = 13, 1 << 19
	w, err := Create(path, testLayout(lanes, n))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	for l := range lanes {
		if err := w.Table().Install(l, laneWords(uint64(l), l, n)); err != nil {
			b.Fatal(err)
		}
	}
	r, err := Attach(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	segBytes := float64(r.Info().RegionBytes) / float64(r.Segments())
	b.Run("lanes=13/buckets=2^19", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if bad, busy := r.VerifySegment(i%r.Segments(), ^uint64(0)); bad|busy != 0 {
				b.Fatalf("segment %d: bad %#x busy %#x", i%r.Segments(), bad, busy)
			}
		}
		b.ReportMetric(segBytes*float64(b.N)/b.Elapsed().Seconds()/(1<<20), "MiB/s")
	})
}

// BenchmarkApply is a 32-image delta applied to one lane of a file writer:
// integrity=on keeps the lane's segment sums (two hashes and the old word's
// load per image, the version and sum stores), integrity=off is the same
// writer's stores without them; both inside the fault guard.
func BenchmarkApply(b *testing.B) {
	const lanes, n = 13, 1 << 19
	file, err := Create(filepath.Join(b.TempDir(), "replica"), testLayout(lanes, n))
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	plain := &Writer{m: file.m} // the same mapping, no sums kept
	prefault(b, file)
	rng := rand.New(rand.NewPCG(1, 2))
	deltas := make([][]ckf.Image, 256)
	for i := range deltas {
		for range 32 {
			deltas[i] = append(deltas[i], ckf.Image{Bucket: uint32(rng.IntN(n)), Word: rng.Uint64()})
		}
	}
	for _, c := range []struct {
		name string
		w    *Writer
	}{{"integrity=on", file}, {"integrity=off", plain}} {
		b.Run(c.name+"/images=32", func(b *testing.B) {
			t := c.w.Table()
			for i := 0; b.Loop(); i++ {
				if err := t.Apply(i%lanes, deltas[i%len(deltas)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInstall is a whole snapshot of one lane of the default file
// (2^19 buckets) arriving in 4 chunks: integrity=on hashes its words into
// the lane's fresh sums besides storing them, integrity=off only stores
// them; both through the table's fast store.
func BenchmarkInstall(b *testing.B) {
	const lanes, n = 13, 1 << 19
	file, err := Create(filepath.Join(b.TempDir(), "replica"), testLayout(lanes, n))
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	plain := &Writer{m: file.m}
	prefault(b, file)
	words := laneWords(1, 0, n)
	for _, c := range []struct {
		name string
		w    *Writer
	}{{"integrity=on", file}, {"integrity=off", plain}} {
		b.Run(c.name+"/buckets=2^19", func(b *testing.B) {
			t := c.w.Table()
			for i := 0; b.Loop(); i++ {
				l := i % lanes
				t.ClearReady(l)
				for off := 0; off < n; off += n / 4 {
					t.StoreWords(l, uint64(off), words[off:off+n/4])
				}
				t.SetReady(l)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/word")
		})
	}
}

// prefault writes every lane of w once, outside the timer, so that no
// variant pays for the file's first page faults (the first would).
func prefault(b *testing.B, w *Writer) {
	b.Helper()
	t := w.Table()
	zero := make([]uint64, t.Buckets())
	for l := range t.Lanes() {
		if err := t.Install(l, zero); err != nil {
			b.Fatal(err)
		}
	}
}
