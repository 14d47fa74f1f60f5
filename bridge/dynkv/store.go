package dynkv

import (
	"slices"
	"sync"
	"time"

	"github.com/goindex/goindex/goindex/kv"
)

// Store is one dynkv index (one key): the module's semantics, which differ
// from Dynamo's in-process radix tree (dynamo-compat §5b):
//
//   - nodes are global, keyed by external hash; a node's identity is its
//     (parent external hash, local hash) edge, and a store that conflicts with
//     an existing node or edge fails whole (DYNKV_CONFLICTING_BLOCK);
//   - each (node, rank) keeps the event id that last touched it and an
//     active flag: events older than that, or than the rank's last clear, are
//     ignored, and an event that changes nothing replies NOOP;
//   - a store's parent must be actively owned by the same rank;
//   - a remove deactivates only the named blocks, so after a mid-chain remove
//     and a re-store of that block the descendants count again;
//   - cleared is worker-wide: the emitting rank is cleared with a dedupe
//     watermark (a repeated event id is NOOP), its sibling ranks are
//     deactivated unconditionally;
//   - REMOVE_WORKER retires a rank (its later events are ignored) until
//     RESET_WORKER; REMOVE_WORKER_ALL also fences ranks the worker registers
//     later.
//
// Match and Select read the Store's nodes, or with Backing{Index: IndexCKF}
// a CKF projection of its active states (ckf.go) fed every change the
// Store accepts; the bookkeeping above stays exact either way. In ckf mode
// at most CKFLanes ranks may hold blocks at once: a store (or a replacement)
// that would make one more rank hold a block fails whole with
// DYNKV_INVALID_EVENT (DYNKV_INVALID_REPLACE) and changes nothing.
//
// A Store is safe for concurrent use: mutations take a write lock, Match and
// Select a read lock.
type Store struct {
	mu        sync.RWMutex
	root      *node
	byHash    map[uint64]*node
	ranks     map[Rank]*rankState
	workers   map[uint64]*workerState
	mutations uint64
	states    int // live (node, rank) states
	holding   int // ranks with an active state

	// Ranks and workers created during the current mutation: a mutation
	// that fails deletes them again (forget), so a rejected command leaves
	// no state behind, not even an empty rank whose ticket a later command
	// would advance.
	freshRanks   []Rank
	freshWorkers []uint64

	proj      *projection // ckf mode; nil in exact mode
	laneLimit int         // ranks that may hold blocks at once; 0: no limit
	run       []*node     // scratch: blocks a store activated, for proj
	gone      []uint64    // scratch: blocks a remove deactivated, for proj
}

// node is one global block. Owners holds every rank's state at this node.
type node struct {
	hash     uint64
	local    uint64
	canon    uint64 // sequence hash of the locals from the root (spec §1.2), the CKF key
	parent   *node
	children map[uint64]*node // by local hash
	owners   []ownerState
}

type ownerState struct {
	rank    Rank
	eventID uint64
	active  bool
}

// rankState is the per-rank fence and lifecycle state.
type rankState struct {
	retired    bool
	hasClear   bool
	clearEvent uint64 // event id of the last clear (the dedupe watermark)
	generation uint64 // ticket for REPLACE_RANK_IF_GENERATION; changes on every change of the rank
	registered bool
	nodes      map[*node]struct{} // nodes where the rank has a state
	active     int                // of those, states with the active flag
}

// workerState is the per-worker registration and retirement fence.
type workerState struct {
	retired      bool // REMOVE_WORKER_ALL: fences ranks registered later
	ownerNonce   uint64
	leaseMs      uint64
	renewed      time.Time // last registration or renewal by the owner
	registration uint64    // REGISTRATION_GENERATION token; changes on every registration change
}

// NewStore returns an empty index.
func NewStore() *Store {
	return &Store{
		root:    &node{hash: RootParent, children: map[uint64]*node{}},
		byHash:  map[uint64]*node{},
		ranks:   map[Rank]*rankState{},
		workers: map[uint64]*workerState{},
	}
}

// Changed is the outcome of a mutation: true replies +OK, false +NOOP.
type Changed bool

func (s *Store) rank(r Rank) *rankState {
	st := s.ranks[r]
	if st == nil {
		st = &rankState{generation: 1, nodes: map[*node]struct{}{}}
		if w := s.workers[r.Worker]; w != nil && w.retired {
			st.retired = true
		}
		s.ranks[r] = st
		s.freshRanks = append(s.freshRanks, r)
	}
	return st
}

// settle ends a mutation: on failure it deletes the ranks and workers the
// mutation created (they hold nothing yet), so the failure changed nothing.
func (s *Store) settle(err error) {
	if err != nil {
		for _, r := range s.freshRanks {
			delete(s.ranks, r)
		}
		for _, w := range s.freshWorkers {
			delete(s.workers, w)
		}
	}
	s.freshRanks, s.freshWorkers = s.freshRanks[:0], s.freshWorkers[:0]
}

