package dynkv

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
)

// Authoritative admission (the module's dynkv_admission.c and
// dynkv_admission_commands.c): DYNKV.SELECT_RESERVE picks a candidate rank
// as SELECT does but counts the reservations it holds against a capacity
// the module owns, per admission domain; a reservation is a lease the
// frontend renews (DYNKV.RENEW) and releases (DYNKV.RELEASE). A rank's
// reservations are revoked, and its admission incarnation advanced, when
// the rank is removed, reset, replaced, dropped from its owner's rank set
// or loses its owner lease.

// Admission wire limits and statuses (dynkv_limits.h, dynkv_types.h).
const (
	MaxAdmissionDomainBytes  = 128
	MaxAdmissionCandidates   = 16384
	MaxAdmissionLeaseMs      = 600_000
	admissionExpiryBudget    = 64  // reservations one admission command expires
	inlineExpiryWorkBudget   = 256 // the lease end SELECT_RESERVE may do inline
	admissionNoCapacity      = 0
	admissionReserved        = 1
	unknownAdmissionCapacity = ^uint32(0)
)

type admissionKey struct {
	domain string
	rank   Rank
}

type reservationKey struct {
	domain          string
	client, request uint64
}

// admissionRank is the module's AdmissionRankState: the capacity the
// module owns for one rank in one domain, its incarnation (a fence that
// changes when the rank's lifecycle does) and its live reservations.
type admissionRank struct {
	key         admissionKey
	capacity    uint32
	incarnation uint64
	active      uint32
	cleanupGen  uint64 // the lease cleanup that last advanced it (gc.go)
	epochIdx    int    // position in its worker's epoch (-1: none)
}

// reservation is one granted admission lease.
type reservation struct {
	key         reservationKey
	rank        Rank
	incarnation uint64
	expiresMs   uint64
	matched     uint32
	atGrant     uint32 // active reservations of the rank once granted
	raw         []byte // the SELECT_RESERVE payload, to recognize a retry
	seq         uint64 // grant order: expiry ties are taken in it
	epochIdx    int    // position in its worker's epoch (-1: none)
}

// admissionRequest is a decoded SELECT_RESERVE payload.
type admissionRequest struct {
	key     reservationKey
	leaseMs uint64
	hashes  []uint64
	cands   []admissionCandidate
	raw     []byte
}

type admissionCandidate struct {
	rank     Rank
	capacity uint32
}

// decodeAdmissionRequest decodes u8 1, u32 domain length, domain, u64
// client nonce, u64 request nonce, u64 lease ms, u32 n, n × u64 local hash,
// u32 m, m × (u64 worker, u32 rank, u32 capacity), exact length.
func decodeAdmissionRequest(b []byte) (admissionRequest, bool) {
	r := reader{b: b}
	r.version("reserve", 1)
	dl := r.count("domain length", MaxAdmissionDomainBytes, 1)
	if r.err != nil || dl == 0 {
		return admissionRequest{}, false
	}
	req := admissionRequest{raw: b, key: reservationKey{domain: string(r.b[:dl])}}
	r.b = r.b[dl:]
	req.key.client, req.key.request, req.leaseMs = r.u64("client nonce"), r.u64("request nonce"), r.u64("lease ms")
	req.hashes = r.hashes()
	n := r.count("candidate count", MaxAdmissionCandidates, 16)
	if r.err != nil || req.leaseMs == 0 || req.leaseMs > MaxAdmissionLeaseMs || len(r.b) != n*16 {
		return admissionRequest{}, false
	}
	req.cands = make([]admissionCandidate, n)
	for i := range req.cands {
		req.cands[i] = admissionCandidate{Rank{r.u64("worker"), r.u32("rank")}, r.u32("capacity")}
	}
	return req, r.err == nil
}

// decodeIdentity decodes u8 1, u32 domain length, domain, u64 client
// nonce, u64 request nonce and returns the rest.
func decodeIdentity(b []byte) (reservationKey, *reader, bool) {
	r := &reader{b: b}
	r.version("admission", 1)
	dl := r.count("domain length", MaxAdmissionDomainBytes, 1)
	if r.err != nil || dl == 0 {
		return reservationKey{}, nil, false
	}
	k := reservationKey{domain: string(r.b[:dl])}
	r.b = r.b[dl:]
	k.client, k.request = r.u64("client nonce"), r.u64("request nonce")
	return k, r, r.err == nil
}

