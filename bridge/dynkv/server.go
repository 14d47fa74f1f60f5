package dynkv

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// Server limits and defaults.
const (
	// MaxRequestBytes bounds the bytes a connection may send for one command
	// (the largest legal APPLY is 1 MiB blocks × 16 bytes ≈ 16 MiB).
	MaxRequestBytes = 24 << 20
	// DefaultMaxConns bounds concurrent connections.
	DefaultMaxConns = 1024
	// DefaultCommandTimeout bounds how long a client may take to send one
	// command once its first byte arrived: a frontend sends a command in
	// one write, so 30 s is generous and still frees a stalled client's
	// connection.
	DefaultCommandTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds how long one reply may wait for a client
	// that does not read (its socket buffer full).
	DefaultWriteTimeout = 30 * time.Second
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
	// CommandTimeout bounds the time from a command's first byte to its
	// last; a client that stalls mid-command is disconnected. Optional;
	// default: DefaultCommandTimeout; negative: none.
	CommandTimeout time.Duration
	// WriteTimeout bounds one reply's write to a client that does not read;
	// optional; default: DefaultWriteTimeout; negative: none.
	WriteTimeout time.Duration
	// IdleTimeout disconnects a client silent for that long between
	// commands (Valkey's `timeout`); optional; default: 0, never.
	IdleTimeout time.Duration
	// AutoRewritePercentage rewrites the log in the background once it has
	// grown by this percentage over its size after the last rewrite (or at
	// start) and is over AutoRewriteMinSize (Valkey's
	// auto-aof-rewrite-percentage); optional; default:
	// DefaultAutoRewritePercentage; negative: never.
	AutoRewritePercentage int
	// AutoRewriteMinSize is the log size below which no automatic rewrite
	// runs (auto-aof-rewrite-min-size); optional; default:
	// DefaultAutoRewriteMinSize.
	AutoRewriteMinSize int64
	// SentinelMaster, when set, makes the server answer SENTINEL as a
	// Sentinel monitoring one primary of that name, itself (sentinel.go),
	// so clients configured for Sentinel can use it; optional; default:
	// none (SENTINEL is refused).
	SentinelMaster string
	// SentinelAnnounce is the primary's host:port that SENTINEL reports;
	// optional; default: the address each client reached the server at.
	SentinelAnnounce string
}

// Server speaks RESP2 and implements the dynkv command set over an Engine.
type Server struct {
	cfg     Config
	engine  *Engine
	log     *Log
	logMu   sync.Mutex // orders logged write commands with their records (exec)
	srv     *redcon.Server
	ln      net.Listener
	conns   atomic.Int64
	started time.Time
	runID   string // SENTINEL MYID and the primary's runid
	closed  sync.Once
	rw      rewriter
}

// connState is a connection's authentication flag.
type connState struct {
	local  string // the server's address on this connection (host:port)
	authed bool
	name   []byte // CLIENT SETNAME's (or HELLO's SETNAME); nil: none
	db     int    // SELECT's database
	sub    subscription
}

// NewServer opens the log (replaying it) and listens on cfg.Addr.
func NewServer(cfg Config) (*Server, error) {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.CommandTimeout == 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.SentinelAnnounce != "" {
		if _, port, err := net.SplitHostPort(cfg.SentinelAnnounce); err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrBadAnnounce, cfg.SentinelAnnounce, err)
		} else if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return nil, fmt.Errorf("%w %q: want a port from 1 to 65535", ErrBadAnnounce, cfg.SentinelAnnounce)
		}
	}
	engine, err := NewEngineWith(cfg.Backing)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, engine: engine, started: time.Now(), runID: newRunID()}
	switch {
	case cfg.AutoRewritePercentage == 0:
		s.rw.percent.Store(DefaultAutoRewritePercentage)
	case cfg.AutoRewritePercentage > 0:
		s.rw.percent.Store(int64(cfg.AutoRewritePercentage))
	}
	s.rw.minSize.Store(cmp.Or(cfg.AutoRewriteMinSize, DefaultAutoRewriteMinSize))
	s.rw.lastSave.Store(s.started.Unix())
	if cfg.LogPath != "" {
		l, _, err := OpenLog(cfg.LogPath, s.engine, cfg.Fsync)
		if err != nil {
			return nil, err
		}
		s.log = l
		s.rw.base.Store(l.Size())
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if s.log != nil {
			s.log.Close()
		}
		return nil, fmt.Errorf("dynkv: listen %s: %w", cfg.Addr, err)
	}
	s.ln = &limitListener{Listener: ln, cfg: &s.cfg}
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

// Serve serves until Close (or a client's SHUTDOWN).
func (s *Server) Serve() error {
	err := s.srv.Serve(s.ln)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("dynkv: serve: %w", err)
	}
	return nil
}

