package ckf

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/goindex/goindex/goindex/kv"
)

// lineage maps a member's source block ids to canonical hashes.
type lineage = flatMap[uint64]

// mapping is one new (source block → canonical) mapping of a Stored event.
type mapping struct {
	src, c uint64
	at     int // block index in the event
}

// offer is one block of a Stored event that asks for a physical
// admission, and its canonical's owner entry (owner.offered is set while
// it is listed).
type offer struct {
	at int // block index in the event
	o  *owner
}

// storeScratch is reused by every Stored event, so that ingest does not
// allocate in steady state.
type storeScratch struct {
	chain    []uint64    // canonical hash of each block
	fresh    []mapping   // new mappings, in block order
	probes   []Probe     // FP and A of each block (Removed: of each mapped id); B is left to the table
	reoffers []int       // blocks whose mapping the event repeats
	cands    []offer     // non-resident candidates, deduplicated, in order
	offers   []offer     // non-resident re-offers that are not candidates, deduplicated, in order
	members  []kv.Member // a worker's ranks, for clearWorkerRanks
	keys     []uint64    // source ids a failed clear already removed
}

// Apply applies one KV event of the pool (spec §4.2–4.5) and returns the
// publication step the cadence now requires. The stream is assumed to be
// device-tier already. An event whose shape is invalid (ErrBadEvent) or
// that reaches a fenced producer (ErrFenced) is not admitted: it changes
// nothing and is not counted. Every admitted event counts as pending, even
// when it fails or changes nothing; its error is the first one met, and
// says what stayed applied:
//
//   - Stored: ErrParentBlockNotFound, ErrInvalidBlockSequence and
//     ErrOwnershipDegreeOverflow reject the whole event with no change;
//     ErrCapacityExhausted means every block is tracked but some are not
//     admitted to the filter (spec §4.7).
//   - Removed, Cleared: ErrInvariantViolation stops at the offending block,
//     which keeps its state; blocks before it stay removed, and the
//     producer is fenced.
func (p *Producer) Apply(ev *kv.Event) (Step, error) { return p.apply(ev, nil, nil) }