// capacityMatches is admission_rank_capacity_matches.
func (a *admissionRank) capacityMatches(capacity uint32) bool {
	return a == nil || a.capacity == 0 || (a.capacity != unknownAdmissionCapacity && a.capacity == capacity)
}

// reservationReply is the module's reservation reply (version, status and,
// when reserved, the grant).
func reservationReply(res *reservation) reply {
	if res == nil {
		return bulk([]byte{1, admissionNoCapacity})
	}
	b := []byte{1, admissionReserved}
	b = binary.BigEndian.AppendUint64(b, res.key.client)
	b = binary.BigEndian.AppendUint64(b, res.key.request)
	b = binary.BigEndian.AppendUint64(b, res.rank.Worker)
	b = binary.BigEndian.AppendUint32(b, res.rank.DPRank)
	b = binary.BigEndian.AppendUint64(b, res.expiresMs)
	b = binary.BigEndian.AppendUint32(b, res.matched)
	b = binary.BigEndian.AppendUint32(b, res.atGrant)
	return bulk(b)
}

// removeReservation is router_index_remove_reservation.
func (s *Store) removeReservation(res *reservation) {
	delete(s.reservations, res.key)
	if a := s.admissions[admissionKey{res.key.domain, res.rank}]; a != nil && a.active > 0 {
		a.active--
	}
	if st := s.ranks[res.rank]; st != nil && st.reservationCount > 0 {
		st.reservationCount--
	}
	if ep := s.epochs[res.rank.Worker]; ep != nil {
		ep.reservations = listRemove(ep.reservations, res)
	}
}

// addReservation is router_index_add_reservation, after the checks.
func (s *Store) addReservation(res *reservation, a *admissionRank) {
	res.epochIdx = -1
	s.reservations[res.key] = res
	a.active++
	if st := s.ranks[res.rank]; st != nil {
		st.reservationCount++
	}
	if ep := s.epochs[res.rank.Worker]; ep != nil {
		ep.reservations = listAdd(ep.reservations, res)
	}
}

// admission is router_index_admission_rank: the rank's admission state in
// a domain, created if absent and asked for.
func (s *Store) admission(k admissionKey, create bool) *admissionRank {
	a := s.admissions[k]
	if a == nil && create {
		a = &admissionRank{key: k, epochIdx: -1}
		s.admissions[k] = a
		s.admissionOrder.add(k)
		if st := s.ranks[k.rank]; st != nil {
			st.admissionCount++
		}
		if ep := s.epochs[k.rank.Worker]; ep != nil {
			ep.admissions = listAdd(ep.admissions, a)
		}
	}
	return a
}

// deleteAdmission is router_index_delete_admission_rank.
func (s *Store) deleteAdmission(a *admissionRank) {
	if s.admissions[a.key] != a {
		return
	}
	delete(s.admissions, a.key)
	if st := s.ranks[a.key.rank]; st != nil && st.admissionCount > 0 {
		st.admissionCount--
	}
	if ep := s.epochs[a.key.rank.Worker]; ep != nil {
		ep.admissions = listRemove(ep.admissions, a)
	}
}

// reservationsOf returns the reservations of the worker's ranks (all, or
// one) in dictionary order.
func (s *Store) reservationsOf(worker uint64, all bool, dpRank uint32) []*reservation {
	var out []*reservation
	for _, res := range s.reservations {
		if res.rank.Worker == worker && (all || res.rank.DPRank == dpRank) {
			out = append(out, res)
		}
	}
	slices.SortFunc(out, func(a, b *reservation) int { return compareReservationKey(a.key, b.key) })
	return out
}

// expireReservations is router_index_cleanup_expired_reservations: up to
// budget reservations whose lease ended, earliest first; it returns how
// many it removed.
func (s *Store) expireReservations(nowMs uint64, budget int) int {
	var expired []*reservation
	for _, res := range s.reservations {
		if res.expiresMs <= nowMs {
			expired = append(expired, res)
		}
	}
	slices.SortFunc(expired, func(a, b *reservation) int {
		return cmp.Or(cmp.Compare(a.expiresMs, b.expiresMs), cmp.Compare(a.seq, b.seq))
	})
	if len(expired) > budget {
		expired = expired[:budget]
	}
	for _, res := range expired {
		s.removeReservation(res)
	}
	return len(expired)
}

