package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/goindex/goindex/bridge/consume"
	"github.com/goindex/goindex/bridge/obs"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/route"
	"github.com/prometheus/client_golang/prometheus"
)

// obsFlags are the observability flags relay, consume and route share:
// the stderr log's format and level, and the metrics endpoint.
type obsFlags struct {
	logFormat, logLevel, metricsAddr *string
}

func addObsFlags(fs *flag.FlagSet) obsFlags {
	return obsFlags{
		logFormat: fs.String("log-format", obs.LogText, "stderr log format: text (key=value) or json (one object per line)"),
		logLevel:  fs.String("log-level", "info", "stderr log level: debug, info, warn or error"),
		metricsAddr: fs.String("metrics-addr", "", "serve Prometheus /metrics, /healthz and /readyz on this host:port "+
			"(port 0: a free one, logged; empty: off)"),
	}
}

// logger returns the stderr logger the flags ask for.
func (f obsFlags) logger(stderr io.Writer) (*slog.Logger, error) {
	log, err := obs.NewLogger(stderr, *f.logFormat, *f.logLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-format/--log-level: %v: %w", err, errUsage)
	}
	return log, nil
}

// serve starts the metrics endpoint with cs and ready when --metrics-addr
// is set; the returned function stops it (a no-op when off).
func (f obsFlags) serve(log *slog.Logger, ready obs.ReadyFunc, cs ...prometheus.Collector) (func(), error) {
	if *f.metricsAddr == "" {
		return func() {}, nil
	}
	reg, err := obs.NewRegistry(cs...)
	if err != nil {
		return nil, err
	}
	srv, err := obs.Listen(*f.metricsAddr, obs.Handler(reg, ready), log)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %v: %w", err, errUsage)
	}
	log.Info("metrics listening", "url", "http://"+srv.Addr().String()+"/metrics")
	return func() { _ = srv.Close() }, nil
}

// serveRelay serves r's metrics and readiness (every pool running).
func (f obsFlags) serveRelay(log *slog.Logger, r *relay.Relay) (func(), error) {
	return f.serve(log, obs.RelayReady(r), obs.NewRelayCollector(r))
}

// serveConsume serves c's metrics and readiness under policy (obs.ReadyAnyLane
// or obs.ReadyAllLanes).
func (f obsFlags) serveConsume(log *slog.Logger, c *consume.Consumer, policy string) (func(), error) {
	ready, err := obs.ConsumeReady(c, policy)
	if err != nil {
		return nil, fmt.Errorf("--ready-lanes: %v: %w", err, errUsage)
	}
	return f.serve(log, ready, obs.NewConsumeCollector(c))
}

// serveRoute serves rt's metrics (m, given to route.Config.Observe before
// New) and readiness (replica attached, a DC eligible).
func (f obsFlags) serveRoute(log *slog.Logger, rt *route.Router, m *obs.RouteMetrics) (func(), error) {
	m.Attach(rt)
	return f.serve(log, obs.RouteReady(rt), m)
}
