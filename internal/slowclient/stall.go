package slowclient

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Stage is where a stalled client stops.
type Stage int

// Stages of a stalled request.
const (
	// Headers: the request line and one header, never the blank line.
	Headers Stage = iota
	// Body: every header with a Content-Length, then part of the body.
	Body
	// Chunked: every header with chunked transfer encoding, then part of
	// the first chunk.
	Chunked
)

// String names the stage.
func (s Stage) String() string {
	switch s {
	case Headers:
		return "headers"
	case Body:
		return "body"
	case Chunked:
		return "chunked"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// Stall describes one stalled client's request.
type Stall struct {
	Stage  Stage
	Method string // default POST
	Path   string // default /
	// Header lines ("Name: value") added to the request; optional.
	Header []string
	// Declared is the body length announced (Body) or the first chunk's
	// size (Chunked); default 4 × Sent.
	Declared int
	// Sent is how many body bytes are sent before the stall (Body,
	// Chunked); default 1024.
	Sent int
}

// Prefix returns the bytes the client sends before it goes silent.
func (s Stall) Prefix() []byte {
	method, path, sent := s.Method, s.Path, s.Sent
	if method == "" {
		method = "POST"
	}
	if path == "" {
		path = "/"
	}
	if sent <= 0 {
		sent = 1024
	}
	declared := s.Declared
	if declared <= sent {
		declared = 4 * sent
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: slowclient\r\n", method, path)
	for _, h := range s.Header {
		b.WriteString(h + "\r\n")
	}
	switch s.Stage {
	case Headers:
		b.WriteString("Content-Type: application/json\r\n")
		return []byte(b.String())
	case Body:
		fmt.Fprintf(&b, "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", declared)
	case Chunked:
		fmt.Fprintf(&b, "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n", declared)
	}
	// A body that starts like JSON, so a server that parses as it reads
	// gets as far as the stall.
	b.WriteString(`{"prompt":"`)
	b.WriteString(strings.Repeat("a", max(sent-len(`{"prompt":"`), 0)))
	return []byte(b.String())
}

// Flood is a set of stalled client connections.
type Flood struct {
	conns    []net.Conn
	released atomic.Int64
	done     chan struct{}
	wg       sync.WaitGroup
}

// Open dials n clients to addr (host:port); client i sends stalls[i %
// len(stalls)]'s prefix and then nothing. Each connection's reader counts
// it released when the server closes it (EOF or reset; any response it
// sent first is read and dropped). A dial or write failure closes the
// clients opened so far and is returned.
func Open(addr string, n int, stalls ...Stall) (*Flood, error) {
	if len(stalls) == 0 {
		return nil, fmt.Errorf("slowclient: no stall given")
	}
	f := &Flood{done: make(chan struct{})}
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("slowclient: dial client %d of %d: %w", i, n, err)
		}
		if _, err := c.Write(stalls[i%len(stalls)].Prefix()); err != nil {
			c.Close()
			f.Close()
			return nil, fmt.Errorf("slowclient: client %d of %d: write: %w", i, n, err)
		}
		f.conns = append(f.conns, c)
		f.wg.Add(1)
		go f.await(c)
	}
	return f, nil
}

// await reads c until the server closes it.
func (f *Flood) await(c net.Conn) {
	defer f.wg.Done()
	_, _ = io.Copy(io.Discard, c)
	select {
	case <-f.done: // closed by Close, not by the server
	default:
		f.released.Add(1)
	}
}

// Len returns the number of clients.
func (f *Flood) Len() int { return len(f.conns) }

// Released returns how many clients' connections the server has closed.
func (f *Flood) Released() int { return int(f.released.Load()) }

// AwaitReleased polls every 10 ms until the server has closed every
// client's connection, or returns an error saying how many it still holds
// after total.
func (f *Flood) AwaitReleased(total time.Duration) error {
	deadline := time.Now().Add(total)
	for f.Released() < f.Len() {
		if time.Now().After(deadline) {
			return fmt.Errorf("slowclient: the server still holds %d of %d stalled clients after %v", f.Len()-f.Released(), f.Len(), total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// Close closes every client's connection and waits for the readers. It
// is safe to call more than once.
func (f *Flood) Close() {
	select {
	case <-f.done:
		return
	default:
		close(f.done)
	}
	for _, c := range f.conns {
		c.Close()
	}
	f.wg.Wait()
}
