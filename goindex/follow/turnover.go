package follow

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/goindex/shm"
)

// Turnover measures how fast each DC's cache turns over, from the
// stored-blocks counters of its load reports as lane records hold them:
// the counter's increment between two reports of one relay incarnation is
// what the DC stored meanwhile, fed to the DC's score.InsertRate at the
// report's time (the relay's clock), as the simulator feeds a DC's store
// events. It gives ttft's eviction charge (score.EvictionFactor) the
// insert rate the simulator's routers measure.
//
// A DC's rate is unknown (0) until two counted reports of one incarnation
// were seen; a new incarnation (the relay restarted) or a counter that
// went down starts it over, unknown again. A record without the counter
// under the incarnation being measured (the same sample's uncounted layout
// arrived first) changes nothing: the rate decays from the last counted
// report, as it does between reports. A torn record read at a relay
// restart (lane records are not read atomically as a whole) may count one
// spurious increment, which decays like any other.
//
// A Turnover is safe for concurrent use; build it with NewTurnover. A
// record already taken into account (each score call reads every DC's,
// though they change only when a report arrives) is answered from a memo
// without the lock: one atomic load and three comparisons.
type Turnover struct {
	mu    sync.Mutex
	dcs   []turnoverDC
	memos []atomic.Pointer[turnoverMemo]
}

// turnoverMemo is a DC's last answer: the record it was for (incarnation,
// sampling time, counter) and the rate. Repeating the last record leaves a
// DC's state as it was, so the memo stays the answer until another record
// of the DC is taken into account, which replaces it under the lock.
type turnoverMemo struct {
	incarnation, stored uint64
	atNs                int64
	rate                float64
}

// turnoverDC is one DC's measurement: the last counted report of the
// incarnation being measured, and the rate so far.
type turnoverDC struct {
	incarnation uint64
	stored      uint64 // counter of the last counted report; 0: none yet
	atMs        float64
	rate        score.InsertRate
}

// NewTurnover measures n DCs, indexed 0..n-1.
func NewTurnover(n int) *Turnover {
	return &Turnover{dcs: make([]turnoverDC, n), memos: make([]atomic.Pointer[turnoverMemo], n)}
}

// InsertRate takes DC i's lane record ld into account and returns the
// DC's insert rate, blocks per ms, as of ld's sampling time; 0 when
// unknown.
func (t *Turnover) InsertRate(i int, ld *shm.Load) float64 {
	if ld.At.IsZero() {
		return 0
	}
	atNs := ld.At.UnixNano()
	if m := t.memos[i].Load(); m != nil && m.atNs == atNs && m.incarnation == ld.Incarnation && m.stored == ld.StoredBlocks {
		return m.rate
	}
	atMs := float64(atNs) / float64(time.Millisecond)
	t.mu.Lock()
	defer t.mu.Unlock()
	d := &t.dcs[i]
	switch {
	case ld.Incarnation != d.incarnation:
		*d = turnoverDC{incarnation: ld.Incarnation}
	case ld.StoredBlocks == 0 || (d.stored != 0 && atMs <= d.atMs):
		// Uncounted, or not a later report than the last counted one.
	case ld.StoredBlocks < d.stored:
		*d = turnoverDC{incarnation: ld.Incarnation}
	case d.stored != 0:
		d.rate.Add(atMs, float64(ld.StoredBlocks-d.stored))
	}
	if ld.StoredBlocks != 0 && (d.stored == 0 || atMs > d.atMs) {
		d.stored, d.atMs = ld.StoredBlocks, atMs
	}
	rate := d.rate.At(atMs)
	t.memos[i].Store(&turnoverMemo{incarnation: ld.Incarnation, stored: ld.StoredBlocks, atNs: atNs, rate: rate})
	return rate
}

// SetEvictionFactor sets c's EvictionFactor from DC i's lane record: the
// share score.EvictionFactor gives a DC of c's capacity storing at the
// DC's insert rate; 0 when c has no fresh load (SetSignals) or either is
// unknown. The record is taken into account whatever its age.
func (t *Turnover) SetEvictionFactor(c *score.Candidate, i int, ld *shm.Load) {
	rate := t.InsertRate(i, ld)
	c.EvictionFactor = 0
	if c.HasLoad && c.HasCapacity {
		c.EvictionFactor = score.EvictionFactor(float64(c.CapacityBlocks), rate)
	}
}
