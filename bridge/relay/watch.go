package relay

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/publish"
)

// Watch follows one pool's publication from inside its writer loop, for
// transports other than NATS (the Pool Relay gRPC contract): a consistent
// start (the pool's words at a sequence) and then, in publication order,
// every message the pool puts on its delta log after that sequence and
// every snapshot it stores. The pool never waits for a watch: one that
// falls Buffer messages behind is dropped.
type Watch struct {
	// Identity is the pool's producer identity when the watch began.
	Identity relayproto.ProducerIdentity
	// Sequence is the publication's last sequence when the watch began,
	// and Words the pool's words at it (every earlier delta applied, no
	// later event).
	Sequence uint64
	Words    []uint64
	// C carries *relayproto.Delta, *relayproto.Heartbeat and
	// *relayproto.DrainMarker as the delta log takes them, and each stored
	// *relayproto.Snapshot whole (a new identity after a rebuild, or a
	// later sequence after sequences were burned by an uncertain publish).
	// The messages are the watch's own to read and never change. C is
	// closed when the pool stops, when the watch fell behind, or by Close;
	// Err then says which.
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

// watchers is a pool's set of watches. The writer goroutine sends; Close
// and the pool's end drop them, from any goroutine.
type watchers struct {
	mu   sync.Mutex
	list []*watcher
	done bool // the pool stopped: no new watch
}

// sent hands a message the pool just published or stored to every watch.
// A Delta's images are the publisher's buffer, so they are copied (once,
// and only when someone watches). A watch whose buffer is full is dropped
// with ErrLagged instead of holding up the pool.
func (ws *watchers) sent(m relayproto.Message) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
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
	for len(ws.list) > 0 {
		ws.dropLocked(ws.list[0], ErrClosed)
	}
}

// DefaultWatchBuffer is how many messages a Watch may fall behind when
// Relay.Watch is given no buffer: at the default cadence (a delta every 16
// events) that is 64k events of slack.
const DefaultWatchBuffer = 4096

// Watch starts a watch of domain d's pool with room for buffer messages
// (DefaultWatchBuffer when buffer ≤ 0). On the pool's writer goroutine it
// first publishes the pending window (as Flush does), so that the words it
// copies are exactly the publication's state at its last sequence. It
// returns ErrFenced while the publication is fenced (its state and
// sequence disagree until the recovery snapshot), ErrClosed when the pool
// or the relay has stopped, ErrUnknownPool for a domain the relay does not
// serve, or ctx's error.
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
	st := p.pub.Status()
	if st.Fence != publish.FenceNone {
		return nil, fmt.Errorf("%w: %v", ErrFenced, st.Fence)
	}
	// Nothing is published between the copy and the registration: both
	// run on the writer goroutine.
	words := p.source().AppendWords(make([]uint64, 0, p.format.Buckets()))
	w := &watcher{ch: make(chan relayproto.Message, buffer)}
	p.watchers.mu.Lock()
	defer p.watchers.mu.Unlock()
	if p.watchers.done {
		return nil, ErrClosed
	}
	p.watchers.list = append(p.watchers.list, w)
	return &Watch{Identity: st.Identity, Sequence: st.LastSequence, Words: words, C: w.ch, w: w, ws: &p.watchers}, nil
}
