package replica

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/internal/testseed"
)

// seqPool is a set of block sequences that share prefixes, like requests of
// one conversation: each sequence copies a random prefix of an earlier one
// and extends it with fresh local hashes.
type seqPool struct {
	locals [][]uint64
	canon  [][]uint64 // kv.AppendChain of locals
}

func newSeqPool(rng *rand.Rand, seqs, maxLen int) *seqPool {
	sp := &seqPool{}
	for s := 0; s < seqs; s++ {
		var loc []uint64
		if s > 0 && rng.IntN(3) != 0 {
			parent := sp.locals[rng.IntN(s)]
			loc = slices.Clone(parent[:rng.IntN(len(parent)+1)])
		}
		for len(loc) < 1+rng.IntN(maxLen) {
			loc = append(loc, rng.Uint64())
		}
		sp.locals = append(sp.locals, loc)
		sp.canon = append(sp.canon, kv.AppendChain(nil, false, 0, loc))
	}
	return sp
}

// external is the engine block id of position pos of sequence s.
func external(s, pos int) uint64 { return uint64(s)<<32 | uint64(pos) }

// laneWriter drives one lane: a real Producer fed random stores, removals
// and clears of pool sequences, whose drained images it applies to the
// lane; now and then it clears the lane and re-installs a full snapshot.
// owned models, per canonical hash, the number of external ids holding it.
type laneWriter struct {
	lane  int
	tab   *Table
	p     *ckf.Producer
	pool  *seqPool
	rng   *rand.Rand
	held  map[uint64]uint64 // external id → canonical
	owned map[uint64]int    // canonical → owner count
	batch []ckf.Image
}

func (w *laneWriter) publish(step ckf.Step) error {
	if step != ckf.StepPublish {
		return nil
	}
	w.batch = w.p.Drain(w.batch[:0])
	return w.tab.Apply(w.lane, w.batch)
}

func (w *laneWriter) step(t *testing.T) {
	member := kv.Member{Worker: uint64(w.lane)}
	s := w.rng.IntN(len(w.pool.locals))
	loc := w.pool.locals[s]
	var ev kv.Event
	switch op := w.rng.IntN(10); {
	case op < 6:
		k := 1 + w.rng.IntN(len(loc))
		ev = kv.Event{Member: member, Kind: kv.Stored}
		for pos := 0; pos < k; pos++ {
			ev.Blocks = append(ev.Blocks, kv.Block{External: external(s, pos), Local: loc[pos]})
			if _, ok := w.held[external(s, pos)]; !ok {
				w.held[external(s, pos)] = w.pool.canon[s][pos]
				w.owned[w.pool.canon[s][pos]]++
			}
		}
	case op < 9:
		ev = kv.Event{Member: member, Kind: kv.Removed}
		for pos := w.rng.IntN(len(loc)); pos < len(loc); pos++ {
			ev.Removed = append(ev.Removed, external(s, pos))
			if c, ok := w.held[external(s, pos)]; ok {
				delete(w.held, external(s, pos))
				if w.owned[c]--; w.owned[c] == 0 {
					delete(w.owned, c)
				}
			}
		}
	default:
		ev = kv.Event{Member: member, Kind: kv.Cleared}
		clear(w.held)
		clear(w.owned)
	}
	step, err := w.p.Apply(&ev)
	if err != nil {
		t.Errorf("lane %d: Producer.Apply(%v): %v", w.lane, ev.Kind, err)
		return
	}
	if err := w.publish(step); err != nil {
		t.Errorf("lane %d: Apply images: %v", w.lane, err)
	}
	if w.rng.IntN(40) == 0 {
		// Re-install: the snapshot covers the pending window.
		w.batch = w.p.Drain(w.batch[:0])
		if err := w.tab.Clear(w.lane); err != nil {
			t.Errorf("lane %d: Clear: %v", w.lane, err)
		}
		if err := w.tab.Install(w.lane, w.p.AppendWords(nil)); err != nil {
			t.Errorf("lane %d: Install: %v", w.lane, err)
		}
	}
}

// exactDepth is the model's depth of sequence s on a lane: its run of
// owned canonical hashes from the root.
func exactDepth(owned map[uint64]int, canon []uint64) uint32 {
	for i, c := range canon {
		if owned[c] == 0 {
			return uint32(i)
		}
	}
	return uint32(len(canon))
}

