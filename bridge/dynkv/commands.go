package dynkv

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
)

// Limits of the server's command surface.
const (
	MaxKeyBytes = 1024 // a key a write may create
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
	replyNullArray // RESP2's null array, *-1 (Sentinel's "no such primary")
	replySeq       // several replies, array's, one after the other (SUBSCRIBE's)
	replyNone      // no reply at all (SHUTDOWN closes the connection instead)
)

func status(s string) reply     { return reply{kind: replyStatus, str: s} }
func bulk(b []byte) reply       { return reply{kind: replyBulk, bulk: b} }
func integer(v int64) reply     { return reply{kind: replyInt, integer: v} }
func errCode(code Code) reply   { return reply{kind: replyError, str: string(code)} }
func errText(text string) reply { return reply{kind: replyError, str: text} }
func ticket(v uint64) reply     { return bulk(binary.BigEndian.AppendUint64(nil, v)) }
func okOrNoop(changed bool) reply {
	return map[bool]reply{true: status("OK"), false: status("NOOP")}[changed]
}

func ints(vs ...uint64) reply {
	arr := make([]reply, len(vs))
	for i, v := range vs {
		arr[i] = integer(int64(v))
	}
	return reply{kind: replyArray, array: arr}
}

// wrongArity is the server's reply to a command with the wrong argument
// count, naming the command as the module registered it (lower case).
func wrongArity(name string) reply {
	return errText("ERR wrong number of arguments for '" + strings.ToLower(name) + "' command")
}