// Apply applies one decoded event.
func (s *Store) Apply(ev Event) (c Changed, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.settle(err) }()
	return s.apply(ev)
}

func (s *Store) apply(ev Event) (Changed, error) {
	st := s.rank(ev.Rank)
	if st.retired {
		return false, nil
	}
	if st.hasClear && ev.EventID <= st.clearEvent && !(ev.Kind == KindClear && ev.EventID == st.clearEvent) {
		return false, nil // older than the rank's last clear
	}
	var changed Changed
	switch ev.Kind {
	case KindStore:
		c, err := s.store(ev, st)
		if err != nil {
			return false, err
		}
		changed = c
	case KindRemove:
		changed = s.remove(ev, st)
	case KindClear:
		changed = s.clear(ev, st)
	default:
		return false, errorf(CodeInvalidEvent, "unknown event kind %d", ev.Kind)
	}
	if changed {
		s.mutations++
	}
	return changed, nil
}

func (s *Store) store(ev Event, st *rankState) (Changed, error) {
	parent := s.root
	if ev.Parent != RootParent {
		p := s.byHash[ev.Parent]
		if p == nil || !p.activeFor(ev.Rank) {
			return false, errorf(CodeMissingParent, "parent %#x is not active for rank %d/%d", ev.Parent, ev.Rank.Worker, ev.Rank.DPRank)
		}
		parent = p
	}
	// Validate the whole chain before touching anything.
	cur := parent
	pending := map[uint64]bool{} // hashes created earlier in this event
	for i, b := range ev.Blocks {
		if b.External == RootParent {
			return false, errorf(CodeInvalidEvent, "block %d uses the reserved root hash", i)
		}
		if n := s.byHash[b.External]; n != nil {
			if n.parent != cur || n.local != b.Local {
				return false, errorf(CodeConflictingBlock, "block %d (%#x) exists under another parent or tokens hash", i, b.External)
			}
			cur = n
			continue
		}
		if pending[b.External] {
			return false, errorf(CodeConflictingBlock, "block %d (%#x) repeats within the event", i, b.External)
		}
		if cur != nil {
			if c := cur.children[b.Local]; c != nil {
				return false, errorf(CodeConflictingBlock, "block %d: edge (%#x, tokens %#x) already leads to %#x", i, cur.hash, b.Local, c.hash)
			}
		}
		pending[b.External] = true
		cur = nil // the rest of the chain lies below a new node
	}
	if s.laneLimit > 0 && st.active == 0 && s.holding >= s.laneLimit && s.activates(ev) {
		return false, errorf(CodeInvalidEvent, "rank %d/%d cannot hold blocks: %d ranks of this key do, the most the ckf index holds", ev.Rank.Worker, ev.Rank.DPRank, s.holding)
	}
	// Commit.
	var changed Changed
	cur = parent
	run := s.run[:0]
	for _, b := range ev.Blocks {
		n := s.byHash[b.External]
		if n == nil {
			n = &node{hash: b.External, local: b.Local, canon: b.Local, parent: cur}
			if cur != s.root {
				n.canon = kv.ChainHash(cur.canon, b.Local)
			}
			if cur.children == nil {
				cur.children = map[uint64]*node{}
			}
			cur.children[b.Local] = n
			s.byHash[b.External] = n
		}
		if s.touch(n, ev.Rank, st, ev.EventID, true) {
			changed = true
			if s.proj != nil {
				run = append(run, n)
			}
		} else if len(run) > 0 {
			s.proj.stored(ev.Rank, run)
			run = run[:0]
		}
		cur = n
	}
	if s.proj != nil {
		s.proj.stored(ev.Rank, run)
	}
	clear(run)
	s.run = run[:0]
	if changed {
		st.generation++
	}
	return changed, nil
}

func (s *Store) remove(ev Event, st *rankState) Changed {
	var changed Changed
	gone := s.gone[:0]
	for _, h := range ev.Hashes {
		if n := s.byHash[h]; n != nil && s.touch(n, ev.Rank, st, ev.EventID, false) {
			changed = true
			if s.proj != nil {
				gone = append(gone, h)
			}
		}
	}
	if s.proj != nil {
		s.proj.removed(ev.Rank, gone)
	}
	s.gone = gone[:0]
	if changed {
		st.generation++
	}
	return changed
}

