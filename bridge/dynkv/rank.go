package dynkv

// Rank lifecycle commands (the module's dynkv_worker_commands.c): rank
// replacement from a tree dump, retirement, reset and worker-wide removal.
// Each runs on the locked Store of its key, which the command opened for
// writing.

// plannedOwner is the replacement plan's owner of one block.
type plannedOwner struct {
	eventID uint64
	active  bool
}

// validReplacement is replace_snapshot_validate: the dump's stores must
// build a topology that agrees with every node of the index and with
// itself, each parent being a block stored earlier in the dump (the rank is
// reset first, so none of its current blocks count).
func (s *Store) validReplacement(events []Event) bool {
	nodes := map[uint64]edge{}  // planned node → its edge
	byEdge := map[edge]uint64{} // planned edge → its node
	owners := map[uint64]plannedOwner{}
	for _, ev := range events {
		if ev.Parent != RootParent {
			if o, ok := owners[ev.Parent]; !ok || !o.active {
				return false
			}
		}
		parent := ev.Parent
		for _, b := range ev.Blocks {
			e := edge{parent, b.Local}
			if n := s.nodes[b.External]; n != nil && (n.parent != parent || n.local != b.Local) {
				return false
			}
			if n := s.edges[e]; n != nil && n.hash != b.External {
				return false
			}
			if planned, ok := nodes[b.External]; ok {
				if planned != e {
					return false
				}
			} else {
				if h, ok := byEdge[e]; ok && h != b.External {
					return false
				}
				nodes[b.External], byEdge[e] = e, b.External
			}
			if o, ok := owners[b.External]; !ok || !(ev.EventID < o.eventID || (ev.EventID == o.eventID && o.active)) {
				owners[b.External] = plannedOwner{ev.EventID, true}
			}
			parent = b.External
		}
	}
	// ckf mode: a rank holding no block needs a free lane for its dump.
	if s.laneLimit > 0 && len(events) > 0 && s.holding >= s.laneLimit {
		if st := s.ranks[events[0].Rank]; st == nil || st.active == 0 {
			for _, ev := range events {
				if len(ev.Blocks) > 0 {
					return false
				}
			}
		}
	}
	return true
}

// replaceRank is the write half of REPLACE_RANK_IF_GENERATION, after the
// ticket and the dump were checked: the rank is reset (a retired one also
// loses its registration), the dump applied and the rank given a new
// ticket, which is the reply.
func (s *Store) replaceRank(r Rank, events []Event) reply {
	if s.cleanupPending(r.Worker) {
		return errCode(CodeWorkerCleanupPending)
	}
	st := s.rankState(r, true)
	s.revokeAdmission(r.Worker, false, r.DPRank)
	wasRetired := st.retired
	s.reset(st)
	if wasRetired {
		st.registered = false
	}
	for i := range events {
		if res := s.applyEvent(&events[i]); res != applyOK && res != applyNoop {
			return errCode(CodeInvalidReplace)
		}
	}
	if !s.advanceRank(st) {
		return errCode(CodeGenerationExhausted)
	}
	s.markLegacyRank(r)
	s.mutations++
	return ticket(s.rankTicket(r))
}

// removeRank is REMOVE_WORKER: the rank is deactivated and retired (its
// later events are ignored until RESET_WORKER or a replacement).
func (s *Store) removeRank(r Rank) reply {
	return s.changeRank(r, func(st *rankState) {
		s.deactivate(st)
		st.retired, st.registered = true, false
	})
}

// resetRank is RESET_WORKER: the rank is deactivated and un-retired, ready
// for a tree dump whose event ids may be lower than the live ones.
func (s *Store) resetRank(r Rank) reply {
	return s.changeRank(r, func(st *rankState) {
		wasRetired := st.retired
		s.reset(st)
		if wasRetired {
			st.registered = false
		}
	})
}

// changeRank is a rank lifecycle command's frame: refused while the
// worker's cleanup is pending or the generations are exhausted; else the
// rank's admission is revoked, change applied to its state and its
// generation advanced.
func (s *Store) changeRank(r Rank, change func(st *rankState)) reply {
	if s.cleanupPending(r.Worker) {
		return errCode(CodeWorkerCleanupPending)
	}
	st := s.rankState(r, true)
	if !s.canAdvance() {
		return errCode(CodeGenerationExhausted)
	}
	s.revokeAdmission(r.Worker, false, r.DPRank)
	change(st)
	s.advanceRank(st)
	s.markLegacyRank(r)
	s.mutations++
	return status("OK")
}

// removeWorkerAll is REMOVE_WORKER_ALL: every rank of the worker is
// deactivated and retired, the worker's epoch takes a new ticket (which
// fences ranks not seen yet), its owner lease ends and no registration is
// accepted for it any more.
func (s *Store) removeWorkerAll(worker uint64) reply {
	if s.cleanupPending(worker) {
		return errCode(CodeWorkerCleanupPending)
	}
	if !s.canAdvance() {
		return errCode(CodeGenerationExhausted)
	}
	s.revokeAdmission(worker, true, 0)
	for _, st := range s.ranksOf(worker) {
		s.deactivate(st)
		st.retired, st.registered = true, false
	}
	s.advanceWorker(worker)
	s.markLegacyWorker(worker)
	ep := s.epochOf(worker, false)
	if ep.ownerSet {
		ep.ownerSet, ep.nonce, ep.expiresMs = false, 0, 0
	}
	ep.retiredAll = true
	s.mutations++
	return status("OK")
}
