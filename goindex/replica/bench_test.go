package replica

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

// BenchmarkProbe measures one query's search across all lanes on tables
// filled with real canonical hashes of Mooncake requests, p50/p99 per
// query. Sub-benchmarks line up as impl=replica-fast (Chunked, the
// default), impl=replica-bisect (upstream's shape), impl=linear (the
// reference, one position after another) and impl=radix (the exact tree,
// lanes ≤ 16 at 1M blocks, where its memory stays near a gigabyte) and
// impl=line-floor (the lines a query reads, overlapped, with no search:
// the machine's memory limit, see lineFloor), for 4,
// 16 and 64 lanes of blocks=1M each. GOINDEX_BENCH_BLOCKS=10M (or "1M,10M")
// selects the 10M-block tables of spec §2 (n = 2^22, 59.6% load; 512 MiB of
// table at 16 lanes).
//
// Workload: the two 400-request Mooncake slices in testdata, copied with
// per-copy id offsets (as upstream's benchmark does) into a universe of
// requests; every hash id becomes a stand-in local hash, chained with
// kv.AppendChain into canonical hashes. Each lane takes every request with
// probability 1/4 until it holds N distinct blocks; a query is a request
// drawn from the part of the universe every lane has walked, so it is fully
// cached in about a quarter of the lanes and shares prefixes with others.
// 65,536 distinct queries keep the touched rows far beyond the 32 MiB L3.
func BenchmarkProbe(b *testing.B) {
	sizes := []int{1 << 20}
	if env := os.Getenv("GOINDEX_BENCH_BLOCKS"); env != "" {
		sizes = sizes[:0]
		for _, s := range strings.Split(env, ",") {
			switch strings.TrimSpace(s) {
			case "1M":
				sizes = append(sizes, 1<<20)
			case "10M":
				sizes = append(sizes, 10_000_000)
			default:
				b.Fatalf("GOINDEX_BENCH_BLOCKS=%q: want a list of 1M and 10M", env)
			}
		}
	}
	reqs := loadMooncake(b)
	var fx *probeFixture
	for _, blocks := range sizes {
		for _, lanes := range []int{4, 16, 64} {
			fx = nil // drop the previous tables before building the next
			get := func(b *testing.B) *probeFixture {
				if fx == nil {
					fx = newProbeFixture(b, reqs, lanes, blocks)
				}
				return fx
			}
			for _, impl := range []string{"replica-fast", "replica-fast-go", "replica-bisect", "linear", "radix", "line-floor"} {
				if impl == "radix" && (lanes > 16 || blocks > 1<<20) {
					continue
				}
				b.Run(fmt.Sprintf("impl=%s/lanes=%d/blocks=%s", impl, lanes, blockLabel(blocks)), func(b *testing.B) {
					runProbe(b, get(b), impl)
				})
			}
		}
	}
}

func blockLabel(n int) string {
	if n == 1<<20 {
		return "1M"
	}
	return fmt.Sprintf("%dM", n/1_000_000)
}

