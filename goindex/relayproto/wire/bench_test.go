package wire

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/bucketgen"
	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
	"github.com/goindex/goindex/goindex/relayproto/snapenc"
)

var benchSink int

// occupiedSlots counts the non-empty slots (blocks) of words.
func occupiedSlots(words []uint64) int {
	n := 0
	for _, w := range words {
		for s := range 4 {
			if uint16(w>>(16*s)) != 0 {
				n++
			}
		}
	}
	return n
}

// BenchmarkSnapshot encodes and decodes one MaxChunkWords chunk at 50% and
// 80% slot load in both encodings, reporting wire bytes per block.
func BenchmarkSnapshot(b *testing.B) {
	f, _ := relayproto.NewFormat(1, relayproto.MaxChunkWords)
	id := prototest.Identity(f, 1, 1)
	for _, load := range []int{50, 80} {
		words := bucketgen.AtLoad(rand.New(rand.NewPCG(uint64(load), 1)), relayproto.MaxChunkWords, float64(load)/100)
		blocks := occupiedSlots(words)
		for _, enc := range []snapenc.Encoding{snapenc.Compact, snapenc.Dense} {
			s := &relayproto.Snapshot{Identity: id, Sequence: 1, Total: relayproto.MaxChunkWords, Words: words, Encoding: enc}
			frame, err := appendSnapshot(nil, s)
			if err != nil {
				b.Fatal(err)
			}
			perBlock := float64(len(frame)) / float64(blocks)
			b.Run(fmt.Sprintf("enc=%v/load=%d/op=encode", enc, load), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(8 * len(words)))
				buf := make([]byte, 0, len(frame))
				for b.Loop() {
					buf, _ = appendSnapshot(buf[:0], s)
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
				var d relayproto.Snapshot
				for b.Loop() {
					if _, err := decodeSnapshot(&d, frame); err != nil {
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
	f, _ := relayproto.NewFormat(1, 1<<22)
	id := prototest.Identity(f, 1, 1)
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{16, 4096} {
		d := &relayproto.Delta{Identity: id, Lease: relayproto.Lease{ConsumerInstance: 1, Epoch: 1}, Base: 9, Sequence: 10, Images: make([]relayproto.Image, n)}
		for i := range d.Images {
			d.Images[i] = relayproto.Image{Bucket: uint32(rng.IntN(1 << 22)), Word: bucketgen.Word(rng)}
		}
		frame, _ := appendDelta(nil, d)
		b.Run(fmt.Sprintf("images=%d/op=encode", n), func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, len(frame))
			for b.Loop() {
				buf, _ = appendDelta(buf[:0], d)
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
				if err != nil || len(m.(*relayproto.Delta).Images) != n {
					b.Fatal(err)
				}
			}
			benchSink++
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}
