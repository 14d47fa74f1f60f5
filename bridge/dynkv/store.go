package dynkv

import (
	"cmp"
	"slices"
	"sync"

	"github.com/goindex/goindex/goindex/kv"
)

// Store is one dynkv index (one key) with the module's semantics
// (dynamo_kv_router, the module's dynkv_mutation.c, dynkv_index.c and
// dynkv_matching.c): global nodes keyed by external hash with a (parent,
// local) edge each; per (node, rank) owners holding the event id that last
// touched them and an active flag, which are deactivated, never deleted,
// except by owner-fenced compaction and lifecycle GC; rank states with a
// clear barrier, a persistent clear dedupe watermark, retirement,
// registration and provenance flags; worker epochs with the worker-wide
// ticket, the registration token and the owner lease; and three counters
// per index: mutations (STATS), rank tickets and registration tokens.
//
// Match and Select read the Store's nodes, or with Backing{Index: IndexCKF}
// a CKF projection of its active owners (ckf.go) fed every activation and
// deactivation; the bookkeeping stays exact either way. In ckf mode at most
// CKFLanes ranks may hold blocks at once: a store that would make one more
// rank hold a block fails whole with DYNKV_INVALID_EVENT and changes
// nothing.
//
// A Store is safe for concurrent use: mutations take a write lock, Match and
// Select a read lock.
type Store struct {
	mu        sync.RWMutex
	nodes     map[uint64]*node // by external hash
	edges     map[edge]*node   // by (parent external hash, local hash)
	ranks     map[Rank]*rankState
	epochs    map[uint64]*epoch
	mutations uint64 // STATS' third field
	tickets   uint64 // generation_counter: rank and worker tickets
	lifecycle uint64 // lifecycle_generation_counter: registration tokens
	gcFloor   uint64 // registration_gc_floor: tokens of deleted epochs are stale

	admissions     map[admissionKey]*admissionRank
	reservations   map[reservationKey]*reservation
	reservationSeq uint64

	holding   int         // ranks with an active owner
	proj      *projection // ckf mode; nil in exact mode
	laneLimit int         // ranks that may hold blocks at once; 0: no limit

	// GC's resumable cursor (gc.go) and the dictionary orders it walks
	// (order.go).
	gcPhase        uint8
	gcCursor       gcKey
	nodeOrder      keyOrder[uint64]
	rankOrder      keyOrder[Rank]
	epochOrder     keyOrder[uint64]
	admissionOrder keyOrder[admissionKey]
}

type edge struct{ parent, local uint64 }

// node is one global block. owners keeps the module's array order (append,
// swap-remove): MATCH lists ranks in the owner order of the first block.
type node struct {
	hash     uint64
	parent   uint64 // external hash of the parent, RootParent at the root
	local    uint64
	canon    uint64 // sequence hash of the locals from the root (spec §1.2), the CKF key
	owners   []owner
	children int
}

type owner struct {
	rank       *rankState
	eventID    uint64
	active     bool
	cleanupGen uint64 // the lease cleanup that last reset it (gc.go)
}

// rankState is the module's WorkerState: one (worker, dp rank).
type rankState struct {
	rank       Rank
	lastClear  uint64 // resettable ordering barrier
	dedupe     uint64 // persistent duplicate-CLEAR barrier
	hasDedupe  bool
	generation uint64 // mutation_generation: the rank's ticket
	retired    bool
	registered bool // admission_registered
	tombstone  bool // lifecycle_tombstone
	tombGen    uint64
	managed    bool   // lifecycle_managed: registered under an owner lease
	tainted    bool   // legacy_tainted: touched by a legacy (unfenced) command
	cleanupGen uint64 // the lease cleanup that last completed this rank (gc.go)
	// members are the nodes the rank owns in the module's order, each with
	// its owner's position in the node's owners, and nodes maps each node
	// to its position in members (order.go): the owner of a shared block
	// is found in O(1) however many ranks hold it.
	members []ownedNode
	nodes   map[*node]int
	active  int // owners of this rank with the active flag
	// epochIdx is the rank's position in its epoch's ranks (-1: none).
	epochIdx int
	// admissionCount and reservationCount count the rank's admission ranks
	// and reservations (the module's admission_rank_count and
	// reservation_count).
	admissionCount, reservationCount int
	// cleanupNodeGen and cleanupNodesLeft partition members during a lease
	// cleanup (the module's runtime lease_cleanup_node_* fields): the
	// first cleanupNodesLeft are still to clean for cleanup cleanupNodeGen.
	cleanupNodeGen   uint64
	cleanupNodesLeft int
}

