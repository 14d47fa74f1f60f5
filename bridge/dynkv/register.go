package dynkv

// Worker registration and owner leases (the module's
// dynkv_registration.c, dynkv_lease.c and dynkv_worker_commands.c):
// REGISTER_WORKER, REGISTER_WORKER_RANKS (version 1 plain, 2 and 3 leased),
// REGISTRATION_GENERATION, RENEW_WORKER_LEASE and UNREGISTER_WORKER.
// APPLY_OWNED is in commands.go, the cleanup of ended leases in gc.go.

func cmdRegisterWorker(c *call) reply { return rankLifecycle(c, (*Store).registerWorker) }

// registerWorker is REGISTER_WORKER on the opened key: a single-rank
// registration, refused behind an owner lease unless it repeats a rank the
// owner registered.
func (s *Store) registerWorker(r Rank) reply {
	ep := s.epochs[r.Worker]
	if ep != nil && ep.pending {
		return errCode(CodeWorkerCleanupPending)
	}
	if ep != nil && ep.retiredAll {
		return errCode(CodeWorkerRetired)
	}
	st := s.ranks[r]
	if ep != nil && ep.ownerSet {
		switch {
		case st != nil && st.retired:
			return errCode(CodeWorkerRetired)
		case st != nil && st.registered:
			if s.markLegacyRank(r) {
				s.mutations++
			}
			return status("NOOP")
		}
		return errCode(CodeWorkerOwned)
	}
	changed := false
	if st == nil {
		st, changed = s.rankState(r, true), true
	}
	if st.retired {
		return errCode(CodeWorkerRetired)
	}
	if !st.registered {
		st.registered, st.tombstone, st.tombGen, changed = true, false, 0, true
	}
	if !changed {
		if s.markLegacyRank(r) {
			s.mutations++
		}
		return status("NOOP")
	}
	s.markLegacyRank(r)
	s.mutations++
	return status("OK")
}

func cmdRegisterWorkerRanks(c *call) reply {
	worker, ok := be64(c.args[2])
	if !ok {
		return errCode(CodeInvalidRegistration)
	}
	reg, err := DecodeRegistration(c.args[3])
	if err != nil {
		return errCode(CodeInvalidRegistration)
	}
	if reg.Leased() {
		return registerLeased(c, worker, reg)
	}
	// Preflight on a read-only view: a fenced or idempotent request
	// creates no key.
	if existing := c.e.lookup(c.key()); existing != nil {
		existing.mu.Lock()
		rep, done := existing.preflightPlain(worker, reg.Ranks)
		existing.mu.Unlock()
		if done {
			return rep
		}
	}
	s, rep, ok := c.write()
	if !ok {
		return rep
	}
	defer s.mu.Unlock()
	if s.cleanupPending(worker) {
		return errCode(CodeWorkerCleanupPending)
	}
	for _, rk := range reg.Ranks {
		st := s.rankState(Rank{worker, rk}, true)
		st.registered, st.tombstone, st.tombGen = true, false, 0
		s.markLegacyRank(Rank{worker, rk})
	}
	s.mutations++
	return status("OK")
}

// preflightPlain checks a version 1 registration against the existing
// index; done reports that rep is the command's reply.
func (s *Store) preflightPlain(worker uint64, ranks []uint32) (rep reply, done bool) {
	ep := s.epochs[worker]
	if ep != nil && ep.pending {
		return errCode(CodeWorkerCleanupPending), true
	}
	if ep != nil && ep.retiredAll {
		return errCode(CodeWorkerRetired), true
	}
	membership, provenance := false, false
	for _, rk := range ranks {
		st := s.ranks[Rank{worker, rk}]
		if st != nil && st.retired {
			return errCode(CodeWorkerRetired), true
		}
		membership = membership || st == nil || !st.registered
		provenance = provenance || (st != nil && !st.tainted)
	}
	provenance = provenance || (ep != nil && !ep.tainted)
	if ep != nil && ep.ownerSet && membership {
		return errCode(CodeWorkerOwned), true
	}
	if !membership && !provenance {
		return status("NOOP"), true
	}
	return reply{}, false
}

