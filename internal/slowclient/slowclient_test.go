package slowclient

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// serve serves a handler that reads the body on a counted listener with
// readTimeout (0: none) and returns it.
func serve(t *testing.T, readTimeout time.Duration) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	cl := Count(ln)
	srv := &http.Server{ReadTimeout: readTimeout, ReadHeaderTimeout: readTimeout,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })}
	go func() { _ = srv.Serve(cl) }()
	t.Cleanup(func() { srv.Close() })
	return cl
}

func TestPrefix_ParsesUpToTheStall(t *testing.T) {
	for _, s := range []Stall{{Stage: Body, Path: "/v1/completions", Sent: 100, Declared: 1000}, {Stage: Chunked, Sent: 100}} {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(s.Prefix())))
		if err != nil {
			t.Errorf("%v: ReadRequest(prefix): %v", s.Stage, err)
			continue
		}
		body, err := io.ReadAll(req.Body)
		if len(body) != 100 || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%v: body read %d bytes, err %v; want 100 and unexpected EOF", s.Stage, len(body), err)
		}
	}
	if _, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(Stall{Stage: Headers}.Prefix()))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("headers: ReadRequest(prefix) = %v, want unexpected EOF (no blank line)", err)
	}
}

func TestFlood_ReleasedOnlyWhenTheServerCloses(t *testing.T) {
	bounded := serve(t, 200*time.Millisecond)
	f, err := Open(bounded.Addr().String(), 30, Stall{Stage: Headers}, Stall{Stage: Body}, Stall{Stage: Chunked})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()
	if err := f.AwaitReleased(30 * time.Second); err != nil {
		t.Errorf("server with a read timeout: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); bounded.Open() != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := bounded.Open(); n != 0 {
		t.Errorf("Listener.Open() = %d after every client was released, want 0", n)
	}

	unbounded := serve(t, 0)
	g, err := Open(unbounded.Addr().String(), 5, Stall{Stage: Body})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := g.AwaitReleased(300 * time.Millisecond); err == nil {
		t.Errorf("AwaitReleased against a server without deadlines = nil, want the clients still held")
	}
	if n := unbounded.Open(); n != 5 {
		t.Errorf("Listener.Open() = %d with 5 stalled clients held, want 5", n)
	}
	g.Close()
	if g.Released() != 0 {
		t.Errorf("Released() = %d after the clients closed themselves, want 0", g.Released())
	}
}

func TestFDs_CountsThisProcess(t *testing.T) {
	before, err := FDs(0)
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	after, _ := FDs(0)
	ln.Close()
	if after != before+1 {
		t.Errorf("FDs(0) = %d with one more listener, want %d", after, before+1)
	}
}