// epoch is the module's WorkerEpoch: worker-wide state.
type epoch struct {
	worker     uint64
	generation uint64 // worker-wide ticket (CLEAR, REMOVE_WORKER_ALL, lease ends)
	lifecycle  uint64 // registration token
	retiredAll bool
	ownerSet   bool
	nonce      uint64
	expiresMs  uint64
	managed    bool
	tainted    bool
	lastExpSet bool
	lastExp    uint64
	pending    bool // lease cleanup pending (GC drains it)
	cleanupGen uint64
	// ranks, admissions and reservations are the worker's rank states,
	// admission ranks and reservations in the module's epoch order
	// (order.go). Compaction on an owned CLEAR walks ranks in this order,
	// which decides the owner order it leaves; lease cleanup takes each
	// list from its end.
	ranks        []*rankState
	admissions   []*admissionRank
	reservations []*reservation
	// cleanupRanksLeft and cleanupAdmissionsLeft are the lease cleanup's
	// partitions: the first so many ranks and admission ranks are still to
	// clean.
	cleanupRanksLeft, cleanupAdmissionsLeft int
}

// NewStore returns an empty exact index.
func NewStore() *Store {
	s := &Store{
		nodes:  map[uint64]*node{},
		edges:  map[edge]*node{},
		ranks:  map[Rank]*rankState{},
		epochs: map[uint64]*epoch{},

		admissions:   map[admissionKey]*admissionRank{},
		reservations: map[reservationKey]*reservation{},
	}
	s.initOrders()
	return s
}

// Changed is the outcome of a mutation: true replies +OK, false +NOOP.
type Changed bool

// applyResult is router_index_apply_event's result.
type applyResult uint8

const (
	applyOK applyResult = iota
	applyInvalid
	applyMissingParent
	applyConflict
	applyNoop
)

// rankState is router_index_worker: the rank's state, created (and added
// to its worker's epoch) if absent and asked for.
func (s *Store) rankState(r Rank, create bool) *rankState {
	st := s.ranks[r]
	if st == nil && create {
		st = &rankState{rank: r, nodes: map[*node]int{}, epochIdx: -1}
		s.ranks[r] = st
		s.rankOrder.add(r)
		if ep := s.epochs[r.Worker]; ep != nil {
			ep.ranks = listAdd(ep.ranks, st)
		}
	}
	return st
}

// epochOf is router_index_worker_epoch: a new epoch gathers the worker's
// rank states, admission ranks and reservations in dictionary order.
func (s *Store) epochOf(worker uint64, create bool) *epoch {
	ep := s.epochs[worker]
	if ep == nil && create {
		ep = &epoch{worker: worker}
		for _, st := range s.ranksOf(worker) {
			ep.ranks = listAdd(ep.ranks, st)
		}
		for _, a := range sortedValues(s.admissions, func(a, b *admissionRank) int { return compareAdmissionKey(a.key, b.key) }) {
			if a.key.rank.Worker == worker {
				ep.admissions = listAdd(ep.admissions, a)
			}
		}
		for _, res := range s.reservationsOf(worker, true, 0) {
			ep.reservations = listAdd(ep.reservations, res)
		}
		s.epochs[worker] = ep
		s.epochOrder.add(worker)
	}
	return ep
}

// ranksOf returns the rank states of worker in dictionary order (by rank).
func (s *Store) ranksOf(worker uint64) []*rankState {
	var out []*rankState
	for r, st := range s.ranks {
		if r.Worker == worker {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b *rankState) int { return cmp.Compare(a.rank.DPRank, b.rank.DPRank) })
	return out
}

// ownerScanMax is the owner count up to which owner scans the node's
// owners instead of the rank's map: a pointer compare per owner beats a
// map lookup (BenchmarkStoreMatch, 16 owners: 3× faster).
const ownerScanMax = 32

func (n *node) owner(st *rankState) *owner {
	if len(n.owners) <= ownerScanMax {
		for i := range n.owners {
			if n.owners[i].rank == st {
				return &n.owners[i]
			}
		}
		return nil
	}
	if i, ok := st.nodes[n]; ok {
		return &n.owners[st.members[i].owner]
	}
	return nil
}

