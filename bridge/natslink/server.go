package natslink

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startTimeout bounds how long Start waits for the server to accept
// connections (JetStream recovery of a large store is the slow part).
const startTimeout = 30 * time.Second

// ServerConfig configures an embedded nats-server.
type ServerConfig struct {
	// Name is the server's name (JetStream needs a stable one to recover its
	// store); optional; default: "goindex-" and the client port.
	Name string
	// Host is the interface to listen on; optional; default: 127.0.0.1.
	Host string
	// Port is the client port; optional; default: 0, a free port.
	Port int
	// JetStream enables JetStream with its store in StoreDir.
	JetStream bool
	// JSDomain is the JetStream domain of this server (leaf nodes serving a
	// DC use one each); optional; default: none.
	JSDomain string
	// StoreDir is the JetStream store; optional; default: a temporary
	// directory that Shutdown removes.
	StoreDir string
	// Leaf accepts leaf-node connections on Host:LeafPort; optional;
	// default: false.
	Leaf bool
	// LeafPort is the leaf-node port; optional; default: 0, a free port.
	LeafPort int
	// LeafRemotes are hub URLs (nats-leaf://host:port) this server connects
	// to as a leaf node; optional.
	LeafRemotes []string
	// LeafReconnect is how often a leaf retries its hub; optional; default:
	// nats-server's (1 s).
	LeafReconnect time.Duration
	// MaxPayload bounds one message; optional; default: nats-server's 1 MiB.
	MaxPayload int32
	// Logs enables the server's own log on stderr; optional; default: off.
	Logs bool
	// Configure edits the server's options last, on every start and
	// restart (authentication, TLS, accounts: tests build secured servers
	// with it); optional.
	Configure func(*server.Options)
}

// Server is a running embedded nats-server.
type Server struct {
	cfg     ServerConfig
	srv     *server.Server
	tempDir string
}

// Start starts an embedded server for cfg and waits until it accepts
// connections.
func Start(cfg ServerConfig) (*Server, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	s := &Server{cfg: cfg}
	if cfg.JetStream && cfg.StoreDir == "" {
		dir, err := os.MkdirTemp("", "goindex-nats-*")
		if err != nil {
			return nil, fmt.Errorf("natslink: store: %w", err)
		}
		s.tempDir, s.cfg.StoreDir = dir, dir
	}
	if err := s.start(); err != nil {
		if s.tempDir != "" {
			os.RemoveAll(s.tempDir)
		}
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	c := &s.cfg
	opts := &server.Options{
		ServerName: c.Name,
		Host:       c.Host,
		Port:       c.Port,
		JetStream:  c.JetStream,
		StoreDir:   c.StoreDir,
		NoSigs:     true,
		MaxPayload: c.MaxPayload,
	}
	if c.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	if c.JetStream {
		opts.JetStreamDomain = c.JSDomain
	}
	if c.Leaf {
		opts.LeafNode.Host = c.Host
		opts.LeafNode.Port = c.LeafPort
		if c.LeafPort == 0 {
			opts.LeafNode.Port = server.RANDOM_PORT
		}
	}
	for _, r := range c.LeafRemotes {
		u, err := url.Parse(r)
		if err != nil {
			return fmt.Errorf("natslink: leaf remote %q: %w", r, err)
		}
		opts.LeafNode.Remotes = append(opts.LeafNode.Remotes, &server.RemoteLeafOpts{URLs: []*url.URL{u}})
	}
	if c.LeafReconnect > 0 {
		opts.LeafNode.ReconnectInterval = c.LeafReconnect
	}
	if c.Configure != nil {
		c.Configure(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("natslink: new server: %w", err)
	}
	if c.Logs {
		srv.ConfigureLogger()
	}
	srv.Start()
	if !srv.ReadyForConnections(startTimeout) {
		srv.Shutdown()
		return fmt.Errorf("%w: %s:%d after %v", ErrNotReady, c.Host, c.Port, startTimeout)
	}
	// Pin the ports a random choice picked, so Restart comes back on them.
	c.Port = srv.Addr().(*net.TCPAddr).Port
	if c.Leaf {
		c.LeafPort = opts.LeafNode.Port
	}
	if c.Name == "" {
		c.Name = "goindex-" + strconv.Itoa(c.Port)
	}
	s.srv = srv
	return nil
}

// ClientURL returns the nats:// URL clients connect to.
func (s *Server) ClientURL() string {
	return "nats://" + net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port))
}

// LeafURL returns the nats-leaf:// URL leaf nodes connect to, or "" when
// the server has no leaf listener.
func (s *Server) LeafURL() string {
	if !s.cfg.Leaf {
		return ""
	}
	return "nats-leaf://" + net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.LeafPort))
}

// Config returns the server's configuration with the ports it listens on.
func (s *Server) Config() ServerConfig { return s.cfg }

// NATS returns the underlying nats-server.
func (s *Server) NATS() *server.Server { return s.srv }

// Restart shuts the server down and starts it again on the same ports,
// name and store: JetStream streams survive, clients and leaf nodes
// reconnect.
func (s *Server) Restart() error {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	return s.start()
}

// Shutdown stops the server and removes a temporary store.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	if s.tempDir != "" {
		os.RemoveAll(s.tempDir)
	}
}