// TestSearch_ConcurrentWithImagesClearsAndReinstalls runs searches in every
// mode while each lane's writer applies its producer's images, clears and
// re-installs the lane (spec §9 item 12): every depth stays ≤ L and only
// lanes in the captured mask are reported. Once the writers stop, every
// lane's words equal its producer's, chunked equals linear, bisect is never
// below linear, and linear never misses a block the model owns.
func TestSearch_ConcurrentWithImagesClearsAndReinstalls(t *testing.T) {
	seed := testseed.For(t, 0xC0C0)
	rng := rand.New(rand.NewPCG(seed, 9))
	const lanes, n = 12, 1 << 10
	f := mustFormat(t, n)
	tab := mustTable(t, lanes, n)
	pool := newSeqPool(rng, 48, 60)
	steps := 1500
	if testing.Short() {
		steps = 300
	}

	writers := make([]*laneWriter, lanes)
	for l := range writers {
		p, err := ckf.New(ckf.Config{Format: f, BatchEvents: 1 + rng.IntN(6)})
		if err != nil {
			t.Fatalf("ckf.New: %v", err)
		}
		writers[l] = &laneWriter{lane: l, tab: tab, p: p, pool: pool, rng: rand.New(rand.NewPCG(seed, uint64(100+l))),
			held: map[uint64]uint64{}, owned: map[uint64]int{}}
		if err := tab.Install(l, p.AppendWords(nil)); err != nil {
			t.Fatalf("Install(lane %d): %v", l, err)
		}
	}

	var done atomic.Bool
	var readers, wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		var ss []*Searcher
		for _, mode := range []Mode{Chunked, Bisect, Linear, AFirst} {
			ss = append(ss, mustSearcher(t, tab, f, mode, 1+rng.IntN(MaxWindow)))
		}
		readers.Add(1)
		go func(rng *rand.Rand) {
			defer readers.Done()
			var dst []uint32
			for searches := 0; !done.Load() || searches < 100; searches++ {
				q := pool.canon[rng.IntN(len(pool.canon))]
				ask := rng.Uint64() | rng.Uint64()
				s := ss[searches%len(ss)]
				var m uint64
				dst, m = s.Search(dst, q, ask)
				if m&^(ask&tab.all) != 0 {
					t.Errorf("Search(%v) captured mask %#x outside asked %#x", s.Mode(), m, ask)
					return
				}
				for l, d := range dst {
					if int(d) > len(q) || m>>uint(l)&1 == 0 && d != 0 {
						t.Errorf("Search(%v, L=%d) lane %d (in mask %v) depth %d", s.Mode(), len(q), l, m>>uint(l)&1 == 1, d)
						return
					}
				}
			}
		}(rand.New(rand.NewPCG(seed, uint64(200+r))))
	}
	for _, w := range writers {
		wg.Add(1)
		go func(w *laneWriter) {
			defer wg.Done()
			for i := 0; i < steps && !t.Failed(); i++ {
				w.step(t)
			}
			if err := w.tab.Apply(w.lane, w.p.Drain(nil)); err != nil {
				t.Errorf("lane %d: final Apply: %v", w.lane, err)
			}
		}(w)
	}
	wg.Wait()
	done.Store(true)
	readers.Wait()

	for l, w := range writers {
		if got, want := tab.AppendLane(nil, l), w.p.AppendWords(nil); !slices.Equal(got, want) {
			t.Errorf("lane %d: table words differ from the producer's after the drain", l)
		}
	}
	if tab.Ready() != tab.all {
		t.Errorf("Ready() = %#x after re-installs, want %#x", tab.Ready(), tab.all)
	}
	lin := mustSearcher(t, tab, f, Linear, 0)
	chk := mustSearcher(t, tab, f, Chunked, 0)
	bis := mustSearcher(t, tab, f, Bisect, 0)
	var over, total int
	for s, q := range pool.canon {
		dl, _ := lin.Search(nil, q, ^uint64(0))
		dc, _ := chk.Search(nil, q, ^uint64(0))
		db, _ := bis.Search(nil, q, ^uint64(0))
		for l, w := range writers {
			exact := exactDepth(w.owned, q)
			total++
			if dl[l] > exact {
				over++
			}
			if dl[l] < exact || dc[l] != dl[l] || db[l] < dl[l] {
				t.Errorf("sequence %d lane %d (seed %#x): exact %d, linear %d, chunked %d, bisect %d; want exact ≤ linear = chunked ≤ bisect", s, l, seed, exact, dl[l], dc[l], db[l])
			}
		}
	}
	t.Logf("linear over the exact depth on %d of %d lane results (fingerprint collisions)", over, total)
}
