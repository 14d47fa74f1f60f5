package dynkv

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/redcon"
)

// Server limits.
const (
	// MaxRequestBytes bounds the bytes a connection may send for one command
	// (the largest legal APPLY is 1 MiB blocks × 16 bytes ≈ 16 MiB).
	MaxRequestBytes = 24 << 20
	// DefaultMaxConns bounds concurrent connections.
	DefaultMaxConns = 1024
)

// Config configures a Server.
type Config struct {
	Addr     string // listen address, e.g. "127.0.0.1:6379"
	LogPath  string // append-only log; optional; default: none (in memory only)
	Fsync    bool   // fsync the log before every reply; optional; default: false
	MaxConns int    // optional; default: DefaultMaxConns
	Password string // required AUTH password; optional; default: none
	// Backing selects the index behind MATCH, MATCH_PRIMARY and SELECT;
	// optional; default: exact.
	Backing Backing
}

// Server speaks RESP2 and implements the dynkv command set over an Engine.
type Server struct {
	cfg    Config
	engine *Engine
	log    *Log
	logMu  sync.Mutex // orders logged mutations with their records (exec)
	srv    *redcon.Server
	ln     net.Listener
	conns  atomic.Int64
	done   chan error
	closed sync.Once
}

// connState is a connection's authentication flag.
type connState struct{ authed bool }

// NewServer opens the log (replaying it) and listens on cfg.Addr.
func NewServer(cfg Config) (*Server, error) {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	engine, err := NewEngineWith(cfg.Backing)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, engine: engine, done: make(chan error, 1)}
	if cfg.LogPath != "" {
		l, _, err := OpenLog(cfg.LogPath, s.engine, cfg.Fsync)
		if err != nil {
			return nil, err
		}
		s.log = l
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if s.log != nil {
			s.log.Close()
		}
		return nil, fmt.Errorf("dynkv: listen %s: %w", cfg.Addr, err)
	}
	s.ln = &limitListener{Listener: ln}
	s.srv = redcon.NewServerNetwork("tcp", cfg.Addr, s.handle, s.accept, s.closedConn)
	return s, nil
}

// Addr returns the listening address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// LogDiverged returns how many records of the replayed log had another
// outcome on replay than when first run (0 unless there is a bug; 0 without
// a log).
func (s *Server) LogDiverged() int {
	if s.log == nil {
		return 0
	}
	return s.log.Diverged()
}

// Engine returns the server's engine (for tests and the benchmark).
func (s *Server) Engine() *Engine { return s.engine }

// Serve serves until Close.
func (s *Server) Serve() error {
	err := s.srv.Serve(s.ln)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "use of closed network connection") {
		return fmt.Errorf("dynkv: serve: %w", err)
	}
	return nil
}

// Close stops listening, closes connections and the log.
func (s *Server) Close() error {
	var err error
	s.closed.Do(func() {
		s.ln.Close()
		if s.log != nil {
			err = s.log.Close()
		}
	})
	return err
}

func (s *Server) accept(c redcon.Conn) bool {
	if s.conns.Add(1) > int64(s.cfg.MaxConns) {
		s.conns.Add(-1)
		c.WriteError("ERR max connections reached")
		return false
	}
	c.SetContext(&connState{authed: s.cfg.Password == ""})
	return true
}

func (s *Server) closedConn(redcon.Conn, error) { s.conns.Add(-1) }

func (s *Server) handle(c redcon.Conn, cmd redcon.Command) {
	if nc, ok := c.NetConn().(*budgetConn); ok {
		nc.reset()
	}
	r, quit := s.exec(c.Context().(*connState), cmd.Args)
	write(c, r)
	if quit {
		c.Close()
	}
}

// exec runs one command for a connection.
func (s *Server) exec(st *connState, args [][]byte) (reply, bool) {
	name := strings.ToUpper(string(args[0]))
	switch name {
	case "QUIT":
		return status("OK"), true
	case "AUTH":
		pw := args[len(args)-1]
		if len(args) < 2 || len(args) > 3 || s.cfg.Password == "" || string(pw) != s.cfg.Password {
			return reply{kind: replyError, str: "WRONGPASS invalid password"}, false
		}
		st.authed = true
		return status("OK"), false
	case "HELLO":
		// HELLO [protover [AUTH username password] [SETNAME name]]
		for i := 2; i+2 < len(args); i++ {
			if strings.EqualFold(string(args[i]), "AUTH") {
				if s.cfg.Password == "" || string(args[i+2]) != s.cfg.Password {
					return reply{kind: replyError, str: "WRONGPASS invalid password"}, false
				}
				st.authed = true
			}
		}
	}
	if !st.authed && name != "HELLO" && name != "PING" {
		return reply{kind: replyError, str: "NOAUTH authentication required"}, false
	}
	if r, ok := plainCommand(args); ok {
		return r, false
	}
	if !strings.HasPrefix(name, "DYNKV.") {
		return reply{kind: replyError, str: fmt.Sprintf("ERR unknown command '%s'", args[0])}, false
	}
	if len(args) < 2 {
		return errReply(errorf(CodeInvalidArgument, "%s needs a key", name)), false
	}
	if s.log == nil || !mutates(name) {
		r, _ := s.engine.Exec(args)
		return r, false
	}
	// The log holds every write command in the order the engine ran it,
	// rejected ones included: replay then reproduces the state whatever a
	// command did, and in another order a store under a parent that a
	// sibling rank's clear dropped meanwhile would fail. Write commands
	// therefore run one at a time, each with its record; reads do not wait.
	s.logMu.Lock()
	defer s.logMu.Unlock()
	now := s.engine.now()
	r, _ := s.engine.ExecAt(now, args)
	if err := s.log.Append(now, r.kind != replyError, args); err != nil {
		// The command ran but its record is not durable: say so rather
		// than pretend success.
		return reply{kind: replyError, str: "ERR " + err.Error()}, false
	}
	return r, false
}

func write(c redcon.Conn, r reply) {
	switch r.kind {
	case replyStatus:
		c.WriteString(r.str)
	case replyError:
		c.WriteError(r.str)
	case replyBulk:
		c.WriteBulk(r.bulk)
	case replyInt:
		c.WriteInt64(r.integer)
	case replyArray:
		c.WriteArray(len(r.array))
		for _, a := range r.array {
			write(c, a)
		}
	}
}

// limitListener wraps accepted connections in a per-command byte budget, so
// a client declaring a huge bulk string is cut off instead of making the
// server buffer it (redcon has no bulk size limit of its own).
type limitListener struct{ net.Listener }

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &budgetConn{Conn: c}, nil
}

// budgetConn fails reads once more than MaxRequestBytes arrive without a
// complete command being dispatched (the handler resets the budget).
type budgetConn struct {
	net.Conn
	read atomic.Int64
}

func (c *budgetConn) reset() { c.read.Store(0) }

func (c *budgetConn) Read(p []byte) (int, error) {
	if c.read.Load() > MaxRequestBytes {
		return 0, fmt.Errorf("dynkv: request over %d bytes", MaxRequestBytes)
	}
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}
