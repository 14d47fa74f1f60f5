package trace

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

func BenchmarkReadAll(b *testing.B) {
	data, err := os.ReadFile(slicePath)
	if err != nil {
		b.Fatalf("read %s: %v", slicePath, err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		reqs, err := ReadAll(bytes.NewReader(data), ReaderConfig{})
		if err != nil || len(reqs) != 400 {
			b.Fatalf("ReadAll = %d requests, %v; want 400", len(reqs), err)
		}
	}
	b.ReportMetric(400*float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}

func BenchmarkMapper(b *testing.B) {
	ids := make([]uint64, 64)
	for i := range ids {
		ids[i] = uint64(i) * 7919
	}
	for _, bs := range []int{512, 128, 16} {
		b.Run(fmt.Sprintf("scheme=split/bs=%d", bs), func(b *testing.B) {
			m, err := NewMapper(MapperConfig{BlockSize: bs})
			if err != nil {
				b.Fatalf("NewMapper(%d): %v", bs, err)
			}
			dst := make([]uint64, 0, len(ids)*m.BlocksPerID())
			for b.Loop() {
				if dst = m.AppendLocals(dst[:0], ids); len(dst) != len(ids)*m.BlocksPerID() {
					b.Fatalf("AppendLocals = %d hashes, want %d", len(dst), len(ids)*m.BlocksPerID())
				}
			}
			b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "ids/s")
		})
	}
}

// BenchmarkEngineServe replays the shipped slice through one engine,
// small enough to evict or large enough to keep everything.
func BenchmarkEngineServe(b *testing.B) {
	reqs := readSlice(b)
	m, _ := NewMapper(MapperConfig{})
	prompts := make([][]uint64, len(reqs))
	for i, r := range reqs {
		prompts[i] = m.AppendLocals(nil, r.HashIDs)
	}
	for _, capacity := range []int{1024, 16384} {
		b.Run(fmt.Sprintf("capacity=%d", capacity), func(b *testing.B) {
			var ops, served int
			var evs []kv.Event
			b.ReportAllocs()
			for b.Loop() {
				e, _ := NewEngine(EngineConfig{CapacityBlocks: capacity})
				for _, p := range prompts {
					var res Result
					evs, res = e.Serve(evs[:0], p)
					ops += res.StoredBlocks + res.EvictedBlocks
					served++
					if e.Blocks() > capacity {
						b.Fatalf("engine holds %d blocks, over capacity %d", e.Blocks(), capacity)
					}
				}
			}
			b.ReportMetric(float64(served)/b.Elapsed().Seconds(), "requests/s")
			b.ReportMetric(float64(ops)/b.Elapsed().Seconds(), "blockops/s")
		})
	}
}
