package dynkv

import (
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
)

// Limits of the server's command surface.
const (
	MaxKeyBytes = 1024 // one index key
	MaxKeys     = 4096 // independent indexes in one server
)

// reply is one RESP reply value.
type reply struct {
	kind    replyKind
	str     string // status or error text
	bulk    []byte
	integer int64
	array   []reply
}

type replyKind uint8

const (
	replyStatus replyKind = iota
	replyError
	replyBulk
	replyInt
	replyArray
)

func status(s string) reply    { return reply{kind: replyStatus, str: s} }
func bulk(b []byte) reply      { return reply{kind: replyBulk, bulk: b} }
func integer(v int64) reply    { return reply{kind: replyInt, integer: v} }
func errReply(err error) reply { return reply{kind: replyError, str: err.Error()} }
func ticket(v uint64) reply    { return bulk(binary.BigEndian.AppendUint64(nil, v)) }

func changedReply(c Changed) reply {
	if c {
		return status("OK")
	}
	return status("NOOP")
}

// Engine executes dynkv commands against its indexes, one Store per key,
// each with the engine's Backing. It holds no connection state, so the
// server, the append-only log replay and the tests all drive the same code.
// Safe for concurrent use.
type Engine struct {
	mu      sync.RWMutex
	stores  map[string]*Store
	now     func() time.Time
	backing Backing
}

// NewEngine returns an engine with no indexes whose stores are exact.
func NewEngine() *Engine {
	return &Engine{stores: map[string]*Store{}, now: time.Now, backing: Backing{Index: IndexExact}}
}

// NewEngineWith returns an engine with no indexes whose stores have backing
// b; ErrBadBacking if b is invalid.
func NewEngineWith(b Backing) (*Engine, error) {
	b, err := b.normalized()
	if err != nil {
		return nil, err
	}
	e := NewEngine()
	e.backing = b
	return e, nil
}

// Backing returns the engine's backing, defaults filled in.
func (e *Engine) Backing() Backing { return e.backing }

