//go:build !linux || zmqpoll

package zmqfeed

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// waiter, where there is no epoll, waits in a libzmq poll of the sockets
// (a cgo call that holds an OS thread), waking every recvPoll to look at
// its context, deadline and interrupts. DefaultMaxSockets keeps the
// threads this takes below Go's limit.
type waiter struct {
	poller      *zmq.Poller
	interrupted atomic.Bool
}

// newWaiter watches the given sockets.
func newWaiter(socks ...*zmq.Socket) (*waiter, error) {
	w := &waiter{poller: zmq.NewPoller()}
	for _, s := range socks {
		w.poller.Add(s, zmq.POLLIN)
	}
	return w, nil
}

// wait returns once ready reports true, deadline passes (zero: none),
// interrupt is called, or ctx ends.
func (w *waiter) wait(ctx context.Context, deadline time.Time, ready func() bool) error {
	for !w.interrupted.Swap(false) && ctx.Err() == nil && !ready() {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return nil
		}
		if _, err := w.poller.Poll(recvPoll); err != nil && !interrupted(err) {
			return fmt.Errorf("zmq poll: %w", err)
		}
	}
	return nil
}

// interrupt ends a wait under way, or the next one, within recvPoll.
func (w *waiter) interrupt() { w.interrupted.Store(true) }

// close releases nothing: the poller holds no resources of its own.
func (w *waiter) close() {}
