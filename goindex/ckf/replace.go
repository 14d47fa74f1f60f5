package ckf

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/goindex/goindex/goindex/kv"
)

// RankDump is the recovered state of one member for ReplaceRanks: Stored
// events in replay order, parents first (as a Dynamo dump lists them).
type RankDump struct {
	Member kv.Member
	Events []kv.Event
}

// ReplaceRanks replaces the exact state of every member named in dumps
// with the replay of its dump and keeps every other member's lineage (spec
// §4.5: recovery after an event gap). It rebuilds the whole state off to
// the side, retained lineages first in member order and then the dumps in
// the order given, and swaps it in only if every dump event applies. A
// member named twice, an event that is not a Stored event of its dump's
// member, or one that fails for a missing parent, a remap or an owner
// overflow fails the call and leaves the producer untouched; capacity
// omissions do not fail it (they are counted). The rebuilt filter is
// logically, not byte-wise, equivalent to the incremental one; the buckets
// that differ from the current words are marked dirty, and the call forces
// a publication boundary (StepPublish). The producer's memory briefly
// holds both states.
func (p *Producer) ReplaceRanks(dumps []RankDump) (Step, error) {
	if p.fence != nil {
		return StepContinue, fmt.Errorf("%w (%w)", ErrFenced, p.fence)
	}
	replaced := make(map[kv.Member]bool, len(dumps))
	for _, d := range dumps {
		if replaced[d.Member] {
			return StepContinue, fmt.Errorf("%w: member %v has two dumps", ErrBadEvent, d.Member)
		}
		replaced[d.Member] = true
	}
	n := p.f.Buckets()
	np := &Producer{
		f:       p.f,
		tab:     newTable(make([]uint64, n), p.f, p.tab.maxKicks),
		win:     newWindow(n),
		members: make(map[kv.Member]*lineage, len(p.members)),
		owners:  newFlatMap[owner](p.owners.len()),
	}
	np.tab.rng = p.tab.rng
	var kept []kv.Member
	for m := range p.members {
		if !replaced[m] {
			kept = append(kept, m)
		}
	}
	slices.SortFunc(kept, func(a, b kv.Member) int {
		return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Rank, b.Rank))
	})
	for _, m := range kept {
		np.adopt(m, p.members[m])
	}
	for _, d := range dumps {
		for i := range d.Events {
			ev := &d.Events[i]
			if ev.Kind != kv.Stored || ev.Member != d.Member {
				return StepContinue, fmt.Errorf("%w: dump of member %v event %d is %v of member %v, want stored", ErrBadEvent, d.Member, i, ev.Kind, ev.Member)
			}
			if err := ev.Validate(); err != nil {
				return StepContinue, fmt.Errorf("%w: dump of member %v event %d: %w", ErrBadEvent, d.Member, i, err)
			}
			if err := np.store(ev, nil, nil); err != nil && !errors.Is(err, ErrCapacityExhausted) {
				return StepContinue, fmt.Errorf("dump of member %v event %d: %w", d.Member, i, err)
			}
		}
	}
	// Swap: the new words go into the producer's own (possibly caller's)
	// memory, and every bucket that changes is dirty against its current
	// word, so the next batch carries exactly the net difference.
	for b, w := range np.tab.words {
		if old := p.tab.words[b]; old != w {
			p.win.mark(touch{uint32(b), old})
			p.tab.words[b] = w
		}
	}
	p.members, p.owners, p.resident, p.tracked = np.members, np.owners, np.resident, np.tracked
	p.tab.rng = np.tab.rng
	p.stats.CapacityOmissions += np.stats.CapacityOmissions
	return StepPublish, nil
}

// adopt copies member m's lineage old into p, counting its owners, and
// inserts the fingerprint of each canonical it is the first to own, in
// lineage order (a failed insertion is a counted omission).
func (p *Producer) adopt(m kv.Member, old *lineage) {
	lin := newFlatMap[uint64](old.len())
	var first []uint64
	for src, c := range old.all() {
		v, _ := lin.upsert(src)
		*v = *c
		o, _ := p.owners.upsert(*c)
		o.count++
		if o.count == 1 {
			first = append(first, *c)
		}
	}
	p.members[m] = &lin
	p.tracked += uint64(lin.len())
	for _, c := range first {
		if touched, ok := p.tab.insert(p.f.primary(c)); ok {
			p.admit(p.owners.find(c), touched)
		} else {
			p.stats.CapacityOmissions++
		}
	}
}

// Restore gives member m, which must map no block yet, the mappings of a
// saved lineage (AppendLineage's), with the effect of one-block root
// Stored events of them (the local hash a mapping's canonical) but in one
// pass: m's lineage, the owner counts, and the fingerprint of each
// canonical m is the first to own, inserted in its lineage's order (a
// failed insertion is a counted omission: ErrCapacityExhausted, the
// mappings still tracked). The buckets written are marked dirty; the
// cadence is not advanced. A member that maps blocks already, or a source
// block listed twice with two canonicals, fails with ErrBadEvent and
// changes nothing; so does a fenced producer (ErrFenced).
func (p *Producer) Restore(m kv.Member, mappings []Mapping) error {
	if p.fence != nil {
		return fmt.Errorf("%w (%w)", ErrFenced, p.fence)
	}
	if p.members[m] != nil {
		return fmt.Errorf("%w: member %v maps blocks already", ErrBadEvent, m)
	}
	if len(mappings) == 0 {
		return nil
	}
	lin := newFlatMap[uint64](max(len(mappings), p.memberHint))
	for _, mp := range mappings {
		v, found := lin.upsert(mp.Source)
		if found && *v != mp.Canonical {
			return fmt.Errorf("%w: member %v block %#x maps to %#x and %#x", ErrBadEvent, m, mp.Source, *v, mp.Canonical)
		}
		*v = mp.Canonical
	}
	omitted := p.stats.CapacityOmissions
	p.adopt(m, &lin)
	if n := p.stats.CapacityOmissions - omitted; n > 0 {
		return fmt.Errorf("member %v: %d of %d blocks tracked but not admitted: %w", m, n, lin.len(), ErrCapacityExhausted)
	}
	return nil
}