// store returns the index for key, creating it when create is set.
func (e *Engine) store(key []byte, create bool) (*Store, error) {
	if len(key) == 0 || len(key) > MaxKeyBytes {
		return nil, errorf(CodeInvalidArgument, "key length %d outside [1, %d]", len(key), MaxKeyBytes)
	}
	e.mu.RLock()
	s := e.stores[string(key)]
	e.mu.RUnlock()
	if s != nil || !create {
		return s, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s = e.stores[string(key)]; s == nil {
		if len(e.stores) >= MaxKeys {
			return nil, errorf(CodeInvalidArgument, "too many indexes (limit %d)", MaxKeys)
		}
		var err error
		if s, err = NewStoreWith(e.backing); err != nil {
			// The backing was checked by NewEngineWith: only an
			// allocation can fail here.
			return nil, errorf(CodeInvalidArgument, "new index: %v", err)
		}
		e.stores[string(key)] = s
	}
	return s, nil
}

// command describes one dynkv command: its argument count after the key and
// whether it mutates (and so goes to the append-only log).
type command struct {
	args    int
	mutates bool
	run     func(now time.Time, s *Store, args [][]byte) reply
}

// optionalArgs are the goindex extensions: arguments a command accepts after
// the module's.
var optionalArgs = map[string]int{"DYNKV.STATS": 1} // [DETAIL]

// commands maps upper-case command names to their handlers. Commands of the
// module's admission and lifecycle-GC features answer DYNKV_UNSUPPORTED; its
// replication-internal commands answer DYNKV_INTERNAL_COMMAND (normal
// clients may not send them).
var commands = map[string]command{
	"DYNKV.APPLY":                      {1, true, cmdApply},
	"DYNKV.APPLY_OWNED":                {2, true, cmdApplyOwned},
	"DYNKV.MATCH":                      {1, false, cmdMatch},
	"DYNKV.MATCH_PRIMARY":              {1, false, cmdMatch},
	"DYNKV.SELECT":                     {1, false, cmdSelect},
	"DYNKV.RESET_WORKER":               {2, true, rankCmd((*Store).ResetWorker)},
	"DYNKV.REMOVE_WORKER":              {2, true, rankCmd((*Store).RemoveWorker)},
	"DYNKV.REMOVE_WORKER_ALL":          {1, true, cmdRemoveWorkerAll},
	"DYNKV.RANK_GENERATION":            {2, false, cmdRankGeneration},
	"DYNKV.REPLACE_RANK_IF_GENERATION": {4, true, cmdReplace},
	"DYNKV.BARRIER":                    {0, false, func(time.Time, *Store, [][]byte) reply { return status("OK") }},
	"DYNKV.STATS":                      {0, false, cmdStats},
	"DYNKV.REGISTER_WORKER":            {2, true, cmdRegisterWorker},
	"DYNKV.REGISTER_WORKER_RANKS":      {2, true, cmdRegisterWorkerRanks},
	"DYNKV.REGISTRATION_GENERATION":    {1, false, cmdRegistrationGeneration},
	"DYNKV.RENEW_WORKER_LEASE":         {1, true, cmdRenewLease},
	"DYNKV.UNREGISTER_WORKER":          {1, true, cmdUnregister},
}

var unsupported = map[string]Code{
	"DYNKV.SELECT_RESERVE": CodeUnsupported, "DYNKV.RELEASE": CodeUnsupported, "DYNKV.RENEW": CodeUnsupported,
	"DYNKV.GC": CodeUnsupported, "DYNKV.GC_STATS": CodeUnsupported, "DYNKV.LIFECYCLE_STATS": CodeUnsupported,
	"DYNKV.ADMISSION_STATS": CodeUnsupported,
	"DYNKV.APPLY_OWNED_AT":  CodeInternalOnly, "DYNKV.ADMIT_APPLY": CodeInternalOnly,
	"DYNKV.WORKER_LEASE_APPLY": CodeInternalOnly, "DYNKV.GC_APPLY": CodeInternalOnly, "DYNKV.RESTORE": CodeInternalOnly,
}

// Unimplemented returns, sorted, the module's commands the server accepts
// but does not implement: unsupported (admission and lifecycle GC, answered
// DYNKV_UNSUPPORTED) and internal (replication and AOF internals, answered
// DYNKV_INTERNAL_COMMAND as the module answers normal clients).
func Unimplemented() (unsupportedNames, internalNames []string) {
	for name, code := range unsupported {
		if code == CodeInternalOnly {
			internalNames = append(internalNames, name)
		} else {
			unsupportedNames = append(unsupportedNames, name)
		}
	}
	slices.Sort(unsupportedNames)
	slices.Sort(internalNames)
	return unsupportedNames, internalNames
}

// mutates reports whether the upper-case command name changes state when it
// succeeds (and so goes to the append-only log).
func mutates(name string) bool { return commands[name].mutates }

// Exec runs one dynkv command (args[0] is the name, args[1] the key) at the
// engine's current time. It reports whether the command mutated state
// successfully, so the caller can log it.
func (e *Engine) Exec(args [][]byte) (r reply, logged bool) { return e.ExecAt(e.now(), args) }

// ExecAt runs one dynkv command as if at time now: owner leases
// (REGISTER_WORKER_RANKS v3, RENEW_WORKER_LEASE) are taken and checked
// against it. The append-only log replays each record at the time it was
// first applied, so a lease that had expired then has expired on replay too.
func (e *Engine) ExecAt(now time.Time, args [][]byte) (r reply, logged bool) {
	name := strings.ToUpper(string(args[0]))
	cmd, ok := commands[name]
	if !ok {
		if code, known := unsupported[name]; known {
			return errReply(errorf(code, "%s is not implemented by goindex (admission, lifecycle GC and replication internals are out of scope)", name)), false
		}
		return errReply(errorf(CodeInvalidArgument, "unknown command %q", name)), false
	}
	if n, opt := len(args)-2, optionalArgs[name]; n < cmd.args || n > cmd.args+opt {
		if opt > 0 {
			return errReply(errorf(CodeInvalidArgument, "%s takes a key and %d to %d arguments, got %d", name, cmd.args, cmd.args+opt, len(args)-1)), false
		}
		return errReply(errorf(CodeInvalidArgument, "%s takes a key and %d arguments, got %d", name, cmd.args, len(args)-1)), false
	}
	s, err := e.store(args[1], cmd.mutates)
	if err != nil {
		return errReply(err), false
	}
	if s == nil {
		return e.absentKey(name, args[2:]), false
	}
	r = cmd.run(now, s, args[2:])
	return r, cmd.mutates && r.kind != replyError
}

// absentKey answers a read-only command on a key no mutation has created.
func (e *Engine) absentKey(name string, args [][]byte) reply {
	switch name {
	case "DYNKV.MATCH", "DYNKV.MATCH_PRIMARY":
		return bulk(AppendMatchReply(nil, nil))
	case "DYNKV.SELECT":
		return bulk(AppendSelectReply(nil, nil))
	case "DYNKV.RANK_GENERATION", "DYNKV.REGISTRATION_GENERATION":
		return ticket(0)
	case "DYNKV.STATS":
		if len(args) > 0 {
			if err := detailArg(args[0]); err != nil {
				return errReply(err)
			}
			d := Detail{Index: e.backing.Index, CKFExpectedBlocks: e.backing.CKFExpectedBlocks}
			if d.Index == IndexCKF {
				d.CKFBuckets, _ = ckf.BucketCount(d.CKFExpectedBlocks)
			}
			return detailReply(d)
		}
		return reply{kind: replyArray, array: []reply{integer(0), integer(0), integer(0)}}
	}
	return status("OK")
}

func cmdApply(_ time.Time, s *Store, a [][]byte) reply {
	ev, err := DecodeEvent(a[0])
	if err != nil {
		return errReply(err)
	}
	c, err := s.Apply(ev)
	if err != nil {
		return errReply(err)
	}
	return changedReply(c)
}

func cmdApplyOwned(_ time.Time, s *Store, a [][]byte) reply {
	nonce, err := u64Arg(a[0], "owner nonce")
	if err != nil {
		return errReply(err)
	}
	ev, err := DecodeEvent(a[1])
	if err != nil {
		return errReply(err)
	}
	c, err := s.ApplyOwned(nonce, ev)
	if err != nil {
		return errReply(err)
	}
	return changedReply(c)
}

func cmdMatch(_ time.Time, s *Store, a [][]byte) reply {
	hashes, err := DecodeMatch(a[0])
	if err != nil {
		return errReply(err)
	}
	return bulk(AppendMatchReply(nil, s.Match(hashes)))
}

func cmdSelect(_ time.Time, s *Store, a [][]byte) reply {
	hashes, cands, err := DecodeSelect(a[0])
	if err != nil {
		return errReply(err)
	}
	return bulk(AppendSelectReply(nil, s.Select(hashes, cands)))
}

func rankArgs(a [][]byte) (Rank, error) {
	w, err := u64Arg(a[0], "worker id")
	if err != nil {
		return Rank{}, err
	}
	r, err := u32Arg(a[1], "dp rank")
	return Rank{w, r}, err
}

func rankCmd(f func(*Store, Rank)) func(time.Time, *Store, [][]byte) reply {
	return func(_ time.Time, s *Store, a [][]byte) reply {
		r, err := rankArgs(a)
		if err != nil {
			return errReply(err)
		}
		f(s, r)
		return status("OK")
	}
}

func cmdRemoveWorkerAll(_ time.Time, s *Store, a [][]byte) reply {
	w, err := u64Arg(a[0], "worker id")
	if err != nil {
		return errReply(err)
	}
	s.RemoveWorkerAll(w)
	return status("OK")
}

func cmdRankGeneration(_ time.Time, s *Store, a [][]byte) reply {
	r, err := rankArgs(a)
	if err != nil {
		return errReply(err)
	}
	return ticket(s.RankGeneration(r))
}

func cmdReplace(_ time.Time, s *Store, a [][]byte) reply {
	r, err := rankArgs(a)
	if err != nil {
		return errReply(err)
	}
	expected, err := u64Arg(a[2], "expected generation")
	if err != nil {
		return errReply(err)
	}
	events, err := DecodeSnapshot(a[3], r)
	if err != nil {
		return errReply(err)
	}
	gen, err := s.ReplaceRankIfGeneration(r, expected, events)
	if err != nil {
		return errReply(err)
	}
	return ticket(gen)
}

// cmdStats answers the module's triple [nodes, rank states, mutations], or
// with the goindex extension argument DETAIL a flat array of name/value
// pairs: the backing index, the triple, ranks holding blocks and, in ckf
// mode, the CKF's counters (detailReply). The triple stays the default
// reply because clients of the module read STATS as exactly three integers.
func cmdStats(_ time.Time, s *Store, a [][]byte) reply {
	if len(a) > 0 {
		if err := detailArg(a[0]); err != nil {
			return errReply(err)
		}
		return detailReply(s.Detail())
	}
	n, st, m := s.Stats()
	return reply{kind: replyArray, array: []reply{integer(int64(n)), integer(int64(st)), integer(int64(m))}}
}

func detailArg(b []byte) error {
	if !strings.EqualFold(string(b), "DETAIL") {
		return errorf(CodeInvalidArgument, "STATS takes a key and optionally DETAIL, got %q", b)
	}
	return nil
}

func cmdRegisterWorker(_ time.Time, s *Store, a [][]byte) reply {
	r, err := rankArgs(a)
	if err != nil {
		return errReply(err)
	}
	c, err := s.RegisterWorker(r)
	if err != nil {
		return errReply(err)
	}
	return changedReply(c)
}

func cmdRegisterWorkerRanks(now time.Time, s *Store, a [][]byte) reply {
	w, err := u64Arg(a[0], "worker id")
	if err != nil {
		return errReply(err)
	}
	reg, err := DecodeRegistration(a[1])
	if err != nil {
		return errReply(err)
	}
	c, err := s.RegisterWorkerRanks(w, reg, now)
	if err != nil {
		return errReply(err)
	}
	return changedReply(c)
}

func cmdRegistrationGeneration(_ time.Time, s *Store, a [][]byte) reply {
	w, err := u64Arg(a[0], "worker id")
	if err != nil {
		return errReply(err)
	}
	return ticket(s.RegistrationGeneration(w))
}

func cmdRenewLease(now time.Time, s *Store, a [][]byte) reply {
	p, err := DecodeLease(a[0])
	if err != nil {
		return errReply(err)
	}
	if err := s.RenewLease(p, now); err != nil {
		return errReply(err)
	}
	return status("OK")
}

func cmdUnregister(_ time.Time, s *Store, a [][]byte) reply {
	p, err := DecodeLease(a[0])
	if err != nil {
		return errReply(err)
	}
	if err := s.UnregisterWorker(p); err != nil {
		return errReply(err)
	}
	return status("OK")
}

// plainCommand answers the non-module commands a Redis/Valkey client sends
// (PING, WAIT, ROLE, HELLO, CLIENT, SELECT, COMMAND, ECHO, QUIT). ok is
// false for names it does not know.
func plainCommand(args [][]byte) (r reply, ok bool) {
	switch strings.ToUpper(string(args[0])) {
	case "PING":
		if len(args) > 1 {
			return bulk(args[1]), true
		}
		return status("PONG"), true
	case "ECHO":
		if len(args) != 2 {
			return errReply(errorf(CodeInvalidArgument, "ECHO takes one argument")), true
		}
		return bulk(args[1]), true
	case "WAIT":
		// A standalone server acknowledges every requested replica: the
		// frontend only checks the count is at least what it asked for.
		if len(args) != 3 {
			return errReply(errorf(CodeInvalidArgument, "WAIT numreplicas timeout")), true
		}
		n, err := strconv.ParseInt(string(args[1]), 10, 64)
		if err != nil || n < 0 {
			return errReply(errorf(CodeInvalidArgument, "WAIT numreplicas %q", args[1])), true
		}
		return integer(n), true
	case "ROLE":
		return reply{kind: replyArray, array: []reply{bulk([]byte("master")), integer(0), {kind: replyArray}}}, true
	case "HELLO":
		if len(args) > 1 && string(args[1]) != "2" {
			return reply{kind: replyError, str: "NOPROTO this server speaks RESP2 only"}, true
		}
		kv := []string{"server", "goindex-dynkv", "version", "1.0.0", "proto", "2", "mode", "standalone", "role", "master"}
		arr := make([]reply, 0, len(kv)+2)
		for _, s := range kv {
			arr = append(arr, bulk([]byte(s)))
		}
		arr = append(arr, bulk([]byte("modules")), reply{kind: replyArray})
		return reply{kind: replyArray, array: arr}, true
	case "CLIENT", "SELECT", "READONLY", "READWRITE":
		return status("OK"), true
	case "COMMAND":
		return reply{kind: replyArray}, true
	}
	return reply{}, false
}
