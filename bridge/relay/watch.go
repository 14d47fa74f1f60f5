package relay

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/goindex/goindex/goindex/relayproto"
)

// Watch follows one pool's publication from inside its writer loop, for
// transports other than NATS (the Pool Relay gRPC contract): a consistent
// start (the pool's words at a sequence) and then, in order, every delta
// the pool publishes after it. The watches' publication is the pool's own,
// apart from its JetStream delta log: it has its own sequence, never
// fences, and goes on while NATS or JetStream is down, so a watch follows
// the pool through an outage that fences the log. The pool never waits for
// a watch: one that falls Buffer messages behind is dropped.
type Watch struct {
	// Identity is the pool's producer identity when the watch began.
	Identity relayproto.ProducerIdentity
	// Sequence is the watches' publication's last sequence when the watch
	// began, and Words the pool's words at it (every earlier delta applied,
	// no later event). The sequence is not the delta log's.
	Sequence uint64
	Words    []uint64
	// C carries *relayproto.Delta (contiguous from Sequence),
	// *relayproto.Heartbeat while the pool is idle, a *relayproto.Snapshot
	// whole when the pool rebuilt its producer (a new identity: the deltas
	// after it are of that identity) and a *relayproto.DrainMarker at a
	// graceful stop. The messages are the watch's own to read and never
	// change. C is closed when the pool stops, when the watch fell behind,
	// or by Close; Err then says which.
	C <-chan relayproto.Message

	w  *watcher
	ws *watchers
}

// Err returns why C was closed: ErrLagged, ErrClosed (the pool stopped or
// Close was called), or nil while it is open.
func (w *Watch) Err() error {
	w.ws.mu.Lock()
	defer w.ws.mu.Unlock()
	return w.w.err
}

// Close ends the watch and closes C; it is safe to call more than once and
// from any goroutine.
func (w *Watch) Close() { w.ws.drop(w.w, ErrClosed) }

// watcher is one Watch's channel and why it ended.
type watcher struct {
	ch  chan relayproto.Message
	err error
}

// watchers is a pool's set of watches and the publication they follow.
// The writer goroutine publishes; Close and the pool's end drop watches,
// from any goroutine.
type watchers struct {
	mu   sync.Mutex
	list []*watcher
	done bool // the pool stopped: no new watch
	// The watches' publication (writer goroutine only): the identity its
	// deltas carry, its last sequence and when it last sent a delta or a
	// heartbeat.
	id   relayproto.ProducerIdentity
	seq  uint64
	last time.Time
}

// deltas publishes a drained batch to the watches as deltas of at most
// relayproto.MaxDeltaImages images, each its own sequence. With no watch
// it only moves the sequence on. A sequence that would overflow drops
// every watch and starts again from 0 (a watch always begins with the
// words, so no reader can mistake the restart for an older delta).
func (ws *watchers) deltas(images []relayproto.Image, now time.Time) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.last = now
	for len(images) > 0 {
		part := images[:min(len(images), relayproto.MaxDeltaImages)]
		images = images[len(part):]
		if ws.seq == math.MaxUint64 {
			ws.dropAllLocked(ErrClosed)
			ws.seq = 0
		}
		ws.seq++
		if len(ws.list) > 0 {
			ws.sendLocked(&relayproto.Delta{Identity: ws.id, Base: ws.seq - 1, Sequence: ws.seq, Images: part})
		}
	}
}

// heartbeat tells the watches the sequence when nothing was sent for
// every.
func (ws *watchers) heartbeat(now time.Time, every time.Duration) {
	if now.Sub(ws.last) < every {
		return
	}
	ws.last = now
	ws.sent(&relayproto.Heartbeat{Identity: ws.id, Sequence: ws.seq})
}

// drained tells the watches that the pool stopped gracefully at the
// sequence.
func (ws *watchers) drained() {
	ws.sent(&relayproto.DrainMarker{Identity: ws.id, Expected: ws.seq})
}

