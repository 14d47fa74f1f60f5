package dynkv

import (
	"cmp"
	"slices"
)

// Lifecycle GC and the lifecycle counters (the module's dynkv_gc_*.c and
// dynkv_stats.c). DYNKV.GC makes the module's transitions: a lease that expired is fenced (its worker takes
// a new ticket and registration token and its cleanup becomes pending), and
// pending cleanups are drained — the worker's reservations revoked, its
// admission ranks given a new incarnation, each owner of its ranks removed
// (owner-managed, untainted ranks) or reset to inactive at event 0, each
// rank unregistered and made a tombstone, then the lease released — one
// transition per unit of budget, so a successor's registration
// (DYNKV_WORKER_CLEANUP_PENDING until then) goes through once GC has run;
// and what owner-fenced workers leave behind is reclaimed (reclaim). The
// transitions and their conditions are the module's; the order GC visits
// them in is not (see reclaim), so one call's counters can differ.

// gcPhasePending is the module's GC phase of worker epochs, the one it
// prioritizes while a lease cleanup is pending.
const gcPhasePending = 3

// maxGCItems is the module's budget limit (DYNKV_MAX_GC_ITEMS).
const maxGCItems = 1 << 20

// gcResult is the reply of DYNKV.GC.
type gcResult struct {
	examined, reclaimed, owners, admissions, nodes, ranks, epochs uint64
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
	if !useCurrent && watermark > s.tickets {
		return errCode(CodeGCFutureWatermark)
	}
	if useCurrent {
		watermark = s.tickets
	}
	res := s.gc(c.nowMs, watermark, uint64(budget))
	if res.reclaimed != 0 {
		s.mutations++
	}
	return ints(res.examined, res.reclaimed, res.owners, res.admissions, res.nodes, res.ranks, res.epochs, s.gcPhase())
}

// gcPhase is the phase the module's cursor would report: pending cleanups
// first, otherwise the start.
func (s *Store) gcPhase() uint64 {
	for _, ep := range s.epochs {
		if ep.pending {
			return gcPhasePending
		}
	}
	return 0
}

// sortedEpochs returns the epochs by worker id (GC's deterministic order:
// a replayed log must make the same transitions).
func (s *Store) sortedEpochs() []*epoch {
	return sortedValues(s.epochs, func(a, b *epoch) int { return cmp.Compare(a.worker, b.worker) })
}

// gc makes at most budget lifecycle transitions at time nowMs: fences
// expired leases, drains pending cleanups, then reclaims what owner-fenced
// workers left (reclaim), never beyond the ticket watermark.
func (s *Store) gc(nowMs, watermark, budget uint64) gcResult {
	var res gcResult
	step := func() bool {
		if res.examined >= budget {
			return false
		}
		res.examined++
		res.reclaimed++
		return true
	}
	for _, ep := range s.sortedEpochs() {
		if ep.ownerSet && !ep.pending && ep.expiresMs <= nowMs && s.canAdvance() && s.lifecycle != ^uint64(0) {
			if !step() {
				return res
			}
			s.beginCleanup(ep)
		}
	}
	for _, ep := range s.sortedEpochs() {
		if !ep.pending {
			continue
		}
		direct := ep.managed && !ep.tainted
		// The worker's reservations, then its admission ranks (a new
		// incarnation each), then its owners, ranks and the lease.
		var held []*reservation
		for _, r := range s.reservations {
			if r.rank.Worker == ep.worker {
				held = append(held, r)
			}
		}
		slices.SortFunc(held, func(a, b *reservation) int { return cmp.Compare(a.seq, b.seq) })
		for _, r := range held {
			if !step() {
				return res
			}
			s.removeReservation(r)
		}
		var adm []admissionKey
		for k, a := range s.admissions {
			if k.rank.Worker == ep.worker && a.cleanupGen != ep.cleanupGen {
				adm = append(adm, k)
			}
		}
		slices.SortFunc(adm, func(a, b admissionKey) int {
			return cmp.Or(cmp.Compare(a.domain, b.domain), cmp.Compare(a.rank.DPRank, b.rank.DPRank))
		})
		for _, k := range adm {
			if !step() {
				return res
			}
			res.admissions++
			if a := s.admissions[k]; a.incarnation == ^uint64(0) {
				delete(s.admissions, k)
			} else {
				a.incarnation++
				a.cleanupGen = ep.cleanupGen
			}
		}
		for _, st := range ep.ranks {
			if st.cleanupGen == ep.cleanupGen {
				continue
			}
			nodes := make([]*node, 0, len(st.nodes))
			for n := range st.nodes {
				nodes = append(nodes, n)
			}
			slices.SortFunc(nodes, func(a, b *node) int { return cmp.Compare(a.hash, b.hash) })
			for _, n := range nodes {
				o := n.owner(st)
				if o == nil || o.cleanupGen == ep.cleanupGen {
					continue
				}
				if !step() {
					return res
				}
				res.owners++
				if direct && st.managed && !st.tainted {
					s.removeOwner(n, st)
				} else {
					o.eventID, o.cleanupGen = 0, ep.cleanupGen
					s.setActive(n, st, o, false)
				}
			}
			if !step() {
				return res
			}
			res.ranks++
			st.lastClear, st.dedupe, st.hasDedupe = 0, 0, false
			st.registered, st.tombstone, st.tombGen, st.cleanupGen = false, true, ep.cleanupGen, ep.cleanupGen
		}
		if !step() {
			return res
		}
		res.epochs++
		ep.pending, ep.cleanupGen = false, 0
		ep.ownerSet, ep.nonce, ep.expiresMs = false, 0, 0
	}
	s.reclaim(watermark, step, &res)
	return res
}