// loadMooncake reads the hash ids of every request of the testdata slices.
func loadMooncake(b testing.TB) [][]uint64 {
	var reqs [][]uint64
	for _, name := range []string{"conversation_head400.jsonl", "synthetic_head400.jsonl"} {
		fh, err := os.Open("../../testdata/mooncake/" + name)
		if err != nil {
			b.Fatalf("open trace: %v", err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r struct {
				HashIDs []uint64 `json:"hash_ids"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			reqs = append(reqs, r.HashIDs)
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
	}
	return reqs
}

// universe is copies of the trace's requests, flattened: request i's local
// and canonical hashes are locals/canon[start[i]:start[i+1]].
type universe struct {
	locals, canon []uint64
	start         []int
}

func (u *universe) requests() int          { return len(u.start) - 1 }
func (u *universe) canonOf(i int) []uint64 { return u.canon[u.start[i]:u.start[i+1]] }
func (u *universe) localOf(i int) []uint64 { return u.locals[u.start[i]:u.start[i+1]] }

// newUniverse copies reqs until a lane taking a quarter of the requests can
// reach blocks distinct blocks, with a 30% margin.
func newUniverse(reqs [][]uint64, blocks int) *universe {
	distinct := map[uint64]bool{} // the distinct prefixes of one copy
	for _, r := range reqs {
		for _, c := range kv.AppendChain(nil, false, 0, r) {
			distinct[c] = true
		}
	}
	copies := 1 + int(1.3*4*float64(blocks)/float64(len(distinct)))
	u := &universe{start: []int{0}}
	for c := 0; c < copies; c++ {
		for _, r := range reqs {
			first := len(u.locals)
			for _, id := range r {
				// A stand-in local hash per (copy, hash id): the trace's ids
				// name 512-token blocks whose tokens it does not ship.
				u.locals = append(u.locals, ckf.Hash8(uint64(c)<<32|id, kv.ChainSeed))
			}
			u.canon = kv.AppendChain(u.canon, false, 0, u.locals[first:])
			u.start = append(u.start, len(u.locals))
		}
	}
	return u
}

const benchQueries = 1 << 16

type probeFixture struct {
	lanes, blocks int
	f             *ckf.Format
	tab           *Table
	u             *universe
	taken         [][]int // per lane, the requests it holds
	queries       []int   // request indices
	radix         *radix.Index
}

func newProbeFixture(b testing.TB, reqs [][]uint64, lanes, blocks int) *probeFixture {
	start := time.Now()
	n, err := ckf.BucketCount(uint64(blocks))
	if err != nil {
		b.Fatal(err)
	}
	fx := &probeFixture{lanes: lanes, blocks: blocks, f: mustFormat(b, n), tab: mustTable(b, lanes, n), u: newUniverse(reqs, blocks)}
	words := make([]uint64, n)
	walked := fx.u.requests()
	for l := 0; l < lanes; l++ {
		clear(words)
		rng := rand.New(rand.NewPCG(uint64(l), 0xBE7C4))
		fl := filler{f: fx.f, words: words, rng: rng}
		held, i := 0, 0
		var taken []int
		for ; held < blocks; i++ {
			if i == fx.u.requests() {
				b.Fatalf("lane %d: universe of %d requests exhausted at %d blocks", l, i, held)
			}
			if rng.IntN(4) != 0 {
				continue
			}
			taken = append(taken, i)
			for _, h := range fx.u.canonOf(i) {
				fresh, ok := fl.add(h)
				if !ok {
					b.Fatalf("lane %d: cuckoo insertion failed at %d blocks (load %.1f%%)", l, held, 100*float64(held)/float64(4*n))
				}
				if fresh {
					held++
				}
			}
		}
		walked = min(walked, i)
		fx.taken = append(fx.taken, taken)
		if err := fx.tab.Install(l, words); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 0x9E7))
	for range benchQueries {
		fx.queries = append(fx.queries, rng.IntN(walked))
	}
	b.Logf("fixture lanes=%d blocks=%d: n=%d, load %.1f%%, %d requests walked, built in %v",
		lanes, blocks, n, 100*float64(blocks)/float64(4*n), walked, time.Since(start).Round(time.Millisecond))
	fx.check(b)
	return fx
}

// check holds the fast search equal to the linear reference and bisection
// at or above it on a sample of the queries, and reports how many lanes
// hit per query, so each sub-benchmark measures real hits.
func (fx *probeFixture) check(b testing.TB) {
	lin := mustSearcher(b, fx.tab, fx.f, Linear, 0)
	fast := mustSearcher(b, fx.tab, fx.f, Chunked, 0)
	bis := mustSearcher(b, fx.tab, fx.f, Bisect, 0)
	var hitLanes, blocks, inflated int
	var dl, df, db []uint32
	const sample = 4096
	for _, qi := range fx.queries[:sample] {
		q := fx.u.canonOf(qi)
		dl, _ = lin.Search(dl, q, ^uint64(0))
		df, _ = fast.Search(df, q, ^uint64(0))
		db, _ = bis.Search(db, q, ^uint64(0))
		blocks += len(q)
		for l := range dl {
			if df[l] != dl[l] || db[l] < dl[l] {
				b.Fatalf("query %d lane %d: fast %d bisect %d linear %d; want fast = linear ≤ bisect", qi, l, df[l], db[l], dl[l])
			}
			if dl[l] > 0 {
				hitLanes++
			}
			if db[l] > dl[l] {
				inflated++
			}
		}
	}
	b.Logf("fixture lanes=%d: %.1f blocks and %.1f hit lanes per query; bisect above linear on %d of %d lane results",
		fx.lanes, float64(blocks)/sample, float64(hitLanes)/sample, inflated, sample*fx.lanes)
}

// buildRadix feeds the exact tree the same lane contents, lane l as member
// l, and checks the CKF never reports less than the exact depth.
func (fx *probeFixture) buildRadix(b *testing.B) *radix.Index {
	if fx.radix != nil {
		return fx.radix
	}
	// Store in trace order, each request into every lane holding it, as a
	// live index would see them arrive (tree nodes end up allocated in
	// arrival order, with no churn: the tree's best case).
	x := radix.New(radix.Config{})
	next := make([]int, fx.lanes) // per lane, its next request in taken
	for i := 0; ; i++ {
		left := false
		for l, taken := range fx.taken {
			if next[l] == len(taken) {
				continue
			}
			left = true
			if taken[next[l]] != i {
				continue
			}
			next[l]++
			ev := kv.Event{Member: kv.Member{Worker: uint64(l)}, Kind: kv.Stored}
			for j, c := range fx.u.canonOf(i) {
				ev.Blocks = append(ev.Blocks, kv.Block{External: c, Local: fx.u.localOf(i)[j]})
			}
			if err := x.Apply(&ev); err != nil {
				b.Fatalf("radix Apply(lane %d, request %d): %v", l, i, err)
			}
		}
		if !left {
			break
		}
	}
	lin := mustSearcher(b, fx.tab, fx.f, Linear, 0)
	var dl []uint32
	var ov []kv.Overlap
	var exact, total int
	for _, qi := range fx.queries[:4096] {
		dl, _ = lin.Search(dl, fx.u.canonOf(qi), ^uint64(0))
		ov = x.Match(ov[:0], fx.u.localOf(qi))
		want := make([]uint32, fx.lanes)
		for _, o := range ov {
			want[o.Member.Worker] = uint32(o.Blocks)
		}
		for l := range want {
			if dl[l] < want[l] {
				b.Fatalf("query %d lane %d: CKF depth %d below exact %d", qi, l, dl[l], want[l])
			}
			if dl[l] == want[l] {
				exact++
			}
			total++
		}
	}
	b.Logf("CKF depth exact on %d of %d lane results (any other over by fingerprint collisions)", exact, total)
	fx.radix = x
	return x
}

// runProbe times impl on the fixture's queries, one query per iteration.
func runProbe(b *testing.B, fx *probeFixture, impl string) {
	var search func(q []uint64) int
	query := fx.u.canonOf
	if impl == "radix" {
		query = fx.u.localOf
	}
	switch impl {
	case "replica-fast", "replica-fast-go", "replica-bisect", "linear":
		mode := map[string]Mode{"replica-fast": Chunked, "replica-fast-go": Chunked, "replica-bisect": Bisect, "linear": Linear}[impl]
		s := mustSearcher(b, fx.tab, fx.f, mode, 0)
		if impl == "replica-fast-go" {
			s.kern = goKernels // the portable path, to line up the assembly kernels' gain
		}
		dst := make([]uint32, fx.lanes)
		search = func(q []uint64) int {
			dst, _ = s.Search(dst, q, ^uint64(0))
			return int(dst[0])
		}
	case "radix":
		x := fx.buildRadix(b)
		var ov []kv.Overlap
		search = func(q []uint64) int {
			ov = x.Match(ov[:0], q)
			return len(ov)
		}
	case "line-floor":
		search = lineFloor(fx)
	}
	lat := make([]time.Duration, 0, 1<<16)
	sink := 0
	var q []uint64
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// A router has just computed the query's hashes: copy them into
		// a hot buffer so the timing covers the table, not the universe.
		q = append(q[:0], query(fx.queries[i%benchQueries])...)
		t0 := time.Now()
		sink += search(q)
		d := time.Since(t0)
		if len(lat) < cap(lat) {
			lat = append(lat, d)
		} else {
			lat[i%cap(lat)] = d
		}
		i++
	}
	benchSink = sink
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

var benchSink int

// lineFloor is impl=line-floor: the memory limit of a query, not a search.
// For each query of L positions it reads, with the native kernels, the
// lines of rows A and B of every lane group at L random bucket pairs: all
// addresses known at once, every line prefetched before any is tested, no
// hashing, no early exit and no lane dropping out. Its time per query over
// 4·L lines (16 lanes) is what overlapped random lines cost on this
// machine; replica-fast reads about as many lines (all lanes stay in while
// some lane holds the whole request) and pays for hashing and control on
// top.
func lineFloor(fx *probeFixture) func(q []uint64) int {
	rng := rand.New(rand.NewPCG(5, 5))
	n := uint32(fx.tab.buckets)
	var groups groupList
	groups.set(fx.tab.all)
	k := nativeKernels()
	var ps []ckf.Probe
	var hits []uint64
	return func(q []uint64) int {
		ps, hits = ps[:0], hits[:0]
		for range q {
			ps = append(ps, ckf.Probe{FP: uint16(rng.Uint32()) | 1, A: rng.Uint32N(n), B: rng.Uint32N(n)})
			hits = append(hits, 0)
		}
		stride := uint64(fx.tab.stride)
		k.prefetch(fx.tab.rows, ps, stride, groups.list())
		k.test(fx.tab.rows, ps, stride, groups.list(), fx.tab.all, hits)
		return len(ps) + int(hits[len(hits)-1]&1)
	}
}

// BenchmarkLineCost is the memory system's price of one table line when a
// query's lines are all in flight at once, against the table's size and
// the number of distinct 4 KiB pages the lines fall in: what separates the
// search's figures from the lines it reads. Each iteration is one
// line-floor batch at 16 lanes: 31 positions (a Mooncake request), rows A
// and B each, both lane groups (124 lines), every line prefetched before
// any is tested, by the native kernels. pages=62 draws every row at
// random, as a query does (two pages a position); pages=8 draws the same
// 62 rows from 8 random pages, fresh each batch, so every line is as cold
// but 8 translations serve them all. Where the two differ at the same
// size, the difference is address translation, not the lines. pages=a-first
// is the best case of a search that reads row B only where row A leaves a
// lane unresolved: rows A of all 31 positions, tested, then rows B of
// bPositions of them (the B positions `goindex bench ckf` counts), one
// dependent round more and 46 lines fewer.
func BenchmarkLineCost(b *testing.B) {
	const (
		lanes      = 16
		positions  = 31
		rowBytes   = 128 // 16 lanes × 8 bytes
		pageRows   = 4096 / rowBytes
		bPositions = 8
		aFirst     = -1
	)
	for _, mib := range []int{16, 128, 512} {
		n := uint64(mib<<20) / rowBytes
		var tab *Table
		for _, pages := range []int{2 * positions, 8, aFirst} {
			name := fmt.Sprint(pages)
			if pages == aFirst {
				name = "a-first"
			}
			b.Run(fmt.Sprintf("table=%dMiB/pages=%s", mib, name), func(b *testing.B) {
				if tab == nil {
					tab = mustTable(b, lanes, n)
					for l := range lanes { // fault every page in before timing
						tab.StoreWords(l, 0, make([]uint64, n))
					}
				}
				rng := rand.New(rand.NewPCG(uint64(mib), uint64(pages)))
				var groups groupList
				groups.set(tab.all)
				k := nativeKernels()
				ps, hits := make([]ckf.Probe, positions), make([]uint64, positions)
				pageOf := make([]uint32, max(pages, 0))
				row := func() uint32 {
					if pages != 8 {
						return rng.Uint32N(uint32(n))
					}
					return pageOf[rng.IntN(pages)]*pageRows + rng.Uint32N(pageRows)
				}
				lat := make([]time.Duration, 0, 1<<16)
				for b.Loop() {
					for i := range pageOf {
						pageOf[i] = rng.Uint32N(uint32(n / pageRows))
					}
					for i := range ps {
						ps[i] = ckf.Probe{FP: 1, A: row(), B: row()}
					}
					t0 := time.Now()
					if pages == aFirst {
						// Row A stands in for both rows (A = B), then the
						// B rows of the first bPositions positions.
						for i := range ps {
							ps[i].B = ps[i].A
						}
						k.prefetch(tab.rows, ps, uint64(tab.stride), groups.list())
						k.test(tab.rows, ps, uint64(tab.stride), groups.list(), tab.all, hits)
						bs := ps[:bPositions]
						for i := range bs {
							bs[i].A = row()
							bs[i].B = bs[i].A
						}
						k.prefetch(tab.rows, bs, uint64(tab.stride), groups.list())
						k.test(tab.rows, bs, uint64(tab.stride), groups.list(), tab.all, hits)
					} else {
						k.prefetch(tab.rows, ps, uint64(tab.stride), groups.list())
						k.test(tab.rows, ps, uint64(tab.stride), groups.list(), tab.all, hits)
					}
					if d := time.Since(t0); len(lat) < cap(lat) {
						lat = append(lat, d)
					}
					benchSink += int(hits[0])
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/(4*positions), "p50-ns/line")
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			})
		}
	}
}
