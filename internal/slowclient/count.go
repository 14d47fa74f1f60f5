package slowclient

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
)

// Listener is a net.Listener that counts the accepted connections not yet
// closed: what a server holds, measured where it holds it.
type Listener struct {
	net.Listener
	open atomic.Int64
}

// Count wraps ln.
func Count(ln net.Listener) *Listener { return &Listener{Listener: ln} }

// Accept accepts a connection and counts it until its first Close.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

// Open returns the number of accepted connections not yet closed.
func (l *Listener) Open() int { return int(l.open.Load()) }

type countedConn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// FDs returns the number of open file descriptors of process pid (0: this
// process), read from /proc/PID/fd (Linux only).
func FDs(pid int) (int, error) {
	dir := "/proc/self/fd"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid) + "/fd"
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("slowclient: count descriptors: %w", err)
	}
	return len(entries), nil
}