// rebuilt moves the publication to the identity of a rebuilt producer and
// hands the watches its words whole (read only when someone watches).
func (ws *watchers) rebuilt(id relayproto.ProducerIdentity, words func() []uint64) {
	ws.id = id
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.list) == 0 {
		return
	}
	w := words()
	ws.sendLocked(&relayproto.Snapshot{Identity: id, Sequence: ws.seq, Total: uint64(len(w)), Words: w})
}

// sent hands m to every watch.
func (ws *watchers) sent(m relayproto.Message) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.sendLocked(m)
}

// sendLocked hands m to every watch. A Delta's images are the pool's
// buffer, so they are copied (once, and only when someone watches). A
// watch whose buffer is full is dropped with ErrLagged instead of holding
// up the pool.
func (ws *watchers) sendLocked(m relayproto.Message) {
	if len(ws.list) == 0 {
		return
	}
	if d, ok := m.(*relayproto.Delta); ok {
		c := *d
		c.Images = slices.Clone(d.Images)
		m = &c
	}
	for _, w := range slices.Clone(ws.list) {
		select {
		case w.ch <- m:
		default:
			ws.dropLocked(w, ErrLagged)
		}
	}
}

func (ws *watchers) drop(w *watcher, err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.dropLocked(w, err)
}

func (ws *watchers) dropLocked(w *watcher, err error) {
	if i := slices.Index(ws.list, w); i >= 0 {
		ws.list = slices.Delete(ws.list, i, i+1)
		w.err = err
		close(w.ch)
	}
}

// stop drops every watch with ErrClosed and refuses new ones.
func (ws *watchers) stop() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.done = true
	ws.dropAllLocked(ErrClosed)
}

func (ws *watchers) dropAllLocked(err error) {
	for len(ws.list) > 0 {
		ws.dropLocked(ws.list[0], err)
	}
}

// DefaultWatchBuffer is how many messages a Watch may fall behind when
// Relay.Watch is given no buffer: at the default cadence (a delta every 16
// events) that is 64k events of slack.
const DefaultWatchBuffer = 4096

// Watch starts a watch of domain d's pool with room for buffer messages
// (DefaultWatchBuffer when buffer ≤ 0). On the pool's writer goroutine it
// first publishes the pending window (as Flush does), so that the words it
// copies are exactly the watches' publication's state at its last
// sequence. It succeeds while the pool's delta log is fenced (NATS or
// JetStream down). It returns ErrClosed when the pool or the relay has
// stopped, ErrUnknownPool for a domain the relay does not serve, or ctx's
// error.
func (r *Relay) Watch(ctx context.Context, d relayproto.DomainID, buffer int) (*Watch, error) {
	if buffer <= 0 {
		buffer = DefaultWatchBuffer
	}
	r.mu.Lock()
	_, stopped := r.final[d]
	r.mu.Unlock()
	if stopped {
		return nil, fmt.Errorf("%w: pool of domain %d stopped", ErrClosed, d)
	}
	var w *Watch
	var werr error
	if err := r.do(ctx, d, func(p *pool) { w, werr = p.watch(buffer) }); err != nil {
		return nil, err
	}
	return w, werr
}

// watch registers a watch (writer goroutine).
func (p *pool) watch(buffer int) (*Watch, error) {
	if err := p.publish(); err != nil {
		return nil, err
	}
	// Nothing is published between the copy and the registration: both
	// run on the writer goroutine.
	words := p.source().AppendWords(make([]uint64, 0, p.format.Buckets()))
	w := &watcher{ch: make(chan relayproto.Message, buffer)}
	ws := &p.watchers
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.done {
		return nil, ErrClosed
	}
	ws.list = append(ws.list, w)
	return &Watch{Identity: ws.id, Sequence: ws.seq, Words: words, C: w.ch, w: w, ws: ws}, nil
}
