package follow

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/tests/c/fixture"
)

// BenchmarkMatch is one 13-lane probe of an attached replica file
// (tests/c/bench.c's global workload, 13 lanes of 2^18 blocks), the same
// view searched with the fault guard (guard=on: debug.SetPanicOnFault set
// and restored around the search, what every reader of a file does) and
// without it (guard=off, as an in-memory Feed's lanes are read): the
// guard's cost on the probe path. query=miss is a one-block query no lane
// holds, where the search does almost nothing and the guard's share is
// largest.
func BenchmarkMatch(b *testing.B) {
	cfg := fixture.BenchConfig{LaneBlocks: make([]int, fixture.BenchDCs), Docs: 1024}
	for l := range cfg.LaneBlocks {
		cfg.LaneBlocks[l] = 1 << 18
	}
	path := filepath.Join(b.TempDir(), "replica")
	queries, _, err := fixture.WriteBenchReplica(path, cfg)
	if err != nil {
		b.Fatalf("WriteBenchReplica: %v", err)
	}
	f := New(path, Config{VerifyEvery: -1})
	if err := f.Attach(); err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	on := f.Acquire()
	defer on.Release()
	off := newView(on.r, false) // the same mapping, unguarded
	miss := []uint64{0x5eed}
	for _, c := range []struct {
		name string
		v    *View
	}{{"guard=on", on}, {"guard=off", off}} {
		b.Run(c.name+"/query=hit/lanes=13", func(b *testing.B) {
			var dst []kv.Overlap
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				q := &queries[i%len(queries)]
				if dst = c.v.Match(dst[:0], q.Locals); len(dst) != q.Entries {
					b.Fatalf("query %d: %d lanes, want %d", i%len(queries), len(dst), q.Entries)
				}
			}
		})
		b.Run(c.name+"/query=miss/lanes=13", func(b *testing.B) {
			var dst []kv.Overlap
			b.ReportAllocs()
			for b.Loop() {
				if dst = c.v.Match(dst[:0], miss); len(dst) != 0 {
					b.Fatalf("the miss matched %d lanes", len(dst))
				}
			}
		})
	}
}

// BenchmarkTurnover is the eviction charge's share of a ttft decision over
// 13 DCs: each DC's load record taken into its insert rate and its
// EvictionFactor set (the rates known, as in steady routing).
func BenchmarkTurnover(b *testing.B) {
	const dcs = 13
	tr := NewTurnover(dcs)
	at := time.Unix(1_760_000_000, 0)
	lds := make([]shm.Load, dcs)
	for i := range lds {
		lds[i] = shm.Load{At: at, Incarnation: 1, StoredBlocks: 1000}
		tr.InsertRate(i, &lds[i])
		lds[i].At, lds[i].StoredBlocks = at.Add(time.Second), 1000+uint64(500*i)
	}
	c := score.Candidate{HasLoad: true, HasCapacity: true, CapacityBlocks: 1 << 16}
	var sum float64
	b.ReportAllocs()
	for b.Loop() {
		for i := range lds {
			tr.SetEvictionFactor(&c, i, &lds[i])
			sum += c.EvictionFactor
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/dcs, "ns/DC")
	if !(sum > 0) {
		b.Fatalf("no DC got an eviction factor")
	}
}
