package zmqfeed

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/internal/syncbuf"
)

func TestFeeds_OneFeedPerSource(t *testing.T) {
	scope := dynamo.Scope{Namespace: "ns", Component: "backend", Endpoint: "generate"}
	engine := EngineConfig{Endpoint: "tcp://127.0.0.1:5557", BlockSize: 16}
	for _, c := range []struct {
		name  string
		cfg   FeedsConfig
		kinds []string
	}{
		{"no source", FeedsConfig{Scope: scope}, nil},
		{"static publishers", FeedsConfig{Scope: scope, Publishers: []string{"tcp://127.0.0.1:1", "tcp://127.0.0.1:2"}}, []string{"plane"}},
		{"a broker", FeedsConfig{Scope: scope, Broker: "xsub=tcp://127.0.0.1:3,xpub=tcp://127.0.0.1:4"}, []string{"plane"}},
		{"an engine and publishers", FeedsConfig{Scope: scope, Engine: engine, Publishers: []string{"tcp://127.0.0.1:1"}}, []string{"engine", "plane"}},
	} {
		feeds, err := Feeds(c.cfg)
		if err != nil {
			t.Errorf("%s: Feeds = %v", c.name, err)
			continue
		}
		var kinds []string
		for _, f := range feeds {
			switch f.(type) {
			case *Engine:
				kinds = append(kinds, "engine")
			case *Plane:
				kinds = append(kinds, "plane")
			}
		}
		if len(kinds) != len(c.kinds) || len(feeds) != len(c.kinds) {
			t.Errorf("%s: Feeds = %v, want %v", c.name, kinds, c.kinds)
			continue
		}
		for i := range kinds {
			if kinds[i] != c.kinds[i] {
				t.Errorf("%s: Feeds = %v, want %v", c.name, kinds, c.kinds)
			}
		}
	}
	for _, c := range []struct {
		name string
		cfg  FeedsConfig
	}{
		{"a broker url without xpub", FeedsConfig{Scope: scope, Broker: "tcp://127.0.0.1:3"}},
		{"a publisher that is no endpoint", FeedsConfig{Scope: scope, Publishers: []string{"localhost"}}},
		{"an engine without its block size", FeedsConfig{Scope: scope, Engine: EngineConfig{Endpoint: "tcp://127.0.0.1:5557"}}},
		{"publishers without a scope", FeedsConfig{Publishers: []string{"tcp://127.0.0.1:1"}}},
		{"brokers looked up without etcd", FeedsConfig{Scope: scope, FindBrokers: true}},
		{"brokers looked up in Kubernetes", FeedsConfig{Scope: scope, FindBrokers: true, Kube: true}},
	} {
		if feeds, err := Feeds(c.cfg); !errors.Is(err, ErrBadConfig) || feeds != nil {
			t.Errorf("%s: Feeds = %v, %v; want nil, ErrBadConfig", c.name, feeds, err)
		}
	}
}

// TestFeeds_SocketBoundsReachEveryFeed: the bounds FeedsConfig gives
// (goindex relay's --zmq-recv-hwm and --zmq-max-message-bytes) are the
// engine's and every plane's; unset ones are the defaults.
func TestFeeds_SocketBoundsReachEveryFeed(t *testing.T) {
	scope := dynamo.Scope{Namespace: "ns", Component: "backend", Endpoint: "generate"}
	for _, c := range []struct{ hwm, wantHWM int }{{100000, 100000}, {0, DefaultRecvHWM}} {
		feeds, err := Feeds(FeedsConfig{Scope: scope, Engine: EngineConfig{Endpoint: "tcp://127.0.0.1:5557", BlockSize: 16},
			Publishers: []string{"tcp://127.0.0.1:1"}, RecvHWM: c.hwm, MaxMessageBytes: 1 << 20})
		if err != nil || len(feeds) != 2 {
			t.Fatalf("Feeds = %v, %v", feeds, err)
		}
		e, p := feeds[0].(*Engine), feeds[1].(*Plane)
		if e.cfg.RecvHWM != c.wantHWM || p.cfg.RecvHWM != c.wantHWM || e.cfg.MaxMessageBytes != 1<<20 || p.cfg.MaxMessageBytes != 1<<20 {
			t.Errorf("RecvHWM %d: engine %d/%d, plane %d/%d; want %d and %d bytes", c.hwm, e.cfg.RecvHWM, e.cfg.MaxMessageBytes,
				p.cfg.RecvHWM, p.cfg.MaxMessageBytes, c.wantHWM, 1<<20)
		}
	}
}

// TestFeeds_BrokerModeWithoutDiscoveryWarns: broker mode can observe a
// worker's departure only through discovery, so a broker without --etcd
// or --kube is warned about at start, and one with discovery is not.
func TestFeeds_BrokerModeWithoutDiscoveryWarns(t *testing.T) {
	scope := dynamo.Scope{Namespace: "ns", Component: "backend", Endpoint: "generate"}
	const broker = "xsub=tcp://127.0.0.1:3,xpub=tcp://127.0.0.1:4"
	for _, c := range []struct {
		name string
		cfg  FeedsConfig
		warn bool
	}{
		{"a broker alone", FeedsConfig{Scope: scope, Broker: broker}, true},
		{"a broker and etcd", FeedsConfig{Scope: scope, Broker: broker, Etcd: []string{"http://127.0.0.1:1"}}, false},
	} {
		logs := &syncbuf.Buffer{}
		c.cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		if _, err := Feeds(c.cfg); err != nil {
			t.Errorf("%s: Feeds = %v", c.name, err)
			continue
		}
		if got := strings.Contains(logs.String(), "broker mode without discovery"); got != c.warn {
			t.Errorf("%s: warned %v, want %v (logs %q)", c.name, got, c.warn, logs.String())
		}
	}
}
