package dynkv

import (
	"errors"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"time"
)

// The server commands clients, tests and operators send beside the
// module's (Valkey's replies, as far as goindex has the state they
// describe). Replication is out of scope: ROLE answers master, INFO
// replication reports no replica, and REPLICAOF, SLAVEOF, SYNC, PSYNC,
// REPLCONF and FAILOVER answer replicationText. WAIT differs from a Valkey
// primary without replicas (which answers 0): with an append-only log the
// log stands in for the replica a frontend waits for — every write it
// acknowledged is in the log (on disk with --fsync) before WAIT runs — so
// WAIT answers the count asked for; without a log it answers 0. A frontend
// given a primary-first list of URLs infers one required acknowledgement and
// would otherwise fail every write.

// replicationText is the reply of the replication commands.
const replicationText = "ERR goindex dynkv does not replicate (replication is out of scope): run one server, with --log for restarts"

// moduleType is the name Valkey reports for the module's keys (TYPE).
const moduleType = "dynkvidx1"

// admin runs a server command for an authenticated connection.
func (s *Server) admin(st *connState, name string, args [][]byte) (reply, afterReply) {
	argc := len(args)
	arity := func(ok bool) (reply, bool) { return wrongArity(name), !ok }
	switch name {
	case "PING":
		if r, bad := arity(argc <= 2); bad {
			return r, afterNothing
		}
		if argc == 2 {
			return bulk(args[1]), afterNothing
		}
		return status("PONG"), afterNothing
	case "ECHO":
		if r, bad := arity(argc == 2); bad {
			return r, afterNothing
		}
		return bulk(args[1]), afterNothing
	case "SELECT":
		if r, bad := arity(argc == 2); bad {
			return r, afterNothing
		}
		db, ok := parseDB(args[1])
		switch {
		case !ok:
			return errText("ERR value is not an integer or out of range"), afterNothing
		case db < 0 || db >= Databases:
			return errText("ERR DB index is out of range"), afterNothing
		}
		st.db = int(db)
		return status("OK"), afterNothing
	case "EXISTS":
		if r, bad := arity(argc >= 2); bad {
			return r, afterNothing
		}
		n := 0
		for _, k := range args[1:] {
			if s.engine.Exists(dbKey(st.db, k)) {
				n++
			}
		}
		return integer(int64(n)), afterNothing
	case "TYPE":
		if r, bad := arity(argc == 2); bad {
			return r, afterNothing
		}
		if s.engine.Exists(dbKey(st.db, args[1])) {
			return status(moduleType), afterNothing
		}
		return status("none"), afterNothing
	case "DBSIZE":
		return integer(int64(s.engine.keysPerDB()[st.db])), afterNothing
	case "TIME":
		now := time.Now()
		return reply{kind: replyArray, array: []reply{
			bulk(strconv.AppendInt(nil, now.Unix(), 10)), bulk(strconv.AppendInt(nil, int64(now.Nanosecond()/1000), 10)),
		}}, afterNothing
	case "SENTINEL":
		return s.sentinel(st, args), afterNothing
	case "ROLE":
		return reply{kind: replyArray, array: []reply{bulk([]byte("master")), integer(0), {kind: replyArray}}}, afterNothing
	case "WAIT":
		if r, bad := arity(argc == 3); bad {
			return r, afterNothing
		}
		n, err1 := strconv.ParseInt(string(args[1]), 10, 64)
		t, err2 := strconv.ParseInt(string(args[2]), 10, 64)
		switch {
		case err1 != nil || err2 != nil:
			return errText("ERR value is not an integer or out of range"), afterNothing
		case t < 0:
			return errText("ERR timeout is negative"), afterNothing
		case n < 0:
			return errText("ERR value is out of range, must be positive"), afterNothing
		}
		if s.log == nil {
			return integer(0), afterNothing
		}
		return integer(n), afterNothing
	case "REPLICAOF", "SLAVEOF", "SYNC", "PSYNC", "REPLCONF", "FAILOVER":
		return errText(replicationText), afterNothing
	case "INFO":
		return bulk([]byte(s.info(args[1:]))), afterNothing
	case "CONFIG":
		return s.config(args), afterNothing
	case "SAVE":
		if err := s.rewriteLog(); errors.Is(err, errRewriteRunning) {
			return errText("ERR Background save already in progress"), afterNothing
		} else if err != nil {
			return errText("ERR goindex dynkv: " + err.Error()), afterNothing
		}
		return status("OK"), afterNothing
	case "BGSAVE":
		if !s.rewriteInBackground() {
			return errText("ERR Background save already in progress"), afterNothing
		}
		return status("Background saving started"), afterNothing
	case "BGREWRITEAOF":
		if !s.rewriteInBackground() {
			return errText("ERR Background append only file rewriting already in progress"), afterNothing
		}
		return status("Background append only file rewriting started"), afterNothing
	case "LASTSAVE":
		return integer(s.rw.lastSave.Load()), afterNothing
	case "SHUTDOWN":
		if err := s.syncLog(); err != nil {
			return errText("ERR Errors trying to SHUTDOWN. Check logs."), afterNothing
		}
		return reply{kind: replyNone}, afterShutdown
	case "MEMORY":
		return s.memory(inDatabase(st.db, args, 2)), afterNothing
	case "HELLO": // the version and credentials were checked by exec
		// HELLO protover [AUTH user password] [SETNAME name]: skip AUTH's
		// two values, so that a password "SETNAME" is not taken for one.
		for i := 2; i+1 < len(args); i++ {
			switch {
			case strings.EqualFold(string(args[i]), "AUTH"):
				i += 2
			case strings.EqualFold(string(args[i]), "SETNAME"):
				if !validClientName(args[i+1]) {
					return errText(badClientName), afterNothing
				}
				st.setName(args[i+1])
				i++
			}
		}
		// The server's field order and types: proto and id are integers.
		b := func(x string) reply { return bulk([]byte(x)) }
		return reply{kind: replyArray, array: []reply{b("server"), b("redis"), b("version"), b("7.2.4"),
			b("proto"), integer(2), b("id"), integer(1), b("mode"), b("standalone"), b("role"), b("master"),
			b("modules"), {kind: replyArray}}}, afterNothing
	case "CLIENT":
		if argc < 2 {
			return wrongArity(name), afterNothing
		}
		switch sub := strings.ToUpper(string(args[1])); sub {
		case "SETNAME":
			if argc != 3 {
				return wrongArity("client|setname"), afterNothing
			}
			if !validClientName(args[2]) {
				return errText(badClientName), afterNothing
			}
			st.setName(args[2])
			return status("OK"), afterNothing
		case "GETNAME":
			if argc != 2 {
				return wrongArity("client|getname"), afterNothing
			}
			return reply{kind: replyBulk, bulk: st.name}, afterNothing
		case "SETINFO", "NO-EVICT", "NO-TOUCH", "REPLY":
			return status("OK"), afterNothing
		case "ID":
			return integer(1), afterNothing
		}
		return errText("ERR unknown subcommand '" + string(args[1]) + "'. Try CLIENT HELP."), afterNothing
	case "COMMAND":
		if argc > 1 && strings.EqualFold(string(args[1]), "COUNT") {
			return integer(int64(len(commands))), afterNothing
		}
		return reply{kind: replyArray}, afterNothing
	case "READONLY", "READWRITE":
		return errText("ERR This instance has cluster support disabled"), afterNothing
	}
	return unknownCommand(args), afterNothing
}