// reclaimable is gc_worker_is_reclaimable: a tombstone of an owner-managed,
// untainted worker whose lease ended at or below the watermark.
func (s *Store) reclaimable(st *rankState, watermark uint64) bool {
	ep := s.epochs[st.rank.Worker]
	return st.tombstone && st.managed && !st.tainted && !st.retired && !st.registered &&
		st.tombGen != 0 && st.tombGen <= watermark && ep != nil && ep.managed && !ep.tainted && !ep.ownerSet
}

// reclaim deletes, one transition per unit of budget, what the module's
// other GC phases delete: the admission ranks (without reservations),
// inactive owners and then the states of reclaimable ranks, nodes with
// neither owners nor children, and empty epochs of owner-managed workers
// (each deletion of an epoch takes a ticket and raises the floor under
// which an absent worker's registration token is stale). It walks them in
// key order, not with the module's cursor, so which of them one call
// reaches within its budget, and its counters, can differ from the
// module's; what is reclaimed in the end does not.
func (s *Store) reclaim(watermark uint64, step func() bool, res *gcResult) {
	var ranks []*rankState
	for _, st := range s.ranks {
		if s.reclaimable(st, watermark) {
			ranks = append(ranks, st)
		}
	}
	slices.SortFunc(ranks, func(a, b *rankState) int { return compareRank(a.rank, b.rank) })
	for _, st := range ranks {
		var adm []admissionKey
		for k, a := range s.admissions {
			if k.rank == st.rank && a.active == 0 {
				adm = append(adm, k)
			}
		}
		slices.SortFunc(adm, func(a, b admissionKey) int { return cmp.Compare(a.domain, b.domain) })
		for _, k := range adm {
			if !step() {
				return
			}
			res.admissions++
			delete(s.admissions, k)
		}
		nodes := make([]*node, 0, len(st.nodes))
		for n := range st.nodes {
			if o := n.owner(st); o != nil && !o.active {
				nodes = append(nodes, n)
			}
		}
		slices.SortFunc(nodes, func(a, b *node) int { return cmp.Compare(a.hash, b.hash) })
		for _, n := range nodes {
			if !step() {
				return
			}
			res.owners++
			s.removeOwner(n, st)
		}
		if len(st.nodes) != 0 || s.holdsAdmission(st.rank) {
			continue
		}
		if !step() {
			return
		}
		res.ranks++
		delete(s.ranks, st.rank)
		if ep := s.epochs[st.rank.Worker]; ep != nil {
			ep.ranks = slices.DeleteFunc(ep.ranks, func(x *rankState) bool { return x == st })
		}
	}
	var leaves []*node
	for _, n := range s.nodes {
		if len(n.owners) == 0 && n.children == 0 {
			leaves = append(leaves, n)
		}
	}
	slices.SortFunc(leaves, func(a, b *node) int { return cmp.Compare(a.hash, b.hash) })
	for _, n := range leaves {
		if !step() {
			return
		}
		res.nodes++
		s.deleteLeaf(n)
	}
	for _, ep := range s.sortedEpochs() {
		if ep.ownerSet || !ep.managed || ep.tainted || ep.retiredAll || ep.generation == 0 || ep.generation > watermark ||
			len(ep.ranks) != 0 || !s.canAdvance() {
			continue
		}
		if s.workerHoldsAdmission(ep.worker) {
			continue
		}
		if !step() {
			return
		}
		res.epochs++
		delete(s.epochs, ep.worker)
		s.gcFloor = max(s.gcFloor, s.lifecycle)
		s.tickets++
	}
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

// holdsAdmission reports whether rank r has admission ranks or
// reservations in any domain.
func (s *Store) holdsAdmission(r Rank) bool {
	for k := range s.admissions {
		if k.rank == r {
			return true
		}
	}
	for _, res := range s.reservations {
		if res.rank == r {
			return true
		}
	}
	return false
}

// workerHoldsAdmission reports whether any rank of worker has admission
// ranks or reservations.
func (s *Store) workerHoldsAdmission(worker uint64) bool {
	for k := range s.admissions {
		if k.rank.Worker == worker {
			return true
		}
	}
	for _, res := range s.reservations {
		if res.rank.Worker == worker {
			return true
		}
	}
	return false
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
	return ints(s.tickets, directTombstones, legacyRanks, directEpochs, legacyEpochs, inactiveOwners, ownerless, s.gcPhase())
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
