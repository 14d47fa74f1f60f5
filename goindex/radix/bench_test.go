package radix

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/kv"
)

// benchTrace supplies Mooncake request lengths (blocks per request).
const benchTrace = "../../testdata/mooncake/synthetic_head400.jsonl"

// traceLengths reads the block count of every request in a Mooncake JSONL
// trace.
func traceLengths(tb testing.TB, path string) []int {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("opening %s: %v", path, err)
	}
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r struct {
			HashIDs []uint64 `json:"hash_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		if len(r.HashIDs) > 0 {
			out = append(out, len(r.HashIDs))
		}
	}
	if err := sc.Err(); err != nil || len(out) == 0 {
		tb.Fatalf("%s: %d requests, err %v", path, len(out), err)
	}
	return out
}

// benchWorld is a Mooncake-shaped population: every member holds chains
// whose lengths follow the trace, starting with one of a few system
// prompts shared by all members; a third of the chains continue an earlier
// chain of the same member (a conversation's next turn).
type benchWorld struct {
	members int
	blocks  int // per member
	chains  [][][]uint64
	queries [][]uint64
}

func newBenchWorld(tb testing.TB, members, blocks int) *benchWorld {
	rng := rand.New(rand.NewSource(42))
	lengths := traceLengths(tb, benchTrace)
	systems := make([][]uint64, 32)
	for i := range systems {
		systems[i] = make([]uint64, 1+rng.Intn(8))
		for j := range systems[i] {
			systems[i][j] = rng.Uint64()
		}
	}
	w := &benchWorld{members: members, blocks: blocks, chains: make([][][]uint64, members)}
	for m := range members {
		held := 0
		for held < blocks {
			var c []uint64
			if prev := w.chains[m]; len(prev) > 0 && rng.Intn(3) == 0 {
				c = append(c, prev[rng.Intn(len(prev))]...)
			} else {
				c = append(c, systems[rng.Intn(len(systems))]...)
			}
			// The request's own length past the prefix it starts with, at
			// least one new block.
			for want := len(c) + max(1, lengths[rng.Intn(len(lengths))]-len(c)); len(c) < want; {
				c = append(c, rng.Uint64())
			}
			held += len(c)
			w.chains[m] = append(w.chains[m], c)
		}
	}
	for range 4096 {
		cs := w.chains[rng.Intn(members)]
		q := append([]uint64(nil), cs[rng.Intn(len(cs))]...)
		for range rng.Intn(4) {
			q = append(q, rng.Uint64())
		}
		w.queries = append(w.queries, q)
	}
	return w
}

// storeAll stores every chain of every member, member by member.
func (w *benchWorld) storeAll(tb testing.TB, x *Index) {
	var ev kv.Event
	var chain []uint64
	for m, cs := range w.chains {
		for _, c := range cs {
			chain = kv.AppendChain(chain[:0], false, 0, c)
			ev = kv.Event{Member: kv.Member{Worker: uint64(m)}, Kind: kv.Stored, Blocks: ev.Blocks[:0]}
			for i, l := range c {
				ev.Blocks = append(ev.Blocks, kv.Block{External: chain[i], Local: l})
			}
			if err := x.Apply(&ev); err != nil {
				tb.Fatalf("storing a chain of member %d: %v", m, err)
			}
		}
	}
}

// benchBlocks lists the per-member sizes to run: RADIX_BENCH_BLOCKS
// (comma-separated, "100k", "1M", "10M"), default 100k and 1M.
func benchBlocks(tb testing.TB) []int {
	spec := os.Getenv("RADIX_BENCH_BLOCKS")
	if spec == "" {
		spec = "100k,1M"
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mult, f = 1000, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "M"):
			mult, f = 1000_000, strings.TrimSuffix(f, "M")
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			tb.Fatalf("RADIX_BENCH_BLOCKS=%q: %v", spec, err)
		}
		out = append(out, n*mult)
	}
	return out
}

func blocksName(n int) string {
	switch {
	case n%1000_000 == 0:
		return fmt.Sprintf("%dM", n/1000_000)
	case n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

// scatter re-creates x's content with every node at a random free id: it
// removes all members, shuffles the free list and stores everything again.
// That is the node order of a long-running heap after churn.
func scatter(tb testing.TB, x *Index, w *benchWorld) {
	for m := range w.members {
		if err := x.RemoveMember(kv.Member{Worker: uint64(m)}); err != nil {
			tb.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(7))
	rng.Shuffle(len(x.a.free), func(i, j int) { x.a.free[i], x.a.free[j] = x.a.free[j], x.a.free[i] })
	w.storeAll(tb, x)
}

var benchSink int

// heapBytes returns the live heap after a collection.
func heapBytes() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// runMatch times every query separately and reports p50/p99 latency and
// queries per second; the result sink checks that each query found its own
// member's chain.
func runMatch(b *testing.B, w *benchWorld, match func(dst []kv.Overlap, q []uint64) []kv.Overlap) {
	dst := make([]kv.Overlap, 0, w.members)
	lat := make([]time.Duration, 0, b.N)
	hits := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := w.queries[i%len(w.queries)]
		t0 := time.Now()
		dst = match(dst[:0], q)
		lat = append(lat, time.Since(t0))
		for _, o := range dst {
			hits += o.Blocks
		}
	}
	b.StopTimer()
	if hits == 0 {
		b.Fatalf("no query matched anything")
	}
	benchSink += hits
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}

// BenchmarkMatch lines up, at 16 members: the index as built (nodes in
// allocation order), the same content with nodes at random ids (churned),
// that tree after Compact, and (at 100k) the reference model's hash maps.
func BenchmarkMatch(b *testing.B) {
	const members = 16
	for _, blocks := range benchBlocks(b) {
		w := newBenchWorld(b, members, blocks)
		before := heapBytes()
		x := New(Config{})
		w.storeAll(b, x)
		perBlock := float64(heapBytes()-before) / float64(x.Stats().Blocks)
		name := fmt.Sprintf("members=%d/blocks=%s", members, blocksName(blocks))
		b.Run("impl=radix/"+name, func(b *testing.B) {
			runMatch(b, w, x.Match)
			b.ReportMetric(perBlock, "bytes/block")
		})
		scatter(b, x, w)
		b.Run("impl=radix-churned/"+name, func(b *testing.B) { runMatch(b, w, x.Match) })
		t0 := time.Now()
		x.Compact()
		compactNs := float64(time.Since(t0).Nanoseconds()) / float64(x.Stats().Nodes)
		runtime.GC()
		b.Run("impl=radix-compacted/"+name, func(b *testing.B) {
			runMatch(b, w, x.Match)
			b.ReportMetric(compactNs, "compact-ns/node")
		})
		st := x.Stats()
		b.Logf("%s: %d nodes, %d held blocks", name, st.Nodes, st.Blocks)
		x = nil
		if blocks <= 100_000 {
			md := newModel(ClearRank)
			for m, cs := range w.chains {
				for _, c := range cs {
					md.store(kv.Member{Worker: uint64(m)}, modelParent{}, kv.AppendChain(nil, false, 0, c))
				}
			}
			var chain []uint64
			b.Run("impl=model/"+name, func(b *testing.B) {
				runMatch(b, w, func(dst []kv.Overlap, q []uint64) []kv.Overlap {
					chain = kv.AppendChain(chain[:0], false, 0, q)
					for m := range md.ranks {
						if _, r := md.lens(m, chain); r > 0 {
							dst = append(dst, kv.Overlap{Member: m, Blocks: r})
						}
					}
					return dst
				})
			})
		}
		runtime.GC()
	}
}

// BenchmarkMatchWide runs the same shape with members beyond the 64-bit
// mask, whose slots live in per-node sorted sets.
func BenchmarkMatchWide(b *testing.B) {
	for _, members := range []int{64, 256} {
		w := newBenchWorld(b, members, 10_000)
		x := New(Config{})
		w.storeAll(b, x)
		runtime.GC()
		b.Run(fmt.Sprintf("impl=radix/members=%d/blocks=10k", members), func(b *testing.B) { runMatch(b, w, x.Match) })
	}
}

// BenchmarkApply measures steady-state event throughput at 16 members: each
// iteration stores one trace-shaped chain for a member and removes (leaf
// first, as engines evict) the chain stored a full window earlier.
func BenchmarkApply(b *testing.B) {
	const members = 16
	w := newBenchWorld(b, members, 20_000)
	type prepared struct {
		store, remove kv.Event
		blocks        int
	}
	var evs []prepared
	for m, cs := range w.chains {
		for ci, c := range cs {
			chain := kv.AppendChain(nil, false, 0, c)
			p := prepared{blocks: len(c)}
			p.store = kv.Event{Member: kv.Member{Worker: uint64(m)}, Kind: kv.Stored}
			// Distinct external hashes per chain, so removals never hit a
			// prefix another chain of the member still uses.
			for i, l := range c {
				p.store.Blocks = append(p.store.Blocks, kv.Block{External: chain[i] ^ uint64(ci)<<40, Local: l ^ uint64(ci)<<40})
			}
			p.remove = kv.Event{Member: p.store.Member, Kind: kv.Removed}
			for i := len(c) - 1; i >= 0; i-- {
				p.remove.Removed = append(p.remove.Removed, p.store.Blocks[i].External)
			}
			evs = append(evs, p)
		}
	}
	rand.New(rand.NewSource(3)).Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	window := len(evs) / 2
	b.Run(fmt.Sprintf("impl=radix/members=%d", members), func(b *testing.B) {
		x := New(Config{})
		for i := range window {
			if err := x.Apply(&evs[i].store); err != nil {
				b.Fatal(err)
			}
		}
		blocks := 0
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			in := &evs[(window+i)%len(evs)]
			out := &evs[i%len(evs)]
			if err := x.Apply(&out.remove); err != nil {
				b.Fatalf("remove: %v", err)
			}
			if err := x.Apply(&in.store); err != nil {
				b.Fatalf("store: %v", err)
			}
			blocks += in.blocks + out.blocks
		}
		b.StopTimer()
		b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(blocks)/b.Elapsed().Seconds(), "blocks/s")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(blocks), "ns/block")
	})
}