// Close stops listening, closes connections, waits for a running log
// rewrite and closes the log.
func (s *Server) Close() error {
	var err error
	s.closed.Do(func() {
		s.ln.Close()
		s.srv.Close()
		s.rw.close()
		if s.log != nil {
			s.logMu.Lock()
			err = s.log.Close()
			s.logMu.Unlock()
		}
	})
	return err
}

func (s *Server) accept(c redcon.Conn) bool {
	if s.conns.Add(1) > int64(s.cfg.MaxConns) {
		s.conns.Add(-1)
		c.WriteError("ERR max number of clients reached")
		return false
	}
	local := ""
	if nc := c.NetConn(); nc != nil {
		local = nc.LocalAddr().String()
	}
	c.SetContext(&connState{authed: s.cfg.Password == "", local: local})
	return true
}

func (s *Server) closedConn(redcon.Conn, error) { s.conns.Add(-1) }

func (s *Server) handle(c redcon.Conn, cmd redcon.Command) {
	if nc, ok := c.NetConn().(*budgetConn); ok {
		nc.consumed(len(cmd.Raw))
	}
	r, after := s.exec(c.Context().(*connState), cmd.Args)
	write(c, r)
	switch after {
	case afterClose:
		c.Close()
	case afterShutdown:
		go s.Close()
	}
}

// afterReply says what a connection does once its reply is written.
type afterReply uint8

const (
	afterNothing afterReply = iota
	afterClose
	afterShutdown
)

// exec runs one command for a connection.
func (s *Server) exec(st *connState, args [][]byte) (reply, afterReply) {
	name := strings.ToUpper(string(args[0]))
	switch name {
	case "QUIT":
		return status("OK"), afterClose
	case "AUTH":
		if len(args) < 2 || len(args) > 3 {
			return wrongArity(name), afterNothing
		}
		if s.cfg.Password == "" {
			return errText("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"), afterNothing
		}
		if string(args[len(args)-1]) != s.cfg.Password || (len(args) == 3 && string(args[1]) != "default") {
			return errText("WRONGPASS invalid username-password pair or user is disabled."), afterNothing
		}
		st.authed = true
		return status("OK"), afterNothing
	case "HELLO":
		// HELLO [protover [AUTH username password] [SETNAME name]]: the
		// version is checked first, then the credentials, as the server does.
		if len(args) > 1 && string(args[1]) != "2" {
			return errText("NOPROTO unsupported protocol version"), afterNothing
		}
		for i := 2; i+2 < len(args); i++ {
			if strings.EqualFold(string(args[i]), "AUTH") {
				if s.cfg.Password == "" || string(args[i+1]) != "default" || string(args[i+2]) != s.cfg.Password {
					return errText("WRONGPASS invalid username-password pair or user is disabled."), afterNothing
				}
				st.authed = true
			}
		}
		if !st.authed {
			return errText("NOAUTH HELLO must be called with the client already authenticated, otherwise the " +
				"HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the " +
				"RESP protocol version at the same time"), afterNothing
		}
	}
	if !st.authed {
		return errText("NOAUTH Authentication required."), afterNothing
	}
	if s.cfg.SentinelMaster != "" {
		switch {
		case name == "SUBSCRIBE" || name == "PSUBSCRIBE" || name == "UNSUBSCRIBE" || name == "PUNSUBSCRIBE":
			return s.pubsub(st, name, args), afterNothing
		case st.sub.count() == 0:
		case name == "PING" && len(args) <= 2:
			pong := reply{kind: replyArray, array: []reply{bulk([]byte("pong")), bulk([]byte{})}}
			if len(args) == 2 {
				pong.array[1] = bulk(args[1])
			}
			return pong, afterNothing
		case name != "PING" && name != "RESET": // RESET: unknown, as to Sentinel
			return subscribedRefusal(name, args), afterNothing
		}
	}
	switch {
	case name == "FLUSHDB":
		return s.flushDB(st.db, args), afterNothing
	case name == "DEL" || name == "UNLINK":
		return s.engineCommand(name, inDatabase(st.db, args, allFrom(1, len(args))...)), afterNothing
	case IsCommand(name) || isKeyspaceWrite(name):
		return s.engineCommand(name, inDatabase(st.db, args, 1)), afterNothing
	}
	return s.admin(st, name, args)
}

// engineCommand runs a command of the engine, logging write commands.
func (s *Server) engineCommand(name string, args [][]byte) reply {
	if s.log == nil || !(IsWrite(name) || isKeyspaceWrite(name)) {
		return s.engine.Exec(args)
	}
	// The log holds every write command in the order the engine ran it,
	// rejected ones included: replay then reproduces the state whatever a
	// command did, and in another order a store under a parent that a
	// sibling rank's clear dropped meanwhile would fail. Write commands
	// therefore run one at a time, each with its record; reads do not wait.
	s.logMu.Lock()
	now := s.engine.now()
	r := s.engine.ExecAt(now, args)
	err := s.log.Append(now, r.kind != replyError, args)
	s.logMu.Unlock()
	if err != nil {
		// The command ran but its record is not durable: say so rather
		// than pretend success.
		return errText("ERR goindex dynkv: " + err.Error())
	}
	s.autoRewrite()
	return r
}