// revokeAdmission advances the admission incarnation of the worker's ranks
// (all, or one) and revokes their reservations: the rank's lifecycle
// changed under them.
func (s *Store) revokeAdmission(worker uint64, all bool, dpRank uint32) {
	for k, a := range s.admissions {
		if k.rank.Worker == worker && (all || k.rank.DPRank == dpRank) && a.incarnation != ^uint64(0) {
			a.incarnation++
		}
	}
	for _, res := range s.reservationsOf(worker, all, dpRank) {
		s.removeReservation(res)
	}
}

// eligible reports whether a candidate rank may be admitted at all.
func (s *Store) eligible(r Rank, nowMs uint64) bool {
	st, ep := s.ranks[r], s.epochs[r.Worker]
	return st != nil && !st.retired && st.registered && (ep == nil || !ep.retiredAll) && s.live(r.Worker, nowMs)
}

// endLeaseInline is worker_lease_commit_one_bounded_expiry: the owner lease
// that expired first is ended on the spot (router_index_end_worker_lease)
// when that is at most inlineExpiryWorkBudget units of work; it reports
// whether it ended one.
func (s *Store) endLeaseInline(nowMs uint64) bool {
	var first *epoch
	for _, ep := range s.epochs {
		if ep.ownerSet && !ep.pending && (first == nil || ep.expiresMs < first.expiresMs ||
			(ep.expiresMs == first.expiresMs && ep.worker < first.worker)) {
			first = ep
		}
	}
	if first == nil || first.expiresMs > nowMs || !s.canAdvance() || s.lifecycle == ^uint64(0) {
		return false
	}
	cost := 1 + len(first.ranks) + len(first.admissions) + 32*len(first.reservations)
	for _, st := range first.ranks {
		cost += len(st.members)
	}
	if cost > inlineExpiryWorkBudget {
		return false
	}
	for _, st := range first.ranks {
		s.deactivate(st)
		st.dedupe, st.hasDedupe = 0, false
		st.registered, st.tombstone = false, true
	}
	s.revokeAdmission(first.worker, true, 0)
	s.advanceWorker(first.worker)
	s.lifecycle++
	first.lifecycle = s.lifecycle
	for _, st := range first.ranks {
		if st.tombstone {
			st.tombGen = first.generation
		}
	}
	first.ownerSet, first.nonce, first.expiresMs = false, 0, 0
	return true
}

func cmdSelectReserve(c *call) reply {
	key := c.key()
	created := !c.e.Exists(key)
	s, rep, ok := c.write()
	if !ok {
		return rep
	}
	defer s.mu.Unlock()
	if s.endLeaseInline(c.nowMs) {
		s.mutations++
	}
	req, ok := decodeAdmissionRequest(c.args[2])
	if !ok || c.nowMs > ^uint64(0)-req.leaseMs {
		if created && !ok {
			c.e.drop(key, s)
		}
		return errCode(CodeInvalidReserve)
	}
	scores := s.match(req.hashes, c.nowMs)
	cleanup := s.expireReservations(c.nowMs, admissionExpiryBudget) > 0
	commitCleanup := func() {
		if cleanup {
			s.mutations++
		}
	}
	if existing := s.reservations[req.key]; existing != nil {
		commitCleanup()
		if !bytes.Equal(existing.raw, req.raw) {
			return errCode(CodeRequestConflict)
		}
		if !s.live(existing.rank.Worker, c.nowMs) {
			s.removeReservation(existing)
			s.mutations++
			return reservationReply(nil)
		}
		return reservationReply(existing)
	}
	for _, cand := range req.cands {
		if cand.capacity == 0 || cand.capacity == unknownAdmissionCapacity {
			commitCleanup()
			return errCode(CodeInvalidCandidate)
		}
		if s.eligible(cand.rank, c.nowMs) && !s.admissions[admissionKey{req.key.domain, cand.rank}].capacityMatches(cand.capacity) {
			commitCleanup()
			return errCode(CodeInvalidCandidate)
		}
	}
	matched := map[Rank]uint32{}
	for _, m := range scores {
		matched[m.Rank] = m.Matched
	}
	var best *admissionCandidate
	var bestMatched, bestLoad uint32
	for i, cand := range req.cands {
		a := s.admissions[admissionKey{req.key.domain, cand.rank}]
		if !s.eligible(cand.rank, c.nowMs) || !a.capacityMatches(cand.capacity) {
			continue
		}
		capacity, active := cand.capacity, uint32(0)
		if a != nil {
			capacity, active = a.capacity, a.active
		}
		if active >= capacity || active == ^uint32(0) {
			continue
		}
		m := matched[cand.rank]
		if best == nil || m > bestMatched || (m == bestMatched && active < bestLoad) ||
			(m == bestMatched && active == bestLoad && compareRank(cand.rank, best.rank) < 0) {
			best, bestMatched, bestLoad = &req.cands[i], m, active
		}
	}
	if best == nil {
		commitCleanup()
		return reservationReply(nil)
	}
	a := s.admission(admissionKey{req.key.domain, best.rank}, true)
	if a.capacity == 0 {
		a.capacity = best.capacity
	}
	if a.incarnation == 0 {
		a.incarnation = 1
	}
	s.reservationSeq++
	res := &reservation{key: req.key, rank: best.rank, incarnation: a.incarnation, expiresMs: c.nowMs + req.leaseMs,
		matched: bestMatched, atGrant: a.active + 1, raw: bytes.Clone(req.raw), seq: s.reservationSeq}
	s.addReservation(res, a)
	commitCleanup()
	s.mutations++
	return reservationReply(res)
}

