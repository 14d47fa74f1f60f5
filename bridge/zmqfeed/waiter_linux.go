//go:build linux && !zmqpoll

package zmqfeed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
	"golang.org/x/sys/unix"
)

// waiter parks a socket's read loop in Go's network poller instead of a
// libzmq poll: an idle subscription then holds no OS thread and costs no
// CPU. libzmq signals on each socket's ZMQ_FD, edge-triggered, whenever
// the socket's state may have changed (a message after the pipe ran dry, a
// connection); the waiter registers both of a socket's descriptors (its
// own and its monitor's) in an epoll instance of its own, edge-triggered,
// and lets the Go poller watch that one descriptor.
//
// libzmq's contract for ZMQ_FD is that a signal may be consumed by any
// call on the socket, so the state is always read back (ZMQ_EVENTS) after
// the waiter is armed and before it sleeps: a change before that read is
// seen by it, a change after it signals the armed waiter.
type waiter struct {
	f      *os.File
	raw    syscall.RawConn
	epfd   int
	events [4]unix.EpollEvent // scratch for draining the epoll instance
}

// newWaiter watches the given sockets' ZMQ_FD descriptors.
func newWaiter(socks ...*zmq.Socket) (*waiter, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("zmq waiter: epoll_create1: %w", err)
	}
	for _, s := range socks {
		fd, err := s.GetFd()
		if err == nil {
			ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(fd)}
			err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev)
		}
		if err != nil {
			_ = unix.Close(epfd)
			return nil, fmt.Errorf("zmq waiter: watch a socket's descriptor: %w", err)
		}
	}
	// Non-blocking, so that os.NewFile hands the descriptor to the Go
	// poller (an epoll instance is readable while it has ready events).
	if err := unix.SetNonblock(epfd, true); err != nil {
		_ = unix.Close(epfd)
		return nil, fmt.Errorf("zmq waiter: %w", err)
	}
	w := &waiter{f: os.NewFile(uintptr(epfd), "zmq-waiter"), epfd: epfd}
	if w.raw, err = w.f.SyscallConn(); err != nil {
		w.close()
		return nil, fmt.Errorf("zmq waiter: %w", err)
	}
	return w, nil
}

// wait returns once ready reports true (it is asked again after every
// signal), deadline passes (zero: none), interrupt is called, or ctx ends.
func (w *waiter) wait(ctx context.Context, deadline time.Time, ready func() bool) error {
	if err := w.f.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("zmq waiter: %w", err)
	}
	if ctx.Err() != nil { // interrupt may have run before the deadline was set
		return nil
	}
	err := w.raw.Read(func(uintptr) bool {
		w.drain()
		return ctx.Err() != nil || ready()
	})
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("zmq waiter: %w", err)
	}
	return nil
}

// drain takes the epoll instance's ready events, so that it signals the Go
// poller again on the next change.
func (w *waiter) drain() {
	for {
		n, err := unix.EpollWait(w.epfd, w.events[:], 0)
		if err == unix.EINTR {
			continue
		}
		if n < len(w.events) {
			return
		}
	}
}

// interrupt ends a wait under way, or the next one, at once; it may be
// called from any goroutine.
func (w *waiter) interrupt() { _ = w.f.SetReadDeadline(time.Unix(1, 0)) }

// close releases the epoll instance (before the sockets it watches close).
func (w *waiter) close() { _ = w.f.Close() }