// touch sets rank's state at n to active (or inactive) at eventID, unless a
// newer event already touched it. It reports whether the active flag changed.
func (s *Store) touch(n *node, r Rank, st *rankState, eventID uint64, active bool) bool {
	i := n.ownerIndex(r)
	if i < 0 {
		if !active {
			return false
		}
		n.owners = append(n.owners, ownerState{rank: r, eventID: eventID, active: true})
		st.nodes[n] = struct{}{}
		s.states++
		s.activate(st, 1)
		return true
	}
	o := &n.owners[i]
	if eventID < o.eventID {
		return false // an older event: ignored
	}
	o.eventID = eventID
	if o.active == active {
		return false
	}
	o.active = active
	if active {
		s.activate(st, 1)
	} else {
		s.activate(st, -1)
	}
	return true
}

// activate adds delta to the rank's active states, keeping the count of
// ranks that hold blocks (in ckf mode, the lanes taken).
func (s *Store) activate(st *rankState, delta int) {
	before := st.active
	st.active += delta
	switch {
	case before == 0 && st.active > 0:
		s.holding++
	case before > 0 && st.active == 0:
		s.holding--
	}
}

func (s *Store) clear(ev Event, st *rankState) Changed {
	if st.hasClear && ev.EventID == st.clearEvent {
		return false // dedupe watermark
	}
	st.hasClear, st.clearEvent = true, ev.EventID
	s.dropRank(ev.Rank, st)
	for r, sib := range s.ranks {
		if r.Worker == ev.Rank.Worker && r != ev.Rank {
			s.dropRank(r, sib)
		}
	}
	return true
}

// dropRank deletes every state of rank r (its fences live on in rankState)
// and prunes nodes left with no owners and no children.
func (s *Store) dropRank(r Rank, st *rankState) {
	if len(st.nodes) == 0 {
		return
	}
	if st.active > 0 {
		s.activate(st, -st.active)
		if s.proj != nil {
			s.proj.dropped(r)
		}
	}
	for n := range st.nodes {
		if i := n.ownerIndex(r); i >= 0 {
			n.owners = slices.Delete(n.owners, i, i+1)
			s.states--
		}
	}
	for n := range st.nodes {
		s.prune(n)
	}
	clear(st.nodes)
	st.generation++
}

// prune deletes n and its ancestors while they have no owners and no children.
func (s *Store) prune(n *node) {
	for n != nil && n != s.root && len(n.owners) == 0 && len(n.children) == 0 {
		if s.byHash[n.hash] != n {
			return // already pruned
		}
		delete(s.byHash, n.hash)
		delete(n.parent.children, n.local)
		n = n.parent
	}
}

func (n *node) ownerIndex(r Rank) int {
	for i := range n.owners {
		if n.owners[i].rank == r {
			return i
		}
	}
	return -1
}

func (n *node) activeFor(r Rank) bool {
	i := n.ownerIndex(r)
	return i >= 0 && n.owners[i].active
}

// Match returns every rank's contiguous active run from depth 0 along the
// query's local hashes, with the external hash of its last matched block,
// ordered by worker then rank. Ranks with no match are omitted.
func (s *Store) Match(locals []uint64) []MatchEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.match(locals)
}

func (s *Store) match(locals []uint64) []MatchEntry {
	if s.proj != nil {
		return s.matchCKF(locals)
	}
	var out []MatchEntry
	n := s.root
	for depth, l := range locals {
		if n = n.children[l]; n == nil {
			break
		}
		if depth == 0 {
			for _, o := range n.owners {
				if o.active {
					out = append(out, MatchEntry{Rank: o.rank, Matched: 1, Last: n.hash})
				}
			}
			continue
		}
		alive := false
		for i := range out {
			if out[i].Matched == uint32(depth) && n.activeFor(out[i].Rank) {
				out[i].Matched++
				out[i].Last = n.hash
				alive = true
			}
		}
		if !alive {
			break
		}
	}
	slices.SortFunc(out, func(a, b MatchEntry) int { return compareRank(a.Rank, b.Rank) })
	return out
}

func compareRank(a, b Rank) int {
	if a.Worker != b.Worker {
		if a.Worker < b.Worker {
			return -1
		}
		return 1
	}
	switch {
	case a.DPRank < b.DPRank:
		return -1
	case a.DPRank > b.DPRank:
		return 1
	}
	return 0
}

// Select returns the best candidate for the query: longest prefix, then
// lowest load, then lowest worker and rank; nil with no candidates.
func (s *Store) Select(locals []uint64, cands []SelectCandidate) *MatchEntry {
	if len(cands) == 0 {
		return nil
	}
	s.mu.RLock()
	matches := s.match(locals)
	s.mu.RUnlock()
	byRank := make(map[Rank]MatchEntry, len(matches))
	for _, m := range matches {
		byRank[m.Rank] = m
	}
	best := -1
	for i, c := range cands {
		if best < 0 || better(byRank[c.Rank].Matched, c, byRank[cands[best].Rank].Matched, cands[best]) {
			best = i
		}
	}
	e := byRank[cands[best].Rank]
	e.Rank = cands[best].Rank
	return &e
}

