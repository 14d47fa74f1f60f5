package ckf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
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
	peak     int // most (member, block) mappings held at once
}

// mooncakeStream turns a trace into the KV events a pool of members would
// emit: requests go round-robin to members; each member stores the blocks
// of a request beyond the prefix it already holds (below that prefix as
// parent) and evicts its oldest blocks beyond capacity blocks. copies
// replays the trace with offset ids, as upstream's scale-up does.
func mooncakeStream(reqs [][]uint64, members, capacity, copies int) ingestStream {
	type held struct {
		ext   map[uint64]uint64 // hash id → external hash
		order []uint64          // hash ids, oldest first
	}
	hs := make([]held, members)
	for i := range hs {
		hs[i].ext = map[uint64]uint64{}
	}
	var st ingestStream
	live, n := 0, 0
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
					live++
				}
			}
			st.events = append(st.events, ev)
			st.blockOps += len(ev.Blocks)
			st.peak = max(st.peak, live)
			if over := len(h.order) - capacity; over > 0 {
				rm := kv.Event{Member: m, Kind: kv.Removed}
				for _, id := range h.order[:over] {
					rm.Removed = append(rm.Removed, h.ext[id])
					delete(h.ext, id)
				}
				h.order = append(h.order[:0], h.order[over:]...)
				live -= over
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

func BenchmarkIngest(b *testing.B) {
	reqs := readTrace(b, mooncakeTrace)
	for _, cfg := range []struct{ members, capacity, copies int }{
		{8, 2048, 4},
		{16, 32768, 60},
	} {
		st := mooncakeStream(reqs, cfg.members, cfg.capacity, cfg.copies)
		n, err := BucketCount(uint64(cfg.members * cfg.capacity))
		if err != nil {
			b.Fatal(err)
		}
		f, err := NewFormat(DefaultSeed, n)
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("impl=producer/members=%d/blocks=%d", cfg.members, cfg.members*cfg.capacity)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var elapsed time.Duration
			var images []Image
			var last Stats
			for b.Loop() {
				b.StopTimer()
				p, err := New(Config{Format: f})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				for i := range st.events {
					step, err := p.Apply(&st.events[i])
					if err != nil {
						b.Fatalf("Apply(event %d) = %v", i, err)
					}
					if step == StepPublish {
						images = p.Drain(images[:0])
					}
				}
				images = p.Drain(images[:0])
				elapsed += time.Since(start)
				b.StopTimer()
				last = p.Stats()
				b.StartTimer()
			}
			b.ReportMetric(float64(st.blockOps)*float64(b.N)/elapsed.Seconds(), "blockops/s")
			b.ReportMetric(float64(last.TrackedBlocks), "tracked")
			_ = runtime.NumGoroutine
		})
	}
}