func cmdRelease(c *call) reply {
	id, r, ok := decodeIdentity(c.args[2])
	expected := uint64(0)
	if ok {
		expected = r.u64("expected expiry")
		ok = r.end("release") == nil
	}
	if !ok {
		return errCode(CodeInvalidRelease)
	}
	s, rep, ok := c.write()
	if !ok {
		return rep
	}
	defer s.mu.Unlock()
	changed := s.expireReservations(c.nowMs, admissionExpiryBudget) > 0
	released := false
	res := s.reservations[id]
	expired := res != nil && res.expiresMs != expected
	if res != nil && !expired {
		s.removeReservation(res)
		released, changed = true, true
	}
	if changed {
		s.mutations++
	}
	if expired {
		return errCode(CodeReservationExpired)
	}
	if released {
		return bulk([]byte{1, 1})
	}
	return bulk([]byte{1, 0})
}

func cmdRenew(c *call) reply {
	id, r, ok := decodeIdentity(c.args[2])
	var expected, leaseMs uint64
	if ok {
		expected, leaseMs = r.u64("expected expiry"), r.u64("lease ms")
		ok = r.end("renew") == nil && leaseMs != 0 && leaseMs <= MaxAdmissionLeaseMs && c.nowMs <= ^uint64(0)-leaseMs
	}
	if !ok {
		return errCode(CodeInvalidRenew)
	}
	s, rep, ok := c.write()
	if !ok {
		return rep
	}
	defer s.mu.Unlock()
	expires := c.nowMs + leaseMs
	if res := s.reservations[id]; res != nil && res.expiresMs > expires {
		expires = res.expiresMs
	}
	changed := s.expireReservations(c.nowMs, admissionExpiryBudget) > 0
	res, extended, ok := s.renewReservation(id, expected, expires, c.nowMs)
	if changed || extended {
		s.mutations++
	}
	if !ok {
		return errCode(CodeReservationExpired)
	}
	return reservationReply(res)
}

// renewReservation is router_index_admission_apply_renew: the reservation
// extended to expires if it still stands and expected names its current
// expiry (an older expected answers it unchanged: a renewal already
// applied), or ok false for DYNKV_RESERVATION_EXPIRED.
func (s *Store) renewReservation(id reservationKey, expected, expires, nowMs uint64) (res *reservation, extended, ok bool) {
	res = s.reservations[id]
	if res == nil || expires <= nowMs {
		return nil, false, false
	}
	st := s.ranks[res.rank]
	a := s.admissions[admissionKey{id.domain, res.rank}]
	if st == nil || st.retired || !st.registered || a == nil || a.incarnation != res.incarnation || !s.live(res.rank.Worker, nowMs) {
		return nil, false, false
	}
	switch {
	case res.expiresMs != expected:
		return res, false, expected < res.expiresMs
	case expires < res.expiresMs:
		return nil, false, false
	case expires == res.expiresMs:
		return res, false, true
	}
	res.expiresMs = expires
	return res, true, true
}

func cmdAdmissionStats(c *call) reply {
	return c.read(integer(0), func(s *Store) reply { return integer(int64(len(s.reservations))) })
}
