package dynkv

// Lifecycle GC and the lifecycle counters (the module's dynkv_gc_*.c and
// dynkv_stats.c), call for call as the module runs them.
//
// DYNKV.GC walks a resumable cursor over four phases, each one of the
// module's dictionaries in key order: rank states (0), admission ranks
// (1), nodes (2) and worker epochs (3), moving to the next phase (and from
// the last back to the first) when one is exhausted. Each record it visits
// costs one unit of budget and may plan transitions: a reclaimable rank
// state (an owner-fenced tombstone at or below the watermark) gives up one
// inactive owner, the last of its members, or, holding none, itself; an
// admission rank of a reclaimable rank without reservations goes; an
// ownerless leaf node goes; and an epoch whose owner lease expired begins
// its cleanup (a new ticket and registration token; its writes answer
// DYNKV_WORKER_CLEANUP_PENDING until the cleanup ends), an epoch whose
// cleanup is pending plans its next chunk (its reservations from the last;
// else its admission ranks, each given a new incarnation; else the owners
// of its last rank still to clean, removed for owner-fenced ranks and reset
// to inactive at event 0 for the others, then that rank made a tombstone;
// else the release of the lease), as many as the budget left allows, and an
// empty epoch of an owner-fenced worker at or below the watermark goes
// (taking a ticket, and raising the floor under which registration tokens
// are stale). A lease begun or an epoch deleted ends the walk; so does the
// budget, or coming back to the call's first record. Planning reads the
// state as it was before the call; the planned transitions are then
// applied in order, each one checked again, and every cleanup transition
// puts the cursor back at the start of the epochs, so pending cleanups come
// first. The reply counts the records visited and the transitions by kind,
// and ends with the cursor's phase, as GC_STATS does.

// GC phases: the dictionaries the cursor walks, in order.
const (
	gcPhaseRanks = iota
	gcPhaseAdmissions
	gcPhaseNodes
	gcPhaseEpochs
	gcPhases
)

// maxGCItems is the module's budget limit (DYNKV_MAX_GC_ITEMS).
const maxGCItems = 1 << 20

// gcKey is the cursor's position: the last key visited in the current
// phase's dictionary (set false: before the first).
type gcKey struct {
	set       bool
	rank      Rank
	admission admissionKey
	hash      uint64 // node, or epoch's worker
}

// gcResult is what one DYNKV.GC call counted.
type gcResult struct {
	examined, reclaimed, owners, admissions, nodes, ranks, epochs uint64
	epochDeletions                                                uint64
	stop                                                          bool
	plan                                                          []func() bool
}