// flushDB empties database db (FLUSHDB [ASYNC|SYNC]); the log records
// the keys it deleted, as a DEL, so that a replay deletes those alone.
func (s *Server) flushDB(db int, args [][]byte) reply {
	if len(args) > 2 || (len(args) == 2 && !strings.EqualFold(string(args[1]), "ASYNC") && !strings.EqualFold(string(args[1]), "SYNC")) {
		return errText("ERR syntax error")
	}
	if s.log == nil {
		s.engine.flushDB(db)
		return status("OK")
	}
	s.logMu.Lock()
	now := s.engine.now()
	gone := s.engine.flushDB(db)
	var err error
	if len(gone) > 0 {
		err = s.log.Append(now, true, append([][]byte{[]byte("DEL")}, gone...))
	}
	s.logMu.Unlock()
	if err != nil {
		return errText("ERR goindex dynkv: " + err.Error())
	}
	s.autoRewrite()
	return status("OK")
}

func write(c redcon.Conn, r reply) {
	switch r.kind {
	case replyStatus:
		c.WriteString(r.str)
	case replyError:
		c.WriteError(r.str)
	case replyBulk:
		if r.bulk == nil {
			c.WriteNull()
		} else {
			c.WriteBulk(r.bulk)
		}
	case replyInt:
		c.WriteInt64(r.integer)
	case replyArray:
		c.WriteArray(len(r.array))
		for _, a := range r.array {
			write(c, a)
		}
	case replyNullArray:
		c.WriteRaw([]byte("*-1\r\n"))
	case replySeq:
		for _, a := range r.array {
			write(c, a)
		}
	}
}

// limitListener wraps accepted connections in budgetConns.
type limitListener struct {
	net.Listener
	cfg *Config
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &budgetConn{Conn: c, cfg: l.cfg}, nil
}

// budgetConn bounds what one client can hold. It counts the bytes received
// and not yet consumed by a dispatched command (pending): reads fail once
// more than MaxRequestBytes are pending (redcon has no bulk size limit of
// its own, so a client declaring a huge bulk string is cut off instead of
// making the server buffer it); while a command is partly received, reads
// have a deadline CommandTimeout after its first byte (a client stalling
// mid-command loses its connection); between commands reads wait
// IdleTimeout (0: forever, as Valkey's default); every write has a
// deadline of WriteTimeout (a client that never reads loses its connection
// once its socket buffer is full). What it reads goes through an
// arrayFilter first (Valkey ignores empty and null command arrays, redcon
// refuses them). redcon reads and dispatches a connection's commands on
// one goroutine, so the fields need no lock.
type budgetConn struct {
	net.Conn
	cfg          *Config
	pending      int64
	partialSince time.Time
	arrays       arrayFilter
	raw          []byte // what the socket gave, before the filter
	out          []byte // filtered bytes not yet handed to redcon: out[off:]
	off          int
}

// readBufferBytes is the size of a connection's raw read buffer.
const readBufferBytes = 16 << 10

// consumed records a dispatched command of n raw bytes. An inline command
// is re-encoded by redcon (n may exceed what it took), hence the clamp.
func (c *budgetConn) consumed(n int) {
	c.pending = max(c.pending-int64(n), 0)
	if c.pending == 0 {
		c.partialSince = time.Time{}
	}
}

func (c *budgetConn) Read(p []byte) (int, error) {
	if c.pending > MaxRequestBytes {
		return 0, fmt.Errorf("dynkv: request over %d bytes", MaxRequestBytes)
	}
	var deadline time.Time
	switch {
	case c.pending > 0 && c.cfg.CommandTimeout > 0:
		deadline = c.partialSince.Add(c.cfg.CommandTimeout)
	case c.pending == 0 && c.cfg.IdleTimeout > 0:
		deadline = time.Now().Add(c.cfg.IdleTimeout)
	}
	if err := c.Conn.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	var err error
	for c.off == len(c.out) && err == nil {
		if c.raw == nil {
			c.raw = make([]byte, readBufferBytes)
		}
		var n int
		n, err = c.Conn.Read(c.raw)
		c.out, c.off = c.arrays.filter(c.out[:0], c.raw[:n]), 0
	}
	n := copy(p, c.out[c.off:])
	c.off += n
	if n > 0 {
		if c.pending == 0 {
			c.partialSince = time.Now()
		}
		c.pending += int64(n)
	}
	return n, err
}

func (c *budgetConn) Write(p []byte) (int, error) {
	if c.cfg.WriteTimeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}
