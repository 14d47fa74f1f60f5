package relayproto

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
)

// testSeed returns the seed for randomized tests: RELAYPROTO_SEED if set,
// else def. It is printed when the test fails.
func testSeed(t testing.TB, def uint64) uint64 {
	t.Helper()
	seed := def
	if s := os.Getenv("RELAYPROTO_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("RELAYPROTO_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with RELAYPROTO_SEED=%d)", seed, seed)
		}
	})
	return seed
}

func testRand(t testing.TB, def uint64) *rand.Rand {
	s := testSeed(t, def)
	return rand.New(rand.NewPCG(s, s^0x9E3779B97F4A7C15))
}

const testDomain DomainID = 7

func testFormat(t testing.TB, n uint64) Format {
	t.Helper()
	f, err := NewFormat(0x5DEECE66D1B54A33, n)
	if err != nil {
		t.Fatalf("NewFormat(n=%d): %v", n, err)
	}
	return f
}

func testIdentity(f Format, dc DCID, incarnation uint64) ProducerIdentity {
	return ProducerIdentity{Pool: PoolID{Domain: testDomain, DC: dc}, Incarnation: incarnation, LayoutGeneration: 1, Format: f}
}

// memTable is an in-memory LaneTable that counts writes per lane and can be
// told to panic mid-apply (an ingestion worker crash) or to refuse images.
type memTable struct {
	n          uint64
	words      [][]uint64
	ready      atomic.Uint64
	writes     []int
	panicAfter []int // per lane: panic after this many more image stores (0: never)
	refuse     bool  // Apply fails, storing nothing
}

func newMemTable(lanes int, n uint64) *memTable {
	t := &memTable{n: n, words: make([][]uint64, lanes), writes: make([]int, lanes), panicAfter: make([]int, lanes)}
	for i := range t.words {
		t.words[i] = make([]uint64, n)
	}
	return t
}

func (t *memTable) Lanes() int      { return len(t.words) }
func (t *memTable) Buckets() uint64 { return t.n }

func (t *memTable) StoreWords(lane int, offset uint64, words []uint64) {
	if offset+uint64(len(words)) > t.n {
		panic(fmt.Sprintf("memTable.StoreWords(lane %d, offset %d, %d words) past n=%d", lane, offset, len(words), t.n))
	}
	copy(t.words[lane][offset:], words)
	t.writes[lane] += len(words)
}

var errTableRefused = fmt.Errorf("memTable: injected refusal")

func (t *memTable) Apply(lane int, images []Image) error {
	if t.refuse {
		return errTableRefused
	}
	for _, im := range images {
		if t.panicAfter[lane] > 0 {
			t.panicAfter[lane]--
			if t.panicAfter[lane] == 0 {
				panic("memTable: injected worker crash")
			}
		}
		t.words[lane][im.Bucket] = im.Word
		t.writes[lane]++
	}
	return nil
}

func (t *memTable) SetReady(lane int) { t.ready.Or(1 << lane) }

func (t *memTable) ClearReady(lane int) { t.ready.And(^uint64(1 << lane)) }

func (t *memTable) isReady(lane int) bool { return t.ready.Load()&(1<<lane) != 0 }

// laneCopy returns a copy of lane's words.
func (t *memTable) laneCopy(lane int) []uint64 { return slices.Clone(t.words[lane]) }

// modelSource is a trivial producer: a word array mutated at random, with a
// dirty window that drains net changes in ascending bucket order, as
// ckf.Producer does (spec §4.8).
type modelSource struct {
	words    []uint64
	original map[uint32]uint64 // bucket → word at first touch in this window
}

func newModelSource(n uint64) *modelSource {
	return &modelSource{words: make([]uint64, n), original: map[uint32]uint64{}}
}

func (s *modelSource) set(b uint32, w uint64) {
	if _, ok := s.original[b]; !ok {
		s.original[b] = s.words[b]
	}
	s.words[b] = w
}

