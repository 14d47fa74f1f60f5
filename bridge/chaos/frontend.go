package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// frontend stands in for a DC's OpenAI-compatible frontend: it answers
// every completion with a small JSON body naming its DC. A fault may take
// it down (its port refuses connections) and bring it back on the same
// port.
type frontend struct {
	dc     string
	addr   string
	served atomic.Uint64

	mu  sync.Mutex
	srv *http.Server
}

// newFrontend listens on a free loopback port and serves.
func newFrontend(dc string) (*frontend, error) {
	f := &frontend{dc: dc}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: frontend %s: %w", dc, err)
	}
	f.addr = ln.Addr().String()
	f.serve(ln)
	return f, nil
}

func (f *frontend) url() string { return "http://" + f.addr }

func (f *frontend) serve(ln net.Listener) {
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		f.served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"text_completion","choices":[{"text":"ok"}],"dc":"`+f.dc+`"}`)
	})}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// down closes the listener and every connection.
func (f *frontend) down() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// up serves again on the same port, retrying while the port is briefly
// unavailable.
func (f *frontend) up(ctx context.Context) error {
	return poll(ctx, startWait, func() error {
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			return err
		}
		f.serve(ln)
		return nil
	})
}