func (s *Store) child(parent, local uint64) *node { return s.edges[edge{parent, local}] }

// addNode creates a node (after validation) and counts it as its parent's
// child.
func (s *Store) addNode(hash, parent, local uint64) *node {
	n := &node{hash: hash, parent: parent, local: local, canon: local}
	if p := s.nodes[parent]; parent != RootParent && p != nil {
		p.children++
		n.canon = kv.ChainHash(p.canon, local)
	}
	s.nodes[hash] = n
	s.edges[edge{parent, local}] = n
	s.nodeOrder.add(hash)
	return n
}

// setOwner is node_set_owner: the rank's owner of n becomes active (or
// inactive) at eventID unless the rank's clear barrier or the owner's newer
// event forbids it, or nothing would change. An absent owner is created.
func (s *Store) setOwner(n *node, st *rankState, eventID uint64, active bool) bool {
	if eventID < st.lastClear {
		return false
	}
	o := n.owner(st)
	if o != nil && (eventID < o.eventID || (o.eventID == eventID && o.active == active)) {
		return false
	}
	if o == nil {
		n.owners = append(n.owners, owner{rank: st})
		st.addMember(n, len(n.owners)-1)
		o = &n.owners[len(n.owners)-1]
	}
	o.eventID = eventID
	s.setActive(n, st, o, active)
	return true
}

// setActive sets an owner's flag, keeping the rank's active count, the
// count of ranks holding blocks and the CKF projection in step.
func (s *Store) setActive(n *node, st *rankState, o *owner, active bool) {
	if o.active == active {
		return
	}
	o.active = active
	before := st.active
	if active {
		st.active++
	} else {
		st.active--
	}
	switch {
	case before == 0 && st.active > 0:
		s.holding++
	case before > 0 && st.active == 0:
		s.holding--
	}
	if s.proj != nil {
		if active {
			s.proj.activated(st.rank, n)
		} else {
			s.proj.deactivated(st.rank, n, st.active == 0)
		}
	}
}

// removeOwner is node_remove_owner: the owner leaves the node's array by
// swap-remove (the module's order) and the rank forgets the node, by
// swap-remove from its members.
func (s *Store) removeOwner(n *node, st *rankState) bool {
	p, ok := st.nodes[n]
	if !ok {
		return false
	}
	i := st.members[p].owner
	s.setActive(n, st, &n.owners[i], false)
	last := len(n.owners) - 1
	if i != last {
		moved := n.owners[last].rank
		moved.members[moved.nodes[n]].owner = i
		n.owners[i] = n.owners[last]
	}
	st.forgetMember(n)
	n.owners = n.owners[:last]
	return true
}

// pruneOwnerless deletes the node named hash and its ancestors while they
// have neither owners nor children.
func (s *Store) pruneOwnerless(hash uint64) {
	for hash != RootParent {
		n := s.nodes[hash]
		if n == nil || len(n.owners) != 0 || n.children != 0 {
			return
		}
		s.deleteLeaf(n)
		hash = n.parent
	}
}

// deactivate is router_index_deactivate_worker: every owner of the rank
// becomes inactive at event 0 and its clear barrier resets.
func (s *Store) deactivate(st *rankState) bool {
	changed := st.lastClear != 0
	st.lastClear = 0
	for _, m := range st.members {
		o := &m.n.owners[m.owner]
		changed = changed || o.eventID != 0 || o.active
		o.eventID = 0
		s.setActive(m.n, st, o, false)
	}
	return changed
}

// reset is router_index_reset_worker.
func (s *Store) reset(st *rankState) bool {
	changed := st.retired
	st.retired = false
	return s.deactivate(st) || changed
}

// clearRank is router_index_clear_worker with a tracked clear.
func (s *Store) clearRank(st *rankState, eventID uint64) bool {
	if st.hasDedupe && eventID <= st.dedupe {
		return false
	}
	st.lastClear, st.dedupe, st.hasDedupe = eventID, eventID, true
	for _, m := range st.members {
		if o := &m.n.owners[m.owner]; eventID >= o.eventID && (o.eventID != eventID || o.active) {
			o.eventID = eventID
			s.setActive(m.n, st, o, false)
		}
	}
	return true
}