// badClientName is the server's reply to a client name it refuses.
const badClientName = "ERR Client names cannot contain spaces, newlines or special characters."

// validClientName reports whether name is one the server accepts: every
// byte printable ASCII other than space ('!' to '~'), as Valkey checks.
func validClientName(name []byte) bool {
	for _, c := range name {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

// setName sets the connection's name; an empty one clears it (GETNAME then
// answers a null bulk string).
func (st *connState) setName(name []byte) {
	if len(name) == 0 {
		st.name = nil
		return
	}
	st.name = append([]byte(nil), name...)
}

func (s *Server) port() string {
	_, port, _ := net.SplitHostPort(s.Addr().String())
	return port
}

// syncLog makes every logged command durable (SHUTDOWN).
func (s *Server) syncLog() error {
	if s.log == nil {
		return nil
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.Sync()
}

// configParams are the parameters CONFIG GET reports.
func (s *Server) configParams() [][2]string {
	host, port, _ := net.SplitHostPort(s.Addr().String())
	aof, fsync := "no", "no"
	if s.log != nil {
		aof = "yes"
		if s.log.fsyncs() {
			fsync = "always"
		}
	}
	return [][2]string{
		{"appendonly", aof}, {"appendfsync", fsync}, {"save", ""},
		{"appendfilename", path.Base(s.cfg.LogPath)}, {"dir", path.Dir(s.cfg.LogPath)},
		{"maxclients", strconv.Itoa(s.cfg.MaxConns)}, {"timeout", strconv.Itoa(int(s.cfg.IdleTimeout / time.Second))},
		{"port", port}, {"bind", host}, {"databases", strconv.Itoa(Databases)}, {"maxmemory", "0"}, {"protected-mode", "no"},
		{"auto-aof-rewrite-percentage", strconv.FormatInt(s.rw.percent.Load(), 10)},
		{"auto-aof-rewrite-min-size", strconv.FormatInt(s.rw.minSize.Load(), 10)},
	}
}

// config runs CONFIG GET pattern…, CONFIG SET appendfsync always|everysec|no,
// CONFIG RESETSTAT and CONFIG REWRITE.
func (s *Server) config(args [][]byte) reply {
	if len(args) < 2 {
		return wrongArity("CONFIG")
	}
	sub := strings.ToUpper(string(args[1]))
	switch sub {
	case "GET":
		if len(args) < 3 {
			return wrongArity("CONFIG|GET")
		}
		var arr []reply
		for _, p := range s.configParams() {
			for _, pat := range args[2:] {
				if ok, _ := path.Match(strings.ToLower(string(pat)), p[0]); ok {
					arr = append(arr, bulk([]byte(p[0])), bulk([]byte(p[1])))
					break
				}
			}
		}
		return reply{kind: replyArray, array: arr}
	case "SET":
		if len(args) < 4 || len(args)%2 != 0 {
			return wrongArity("CONFIG|SET")
		}
		for i := 2; i < len(args); i += 2 {
			name, value := strings.ToLower(string(args[i])), strings.ToLower(string(args[i+1]))
			known := false
			for _, p := range s.configParams() {
				known = known || p[0] == name
			}
			switch {
			case name == "appendfsync" && s.log != nil && (value == "always" || value == "everysec" || value == "no"):
				s.logMu.Lock()
				s.log.setFsync(value == "always")
				s.logMu.Unlock()
			case name == "auto-aof-rewrite-percentage":
				n, err := strconv.ParseInt(value, 10, 32)
				if err != nil || n < 0 {
					return errText(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - argument must be an integer from 0 (off) up", name))
				}
				s.rw.percent.Store(n)
			case name == "auto-aof-rewrite-min-size":
				n, err := ParseMemory(value)
				if err != nil {
					return errText(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - argument must be a memory value", name))
				}
				s.rw.minSize.Store(n)
			case known:
				return errText(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - goindex dynkv sets it by a flag at start", name))
			default:
				return errText(fmt.Sprintf("ERR Unknown option or number of arguments for CONFIG SET - '%s'", name))
			}
		}
		return status("OK")
	case "RESETSTAT":
		return status("OK")
	case "REWRITE":
		return errText("ERR The server is running without a config file")
	}
	return errText("ERR unknown subcommand '" + string(args[1]) + "'. Try CONFIG HELP.")
}

// memory runs MEMORY USAGE key: an estimate of the index's bytes.
func (s *Server) memory(args [][]byte) reply {
	if len(args) < 2 {
		return wrongArity("MEMORY")
	}
	if !strings.EqualFold(string(args[1]), "USAGE") {
		return errText("ERR unknown subcommand '" + string(args[1]) + "'. Try MEMORY HELP.")
	}
	if len(args) < 3 {
		return wrongArity("MEMORY|USAGE")
	}
	st := s.engine.lookup(args[2])
	if st == nil {
		return reply{kind: replyBulk}
	}
	return integer(int64(st.MemoryBytes()))
}

// info renders INFO's sections (all of them without an argument).
func (s *Server) info(sections [][]byte) string {
	want := map[string]bool{}
	for _, a := range sections {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	var b strings.Builder
	section := func(name string, lines ...string) {
		if !all && !want[strings.ToLower(name)] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + name + "\r\n")
		for _, l := range lines {
			b.WriteString(l + "\r\n")
		}
	}
	aof, size := "0", int64(0)
	if s.log != nil {
		aof, size = "1", s.log.Size()
	}
	rewriting, rwStatus := "0", "ok"
	if s.rw.running.Load() {
		rewriting = "1"
	}
	if s.rw.failed.Load() {
		rwStatus = "err"
	}
	section("Server", "redis_version:7.2.4", "server_name:goindex-dynkv", "redis_mode:standalone",
		"tcp_port:"+s.port(),
		fmt.Sprintf("uptime_in_seconds:%d", int(time.Since(s.started).Seconds())))
	section("Clients", fmt.Sprintf("connected_clients:%d", s.conns.Load()), fmt.Sprintf("maxclients:%d", s.cfg.MaxConns))
	section("Persistence", "loading:0", "async_loading:0", "rdb_bgsave_in_progress:"+rewriting,
		fmt.Sprintf("rdb_last_save_time:%d", s.rw.lastSave.Load()), "rdb_last_bgsave_status:"+rwStatus, "aof_enabled:"+aof,
		"aof_rewrite_in_progress:"+rewriting, "aof_rewrite_scheduled:0", fmt.Sprintf("aof_rewrites:%d", s.rw.done.Load()),
		"aof_last_write_status:ok", "aof_last_bgrewrite_status:"+rwStatus,
		fmt.Sprintf("aof_current_size:%d", size), fmt.Sprintf("aof_base_size:%d", s.rw.base.Load()))
	section("Replication", "role:master", "connected_slaves:0", "master_failover_state:no-failover",
		"master_replid:0000000000000000000000000000000000000000", "master_replid2:0000000000000000000000000000000000000000",
		"master_repl_offset:0", "second_repl_offset:-1", "repl_backlog_active:0")
	section("Modules", "module:name=dynkv,ver=1,api=1,filters=0,usedby=[],using=[],options=[handle-io-errors]")
	var keyspace []string
	for db, n := range s.engine.keysPerDB() {
		if n > 0 {
			keyspace = append(keyspace, fmt.Sprintf("db%d:keys=%d,expires=0,avg_ttl=0", db, n))
		}
	}
	section("Keyspace", keyspace...)
	return b.String()
}
