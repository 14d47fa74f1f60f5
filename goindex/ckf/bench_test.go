package ckf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/kv"
)

// mooncakeTrace is the request trace the benchmarks replay (one 512-token
// block id per hash id, equal ids at equal positions share a prefix).
const mooncakeTrace = "../../testdata/mooncake/synthetic_head400.jsonl"

// readTrace returns the hash ids of every request of a Mooncake trace.
func readTrace(tb testing.TB, path string) [][]uint64 {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("open trace: %v", err)
	}
	defer f.Close()
	var reqs [][]uint64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r struct {
			HashIDs []uint64 `json:"hash_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatalf("trace %s: %v", path, err)
		}
		reqs = append(reqs, r.HashIDs)
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("read trace %s: %v", path, err)
	}
	return reqs
}

// ingestStream is a replayable event stream and its size in block
// operations (stored plus removed blocks).
type ingestStream struct {
	events   []kv.Event
	blockOps int
	live     int // (member, block) mappings held after the stream
}

// mooncakeStream turns a trace into the KV events a pool of members would
// emit: requests go round-robin to members; each member stores the blocks
// of a request beyond the prefix it already holds (below that prefix as
// parent) and evicts its oldest blocks beyond capacity blocks. copies
// replays the trace with offset ids, as upstream's scale-up does.
func mooncakeStream(reqs [][]uint64, members, capacity, copies int) ingestStream {
	type held struct {
		ext   map[uint64]uint64 // hash id → external hash
		order []uint64          // hash ids, oldest first, from head on
		head  int
	}
	hs := make([]held, members)
	for i := range hs {
		hs[i].ext = map[uint64]uint64{}
	}
	var st ingestStream
	n := 0
	seq := make([]uint64, 0, 1024)
	locals := make([]uint64, 0, 1024)
	for cp := range copies {
		for _, ids := range reqs {
			h := &hs[n%members]
			m := kv.Member{Worker: uint64(n % members), Rank: 0}
			n++
			locals = locals[:0]
			for _, id := range ids {
				locals = append(locals, mixID(id+uint64(cp)<<40))
			}
			seq = kv.AppendChain(seq[:0], false, 0, locals)
			p := 0
			for p < len(ids) && h.ext[ids[p]+uint64(cp)<<40] == seq[p] && h.ext[ids[p]+uint64(cp)<<40] != 0 {
				p++
			}
			if p == len(ids) {
				continue
			}
			ev := kv.Event{Member: m, Kind: kv.Stored}
			if p > 0 {
				ev.HasParent, ev.Parent = true, seq[p-1]
			}
			for i := p; i < len(ids); i++ {
				id := ids[i] + uint64(cp)<<40
				ev.Blocks = append(ev.Blocks, kv.Block{External: seq[i], Local: locals[i]})
				if _, ok := h.ext[id]; !ok {
					h.ext[id] = seq[i]
					h.order = append(h.order, id)
					st.live++
				}
			}
			st.events = append(st.events, ev)
			st.blockOps += len(ev.Blocks)
			if over := len(h.order) - h.head - capacity; over > 0 {
				rm := kv.Event{Member: m, Kind: kv.Removed}
				for _, id := range h.order[h.head : h.head+over] {
					rm.Removed = append(rm.Removed, h.ext[id])
					delete(h.ext, id)
				}
				h.head += over
				if h.head > capacity { // compact now and then, not per request
					h.order = append(h.order[:0], h.order[h.head:]...)
					h.head = 0
				}
				st.live -= over
				st.events = append(st.events, rm)
				st.blockOps += len(rm.Removed)
			}
		}
	}
	return st
}

// mixID stands in for the local hash of the 512-token block of a hash id.
func mixID(id uint64) uint64 {
	r := splitmix{state: id}
	return r.next()
}

// ingestBatch is how many events BenchmarkIngest's impl=batch hands to
// one ApplyBatch call.
const ingestBatch = 256

// BenchmarkIngest replays Mooncake-shaped chains (stores below held
// prefixes, FIFO evictions as removes) through a fresh producer whose
// filter is sized for the pool, draining at every boundary the default
// cadence asks for: impl=producer with the owner table grown as it fills,
// impl=presized with Config.ExpectedBlocks and ExpectedMemberBlocks set to
// the pool's and each member's capacity, impl=presized-nohuge the same
// without advising huge pages for the producer's tables, impl=batch the
// presized producer fed through ApplyBatch, ingestBatch events a call. It
// reports block operations (stored plus removed blocks) per second of wall
// time and of the benchmark thread's CPU time (cpu-blockops/s, steadier on
// a shared machine; Linux only), and
// the producer's memory per tracked block at the end of the stream, both
// from Stats and from the Go heap.
func BenchmarkIngest(b *testing.B) {
	reqs := readTrace(b, mooncakeTrace)
	for _, cfg := range []struct{ members, capacity, copies int }{
		{8, 2048, 4},
		{16, 32768, 60},
		{16, 131072, 240},
	} {
		if testing.Short() && cfg.capacity > 2048 {
			continue
		}
		st := mooncakeStream(reqs, cfg.members, cfg.capacity, cfg.copies)
		n, err := BucketCount(uint64(cfg.members * cfg.capacity))
		if err != nil {
			b.Fatal(err)
		}
		f, err := NewFormat(DefaultSeed, n)
		if err != nil {
			b.Fatal(err)
		}
		for _, impl := range []string{"producer", "presized", "presized-nohuge", "batch"} {
			name := fmt.Sprintf("impl=%s/members=%d/blocks=%d", impl, cfg.members, cfg.members*cfg.capacity)
			expect, memberExpect := 0, 0
			if impl != "producer" {
				expect = cfg.members * cfg.capacity // Config.ExpectedBlocks: the pool's capacity
				memberExpect = cfg.capacity         // and each member's
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				hugePages = impl != "presized-nohuge"
				defer func() { hugePages = true }()
				runtime.LockOSThread() // threadCPU measures this goroutine's thread
				defer runtime.UnlockOSThread()
				var elapsed, cpu time.Duration
				var images []Image
				var last Stats
				var heap uint64
				for b.Loop() {
					b.StopTimer()
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					p, err := New(Config{Format: f, ExpectedBlocks: expect, ExpectedMemberBlocks: memberExpect})
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start, cpu0 := time.Now(), threadCPU()
					onEvent := func(i int, step Step, err error) {
						if err != nil {
							b.Fatalf("Apply(event %d) = %v", i, err)
						}
						if step == StepPublish {
							images = p.Drain(images[:0])
						}
					}
					if impl == "batch" {
						for i := 0; i < len(st.events); i += ingestBatch {
							p.ApplyBatch(st.events[i:min(i+ingestBatch, len(st.events))], func(j int, step Step, err error) { onEvent(i+j, step, err) })
						}
					} else {
						for i := range st.events {
							step, err := p.Apply(&st.events[i])
							onEvent(i, step, err)
						}
					}
					images = p.Drain(images[:0])
					elapsed += time.Since(start)
					cpu += threadCPU() - cpu0
					b.StopTimer()
					last = p.Stats()
					runtime.GC()
					runtime.ReadMemStats(&after)
					heap = after.HeapAlloc - before.HeapAlloc
					runtime.KeepAlive(p)
					b.StartTimer()
				}
				if last.TrackedBlocks != uint64(st.live) || last.CapacityOmissions != 0 {
					b.Fatalf("after the stream: %d tracked, %d omitted; want %d tracked, none omitted", last.TrackedBlocks, last.CapacityOmissions, st.live)
				}
				b.ReportMetric(float64(st.blockOps)*float64(b.N)/elapsed.Seconds(), "blockops/s")
				if cpu > 0 {
					b.ReportMetric(float64(st.blockOps)*float64(b.N)/cpu.Seconds(), "cpu-blockops/s")
				}
				b.ReportMetric(float64(last.MemoryBytes)/float64(last.TrackedBlocks), "statsB/block")
				b.ReportMetric(float64(heap)/float64(last.TrackedBlocks), "heapB/block")
				b.ReportMetric(last.LoadFactor, "load")
			})
		}
	}
}

// BenchmarkMap compares the producer's flatMap with a Go map on its
// workload: find-or-insert of new random keys and deletion of the oldest,
// at a steady size larger than the caches.
func BenchmarkMap(b *testing.B) {
	const size = 1 << 20
	keys := make([]uint64, 4*size)
	r := splitmix{state: 1}
	for i := range keys {
		keys[i] = r.next()
	}
	b.Run("impl=flat", func(b *testing.B) {
		m := newFlatMap[uint64](0)
		for _, k := range keys[:size] {
			v, _ := m.upsert(k)
			*v = k
		}
		i := 0
		for b.Loop() {
			in, out := keys[(i+size)%len(keys)], keys[i%len(keys)]
			if v, found := m.upsert(in); !found {
				*v = in
			}
			if !m.del(out) {
				b.Fatalf("del(%#x) = false, want true", out)
			}
			i++
		}
		b.ReportMetric(float64(m.bytes())/float64(m.len()), "B/key")
	})
	b.Run("impl=gomap", func(b *testing.B) {
		m := make(map[uint64]uint64)
		for _, k := range keys[:size] {
			m[k] = k
		}
		i := 0
		for b.Loop() {
			in, out := keys[(i+size)%len(keys)], keys[i%len(keys)]
			if _, found := m[in]; !found {
				m[in] = in
			}
			if _, ok := m[out]; !ok {
				b.Fatalf("key %#x missing", out)
			}
			delete(m, out)
			i++
		}
	})
}

// BenchmarkDrain compares drain's ordered walk of the dirty bitmap with
// sorting the window's entries by bucket (packed (bucket, index) keys and
// the ordered sort, the drain it replaced), for a 16-event window's worth
// of dirty buckets in a cache-resident table (2^13 buckets) and a large
// one (2^20).
func BenchmarkDrain(b *testing.B) {
	for _, n := range []uint32{1 << 13, 1 << 20} {
		b.Run(fmt.Sprintf("buckets=%d", n), func(b *testing.B) { benchmarkDrain(b, n) })
	}
}

func benchmarkDrain(b *testing.B, n uint32) {
	const dirty = 512
	words := make([]uint64, n)
	r := splitmix{state: 2}
	entries := make([]touch, 0, dirty)
	for len(entries) < dirty {
		bk := uint32(r.next() % uint64(n))
		if words[bk] == 0 {
			words[bk] = r.next() | 1
			entries = append(entries, touch{bucket: bk})
		}
	}
	ascending := func(out []Image) bool {
		return slices.IsSortedFunc(out, func(x, y Image) int { return int(x.Bucket) - int(y.Bucket) })
	}
	b.Run("impl=bitmap", func(b *testing.B) {
		w := newWindow(uint64(n))
		var out []Image
		for b.Loop() {
			for _, e := range entries {
				w.mark(e)
			}
			out, _ = w.drain(out[:0], words)
		}
		if len(out) != dirty || !ascending(out) {
			b.Fatalf("drain returned %d images (ascending %v), want %d ascending", len(out), ascending(out), dirty)
		}
	})
	b.Run("impl=sort", func(b *testing.B) {
		var list []touch
		var order []uint64
		var out []Image
		for b.Loop() {
			list = append(list[:0], entries...)
			order = order[:0]
			for i, e := range list {
				order = append(order, uint64(e.bucket)<<32|uint64(i))
			}
			slices.Sort(order)
			out = out[:0]
			for _, k := range order {
				if e := list[uint32(k)]; words[e.bucket] != e.word {
					out = append(out, Image{Bucket: e.bucket, Word: words[e.bucket]})
				}
			}
		}
		if len(out) != dirty || !ascending(out) {
			b.Fatalf("reference drain returned %d images (ascending %v), want %d ascending", len(out), ascending(out), dirty)
		}
	})
}