// clearAll is router_index_clear_all_worker: a Cleared event is
// worker-wide; the emitting rank keeps the clear as its barrier, its
// siblings are deactivated unconditionally.
func (s *Store) clearAll(worker uint64, dpRank uint32, eventID uint64) bool {
	emitter := s.rankState(Rank{worker, dpRank}, false)
	changed := false
	if emitter == nil {
		emitter = s.rankState(Rank{worker, dpRank}, true)
		changed = true
	}
	if emitter.hasDedupe && eventID <= emitter.dedupe {
		return false
	}
	for _, st := range s.ranksOf(worker) {
		if st == emitter {
			changed = s.clearRank(st, eventID) || changed
		} else {
			changed = s.deactivate(st) || changed
		}
	}
	return changed
}

// applyStore is router_index_apply_store on a validated event. complete
// reports whether the module's reader reached the payload's end: a retired
// rank returns before reading the blocks.
func (s *Store) applyStore(ev *Event, st *rankState) (res applyResult, changed, complete bool) {
	if st != nil && st.retired {
		return applyOK, false, len(ev.Blocks) == 0
	}
	if ev.Parent != RootParent {
		p := s.nodes[ev.Parent]
		if p == nil || st == nil {
			return applyMissingParent, false, false
		}
		if o := p.owner(st); o == nil || !o.active {
			return applyMissingParent, false, false
		}
	}
	seen := make(map[uint64]struct{}, len(ev.Blocks))
	parent := ev.Parent
	for _, b := range ev.Blocks {
		if _, dup := seen[b.External]; dup {
			return applyConflict, false, false
		}
		seen[b.External] = struct{}{}
		if n := s.nodes[b.External]; n != nil && (n.parent != parent || n.local != b.Local) {
			return applyConflict, false, false
		}
		if n := s.child(parent, b.Local); n != nil && n.hash != b.External {
			return applyConflict, false, false
		}
		parent = b.External
	}
	if s.laneLimit > 0 && (st == nil || st.active == 0) && s.holding >= s.laneLimit && s.activates(ev, st) {
		return applyInvalid, false, false
	}
	if st == nil {
		st = s.rankState(ev.Rank, true)
		changed = true
	}
	parent = ev.Parent
	for _, b := range ev.Blocks {
		n := s.nodes[b.External]
		if n == nil {
			n = s.addNode(b.External, parent, b.Local)
			changed = true
		}
		if s.setOwner(n, st, ev.EventID, true) {
			changed = true
		}
		parent = b.External
	}
	return applyOK, changed, true
}

// applyEvent is router_index_apply_event on a validated event: OK (and one
// more mutation) when something changed, NOOP when not, or the failure.
func (s *Store) applyEvent(ev *Event) applyResult {
	st := s.rankState(ev.Rank, false)
	var res applyResult
	changed, complete := false, true
	switch ev.Kind {
	case KindStore:
		res, changed, complete = s.applyStore(ev, st)
	case KindRemove:
		for _, h := range ev.Hashes {
			if n := s.nodes[h]; n != nil && st != nil && s.setOwner(n, st, ev.EventID, false) {
				changed = true
			}
		}
	case KindClear:
		changed = s.clearAll(ev.Rank.Worker, ev.Rank.DPRank, ev.EventID)
	default:
		return applyInvalid
	}
	if res != applyOK || !complete {
		return res
	}
	if changed {
		s.mutations++
		return applyOK
	}
	return applyNoop
}

// Apply applies one decoded event as DYNKV.APPLY does (the module's
// dynkv_apply_command after decoding): OK when the event changed an owner,
// created the rank or, as a remove of blocks (even of none held), fences a
// tree dump with a new ticket; NOOP when it changed nothing; or the error
// (DYNKV_MISSING_PARENT, DYNKV_CONFLICTING_BLOCK, DYNKV_WORKER_CLEANUP_PENDING,
// DYNKV_GENERATION_EXHAUSTED, and in ckf mode DYNKV_INVALID_EVENT for a
// rank beyond the lanes), which changes nothing. A store for a retired rank
// answers OK (it takes a ticket) and changes no owner, as in the module.
func (s *Store) Apply(ev Event) (Changed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cleanupPending(ev.Rank.Worker) {
		return false, codeErr(CodeWorkerCleanupPending)
	}
	if !s.canAdvance() {
		return false, codeErr(CodeGenerationExhausted)
	}
	res := s.applyEvent(&ev)
	switch res {
	case applyMissingParent:
		return false, codeErr(CodeMissingParent)
	case applyConflict:
		return false, codeErr(CodeConflictingBlock)
	}
	// A remove that arrives before the store it undoes still fences a
	// tree dump captured before it: it takes a ticket though no owner
	// changed.
	fence := res == applyNoop && ev.Kind == KindRemove && len(ev.Hashes) != 0
	if res != applyOK && !fence {
		if res == applyNoop {
			var provenance bool
			if ev.Kind == KindClear {
				provenance = s.markLegacyWorker(ev.Rank.Worker)
			} else {
				provenance = s.markLegacyRank(ev.Rank)
			}
			if provenance {
				s.mutations++
			}
			return false, nil
		}
		return false, codeErr(CodeInvalidEvent)
	}
	if !s.advanceForEvent(&ev) {
		return false, codeErr(CodeGenerationExhausted)
	}
	if ev.Kind == KindClear {
		s.markLegacyWorker(ev.Rank.Worker)
	} else {
		s.markLegacyRank(ev.Rank)
	}
	if fence {
		s.mutations++
	}
	return true, nil
}

