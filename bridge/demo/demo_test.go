package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// echoServer accepts connections on loopback and echoes every byte back.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func TestLink_DeliversEveryByteInOrder(t *testing.T) {
	const oneWay = 20 * time.Millisecond
	l, err := newLink(echoServer(t), oneWay)
	if err != nil {
		t.Fatalf("newLink: %v", err)
	}
	defer l.close()
	c, err := net.Dial("tcp", l.addr())
	if err != nil {
		t.Fatalf("dial link: %v", err)
	}
	defer c.Close()
	seed := uint64(1)
	if s := os.Getenv("GOINDEX_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	// Several writes of random sizes, some over linkChunkBytes, so that the
	// link splits and queues them.
	var sent bytes.Buffer
	for range 20 {
		b := make([]byte, 1+rng.IntN(3*linkChunkBytes))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		sent.Write(b)
	}
	go func() { c.Write(sent.Bytes()) }()
	got := make([]byte, sent.Len())
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %d echoed bytes (seed %d): %v", sent.Len(), seed, err)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		i := 0
		for i < len(got) && got[i] == sent.Bytes()[i] {
			i++
		}
		t.Errorf("echo through the link differs from what was sent at byte %d of %d (seed %d)", i, sent.Len(), seed)
	}
}

func TestLink_CloseCutsConnections(t *testing.T) {
	l, err := newLink(echoServer(t), time.Millisecond)
	if err != nil {
		t.Fatalf("newLink: %v", err)
	}
	c, err := net.Dial("tcp", l.addr())
	if err != nil {
		t.Fatalf("dial link: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("write: %v", err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("echo before close: %v", err)
	}
	l.close() // returns only once every pipe ended
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(b); err == nil {
		t.Errorf("read after the link closed = %d bytes, nil error; want the connection cut", n)
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read after the link closed: still open 10 s later")
	}
	if _, err := net.Dial("tcp", l.addr()); err == nil {
		t.Errorf("dial after close succeeded, want refused")
	}
}

func TestCapture_KeepsTheTail(t *testing.T) {
	var c capture
	for i := range childLogBytes / 8 {
		fmt.Fprintf(&c, "l%06d\n", i) // 8 bytes a line
	}
	fmt.Fprintf(&c, "last one\n")
	s := c.String()
	if len(s) != childLogBytes {
		t.Errorf("capture holds %d bytes, want %d", len(s), childLogBytes)
	}
	if !strings.HasSuffix(s, "last one\n") {
		t.Errorf("capture ends %q, want the last write", s[len(s)-20:])
	}
	if got, want := c.tail(2), fmt.Sprintf("l%06d\nlast one", childLogBytes/8-1); got != want {
		t.Errorf("tail(2) = %q, want %q", got, want)
	}
}

func TestPoll_StopsOnContextWithItsCause(t *testing.T) {
	cause := errors.New("relay died")
	ctx, cancel := context.WithCancelCause(context.Background())
	calls := 0
	err := poll(ctx, time.Hour, time.Millisecond, func() error {
		if calls++; calls == 3 {
			cancel(cause)
		}
		return errors.New("not yet")
	})
	if !errors.Is(err, cause) {
		t.Errorf("poll after cancel = %v, want the cause %v", err, cause)
	}
	err = poll(context.Background(), 0, time.Millisecond, func() error { return errors.New("never") })
	if err == nil || !strings.Contains(err.Error(), "never") {
		t.Errorf("poll past its wait = %v, want the last error", err)
	}
	if err := poll(context.Background(), time.Hour, time.Hour, func() error { return nil }); err != nil {
		t.Errorf("poll of a ready condition = %v, want nil", err)
	}
}

func TestResolve_RefusesBeforeStarting(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "goindex")
	file := filepath.Join(dir, "file")
	for _, p := range []string{bin, file} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	grid, tr := "../../testdata/wan/grid13_rtt_ms.csv", "../../testdata/mooncake/conversation_head400.jsonl"
	good := Config{Binary: bin, Trace: tr, Grid: grid}
	if r, err := resolve(good); err != nil || len(r.sites) != 5 || len(r.reqs) != 400 || r.sites[0].rtt != 0 {
		t.Fatalf("resolve(defaults) = %v, %v; want 5 sites, 400 requests, the router site first at RTT 0", r, err)
	}
	cases := []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Binary = "" }, "no goindex binary"},
		{func(c *Config) { c.Binary = filepath.Join(dir, "none") }, "goindex binary"},
		{func(c *Config) { c.Sites = []string{"fra", "atlantis"} }, `"atlantis" is not in the grid`},
		{func(c *Config) { c.RouterSite = "atlantis" }, "router site"},
		{func(c *Config) { c.Sites = []string{} }, "0 sites"},
		{func(c *Config) { c.Requests = -1 }, "requests -1"},
		{func(c *Config) { c.PrefillTokensPerMs = -1 }, "prefill rate"},
		{func(c *Config) { c.Library = filepath.Join(dir, "none.so") }, "library"},
		{func(c *Config) { c.ReportDir = filepath.Join(file, "sub") }, "report directory"},
		{func(c *Config) { c.WorkDir = file }, "not a directory"},
		{func(c *Config) { c.Trace = grid }, "trace"},
	}
	for _, c := range cases {
		cfg := good
		c.mod(&cfg)
		_, err := resolve(cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("resolve(%+v) = %v, want ErrConfig naming %q", cfg, err, c.want)
		}
	}
}
