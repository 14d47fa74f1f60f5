package dynkv

import "time"

// Worker registration (REGISTER_WORKER, REGISTER_WORKER_RANKS v1/v3,
// REGISTRATION_GENERATION, APPLY_OWNED, RENEW_WORKER_LEASE,
// UNREGISTER_WORKER). goindex runs cleanup synchronously, so
// DYNKV_WORKER_CLEANUP_PENDING is never returned: an unregistered worker's
// ranks are dropped before the reply.

// RegisterWorker registers one rank: true when created, false when it was
// already registered; DYNKV_WORKER_RETIRED for a retired rank.
func (s *Store) RegisterWorker(r Rank) (c Changed, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.settle(err) }()
	st := s.rank(r)
	if st.retired {
		return false, errorf(CodeWorkerRetired, "rank %d/%d is retired until RESET_WORKER", r.Worker, r.DPRank)
	}
	if st.registered {
		return false, nil
	}
	st.registered = true
	s.workerState(r.Worker).registration++
	s.mutations++
	return true, nil
}

// RegisterWorkerRanks registers a worker's ranks. Version 3 also claims the
// worker for an owner nonce with a lease, guarded by the expected
// registration generation.
func (s *Store) RegisterWorkerRanks(worker uint64, reg Registration, now time.Time) (c Changed, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.settle(err) }()
	w := s.workerState(worker)
	if w.retired {
		return false, errorf(CodeWorkerRetired, "worker %d is retired", worker)
	}
	if reg.Version == 3 {
		if w.ownerNonce != 0 && w.ownerNonce != reg.OwnerNonce && now.Before(w.leaseUntil()) {
			return false, errorf(CodeWorkerOwned, "worker %d is owned by another process until its lease expires", worker)
		}
		if reg.ExpectedGeneration != w.registration {
			return false, errorf(CodeStaleGeneration, "worker %d registration generation is %d, not %d", worker, w.registration, reg.ExpectedGeneration)
		}
	}
	for _, rk := range reg.Ranks {
		if s.rank(Rank{worker, rk}).retired {
			return false, errorf(CodeWorkerRetired, "rank %d/%d is retired until RESET_WORKER", worker, rk)
		}
	}
	var changed Changed
	for _, rk := range reg.Ranks {
		if st := s.rank(Rank{worker, rk}); !st.registered {
			st.registered, changed = true, true
		}
	}
	if reg.Version == 3 && (w.ownerNonce != reg.OwnerNonce || w.leaseMs != reg.LeaseMs) {
		w.ownerNonce, w.leaseMs, changed = reg.OwnerNonce, reg.LeaseMs, true
	}
	if reg.Version == 3 {
		w.renewed = now
	}
	if changed {
		w.registration++
		s.mutations++
	}
	return changed, nil
}

// RegistrationGeneration returns the worker's registration token.
func (s *Store) RegistrationGeneration(worker uint64) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if w := s.workers[worker]; w != nil {
		return w.registration
	}
	return 1
}

// ApplyOwned applies an event from the worker's registered owner.
func (s *Store) ApplyOwned(nonce uint64, ev Event) (c Changed, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.settle(err) }()
	w := s.workers[ev.Rank.Worker]
	if w == nil || w.ownerNonce == 0 || w.ownerNonce != nonce {
		return false, errorf(CodeStaleWorkerOwner, "nonce %#x does not own worker %d", nonce, ev.Rank.Worker)
	}
	if st := s.ranks[ev.Rank]; st == nil || !st.registered {
		return false, errorf(CodeUnregisteredWorkerRnk, "rank %d/%d is not registered", ev.Rank.Worker, ev.Rank.DPRank)
	}
	return s.apply(ev)
}

// RenewLease extends the owner's lease (optionally changing its length).
func (s *Store) RenewLease(p LeasePayload, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.workers[p.Worker]
	if w == nil || w.ownerNonce == 0 || w.ownerNonce != p.OwnerNonce {
		return errorf(CodeStaleWorkerOwner, "nonce %#x does not own worker %d", p.OwnerNonce, p.Worker)
	}
	if p.HasLease {
		w.leaseMs = p.LeaseMs
	}
	w.renewed = now
	return nil
}

// UnregisterWorker releases the owner's claim and drops the worker's ranks.
func (s *Store) UnregisterWorker(p LeasePayload) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.workers[p.Worker]
	if w == nil || w.ownerNonce == 0 || w.ownerNonce != p.OwnerNonce {
		return errorf(CodeStaleWorkerOwner, "nonce %#x does not own worker %d", p.OwnerNonce, p.Worker)
	}
	for r, st := range s.ranks {
		if r.Worker == p.Worker {
			s.dropRank(r, st)
			st.registered = false
		}
	}
	w.ownerNonce, w.leaseMs = 0, 0
	w.registration++
	s.mutations++
	return nil
}

func (w *workerState) leaseUntil() time.Time {
	return w.renewed.Add(time.Duration(w.leaseMs) * time.Millisecond)
}