// canAdvance is router_index_generation_can_advance.
func (s *Store) canAdvance() bool { return s.tickets != ^uint64(0) }

// advanceRank gives the rank a new ticket.
func (s *Store) advanceRank(st *rankState) bool {
	if !s.canAdvance() {
		return false
	}
	s.tickets++
	st.generation = s.tickets
	return true
}

// advanceWorker gives the worker's epoch (created if absent) a new ticket.
func (s *Store) advanceWorker(worker uint64) bool {
	if !s.canAdvance() {
		return false
	}
	s.tickets++
	s.epochOf(worker, true).generation = s.tickets
	return true
}

// advanceForEvent is router_index_advance_for_event.
func (s *Store) advanceForEvent(ev *Event) bool {
	if ev.Kind == KindClear {
		return s.advanceWorker(ev.Rank.Worker)
	}
	return s.advanceRank(s.rankState(ev.Rank, true))
}

// rankTicket is router_index_rank_generation.
func (s *Store) rankTicket(r Rank) uint64 {
	st, ep := s.ranks[r], s.epochs[r.Worker]
	if st == nil && ep == nil {
		return s.tickets
	}
	var rt, wt uint64
	if st != nil {
		rt = st.generation
	}
	if ep != nil {
		wt = ep.generation
	}
	return max(rt, wt)
}

// markLegacyRank is router_index_mark_legacy_rank: a legacy (unfenced)
// command touched the rank, so lifecycle GC must retain its state.
func (s *Store) markLegacyRank(r Rank) bool {
	changed := false
	if st := s.ranks[r]; st != nil && !st.tainted {
		st.tainted, changed = true, true
	}
	if ep := s.epochs[r.Worker]; ep != nil && !ep.tainted {
		ep.tainted, changed = true, true
	}
	return changed
}

// markLegacyWorker is router_index_mark_legacy_worker.
func (s *Store) markLegacyWorker(worker uint64) bool {
	changed := false
	for _, st := range s.ranksOf(worker) {
		if !st.tainted {
			st.tainted, changed = true, true
		}
	}
	if ep := s.epochs[worker]; ep != nil && !ep.tainted {
		ep.tainted, changed = true, true
	}
	return changed
}

// live is worker_registration_is_live: a worker under an owner lease counts
// only while the lease runs and no cleanup is pending.
func (s *Store) live(worker, nowMs uint64) bool {
	ep := s.epochs[worker]
	return ep == nil || !ep.ownerSet || (!ep.pending && ep.expiresMs > nowMs)
}

// ownerLive is worker_registration_owner_is_live.
func (s *Store) ownerLive(worker, nonce, nowMs uint64) bool {
	ep := s.epochs[worker]
	return ep != nil && ep.ownerSet && !ep.pending && ep.nonce == nonce && ep.expiresMs > nowMs
}

func (s *Store) cleanupPending(worker uint64) bool {
	ep := s.epochs[worker]
	return ep != nil && ep.pending
}

// compactRank is router_index_compact_direct_worker_owners: an owner-fenced
// rank's inactive owners are deleted (its tickets stay the recovery fence)
// and the nodes left without owners or children are pruned.
func (s *Store) compactRank(st *rankState) {
	if st == nil || !st.managed || st.tainted || len(st.members) == 0 {
		return
	}
	// As the module: a removal swaps the last member into position i,
	// which is examined next.
	var removed []uint64
	for i := 0; i < len(st.members); {
		m := st.members[i]
		if m.n.owners[m.owner].active {
			i++
			continue
		}
		removed = append(removed, m.n.hash)
		s.removeOwner(m.n, st)
	}
	for _, h := range removed {
		s.pruneOwnerless(h)
	}
}

