package movable

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Forwarder is a loopback address whose connections go to a target that
// can change (Point).
type Forwarder struct {
	ln    net.Listener
	mu    sync.Mutex
	to    string
	conns map[net.Conn]struct{} // both ends of every pipe, closed at the end
	done  bool
	// silent drops what every pipe carries, both ways, keeping the
	// connections open: a path that went dark without a reset.
	silent atomic.Bool
}

// New listens on a random loopback port and forwards to to; it stops, with
// every pipe, when t ends.
func New(t testing.TB, to string) *Forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("movable: listen: %v", err)
	}
	f := &Forwarder{ln: ln, to: to, conns: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { f.pipe(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		f.done = true
		for c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		wg.Wait()
	})
	return f
}

// Addr returns the forwarder's address (host:port).
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// Point makes new connections go to to; open ones keep their server.
func (f *Forwarder) Point(to string) {
	f.mu.Lock()
	f.to = to
	f.mu.Unlock()
}

// Silence makes every pipe drop what it carries, both ways, while its
// connections stay open, as a firewall that silently drops a flow does;
// Silence(false) forwards again.
func (f *Forwarder) Silence(on bool) { f.silent.Store(on) }

// pipe copies between c and a connection to the current target until
// either side closes.
func (f *Forwarder) pipe(c net.Conn) {
	f.mu.Lock()
	to := f.to
	f.mu.Unlock()
	u, err := net.Dial("tcp", to)
	if err != nil {
		_ = c.Close()
		return
	}
	if !f.track(c, u) {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { f.copy(u, c); _ = u.Close() })
	f.copy(c, u)
	_ = c.Close()
	wg.Wait()
	f.mu.Lock()
	delete(f.conns, c)
	delete(f.conns, u)
	f.mu.Unlock()
}

// copy forwards what src sends to dst, dropping it while the forwarder is
// silent, until either side fails.
func (f *Forwarder) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !f.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// track records both ends of a pipe, or closes them when the forwarder
// has stopped.
func (f *Forwarder) track(c, u net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		_, _ = c.Close(), u.Close()
		return false
	}
	f.conns[c], f.conns[u] = struct{}{}, struct{}{}
	return true
}