// mutate changes k random buckets to random packed words (some emptied, some
// restored to their original, so that net reversions happen too).
func (s *modelSource) mutate(rng *rand.Rand, k int) {
	for range k {
		b := uint32(rng.IntN(len(s.words)))
		switch rng.IntN(4) {
		case 0:
			s.set(b, 0)
		case 1:
			if o, ok := s.original[b]; ok {
				s.set(b, o)
				continue
			}
			s.set(b, randomWord(rng))
		default:
			s.set(b, randomWord(rng))
		}
	}
}

func (s *modelSource) AppendWords(dst []uint64) []uint64 { return append(dst, s.words...) }

func (s *modelSource) Drain(dst []Image) []Image {
	start := len(dst)
	for b, o := range s.original {
		if s.words[b] != o {
			dst = append(dst, Image{Bucket: b, Word: s.words[b]})
		}
	}
	slices.SortFunc(dst[start:], func(a, b Image) int { return int(a.Bucket) - int(b.Bucket) })
	clear(s.original)
	return dst
}

// randomWord returns a packed bucket with random occupancy and non-zero
// fingerprints.
func randomWord(rng *rand.Rand) uint64 {
	var w uint64
	for s := range 4 {
		if rng.IntN(2) == 0 {
			w |= uint64(1+rng.IntN(0xFFFF)) << (16 * s)
		}
	}
	return w
}

// recorder is a Sink that keeps deep copies of what it is sent and fails
// when fail returns true.
type recorder struct {
	msgs []Message
	fail func(m Message) bool
}

var errSinkDown = fmt.Errorf("sink down")

func (r *recorder) Send(m Message) error {
	if r.fail != nil && r.fail(m) {
		return errSinkDown
	}
	r.msgs = append(r.msgs, cloneMessage(m))
	return nil
}

func (r *recorder) deltas() []*Delta {
	var ds []*Delta
	for _, m := range r.msgs {
		if d, ok := m.(*Delta); ok {
			ds = append(ds, d)
		}
	}
	return ds
}

func cloneMessage(m Message) Message {
	switch m := m.(type) {
	case *Snapshot:
		c := *m
		c.Words = slices.Clone(m.Words)
		return &c
	case *Delta:
		c := *m
		c.Images = slices.Clone(m.Images)
		return &c
	case *DrainMarker:
		c := *m
		return &c
	case *Heartbeat:
		c := *m
		return &c
	case *LoadReport:
		c := *m
		return &c
	}
	panic(fmt.Sprintf("cloneMessage(%T)", m))
}

// newTestConsumer builds a consumer of lanes lanes (DC i+1 owns lane i) over
// a memTable of n buckets.
func newTestConsumer(t testing.TB, lanes int, n uint64, cfg ConsumerConfig) (*Consumer, *memTable, Format) {
	t.Helper()
	f := testFormat(t, n)
	m := Manifest{ConsumerInstance: 42, Domain: testDomain, Format: f}
	for i := range lanes {
		m.Lanes = append(m.Lanes, PoolID{Domain: testDomain, DC: DCID(i + 1)})
	}
	tbl := newMemTable(lanes, n)
	c, err := NewConsumer(m, tbl, cfg)
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	return c, tbl, f
}

// readyLane claims lane i, assigns id under its next lease and installs
// words at sequence seq; it returns the lease.
func readyLane(t testing.TB, c *Consumer, i int, id ProducerIdentity, words []uint64, seq uint64) Lease {
	t.Helper()
	l := c.Lane(i)
	if l.Status().State == StateUnclaimed {
		if err := l.Claim(); err != nil {
			t.Fatalf("lane %d Claim: %v", i, err)
		}
	}
	lease := l.NextLease()
	if err := l.Assign(id, lease); err != nil {
		t.Fatalf("lane %d Assign(%v): %v", i, lease, err)
	}
	if o := l.Snapshot(whole(id, lease, seq, words)); o != Installed {
		t.Fatalf("lane %d Snapshot(N=%d) = %v, want Installed", i, seq, o)
	}
	return lease
}

// whole returns a single-chunk snapshot of words.
func whole(id ProducerIdentity, lease Lease, seq uint64, words []uint64) *Snapshot {
	return &Snapshot{Identity: id, Lease: lease, Sequence: seq, Total: uint64(len(words)), Words: words}
}