// compactRemove is router_index_compact_direct_remove.
func (s *Store) compactRemove(st *rankState, hashes []uint64) {
	if st == nil || !st.managed || st.tainted {
		return
	}
	for _, h := range hashes {
		n := s.nodes[h]
		if n == nil {
			continue
		}
		if o := n.owner(st); o == nil || o.active || !s.removeOwner(n, st) {
			continue
		}
		s.pruneOwnerless(h)
	}
}

// match is router_index_collect_matches: each rank's contiguous active run
// from depth 0, with the external hash of its last matched block, in the
// owner order of the first block. Workers whose owner lease lapsed are
// skipped.
func (s *Store) match(locals []uint64, nowMs uint64) []MatchEntry {
	if s.proj != nil {
		return s.matchCKF(locals, nowMs)
	}
	var out []MatchEntry
	var who []*rankState // out[i]'s rank
	parent := RootParent
	for depth, l := range locals {
		n := s.child(parent, l)
		if n == nil {
			break
		}
		if depth == 0 {
			// A rank owns a node once, so the first block lists each
			// rank at most once, in owner order.
			for _, o := range n.owners {
				if o.active && s.live(o.rank.rank.Worker, nowMs) {
					out = append(out, MatchEntry{Rank: o.rank.rank, Matched: 1, Last: n.hash})
					who = append(who, o.rank)
				}
			}
		} else {
			for i := range out {
				if out[i].Matched != uint32(depth) {
					continue
				}
				if o := n.owner(who[i]); o != nil && o.active {
					out[i].Matched++
					out[i].Last = n.hash
				}
			}
		}
		parent = n.hash
	}
	return out
}

// Match answers a MATCH at time nowMs (unix milliseconds; owner leases are
// checked against it).
func (s *Store) Match(locals []uint64, nowMs uint64) []MatchEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.match(locals, nowMs)
}

// Select is router_index_select: the best live candidate by longest
// prefix, then lowest load, then lowest worker and rank; nil when no
// candidate is live. A candidate with no match reports 0 blocks and the
// root hash (0xFFFF…FFFF) as its last block.
func (s *Store) Select(locals []uint64, cands []SelectCandidate, nowMs uint64) *MatchEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	matches := s.match(locals, nowMs)
	byRank := make(map[Rank]MatchEntry, len(matches))
	for _, m := range matches {
		byRank[m.Rank] = m
	}
	var best *MatchEntry
	var bestLoad uint64
	for _, c := range cands {
		if !s.live(c.Rank.Worker, nowMs) {
			continue
		}
		m, ok := byRank[c.Rank]
		if !ok {
			m = MatchEntry{Last: RootParent}
		}
		m.Rank = c.Rank
		if best == nil || m.Matched > best.Matched ||
			(m.Matched == best.Matched && c.Load < bestLoad) ||
			(m.Matched == best.Matched && c.Load == bestLoad && compareRank(c.Rank, best.Rank) < 0) {
			best, bestLoad = &m, c.Load
		}
	}
	return best
}

func compareRank(a, b Rank) int {
	switch {
	case a.Worker < b.Worker:
		return -1
	case a.Worker > b.Worker:
		return 1
	case a.DPRank < b.DPRank:
		return -1
	case a.DPRank > b.DPRank:
		return 1
	}
	return 0
}

// Stats returns the module's STATS triple: nodes, rank states, mutations.
func (s *Store) Stats() (nodes, rankStates, mutations uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return uint64(len(s.nodes)), uint64(len(s.ranks)), s.mutations
}

// MemoryBytes estimates the index's memory (MEMORY USAGE): per node, its
// owners and map entries; per rank, its state and node memberships.
func (s *Store) MemoryBytes() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	const nodeBytes, ownerBytes, rankBytes, memberBytes, epochBytes = 120, 32, 160, 16, 120
	b := uint64(len(s.nodes))*nodeBytes + uint64(len(s.ranks))*rankBytes + uint64(len(s.epochs))*epochBytes
	for _, st := range s.ranks {
		b += uint64(len(st.nodes)) * (ownerBytes + memberBytes)
	}
	return b
}