func cmdGC(c *call) reply {
	useCurrent := string(c.args[2]) == "CURRENT"
	watermark, okW := be64(c.args[2])
	budget, okB := be32(c.args[3])
	if (!useCurrent && !okW) || !okB || budget == 0 || budget > maxGCItems {
		return errCode(CodeInvalidGCRequest)
	}
	s := c.e.lookup(c.key())
	if s == nil {
		if !useCurrent && watermark > 0 {
			return errCode(CodeGCFutureWatermark)
		}
		return ints(0, 0, 0, 0, 0, 0, 0, 0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if useCurrent {
		watermark = s.tickets
	}
	if watermark > s.tickets {
		return errCode(CodeGCFutureWatermark)
	}
	res, ok := s.gc(c.nowMs, watermark, uint64(budget))
	if !ok {
		return errCode(CodeInvalidGCState)
	}
	if res.reclaimed != 0 {
		for _, apply := range res.plan {
			if !apply() {
				return errCode(CodeGCCommitInvariant)
			}
		}
		s.mutations++
	}
	return ints(res.examined, res.reclaimed, res.owners, res.admissions, res.nodes, res.ranks, res.epochs, uint64(s.gcPhase))
}

// gc plans one call's transitions (dynkv_gc_command's loop); ok false is
// the module's DYNKV_INVALID_GC_STATE.
func (s *Store) gc(nowMs, watermark, budget uint64) (res gcResult, ok bool) {
	var firstPhase uint8
	var first gcKey
	for res.examined < budget {
		phase, rec, more := s.gcNext()
		if !more || (first.set && phase == firstPhase && s.gcCursor == first) {
			break
		}
		if !first.set {
			firstPhase, first = phase, s.gcCursor
		}
		res.examined++
		if !s.planRecord(phase, rec, watermark, nowMs, budget, &res) {
			return res, false
		}
		if res.stop {
			break
		}
	}
	return res, true
}

// gcNext is gc_next_record: the record after the cursor in the current
// phase, moving through the phases (at most once around) when one is
// exhausted.
func (s *Store) gcNext() (uint8, any, bool) {
	for range gcPhases {
		c := &s.gcCursor
		switch s.gcPhase {
		case gcPhaseRanks:
			if r, ok := s.rankOrder.next(c.rank, c.set); ok {
				*c = gcKey{set: true, rank: r}
				return s.gcPhase, s.ranks[r], true
			}
		case gcPhaseAdmissions:
			if k, ok := s.admissionOrder.next(c.admission, c.set); ok {
				*c = gcKey{set: true, admission: k}
				return s.gcPhase, s.admissions[k], true
			}
		case gcPhaseNodes:
			if h, ok := s.nodeOrder.next(c.hash, c.set); ok {
				*c = gcKey{set: true, hash: h}
				return s.gcPhase, s.nodes[h], true
			}
		case gcPhaseEpochs:
			if w, ok := s.epochOrder.next(c.hash, c.set); ok {
				*c = gcKey{set: true, hash: w}
				return s.gcPhase, s.epochs[w], true
			}
		}
		s.gcPhase = (s.gcPhase + 1) % gcPhases
		s.gcCursor = gcKey{}
	}
	return 0, nil, false
}

// prioritizeCleanup is gc_prioritize_pending_cleanup: the cursor goes back
// to the start of the epochs.
func (s *Store) prioritizeCleanup() {
	s.gcPhase, s.gcCursor = gcPhaseEpochs, gcKey{}
}

// planRecord is gc_plan_record.
func (s *Store) planRecord(phase uint8, rec any, watermark, nowMs, budget uint64, res *gcResult) bool {
	switch phase {
	case gcPhaseRanks:
		st := rec.(*rankState)
		if !s.reclaimable(st, watermark) {
			return true
		}
		if len(st.members) != 0 {
			m := st.members[len(st.members)-1]
			if m.n.owners[m.owner].active {
				return true
			}
			n, tomb := m.n, st.tombGen
			res.add(func() bool { return s.gcRemoveOwner(n, st, tomb) })
			res.owners++
			return true
		}
		if st.admissionCount == 0 && st.reservationCount == 0 {
			tomb := st.tombGen
			res.add(func() bool { return s.gcRemoveRank(st, tomb) })
			res.ranks++
		}
	case gcPhaseAdmissions:
		a := rec.(*admissionRank)
		st := s.ranks[a.key.rank]
		if st == nil || !s.reclaimable(st, watermark) || a.active != 0 {
			return true
		}
		inc, tomb := a.incarnation, st.tombGen
		res.add(func() bool { return s.gcRemoveAdmission(a, inc, tomb) })
		res.admissions++
	case gcPhaseNodes:
		n := rec.(*node)
		if len(n.owners) != 0 || n.children != 0 {
			return true
		}
		res.add(func() bool { return s.gcRemoveNode(n) })
		res.nodes++
	case gcPhaseEpochs:
		return s.planEpoch(rec.(*epoch), watermark, nowMs, budget, res)
	}
	return true
}

// add plans one transition.
func (res *gcResult) add(apply func() bool) {
	res.plan = append(res.plan, apply)
	res.reclaimed++
}

// planEpoch plans an epoch's transitions (gc_plan_record's epoch phase).
func (s *Store) planEpoch(ep *epoch, watermark, nowMs, budget uint64, res *gcResult) bool {
	if ep.ownerSet {
		switch {
		case ep.pending:
			return s.planCleanup(ep, budget, res)
		case ep.expiresMs <= nowMs:
			if budget-(res.examined-1) < 1 || !s.canAdvance() || s.lifecycle == ^uint64(0) {
				return true
			}
			id := cleanupID{ep.worker, ep.nonce, ep.expiresMs, s.tickets + 1}
			lifecycle := s.lifecycle + 1
			res.add(func() bool { return s.gcBeginCleanup(id, lifecycle, nowMs) })
			res.epochs++
			res.stop = true
		}
		return true
	}
	if !ep.managed || ep.tainted || ep.retiredAll || ep.generation == 0 || ep.generation > watermark ||
		len(ep.ranks) != 0 || len(ep.admissions) != 0 || len(ep.reservations) != 0 ||
		res.epochDeletions >= ^uint64(0)-s.tickets {
		return true
	}
	gen := ep.generation
	res.add(func() bool { return s.gcRemoveEpoch(ep, gen) })
	res.epochs++
	res.epochDeletions++
	res.stop = true
	return true
}

// planCleanup is gc_plan_pending_lease_cleanup: the next chunk of a pending
// lease cleanup, as much of it as the budget left allows.
func (s *Store) planCleanup(ep *epoch, budget uint64, res *gcResult) bool {
	available := budget - (res.examined - 1)
	id := cleanupID{ep.worker, ep.nonce, ep.expiresMs, ep.cleanupGen}
	chunk := func(left int) int {
		count := int(min(uint64(left), available))
		if count > 0 {
			res.examined += uint64(count) - 1
		}
		return count
	}
	switch {
	case len(ep.reservations) != 0:
		for i := range chunk(len(ep.reservations)) {
			r := ep.reservations[len(ep.reservations)-1-i]
			res.add(func() bool { return s.gcCleanupReservation(id, r) })
		}
	case ep.cleanupAdmissionsLeft != 0:
		for i := range chunk(ep.cleanupAdmissionsLeft) {
			a := ep.admissions[ep.cleanupAdmissionsLeft-1-i]
			inc := a.incarnation
			res.add(func() bool { return s.gcCleanupAdmission(id, a, inc) })
			res.admissions++
		}
	case ep.cleanupRanksLeft != 0:
		st := ep.ranks[ep.cleanupRanksLeft-1]
		st.prepareCleanup(ep.cleanupGen)
		if st.cleanupNodesLeft == 0 {
			res.add(func() bool { return s.gcCleanupRank(id, st) })
			res.ranks++
			return true
		}
		for i := range chunk(st.cleanupNodesLeft) {
			m := st.members[st.cleanupNodesLeft-1-i]
			o := m.n.owners[m.owner]
			n := m.n
			res.add(func() bool { return s.gcCleanupOwner(id, st, n, o.eventID, o.active) })
			res.owners++
		}
	default:
		res.add(func() bool { return s.gcFinalizeCleanup(id) })
		res.epochs++
	}
	return true
}

// prepareCleanup is worker_prepare_cleanup_nodes: a rank met first by
// cleanup gen has all its members still to clean.
func (st *rankState) prepareCleanup(gen uint64) {
	if st.cleanupNodeGen != gen {
		st.cleanupNodeGen, st.cleanupNodesLeft = gen, len(st.members)
	}
}

// reclaimable is gc_worker_is_reclaimable: a tombstone of an owner-managed,
// untainted worker whose lease ended at or below the watermark.
func (s *Store) reclaimable(st *rankState, watermark uint64) bool {
	ep := s.epochs[st.rank.Worker]
	return st.tombstone && st.managed && !st.tainted && !st.retired && !st.registered &&
		st.tombGen != 0 && st.tombGen <= watermark && ep != nil && ep.managed && !ep.tainted && !ep.ownerSet
}

// The transitions (gc_apply_*): each checks its conditions on the state
// it meets and reports whether it applied.

func (s *Store) gcRemoveOwner(n *node, st *rankState, tomb uint64) bool {
	if s.ranks[st.rank] != st || !st.tombstone || st.tombGen != tomb || s.nodes[n.hash] != n {
		return false
	}
	if o := n.owner(st); o == nil || o.active {
		return false
	}
	return s.removeOwner(n, st)
}

func (s *Store) gcRemoveAdmission(a *admissionRank, incarnation, tomb uint64) bool {
	st := s.ranks[a.key.rank]
	if st == nil || !st.tombstone || st.tombGen != tomb || s.admissions[a.key] != a || a.incarnation != incarnation || a.active != 0 {
		return false
	}
	s.deleteAdmission(a)
	return true
}

func (s *Store) gcRemoveNode(n *node) bool {
	if s.nodes[n.hash] != n || len(n.owners) != 0 || n.children != 0 {
		return false
	}
	s.deleteLeaf(n)
	return true
}

// gcRemoveRank is gc_apply_remove_worker (router_index_delete_worker_state).
func (s *Store) gcRemoveRank(st *rankState, tomb uint64) bool {
	if s.ranks[st.rank] != st || !st.tombstone || !st.managed || st.tainted || st.tombGen != tomb ||
		len(st.members) != 0 || st.admissionCount != 0 || st.reservationCount != 0 {
		return false
	}
	delete(s.ranks, st.rank)
	if ep := s.epochs[st.rank.Worker]; ep != nil {
		ep.ranks = listRemove(ep.ranks, st)
	}
	return true
}

// gcRemoveEpoch is gc_apply_remove_worker_epoch: the epoch goes, its
// registration tokens become stale and the ticket counter advances.
func (s *Store) gcRemoveEpoch(ep *epoch, gen uint64) bool {
	if !s.canAdvance() || s.epochs[ep.worker] != ep || !ep.managed || ep.tainted || ep.retiredAll || ep.generation != gen ||
		ep.ownerSet || len(ep.ranks) != 0 || len(ep.admissions) != 0 || len(ep.reservations) != 0 {
		return false
	}
	delete(s.epochs, ep.worker)
	s.gcFloor = max(s.gcFloor, s.lifecycle)
	s.tickets++
	return true
}

// cleanupID names a lease cleanup as the module's plan does: the worker,
// its owner nonce and lease expiry, and the cleanup's ticket.
type cleanupID struct{ worker, nonce, expiresMs, gen uint64 }

// cleanupEpoch is gc_cleanup_epoch: the epoch whose cleanup id names, if
// that cleanup is still pending.
func (s *Store) cleanupEpoch(id cleanupID) *epoch {
	ep := s.epochs[id.worker]
	if ep == nil || !ep.ownerSet || !ep.pending || ep.nonce != id.nonce || ep.expiresMs != id.expiresMs ||
		ep.cleanupGen != id.gen || ep.generation != id.gen {
		return nil
	}
	return ep
}

func (s *Store) gcBeginCleanup(id cleanupID, lifecycle, nowMs uint64) bool {
	ep := s.epochs[id.worker]
	if ep == nil || !ep.ownerSet || ep.pending || ep.nonce != id.nonce || ep.expiresMs != id.expiresMs || id.expiresMs > nowMs ||
		!s.canAdvance() || id.gen != s.tickets+1 || s.lifecycle == ^uint64(0) || lifecycle != s.lifecycle+1 {
		return false
	}
	s.beginCleanup(ep)
	return true
}

func (s *Store) gcCleanupReservation(id cleanupID, r *reservation) bool {
	if s.cleanupEpoch(id) == nil || s.reservations[r.key] != r || r.rank.Worker != id.worker {
		return false
	}
	s.removeReservation(r)
	s.prioritizeCleanup()
	return true
}

func (s *Store) gcCleanupAdmission(id cleanupID, a *admissionRank, incarnation uint64) bool {
	ep := s.cleanupEpoch(id)
	if ep == nil || s.admissions[a.key] != a || a.incarnation != incarnation || a.active != 0 || a.cleanupGen == id.gen ||
		ep.cleanupAdmissionsLeft == 0 || a.epochIdx >= ep.cleanupAdmissionsLeft {
		return false
	}
	listSwap(ep.admissions, a.epochIdx, ep.cleanupAdmissionsLeft-1)
	if a.incarnation == ^uint64(0) {
		s.deleteAdmission(a) // the successor recreates it
	} else {
		a.incarnation++
		a.cleanupGen = id.gen
	}
	ep.cleanupAdmissionsLeft--
	s.prioritizeCleanup()
	return true
}

// rankInCleanup reports whether st is one of ep's ranks still to clean.
func rankInCleanup(ep *epoch, st *rankState, gen uint64) bool {
	return st.cleanupGen != gen && ep.cleanupRanksLeft != 0 && st.epochIdx >= 0 && st.epochIdx < ep.cleanupRanksLeft && ep.ranks[st.epochIdx] == st
}

func (s *Store) gcCleanupOwner(id cleanupID, st *rankState, n *node, eventID uint64, active bool) bool {
	ep := s.cleanupEpoch(id)
	if ep == nil || s.ranks[st.rank] != st || s.nodes[n.hash] != n || !rankInCleanup(ep, st, id.gen) {
		return false
	}
	st.prepareCleanup(id.gen)
	o := n.owner(st)
	pos, ok := st.nodes[n]
	if o == nil || o.eventID != eventID || o.active != active || o.cleanupGen == id.gen || st.cleanupNodesLeft == 0 || !ok || pos >= st.cleanupNodesLeft {
		return false
	}
	st.swapMembers(pos, st.cleanupNodesLeft-1)
	if ep.managed && !ep.tainted && st.managed && !st.tainted {
		s.removeOwner(n, st)
	} else {
		o = n.owner(st)
		o.eventID, o.cleanupGen = 0, id.gen
		s.setActive(n, st, o, false)
	}
	listSwap(ep.ranks, st.epochIdx, ep.cleanupRanksLeft-1)
	st.cleanupNodesLeft--
	s.prioritizeCleanup()
	return true
}

// gcCleanupRank is gc_apply_cleanup_worker: a rank whose owners are all
// cleaned becomes an unregistered tombstone of the cleanup.
func (s *Store) gcCleanupRank(id cleanupID, st *rankState) bool {
	ep := s.cleanupEpoch(id)
	if ep == nil || s.ranks[st.rank] != st || !rankInCleanup(ep, st, id.gen) || ep.cleanupAdmissionsLeft != 0 || st.reservationCount != 0 {
		return false
	}
	st.prepareCleanup(id.gen)
	if st.cleanupNodesLeft != 0 {
		return false
	}
	listSwap(ep.ranks, st.epochIdx, ep.cleanupRanksLeft-1)
	st.lastClear, st.dedupe, st.hasDedupe = 0, 0, false
	st.registered, st.tombstone, st.tombGen, st.cleanupGen = false, true, id.gen, id.gen
	ep.cleanupRanksLeft--
	s.prioritizeCleanup()
	return true
}

// gcFinalizeCleanup is gc_apply_finalize_lease_cleanup: the lease is
// released.
func (s *Store) gcFinalizeCleanup(id cleanupID) bool {
	ep := s.cleanupEpoch(id)
	if ep == nil || ep.cleanupRanksLeft != 0 || ep.cleanupAdmissionsLeft != 0 || len(ep.reservations) != 0 {
		return false
	}
	ep.pending, ep.cleanupGen = false, 0
	ep.ownerSet, ep.nonce, ep.expiresMs = false, 0, 0
	s.prioritizeCleanup()
	return true
}

// beginCleanup fences an ended lease (gc_begin_lease_cleanup, also run by
// UNREGISTER_WORKER): the worker takes a new ticket and a new registration
// token and its cleanup is pending, its ranks and admission ranks all still
// to clean, until GC has drained it; the owner stays installed meanwhile,
// so no successor can race the partial cleanup.
func (s *Store) beginCleanup(ep *epoch) {
	s.tickets++
	ep.generation = s.tickets
	s.lifecycle++
	ep.lifecycle = s.lifecycle
	ep.pending, ep.cleanupGen = true, s.tickets
	ep.cleanupRanksLeft, ep.cleanupAdmissionsLeft = len(ep.ranks), len(ep.admissions)
	ep.lastExpSet, ep.lastExp = false, 0
	s.prioritizeCleanup()
}

// leaseCanEnd is router_index_worker_lease_can_end.
func (s *Store) leaseCanEnd(ep *epoch) bool {
	if !s.canAdvance() || s.lifecycle == ^uint64(0) || ep == nil || ep.pending {
		return false
	}
	for _, a := range ep.admissions {
		if a.incarnation == ^uint64(0) {
			return false
		}
	}
	return true
}

// deleteLeaf is router_index_delete_ownerless_leaf: one node without
// owners or children goes (its parent may become such a leaf for a later
// call).
func (s *Store) deleteLeaf(n *node) {
	delete(s.nodes, n.hash)
	delete(s.edges, edge{n.parent, n.local})
	if p := s.nodes[n.parent]; n.parent != RootParent && p != nil && p.children > 0 {
		p.children--
	}
}

func cmdGCStats(c *call) reply {
	return c.read(ints(0, 0, 0, 0, 0, 0, 0, 0), func(s *Store) reply { return s.gcStats(c.nowMs) })
}

// gcStats is DYNKV.GC_STATS: [tickets, direct tombstones, retained legacy
// ranks, direct ownerless epochs, retained legacy epochs, inactive owners,
// ownerless nodes, GC phase].
func (s *Store) gcStats(nowMs uint64) reply {
	var directTombstones, legacyRanks, directEpochs, legacyEpochs, inactiveOwners, ownerless uint64
	for _, st := range s.ranks {
		switch {
		case st.tombstone && st.managed && !st.tainted:
			directTombstones++
		case st.tombstone || st.tainted:
			legacyRanks++
		}
	}
	for _, ep := range s.epochs {
		inactive := !ep.ownerSet || ep.pending || ep.expiresMs <= nowMs
		switch {
		case inactive && ep.managed && !ep.tainted:
			directEpochs++
		case inactive && ep.tainted:
			legacyEpochs++
		}
	}
	for _, n := range s.nodes {
		if len(n.owners) == 0 {
			ownerless++
		}
		for _, o := range n.owners {
			if !o.active {
				inactiveOwners++
			}
		}
	}
	return ints(s.tickets, directTombstones, legacyRanks, directEpochs, legacyEpochs, inactiveOwners, ownerless, uint64(s.gcPhase))
}

func cmdLifecycleStats(c *call) reply {
	return c.read(ints(0, 0, 0), func(s *Store) reply { return s.lifecycleStats(c.nowMs) })
}

// lifecycleStats is DYNKV.LIFECYCLE_STATS: [live owner leases, rank
// tombstones, epochs without a live owner].
func (s *Store) lifecycleStats(nowMs uint64) reply {
	var leases, tombstones, ownerless uint64
	for _, st := range s.ranks {
		if st.tombstone {
			tombstones++
		}
	}
	for _, ep := range s.epochs {
		if ep.ownerSet && !ep.pending && ep.expiresMs > nowMs {
			leases++
		} else {
			ownerless++
		}
	}
	return ints(leases, tombstones, ownerless)
}