// registerLeased is REGISTER_WORKER_RANKS version 2 or 3: the worker's
// ranks are registered and the worker claimed by an owner nonce whose
// lease ends at now + lease (never earlier than the same owner's running
// lease). Version 3 must quote the worker's registration token.
func registerLeased(c *call, worker uint64, reg Registration) reply {
	replaySafe := reg.Version == 3
	if c.nowMs > ^uint64(0)-reg.LeaseMs {
		return errCode(CodeInvalidRegistration)
	}
	expires := c.nowMs + reg.LeaseMs
	existing := c.e.lookup(c.key())
	if existing == nil {
		if replaySafe && reg.ExpectedGeneration != 1 {
			return errCode(CodeStaleRegistration)
		}
		s, rep, ok := c.write()
		if !ok {
			return rep
		}
		defer s.mu.Unlock()
		return s.applyRegister(c.nowMs, worker, reg, expires)
	}
	existing.mu.Lock()
	defer existing.mu.Unlock()
	s := existing
	ep := s.epochs[worker]
	if ep != nil && ep.ownerSet && (ep.pending || ep.expiresMs <= c.nowMs) {
		return errCode(CodeWorkerCleanupPending)
	}
	if replaySafe && ep == nil && s.lifecycle == ^uint64(0) {
		return errCode(CodeLifecycleExhausted)
	}
	current := s.lifecycle + 1
	if ep != nil {
		current = ep.lifecycle
	}
	exactReplay := replaySafe && ep != nil && ep.ownerSet && ep.expiresMs > c.nowMs && ep.nonce == reg.OwnerNonce &&
		ep.lastExpSet && ep.lastExp == reg.ExpectedGeneration && s.registeredRanksEqual(worker, reg.Ranks)
	// A token at or below the floor predates a garbage-collected epoch.
	absentValid := replaySafe && ep == nil && reg.ExpectedGeneration > s.gcFloor && reg.ExpectedGeneration <= current
	if replaySafe && reg.ExpectedGeneration != current && !absentValid && !exactReplay {
		return errCode(CodeStaleRegistration)
	}
	if ep != nil && ep.retiredAll {
		return errCode(CodeWorkerRetired)
	}
	if ep != nil && ep.ownerSet && ep.expiresMs > c.nowMs && ep.nonce != reg.OwnerNonce {
		return errCode(CodeWorkerOwned)
	}
	if ep != nil && ep.ownerSet && ep.nonce == reg.OwnerNonce && ep.expiresMs > expires {
		expires = ep.expiresMs
	}
	for _, rk := range reg.Ranks {
		if st := s.ranks[Rank{worker, rk}]; st != nil && st.retired {
			return errCode(CodeWorkerRetired)
		}
	}
	return s.applyRegister(c.nowMs, worker, reg, expires)
}

// registeredRanksEqual reports whether the worker's registered ranks are
// exactly ranks (sorted).
func (s *Store) registeredRanksEqual(worker uint64, ranks []uint32) bool {
	found := 0
	for r, st := range s.ranks {
		if r.Worker != worker || !st.registered {
			continue
		}
		if !containsRank(ranks, r.DPRank) {
			return false
		}
		found++
	}
	return found == len(ranks)
}