// Engine executes dynkv commands against its indexes, one Store per key,
// each with the engine's Backing. It holds no connection state, so the
// server, the append-only log replay and the tests all drive the same code.
// Safe for concurrent use: write commands run one at a time (as in the
// module, whose server runs every command on one thread), reads run in
// parallel with each other.
type Engine struct {
	mu      sync.RWMutex // stores
	stores  map[string]*Store
	wmu     sync.Mutex // serializes write commands
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

// lookup returns the index of key, nil when no write created it.
func (e *Engine) lookup(key []byte) *Store {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.stores[string(key)]
}

// create returns the index of key, creating an empty one (the module's
// router_index_for_write). The key then exists even if the command fails
// afterwards, as in the module.
func (e *Engine) create(key []byte) (*Store, error) {
	if s := e.lookup(key); s != nil {
		return s, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(key) > MaxKeyBytes || len(e.stores) >= MaxKeys {
		return nil, ErrTooManyKeys
	}
	s, err := NewStoreWith(e.backing)
	if err != nil {
		return nil, err // the backing was checked by NewEngineWith: only allocation fails here
	}
	e.stores[string(key)] = s
	return s, nil
}

// drop deletes key's index s (SELECT_RESERVE deletes the key it created
// for a request it then found malformed, as the module does).
func (e *Engine) drop(key []byte, s *Store) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stores[string(key)] == s {
		delete(e.stores, string(key))
	}
}

// Exists reports whether key holds an index.
func (e *Engine) Exists(key []byte) bool { return e.lookup(key) != nil }

// call is one command being executed.
type call struct {
	e     *Engine
	now   time.Time
	nowMs uint64
	args  [][]byte // args[0] the name, args[1] the key
}

func (c *call) key() []byte { return c.args[1] }

// write opens the key for writing (creating it) and locks its index; the
// caller unlocks. A refused creation answers ok false with the reply.
func (c *call) write() (*Store, reply, bool) {
	s, err := c.e.create(c.key())
	if err != nil {
		return nil, errText("ERR goindex dynkv: " + err.Error()), false
	}
	s.mu.Lock()
	return s, reply{}, true
}

// command describes one module command: its argument count (with the name
// and key, as the module's argc) and whether it is a write (serialized and
// logged).
type command struct {
	argc  int
	write bool
	run   func(c *call) reply
}

// commands maps the module's command names (upper case) to their handlers,
// in the module's registration order. DYNKV.STATS also takes the goindex
// extension argument DETAIL.
var commands = map[string]command{
	"DYNKV.APPLY":                      {3, true, cmdApply},
	"DYNKV.APPLY_OWNED":                {4, true, cmdApplyOwned},
	"DYNKV.APPLY_OWNED_AT":             {5, false, internalOnly(CodeApplyOwnedAtInternalOnly)},
	"DYNKV.BARRIER":                    {2, false, cmdBarrier},
	"DYNKV.MATCH":                      {3, false, cmdMatch},
	"DYNKV.MATCH_PRIMARY":              {3, false, cmdMatch},
	"DYNKV.SELECT":                     {3, false, cmdSelect},
	"DYNKV.SELECT_RESERVE":             {3, true, cmdSelectReserve},
	"DYNKV.RELEASE":                    {3, true, cmdRelease},
	"DYNKV.RENEW":                      {3, true, cmdRenew},
	"DYNKV.ADMIT_APPLY":                {3, false, internalOnly(CodeAdmitApplyInternalOnly)},
	"DYNKV.WORKER_LEASE_APPLY":         {3, false, internalOnly(CodeWorkerLeaseApplyInternal)},
	"DYNKV.GC_APPLY":                   {3, false, internalOnly(CodeGCApplyInternalOnly)},
	"DYNKV.RANK_GENERATION":            {4, false, cmdRankGeneration},
	"DYNKV.REGISTRATION_GENERATION":    {3, false, cmdRegistrationGeneration},
	"DYNKV.REPLACE_RANK_IF_GENERATION": {6, true, cmdReplace},
	"DYNKV.RESTORE":                    {3, false, internalOnly(CodeRestoreLoadingOnly)},
	"DYNKV.REMOVE_WORKER":              {4, true, cmdRemoveWorker},
	"DYNKV.RESET_WORKER":               {4, true, cmdResetWorker},
	"DYNKV.REMOVE_WORKER_ALL":          {3, true, cmdRemoveWorkerAll},
	"DYNKV.REGISTER_WORKER":            {4, true, cmdRegisterWorker},
	"DYNKV.REGISTER_WORKER_RANKS":      {4, true, cmdRegisterWorkerRanks},
	"DYNKV.RENEW_WORKER_LEASE":         {3, true, cmdRenewLease},
	"DYNKV.UNREGISTER_WORKER":          {3, true, cmdUnregister},
	"DYNKV.ADMISSION_STATS":            {2, false, cmdAdmissionStats},
	"DYNKV.LIFECYCLE_STATS":            {2, false, cmdLifecycleStats},
	"DYNKV.GC":                         {4, true, cmdGC},
	"DYNKV.GC_STATS":                   {2, false, cmdGCStats},
	"DYNKV.STATS":                      {2, false, cmdStats},
}

// internalOnly answers a replication or AOF-load command from a client,
// as the module does (goindex has no replication stream to obey).
func internalOnly(code Code) func(*call) reply {
	return func(*call) reply { return errCode(code) }
}

// CommandNames returns the module's command names (upper case), sorted.
func CommandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// IsCommand reports whether name (any case) is a module command.
func IsCommand(name string) bool {
	_, ok := commands[strings.ToUpper(name)]
	return ok
}

// IsWrite reports whether the module command name (upper case) may change
// state, and so runs serialized and goes to the append-only log.
func IsWrite(name string) bool { return commands[name].write }

// Exec runs one dynkv command (args[0] is the name, args[1] the key) at the
// engine's current time.
func (e *Engine) Exec(args [][]byte) reply { return e.ExecAt(e.now(), args) }

// ExecAt runs one dynkv command as if at time now: owner leases are taken
// and checked against it. The append-only log replays each record at the
// time it first ran, so a lease that had expired then has expired on
// replay too.
func (e *Engine) ExecAt(now time.Time, args [][]byte) reply {
	name := strings.ToUpper(string(args[0]))
	if isKeyspaceWrite(name) {
		return e.keyspaceWrite(name, args)
	}
	cmd, ok := commands[name]
	if !ok {
		return unknownCommand(args)
	}
	if len(args) != cmd.argc && !(name == "DYNKV.STATS" && len(args) == 3) {
		return wrongArity(name)
	}
	if cmd.write {
		e.wmu.Lock()
		defer e.wmu.Unlock()
	}
	return cmd.run(&call{e: e, now: now, nowMs: uint64(max(now.UnixMilli(), 0)), args: args})
}

// unknownCommand is the server's reply to a name it does not know, with
// the arguments as Valkey quotes them.
func unknownCommand(args [][]byte) reply {
	var b strings.Builder
	for _, a := range args[1:] {
		if b.Len() >= 128 {
			break
		}
		b.WriteString("'")
		b.Write(a[:min(len(a), 128-b.Len())])
		b.WriteString("' ")
	}
	text := "ERR unknown command '" + string(args[0][:min(len(args[0]), 128)]) + "', with args beginning with: " + b.String()
	return errText(strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, text))
}