// apply is Apply with ApplyBatch's look-ahead for ev (pr, its data in cs),
// or none (pr nil).
func (p *Producer) apply(ev *kv.Event, pr *prep, cs *chunkScratch) (Step, error) {
	if p.fence != nil {
		return StepContinue, fmt.Errorf("%w (%w)", ErrFenced, p.fence)
	}
	if err := ev.Validate(); err != nil {
		return StepContinue, fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	var err error
	switch ev.Kind {
	case kv.Stored:
		err = p.store(ev, pr, cs)
	case kv.Removed:
		err = p.remove(ev.Member, ev.Removed, pr, cs)
	case kv.Cleared:
		if p.clearWorker {
			err = p.clearWorkerRanks(ev.Member.Worker)
		} else {
			err = p.clearMember(ev.Member)
		}
	}
	return p.admitted(), err
}

// RemoveMember drops every block of m, as a Cleared event would, and
// forces a publication boundary: it returns StepPublish unless the
// producer is fenced. Its errors are those of a Cleared event.
func (p *Producer) RemoveMember(m kv.Member) (Step, error) {
	if p.fence != nil {
		return StepContinue, fmt.Errorf("%w (%w)", ErrFenced, p.fence)
	}
	return StepPublish, p.clearMember(m)
}

// RemoveWorker drops every block of every rank of worker, in ascending
// rank order, and forces a publication boundary like RemoveMember.
func (p *Producer) RemoveWorker(worker uint64) (Step, error) {
	if p.fence != nil {
		return StepContinue, fmt.Errorf("%w (%w)", ErrFenced, p.fence)
	}
	return StepPublish, p.clearWorkerRanks(worker)
}

// store applies a Stored event (spec §4.3); pr and cs are as for apply.
func (p *Producer) store(ev *kv.Event, pr *prep, cs *chunkScratch) error {
	m := ev.Member
	lin := p.members[m]
	var prev uint64
	if ev.HasParent {
		var c *uint64
		if lin != nil {
			c = lin.find(ev.Parent)
		}
		if c == nil {
			p.stats.MissingParents++
			return fmt.Errorf("member %v parent %#x: %w", m, ev.Parent, ErrParentBlockNotFound)
		}
		prev = *c
	} else if ev.HasStart && ev.StartPosition != 0 {
		p.stats.InvalidSequences++
		return fmt.Errorf("member %v: start position %d without a parent: %w", m, ev.StartPosition, ErrInvalidBlockSequence)
	}
	if len(ev.Blocks) == 0 {
		return nil
	}
	if lin == nil {
		l := newFlatMap[uint64](max(len(ev.Blocks), p.memberHint))
		lin = &l
		p.members[m] = lin
	}
	s := &p.scratch
	s.fresh, s.cands, s.offers, s.reoffers = s.fresh[:0], s.cands[:0], s.offers[:0], s.reoffers[:0]

	// Chain and address every block, then start the cache misses of its
	// lineage, owner and filter lines all at once instead of one after
	// another: a loop of loads only keeps many misses in flight
	// (BenchmarkIngest). The look-ahead of ApplyBatch did both already if
	// it chained from the parent's canonical of now.
	var chain []uint64
	var probes []Probe
	if pr != nil && pr.ok && pr.prev == prev {
		chain, probes = cs.canon[pr.off:pr.off+pr.n], cs.probes[pr.off:pr.off+pr.n]
	} else {
		chain, probes = p.chainProbes(ev, prev)
		for i, b := range ev.Blocks {
			p.sink += lin.warm(b.External) + p.owners.warm(chain[i]) + p.tab.words[probes[i].A]
		}
	}

	// Classify. A new mapping enters the lineage at once, so a
	// later block of this event sees it as the spec's "mapping created
	// earlier in this batch"; a rejection takes them all out again.
	for i, b := range ev.Blocks {
		c := chain[i]
		v, found := lin.upsert(b.External)
		switch {
		case !found:
			*v = c
			s.fresh = append(s.fresh, mapping{b.External, c, i})
		case *v == c:
			s.reoffers = append(s.reoffers, i)
		default:
			old := *v
			p.unmap(m, lin, s.fresh)
			p.stats.RemapRejections++
			return fmt.Errorf("member %v block %#x: maps to %#x, event says %#x: %w", m, b.External, old, c, ErrInvalidBlockSequence)
		}
	}

	// Owner increments, undone if any would overflow (reserve before
	// commit: the event is then rejected whole). The owner table makes
	// room for every new canonical first, so that the owner pointers kept
	// in cands and offers stay valid for the rest of the event.
	p.owners.reserve(len(s.fresh))
	for i, f := range s.fresh {
		o, _ := p.owners.upsert(f.c)
		if o.count == math.MaxUint32 {
			for _, c := range s.cands {
				c.o.offered = false
			}
			p.unown(s.fresh[:i])
			p.unmap(m, lin, s.fresh)
			p.stats.OwnershipOverflows++
			return fmt.Errorf("member %v block %#x canonical %#x: %w", m, f.src, f.c, ErrOwnershipDegreeOverflow)
		}
		o.count++
		if !o.resident && !o.offered {
			o.offered = true
			s.cands = append(s.cands, offer{f.at, o})
		}
	}
	p.tracked += uint64(len(s.fresh))

	// Re-offers that may need a physical admission: not resident, not a
	// candidate, once each (spec: candidates leave the re-offer list).
	for _, i := range s.reoffers {
		if o := p.owners.find(chain[i]); o != nil && !o.resident && !o.offered {
			o.offered = true
			s.offers = append(s.offers, offer{i, o})
		}
	}
	p.win.reserve(len(s.cands)*(p.tab.maxKicks+1)+len(s.offers), p.f.Buckets())

	// Physical admission: full insertion for candidates, relocation-free
	// for re-offers (a failed re-offer is not counted again).
	omitted := 0
	for _, c := range s.cands {
		if touched, ok := p.tab.insert(probes[c.at]); ok {
			p.admit(c.o, touched)
		} else {
			c.o.offered = false
			omitted++
		}
	}
	for _, c := range s.offers {
		if touched, ok := p.tab.place(probes[c.at]); ok {
			p.admit(c.o, touched)
		} else {
			c.o.offered = false
		}
	}
	if omitted > 0 {
		p.stats.CapacityOmissions += uint64(omitted)
		return fmt.Errorf("member %v: %d of %d blocks tracked but not admitted: %w", m, omitted, len(ev.Blocks), ErrCapacityExhausted)
	}
	return nil
}

// chainProbes returns the canonical hash and primary probe of each block
// of Stored event ev, chained from prev if it has a parent (scratch,
// valid until the next event).
func (p *Producer) chainProbes(ev *kv.Event, prev uint64) ([]uint64, []Probe) {
	s := &p.scratch
	chained := ev.HasParent
	chain, probes := s.chain[:0], s.probes[:0]
	for _, b := range ev.Blocks {
		c := b.Local
		if chained {
			c = kv.ChainHash(prev, b.Local)
		}
		prev, chained = c, true
		chain = append(chain, c)
		probes = append(probes, p.f.primary(c))
	}
	s.chain, s.probes = chain, probes
	return chain, probes
}

// admit marks the canonical of owner entry o resident after an insertion
// wrote touched.
func (p *Producer) admit(o *owner, touched []touch) {
	for _, t := range touched {
		p.win.mark(t)
	}
	p.stats.Touches += uint64(len(touched))
	o.resident, o.offered = true, false
	p.resident++
}

// unmap takes fresh's mappings out of m's lineage again, dropping m if
// that empties it.
func (p *Producer) unmap(m kv.Member, lin *lineage, fresh []mapping) {
	for _, f := range fresh {
		lin.del(f.src)
	}
	if lin.len() == 0 {
		delete(p.members, m)
	}
}

// unown undoes the owner increments of fresh, last first.
func (p *Producer) unown(fresh []mapping) {
	for i := len(fresh) - 1; i >= 0; i-- {
		c := fresh[i].c
		if o := p.owners.find(c); o.count > 1 {
			o.count--
		} else {
			p.owners.del(c)
		}
	}
}

// remove applies a Removed event (spec §4.4); pr and cs are as for
// apply.
func (p *Producer) remove(m kv.Member, srcs []uint64, pr *prep, cs *chunkScratch) error {
	lin := p.members[m]
	if lin == nil {
		p.stats.UnknownRemovals += uint64(len(srcs))
		return nil
	}
	// Look every block up before releasing any, so that the lineage, owner
	// and filter misses of the whole event overlap (BenchmarkIngest), unless
	// the look-ahead of ApplyBatch did.
	var canon []uint64
	var probes []Probe
	if pr != nil && pr.ok {
		canon, probes = cs.canon[pr.off:pr.off+pr.n], cs.probes[pr.off:pr.off+pr.n]
	} else {
		for _, src := range srcs {
			p.sink += lin.warm(src)
		}
		canon, probes = p.scratch.chain[:0], p.scratch.probes[:0]
		for _, src := range srcs {
			var c uint64
			var probe Probe
			if v := lin.find(src); v != nil {
				c, probe = *v, p.f.primary(*v)
				p.sink += p.owners.warm(c) + p.tab.words[probe.A]
			}
			canon, probes = append(canon, c), append(probes, probe)
		}
		p.scratch.chain, p.scratch.probes = canon, probes
	}
	for i, src := range srcs {
		c, ok := lin.take(src) // an id may repeat within the event: then it is gone
		if !ok {
			p.stats.UnknownRemovals++
			continue
		}
		var probe Probe // c's probe if it was looked up (release computes it otherwise)
		if canon[i] == c {
			probe = probes[i]
		}
		if err := p.release(c, probe); err != nil {
			v, _ := lin.upsert(src) // the offending block keeps its mapping
			*v = c
			return fmt.Errorf("member %v block %#x: %w", m, src, err)
		}
		p.tracked--
	}
	if lin.len() == 0 {
		delete(p.members, m)
	}
	return nil
}

// clearMember applies §4.4 to every mapping of m. Removal never draws from
// the RNG, and the words left after removing a set of fingerprints do not
// depend on the order, so the lineage's slot order cannot change the layout.
func (p *Producer) clearMember(m kv.Member) error {
	lin := p.members[m]
	if lin == nil {
		return nil
	}
	done := 0
	var err error
	for src, c := range lin.all() {
		if err = p.release(*c, Probe{}); err != nil {
			err = fmt.Errorf("member %v block %#x: %w", m, src, err)
			break
		}
		done++
	}
	if err == nil {
		p.tracked -= uint64(lin.len())
		delete(p.members, m)
		return nil
	}
	// Forget the blocks released before the failure; the lineage did not
	// change during the walk, so they are the first done it yields.
	keys := p.scratch.keys[:0]
	for src := range lin.all() {
		if len(keys) == done {
			break
		}
		keys = append(keys, src)
	}
	for _, k := range keys {
		lin.del(k)
	}
	p.scratch.keys = keys
	p.tracked -= uint64(done)
	return err
}

// clearWorkerRanks clears every member of worker in ascending rank order.
func (p *Producer) clearWorkerRanks(worker uint64) error {
	ms := p.scratch.members[:0]
	for m := range p.members {
		if m.Worker == worker {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b kv.Member) int { return cmp.Compare(a.Rank, b.Rank) })
	p.scratch.members = ms
	for _, m := range ms {
		if err := p.clearMember(m); err != nil {
			return err
		}
	}
	return nil
}

// release drops one owner of canonical c: the final owner of a resident
// canonical also clears one copy of its fingerprint (spec §4.1, I5). If
// that copy is missing, nothing changes and the producer is fenced. pr is
// c's primary probe (FP and A) when the caller has it, or the zero Probe
// (fingerprints are never 0).
func (p *Producer) release(c uint64, pr Probe) error {
	at := p.owners.slot(c)
	if at < 0 { // a mapping without an owner entry breaks I1
		return p.violate(c, owner{})
	}
	o := p.owners.at(at)
	switch {
	case o.count > 1:
		o.count--
		return nil
	case o.resident:
		if pr.FP == 0 {
			pr = p.f.primary(c)
		}
		t, ok := p.tab.remove(pr)
		if !ok {
			return p.violate(c, *o)
		}
		p.win.mark(t)
		p.stats.Touches++
		p.resident--
	}
	p.owners.delAt(at)
	return nil
}

// violate fences the producer for an invariant violation found at c.
func (p *Producer) violate(c uint64, o owner) error {
	p.stats.InvariantViolations++
	p.fence = fmt.Errorf("canonical %#x (owners %d, resident %v): %w", c, o.count, o.resident, ErrInvariantViolation)
	return p.fence
}
