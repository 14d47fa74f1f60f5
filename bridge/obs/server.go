package obs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server limits: scrapes and probes are small requests. A whole request,
// headers and any body (which no handler reads: net/http drains up to 256
// KiB of it after the handler), must arrive within serverReadTimeout, so a
// client that stops half-way holds its connection no longer; an idle
// keep-alive connection is closed after serverIdleTimeout (Prometheus
// scrapes every 15 s to 1 min by default).
const (
	serverReadHeaderTimeout = 5 * time.Second
	serverReadTimeout       = 10 * time.Second
	serverWriteTimeout      = 30 * time.Second
	serverIdleTimeout       = 2 * time.Minute
	serverMaxHeaderBytes    = 64 << 10
	shutdownGrace           = 2 * time.Second
)

// limits are a Server's connection bounds.
type limits struct {
	readHeader, read, write, idle time.Duration
}

// serverLimits are Listen's limits; the tests shorten them.
func serverLimits() limits {
	return limits{readHeader: serverReadHeaderTimeout, read: serverReadTimeout, write: serverWriteTimeout, idle: serverIdleTimeout}
}

// ReadyFunc reports readiness: nil when ready, else an error saying why
// (wrapping ErrNotReady). It is called on every /readyz request.
type ReadyFunc func() error

// Readiness is /readyz's JSON answer.
type Readiness struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

// NewRegistry returns a registry holding the Go runtime and process
// collectors and cs; a collector that cannot be registered (a duplicate
// metric) is an error.
func NewRegistry(cs ...prometheus.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	all := append([]prometheus.Collector{collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}, cs...)
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("obs: register collector: %w", err)
		}
	}
	return reg, nil
}

// Handler serves /metrics (g in the Prometheus text or protobuf format,
// as the scraper asks; a collector error drops only its metrics),
// /healthz (200 while the process serves) and /readyz (200 when ready
// returns nil, else 503; both with a Readiness body). A nil ready is
// always ready.
func Handler(g prometheus.Gatherer, ready ReadyFunc) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, Readiness{Ready: true})
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		var err error
		if ready != nil {
			err = ready()
		}
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, Readiness{Reason: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, Readiness{Ready: true})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Server is a running metrics and health endpoint. Build it with Listen.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan error
}

// Listen serves h on addr (host:port; port 0 picks a free one) in the
// background until Close. A listen failure returns ErrBadConfig.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: metrics address %q: %w", ErrBadConfig, addr, err)
	}
	return serve(ln, h, log, serverLimits()), nil
}

// serve serves h on ln with the limits lim (Listen's, or a test's).
func serve(ln net.Listener, h http.Handler, log *slog.Logger, lim limits) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{ln: ln, done: make(chan error, 1), srv: &http.Server{Handler: h,
		ReadHeaderTimeout: lim.readHeader, ReadTimeout: lim.read, WriteTimeout: lim.write, IdleTimeout: lim.idle,
		MaxHeaderBytes: serverMaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server: in-flight scrapes get a short grace, then their
// connections are closed. It is safe to call more than once.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	if err := <-s.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.done <- err
		return fmt.Errorf("obs: serve: %w", err)
	}
	s.done <- http.ErrServerClosed
	return nil
}