func better(m uint32, c SelectCandidate, bm uint32, b SelectCandidate) bool {
	if m != bm {
		return m > bm
	}
	if c.Load != b.Load {
		return c.Load < b.Load
	}
	return compareRank(c.Rank, b.Rank) < 0
}

// ResetWorker clears one rank, un-retires it and resets its event-id fences
// (Dynamo sends it before replaying a tree dump).
func (s *Store) ResetWorker(r Rank) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.settle(nil)
	st := s.rank(r)
	s.dropRank(r, st)
	st.retired, st.hasClear, st.clearEvent = false, false, 0
	st.generation++
	s.mutations++
}

// RemoveWorker retires one rank: its blocks are dropped and its later events
// ignored until ResetWorker.
func (s *Store) RemoveWorker(r Rank) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.settle(nil)
	st := s.rank(r)
	s.dropRank(r, st)
	st.retired = true
	st.generation++
	s.mutations++
}

// RemoveWorkerAll retires every rank of a worker and keeps a worker-wide
// fence, so ranks that appear later start retired.
func (s *Store) RemoveWorkerAll(worker uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.settle(nil)
	s.workerState(worker).retired = true
	for r, st := range s.ranks {
		if r.Worker == worker {
			s.dropRank(r, st)
			st.retired = true
			st.generation++
		}
	}
	s.mutations++
}

func (s *Store) workerState(worker uint64) *workerState {
	w := s.workers[worker]
	if w == nil {
		w = &workerState{registration: 1}
		s.workers[worker] = w
		s.freshWorkers = append(s.freshWorkers, worker)
	}
	return w
}

// RankGeneration returns the rank's replacement ticket.
func (s *Store) RankGeneration(r Rank) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if st := s.ranks[r]; st != nil {
		return st.generation
	}
	return 1
}

// ReplaceRankIfGeneration atomically resets rank r and replays events when
// the rank's ticket equals expected, returning the new ticket. Any failing
// event aborts the replacement with the index unchanged.
func (s *Store) ReplaceRankIfGeneration(r Rank, expected uint64, events []Event) (gen uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.settle(err) }()
	st := s.rank(r)
	if st.generation != expected {
		return 0, errorf(CodeStaleGeneration, "rank %d/%d ticket is %d, not %d", r.Worker, r.DPRank, st.generation, expected)
	}
	if st.generation == ^uint64(0) {
		return 0, errorf(CodeGenerationExhausted, "rank %d/%d ticket exhausted", r.Worker, r.DPRank)
	}
	// Validate on a scratch store holding the other ranks' structure: a
	// replay that succeeds there succeeds here, because only r's states
	// differ and r is reset first.
	scratch := s.withoutRank(r)
	for i, ev := range events {
		if _, err := scratch.apply(ev); err != nil {
			return 0, errorf(CodeInvalidReplace, "event %d: %v", i, err)
		}
	}
	gen = st.generation
	s.dropRank(r, st)
	st.retired, st.hasClear, st.clearEvent = false, false, 0
	for _, ev := range events {
		if _, err := s.apply(ev); err != nil {
			// Unreachable: the scratch replay proved every event applies.
			return 0, errorf(CodeInvalidReplace, "event replay diverged: %v", err)
		}
	}
	st.generation = gen + 1
	s.mutations++
	return st.generation, nil
}

// withoutRank returns a structural copy of the store without rank r's states
// (used to validate a replacement). Other ranks keep their states; their
// rankStates are not copied, only the count of those holding blocks, so
// the copy enforces the lane limit. The copy is exact-backed.
func (s *Store) withoutRank(r Rank) *Store {
	c := NewStore()
	c.laneLimit, c.holding = s.laneLimit, s.holding
	if st := s.ranks[r]; st != nil && st.active > 0 {
		c.holding--
	}
	var copyNode func(src, dstParent *node)
	copyNode = func(src, dstParent *node) {
		n := &node{hash: src.hash, local: src.local, canon: src.canon, parent: dstParent}
		for _, o := range src.owners {
			if o.rank != r {
				n.owners = append(n.owners, o)
			}
		}
		if dstParent.children == nil {
			dstParent.children = map[uint64]*node{}
		}
		dstParent.children[n.local] = n
		c.byHash[n.hash] = n
		for _, ch := range src.children {
			copyNode(ch, n)
		}
	}
	for _, ch := range s.root.children {
		copyNode(ch, c.root)
	}
	c.rank(r)
	return c
}

// Stats returns the module's STATS triple: nodes, rank states, mutations.
func (s *Store) Stats() (nodes, rankStates, mutations uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return uint64(len(s.byHash)), uint64(s.states), s.mutations
}
