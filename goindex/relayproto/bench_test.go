package relayproto

import (
	"cmp"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

var benchSink int

// occupiedSlots counts the non-empty slots (blocks) of words.
func occupiedSlots(words []uint64) int {
	n := 0
	for _, w := range words {
		n += bits.OnesCount8(occupancy(w))
	}
	return n
}

// BenchmarkSnapshot encodes and decodes one MaxChunkWords chunk at 50% and
// 80% slot load in both encodings, reporting wire bytes per block.
func BenchmarkSnapshot(b *testing.B) {
	f, _ := NewFormat(1, MaxChunkWords)
	id := testIdentity(f, 1, 1)
	for _, load := range []int{50, 80} {
		words := wordsAtLoad(rand.New(rand.NewPCG(uint64(load), 1)), MaxChunkWords, float64(load)/100)
		blocks := occupiedSlots(words)
		for _, enc := range []Encoding{Compact, Dense} {
			s := &Snapshot{Identity: id, Sequence: 1, Total: MaxChunkWords, Words: words, Encoding: enc}
			frame, err := AppendSnapshot(nil, s)
			if err != nil {
				b.Fatal(err)
			}
			perBlock := float64(len(frame)) / float64(blocks)
			b.Run(fmt.Sprintf("enc=%v/load=%d/op=encode", enc, load), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(8 * len(words)))
				buf := make([]byte, 0, len(frame))
				for b.Loop() {
					buf, _ = AppendSnapshot(buf[:0], s)
				}
				if len(buf) != len(frame) {
					b.Fatalf("encoded %d bytes, want %d", len(buf), len(frame))
				}
				benchSink += len(buf)
				b.ReportMetric(perBlock, "bytes/block")
			})
			b.Run(fmt.Sprintf("enc=%v/load=%d/op=decode", enc, load), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(8 * len(words)))
				var d Snapshot
				for b.Loop() {
					if _, err := DecodeSnapshot(&d, frame); err != nil {
						b.Fatal(err)
					}
				}
				if d.Words[len(d.Words)-1] != words[len(words)-1] {
					b.Fatalf("decoded words differ")
				}
				benchSink += len(d.Words)
				b.ReportMetric(perBlock, "bytes/block")
			})
		}
	}
}

// BenchmarkDelta encodes and decodes deltas of 16 and 4096 images,
// reporting images/s.
func BenchmarkDelta(b *testing.B) {
	f, _ := NewFormat(1, 1<<22)
	id := testIdentity(f, 1, 1)
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{16, 4096} {
		d := &Delta{Identity: id, Lease: Lease{ConsumerInstance: 1, Epoch: 1}, Base: 9, Sequence: 10, Images: make([]Image, n)}
		for i := range d.Images {
			d.Images[i] = Image{Bucket: uint32(rng.IntN(1 << 22)), Word: randomWord(rng)}
		}
		frame, _ := AppendDelta(nil, d)
		b.Run(fmt.Sprintf("images=%d/op=encode", n), func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, len(frame))
			for b.Loop() {
				buf, _ = AppendDelta(buf[:0], d)
			}
			benchSink += len(buf)
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "images/s")
			b.ReportMetric(float64(len(frame))/float64(n), "bytes/image")
		})
		b.Run(fmt.Sprintf("images=%d/op=decode", n), func(b *testing.B) {
			b.ReportAllocs()
			var dec Decoder
			for b.Loop() {
				m, _, err := dec.Decode(frame)
				if err != nil || len(m.(*Delta).Images) != n {
					b.Fatal(err)
				}
			}
			benchSink++
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// BenchmarkCatchUp applies a backlog of 256 deltas of 48 images over a
// 4M-bucket lane, as CatchUp does, reporting images/s.
func BenchmarkCatchUp(b *testing.B) {
	const n, deltas, images = 1 << 22, 256, 48
	f, _ := NewFormat(1, n)
	id := testIdentity(f, 1, 1)
	m := Manifest{ConsumerInstance: 42, Domain: testDomain, Format: f, Lanes: []PoolID{id.Pool}}
	rng := rand.New(rand.NewPCG(4, 4))
	backlog := make([]Delta, deltas)
	for i := range backlog {
		backlog[i] = Delta{Identity: id, Base: uint64(i), Sequence: uint64(i + 1), Images: make([]Image, images)}
		for j := range backlog[i].Images {
			backlog[i].Images[j] = Image{Bucket: uint32(rng.IntN(n)), Word: randomWord(rng)}
		}
		slices.SortFunc(backlog[i].Images, func(a, b Image) int { return cmp.Compare(a.Bucket, b.Bucket) })
	}
	tbl := newMemTable(1, n)
	c, _ := NewConsumer(m, tbl, ConsumerConfig{})
	l := c.Lane(0)
	if err := l.Claim(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		lease := l.NextLease()
		if err := l.Assign(id, lease); err != nil {
			b.Fatal(err)
		}
		if o := l.Snapshot(&Snapshot{Identity: id, Lease: lease, Total: n, Words: tbl.words[0]}); o != Installed {
			b.Fatalf("Snapshot = %v", o)
		}
		for i := range backlog {
			backlog[i].Lease = lease
		}
		b.StartTimer()
		if k, o := l.ApplyDeltas(backlog); k != deltas || o != Applied {
			b.Fatalf("ApplyDeltas = %d, %v", k, o)
		}
	}
	benchSink += int(l.Status().Installed)
	b.ReportMetric(float64(deltas*images)*float64(b.N)/b.Elapsed().Seconds(), "images/s")
}