func containsRank(sorted []uint32, r uint32) bool {
	lo, hi := 0, len(sorted)
	for lo < hi {
		m := (lo + hi) / 2
		if sorted[m] < r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(sorted) && sorted[lo] == r
}

// applyRegister is router_index_worker_lease_apply_register: it installs or
// extends the owner lease, registers the listed ranks (owner-managed),
// retires the worker's registered ranks not listed (tombstones, with a new
// worker ticket) and, for a new epoch or a changed rank set under the same
// owner, issues a new registration token. The reply is OK even when nothing
// changed (the module replicates the registration either way).
func (s *Store) applyRegister(nowMs, worker uint64, reg Registration, expires uint64) reply {
	// The module answers a registration its lease logic refuses after the
	// preflight as a failed replication.
	invalid := errCode(CodeReplicationFailed)
	replaySafe := reg.Version == 3
	if expires <= nowMs {
		return invalid
	}
	ep := s.epochs[worker]
	epochWasAbsent := ep == nil
	if ep != nil && (ep.retiredAll || ep.pending || (ep.ownerSet && ep.expiresMs <= nowMs)) {
		return invalid
	}
	for _, rk := range reg.Ranks {
		if st := s.ranks[Rank{worker, rk}]; st != nil && st.retired {
			return invalid
		}
	}
	rankSetChanged := !s.registeredRanksEqual(worker, reg.Ranks)
	removesRank := false
	for r, st := range s.ranks {
		if r.Worker == worker && st.registered && !containsRank(reg.Ranks, r.DPRank) {
			removesRank = true
			break
		}
	}
	ownerAcquisition := ep == nil || !ep.ownerSet
	advanceRegistration := epochWasAbsent || (!ownerAcquisition && rankSetChanged)
	if advanceRegistration && s.lifecycle == ^uint64(0) {
		return invalid
	}
	if removesRank && !s.canAdvance() {
		return invalid
	}
	if ep != nil && ep.ownerSet && ep.nonce != reg.OwnerNonce {
		return errCode(CodeWorkerOwned)
	}
	changed := false
	if ep == nil {
		ep = s.epochOf(worker, true)
	}
	ep.managed = true
	if !replaySafe && !ep.tainted {
		ep.tainted, changed = true, true
	}
	if !ep.ownerSet {
		ep.ownerSet, ep.nonce, ep.expiresMs, changed = true, reg.OwnerNonce, expires, true
	} else if expires > ep.expiresMs {
		ep.expiresMs, changed = expires, true
	}
	for _, rk := range reg.Ranks {
		st := s.rankState(Rank{worker, rk}, true)
		st.managed = true
		if !replaySafe && !st.tainted {
			st.tainted, changed = true, true
		}
		if !st.registered || st.tombstone {
			st.registered, st.tombstone, st.tombGen, changed = true, false, 0, true
		}
	}
	if removesRank {
		for _, st := range s.ranksOf(worker) {
			if !st.registered || containsRank(reg.Ranks, st.rank.DPRank) {
				continue
			}
			s.deactivate(st)
			st.registered, st.tombstone = false, true
			s.revokeAdmission(worker, false, st.rank.DPRank)
		}
		s.advanceWorker(worker)
		for _, st := range s.ranksOf(worker) {
			if st.tombstone {
				st.tombGen = ep.generation
			}
		}
		changed = true
	}
	if advanceRegistration {
		s.lifecycle++
		ep.lifecycle = s.lifecycle
		ep.lastExpSet, ep.lastExp = replaySafe, 0
		if replaySafe {
			ep.lastExp = reg.ExpectedGeneration
		}
		changed = true
	}
	if changed {
		s.mutations++
	}
	return status("OK")
}

func cmdRegistrationGeneration(c *call) reply {
	worker, ok := be64(c.args[2])
	if !ok {
		return errCode(CodeInvalidWorker)
	}
	return c.read(ticket(1), func(s *Store) reply {
		ep := s.epochs[worker]
		if ep == nil {
			if s.lifecycle == ^uint64(0) {
				return errCode(CodeLifecycleExhausted)
			}
			return ticket(s.lifecycle + 1)
		}
		gen := ep.lifecycle
		if ep.ownerSet && !ep.pending && ep.expiresMs <= c.nowMs && s.lifecycle != ^uint64(0) {
			gen = s.lifecycle + 1
		}
		return ticket(gen)
	})
}

func cmdRenewLease(c *call) reply {
	p, err := DecodeLease(c.args[2], true)
	if err != nil || c.nowMs > ^uint64(0)-p.LeaseMs {
		return errCode(CodeInvalidWorkerLease)
	}
	s := c.e.lookup(c.key())
	if s == nil {
		return errCode(CodeStaleWorkerOwner)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	expires := c.nowMs + p.LeaseMs
	ep := s.epochs[p.Worker]
	if ep != nil && ep.ownerSet && ep.nonce == p.OwnerNonce && ep.expiresMs > expires {
		expires = ep.expiresMs
	}
	if ep == nil || !ep.ownerSet || ep.pending || ep.nonce != p.OwnerNonce || ep.expiresMs <= c.nowMs {
		return errCode(CodeStaleWorkerOwner)
	}
	if expires > ep.expiresMs {
		ep.expiresMs = expires
		s.mutations++
	}
	return status("OK")
}

func cmdUnregister(c *call) reply {
	p, err := DecodeLease(c.args[2], false)
	if err != nil {
		return errCode(CodeInvalidWorkerLease)
	}
	s := c.e.lookup(c.key())
	if s == nil {
		return errCode(CodeStaleWorkerOwner)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ep := s.epochs[p.Worker]
	if ep == nil || !ep.ownerSet || ep.pending || ep.nonce != p.OwnerNonce {
		return errCode(CodeStaleWorkerOwner)
	}
	if !s.leaseCanEnd(ep) {
		return errCode(CodeInvalidWorkerLease)
	}
	s.beginCleanup(ep)
	s.mutations++
	return status("OK")
}
