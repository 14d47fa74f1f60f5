package ingest

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
	"github.com/goindex/goindex/goindex/relayproto/wire"
)

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

func (t *memTable) Apply(lane int, images []relayproto.Image) error {
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

// newTestConsumer builds a consumer of lanes lanes (DC i+1 owns lane i) over
// a memTable of n buckets.
func newTestConsumer(t testing.TB, lanes int, n uint64, cfg Config) (*Consumer, *memTable, relayproto.Format) {
	t.Helper()
	f := prototest.Format(t, n)
	m := relayproto.Manifest{ConsumerInstance: 42, Domain: prototest.Domain, Format: f}
	for i := range lanes {
		m.Lanes = append(m.Lanes, relayproto.PoolID{Domain: prototest.Domain, DC: relayproto.DCID(i + 1)})
	}
	tbl := newMemTable(lanes, n)
	c, err := New(m, tbl, cfg)
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	return c, tbl, f
}

// readyLane claims lane i, assigns id under its next lease and installs
// words at sequence seq; it returns the lease.
func readyLane(t testing.TB, c *Consumer, i int, id relayproto.ProducerIdentity, words []uint64, seq uint64) relayproto.Lease {
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
func whole(id relayproto.ProducerIdentity, lease relayproto.Lease, seq uint64, words []uint64) *relayproto.Snapshot {
	return &relayproto.Snapshot{Identity: id, Lease: lease, Sequence: seq, Total: uint64(len(words)), Words: words}
}

// decodeDelta decodes frame and returns it when it is a delta.
func decodeDelta(frame []byte) (*relayproto.Delta, bool) {
	m, _, err := wire.Decode(frame)
	d, ok := m.(*relayproto.Delta)
	return d, err == nil && ok
}