func cmdApply(c *call) reply {
	ev, err := DecodeEvent(c.args[2])
	if err != nil {
		return errCode(CodeInvalidEvent)
	}
	s, r, ok := c.write()
	if !ok {
		return r
	}
	s.mu.Unlock() // Apply locks
	return changedReply(s.Apply(ev))
}

// changedReply is the reply of a mutation's outcome.
func changedReply(c Changed, err error) reply {
	if err != nil {
		return errCode(CodeOf(err))
	}
	return okOrNoop(bool(c))
}

func cmdApplyOwned(c *call) reply {
	nonce, ok := be64(c.args[2])
	if !ok || nonce == 0 {
		return errCode(CodeInvalidWorkerOwner)
	}
	ev, err := DecodeEvent(c.args[3])
	if err != nil {
		return errCode(CodeInvalidEvent)
	}
	s := c.e.lookup(c.key())
	if s == nil {
		return errCode(CodeStaleWorkerOwner)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ownerLive(ev.Rank.Worker, nonce, c.nowMs) {
		return errCode(CodeStaleWorkerOwner)
	}
	if st := s.ranks[ev.Rank]; st == nil || st.retired || !st.registered {
		return errCode(CodeUnregisteredRank)
	}
	if !s.canAdvance() {
		return errCode(CodeGenerationExhausted)
	}
	res := s.applyEvent(&ev)
	switch res {
	case applyMissingParent:
		return errCode(CodeMissingParent)
	case applyConflict:
		return errCode(CodeConflictingBlock)
	}
	fence := res == applyNoop && ev.Kind == KindRemove && len(ev.Hashes) != 0
	if res != applyOK && !fence {
		if res == applyNoop {
			return status("NOOP")
		}
		return errCode(CodeInvalidEvent)
	}
	if res == applyOK {
		switch ev.Kind {
		case KindClear:
			// Ranks without an epoch are legacy state: retained.
			if ep := s.epochs[ev.Rank.Worker]; ep != nil {
				for _, st := range ep.ranks {
					s.compactRank(st)
				}
			}
		case KindRemove:
			s.compactRemove(s.ranks[ev.Rank], ev.Hashes)
		}
	}
	if !s.advanceForEvent(&ev) {
		return errCode(CodeGenerationExhausted)
	}
	if fence {
		s.mutations++
	}
	return status("OK")
}

func cmdBarrier(*call) reply { return status("OK") }

func cmdMatch(c *call) reply {
	hashes, err := DecodeMatch(c.args[2])
	if err != nil {
		return errCode(CodeInvalidMatch)
	}
	s := c.e.lookup(c.key())
	if s == nil {
		return bulk(AppendMatchReply(nil, nil))
	}
	return bulk(AppendMatchReply(nil, s.Match(hashes, c.nowMs)))
}

func cmdSelect(c *call) reply {
	hashes, cands, err := DecodeSelect(c.args[2])
	if err != nil {
		return errCode(CodeInvalidSelect)
	}
	s := c.e.lookup(c.key())
	if s == nil {
		s = NewStore()
	}
	return bulk(AppendSelectReply(nil, s.Select(hashes, cands, c.nowMs)))
}

// rankArgs reads the worker (8 bytes) and dp rank (4 bytes) arguments.
func rankArgs(w, r []byte) (Rank, bool) {
	worker, ok1 := be64(w)
	rank, ok2 := be32(r)
	return Rank{worker, rank}, ok1 && ok2
}

// read answers a read-only command: absent without an index, else f on
// the read-locked index.
func (c *call) read(absent reply, f func(s *Store) reply) reply {
	s := c.e.lookup(c.key())
	if s == nil {
		return absent
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return f(s)
}

func cmdRankGeneration(c *call) reply {
	r, ok := rankArgs(c.args[2], c.args[3])
	if !ok {
		return errCode(CodeInvalidWorker)
	}
	return c.read(ticket(0), func(s *Store) reply { return ticket(s.rankTicket(r)) })
}

func cmdReplace(c *call) reply {
	r, ok := rankArgs(c.args[2], c.args[3])
	expected, ok2 := be64(c.args[4])
	if !ok || !ok2 {
		return errCode(CodeInvalidReplace)
	}
	existing := c.e.lookup(c.key())
	validation := existing
	if existing == nil {
		if expected != 0 {
			return errCode(CodeStaleGeneration)
		}
		validation = NewStore()
	} else {
		existing.mu.Lock()
		defer existing.mu.Unlock()
		if existing.rankTicket(r) != expected {
			return errCode(CodeStaleGeneration)
		}
		if !existing.canAdvance() {
			return errCode(CodeGenerationExhausted)
		}
	}
	events, err := DecodeSnapshot(c.args[5], r)
	if err != nil || !validation.validReplacement(events) {
		return errCode(CodeInvalidReplace)
	}
	s := existing
	if s == nil {
		var rep reply
		if s, rep, ok = c.write(); !ok {
			return rep
		}
		defer s.mu.Unlock()
	}
	return s.replaceRank(r, events)
}

func cmdRemoveWorker(c *call) reply { return rankLifecycle(c, (*Store).removeRank) }
func cmdResetWorker(c *call) reply  { return rankLifecycle(c, (*Store).resetRank) }
func cmdRemoveWorkerAll(c *call) reply {
	worker, ok := be64(c.args[2])
	if !ok {
		return errCode(CodeInvalidWorker)
	}
	s, rep, ok := c.write()
	if !ok {
		return rep
	}
	defer s.mu.Unlock()
	return s.removeWorkerAll(worker)
}

// rankLifecycle runs a command on one rank (REMOVE_WORKER, RESET_WORKER,
// REGISTER_WORKER) of the key it opens for writing.
func rankLifecycle(c *call, f func(*Store, Rank) reply) reply {
	r, ok := rankArgs(c.args[2], c.args[3])
	if !ok {
		return errCode(CodeInvalidWorker)
	}
	s, rep, ok := c.write()
	if !ok {
		return rep
	}
	defer s.mu.Unlock()
	return f(s, r)
}

// cmdStats answers the module's triple [nodes, rank states, mutations], or
// with the goindex extension argument DETAIL a flat array of name/value
// pairs: the backing index, the triple, ranks holding blocks and, in ckf
// mode, the CKF's counters (detailReply). The triple stays the default
// reply because clients of the module read STATS as exactly three integers.
func cmdStats(c *call) reply {
	s := c.e.lookup(c.key())
	if len(c.args) == 3 {
		if !strings.EqualFold(string(c.args[2]), "DETAIL") {
			return errText("ERR goindex dynkv: DYNKV.STATS takes a key and optionally DETAIL")
		}
		if s == nil {
			d := Detail{Index: c.e.backing.Index, CKFExpectedBlocks: c.e.backing.CKFExpectedBlocks}
			if d.Index == IndexCKF {
				d.CKFBuckets, _ = ckf.BucketCount(d.CKFExpectedBlocks)
			}
			return detailReply(d)
		}
		return detailReply(s.Detail())
	}
	if s == nil {
		return ints(0, 0, 0)
	}
	return ints(s.Stats())
}

// isKeyspaceWrite reports whether name (upper case) is one of the plain
// keyspace writes the engine runs (and the log records): DEL, UNLINK,
// FLUSHALL and FLUSHDB.
func isKeyspaceWrite(name string) bool {
	switch name {
	case "DEL", "UNLINK", "FLUSHALL", "FLUSHDB":
		return true
	}
	return false
}

// keyspaceWrite runs DEL/UNLINK key… (the count of keys deleted) or
// FLUSHALL/FLUSHDB [ASYNC|SYNC].
func (e *Engine) keyspaceWrite(name string, args [][]byte) reply {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	switch name {
	case "DEL", "UNLINK":
		if len(args) < 2 {
			return wrongArity(name)
		}
		n := 0
		for _, k := range args[1:] {
			if _, ok := e.stores[string(k)]; ok {
				delete(e.stores, string(k))
				n++
			}
		}
		return integer(int64(n))
	}
	if len(args) > 2 || (len(args) == 2 && !strings.EqualFold(string(args[1]), "ASYNC") && !strings.EqualFold(string(args[1]), "SYNC")) {
		return errText("ERR syntax error")
	}
	clear(e.stores)
	return status("OK")
}
