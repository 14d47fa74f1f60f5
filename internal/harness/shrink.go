package harness

import (
	"fmt"
	"slices"
	"strings"

	"github.com/goindex/goindex/goindex/kv"
)

// DefaultMaxReplays bounds the serial replays one Shrink makes.
const DefaultMaxReplays = 5000

// ShrinkConfig configures Shrink; the policy fields must match the run that
// failed.
type ShrinkConfig struct {
	Seed           uint64 // printed with the case
	ClearScope     ClearScope
	AllowOvercount bool
	Strict         bool
	MaxReplays     int // optional; default DefaultMaxReplays
}

// Case is a shrunk failing workload: replaying Ops serially into a fresh
// index and then running Probe gives a violation of Kind.
type Case struct {
	Seed      uint64
	Kind      ViolationKind
	Ops       []Op // without queries
	Probe     []Query
	Violation Violation // what the shrunk case produces
	From      int       // ops before shrinking
	Replays   int       // serial replays spent
}

// shrinker holds one Shrink's state.
type shrinker struct {
	newIndex func() kv.Index
	rc       runConfig
	kind     ViolationKind
	budget   int
	replays  int
	best     candidate
	got      Violation
}

// candidate is a workload under test: ops, then the probe queries.
type candidate struct {
	ops   []Op
	probe []Query
}

// Shrink reduces a failing workload to a small one that fails the same way
// (same ViolationKind) when replayed serially. ops is the failing run's
// workload and v its first failing violation. It first cuts the ops after
// v.Op and keeps only v's query as the probe, then repeats until nothing
// helps or the replay budget is spent: drop chunks of ops (halving sizes),
// drop every op of one rank or worker, fold one rank onto another, merge
// chained stores, trim blocks off stores and hashes off removals, move
// stores and removed hashes towards the root, and trim the probe. Only engine-valid workloads are tried: every store chains from
// the root or a block its rank holds, and every removal names held blocks.
// Shrink returns nil when the failure does not reproduce serially (a
// mode-only or nondeterministic failure). ops is not modified.
func Shrink(newIndex func() kv.Index, ops []Op, v *Violation, cfg ShrinkConfig) *Case {
	s := &shrinker{
		newIndex: newIndex,
		rc:       runConfig{scope: cfg.ClearScope, allowOvercount: cfg.AllowOvercount, strict: cfg.Strict},
		kind:     v.Kind,
		budget:   cfg.MaxReplays,
	}
	if s.budget <= 0 {
		s.budget = DefaultMaxReplays
	}
	last := min(max(v.Op, 0), len(ops)-1)
	base := candidate{ops: stripQueries(ops[:last+1])}
	if v.Kind != ApplyError {
		base.probe = []Query{v.Query}
	}
	if !s.try(base) {
		// The violation may need the other queries of its op (a concurrent
		// reader's query, say): keep them all.
		base.probe = ops[last].Queries
		if v.Kind == ApplyError || !s.try(base) {
			return nil
		}
	}
	for changed := true; changed && s.replays < s.budget; {
		changed = false
		for _, pass := range []func() bool{s.dropChunks, s.dropMembers, s.foldMembers, s.mergeStores, s.trimEvents, s.trimProbe} {
			if pass() {
				changed = true
			}
		}
	}
	return &Case{
		Seed: cfg.Seed, Kind: v.Kind, Ops: s.best.ops, Probe: s.best.probe,
		Violation: s.got, From: len(ops), Replays: s.replays,
	}
}

func stripQueries(ops []Op) []Op {
	out := slices.Clone(ops)
	for i := range out {
		out[i].Queries = nil
		out[i].Checkpoint = false
	}
	return out
}

// try replays c if it is engine-valid and the budget allows, and keeps it
// as the best case if it fails the same way.
func (s *shrinker) try(c candidate) bool {
	if s.replays >= s.budget || firstInvalid(c.ops, s.rc.scope) >= 0 {
		return false
	}
	s.replays++
	v := s.replay(c)
	if v == nil || v.Kind != s.kind {
		return false
	}
	s.best, s.got = c, *v
	return true
}

// firstInvalid returns the index of the first op that makes ops
// engine-invalid (an empty store, a store below a parent its rank does not
// hold, an empty removal, a removal naming a block its rank does not hold or
// naming one twice), or -1 if ops is engine-valid.
func firstInvalid(ops []Op, scope ClearScope) int {
	m := NewModel(scope)
	for i := range ops {
		op := &ops[i]
		if op.Kind == OpEvent {
			ev := &op.Event
			switch ev.Kind {
			case kv.Stored:
				if len(ev.Blocks) == 0 || (ev.HasParent && !m.Held(ev.Member, ev.Parent)) {
					return i
				}
			case kv.Removed:
				if len(ev.Removed) == 0 {
					return i
				}
				for k, h := range ev.Removed {
					if !m.Held(ev.Member, h) || slices.Contains(ev.Removed[:k], h) {
						return i
					}
				}
			}
		}
		m.Apply(op)
	}
	return -1
}

// replay runs c serially on a fresh index and returns its first failing
// violation.
func (s *shrinker) replay(c candidate) *Violation {
	ix := s.newIndex()
	m := NewModel(s.rc.scope)
	var counts Counters
	for i := range c.ops {
		op := &c.ops[i]
		expect := m.Apply(op)
		if v := judgeApply(expect, op.Apply(ix), op, i, &counts); v != nil && s.rc.fails(v) {
			return v
		}
	}
	return checkQueries(ix, m, c.probe, len(c.ops)-1, &counts, &s.rc)
}

// with returns the best case with its ops replaced.
func (s *shrinker) with(ops []Op) candidate { return candidate{ops: ops, probe: s.best.probe} }

// dropChunks removes runs of ops, halving the run length down to one.
func (s *shrinker) dropChunks() bool {
	changed := false
	for size := len(s.best.ops) / 2; size >= 1; size /= 2 {
		for start := 0; start < len(s.best.ops) && len(s.best.ops) > 1; {
			end := min(start+size, len(s.best.ops))
			if s.try(s.with(slices.Delete(slices.Clone(s.best.ops), start, end))) {
				changed = true
			} else {
				start = end
			}
		}
	}
	return changed
}

// members returns the members the ops touch, in order of appearance.
func members(ops []Op) []kv.Member {
	var out []kv.Member
	for i := range ops {
		if m, ok := ops[i].member(); ok && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// dropMembers removes every op of one member, then of one worker.
func (s *shrinker) dropMembers() bool {
	changed := false
	for _, mem := range members(s.best.ops) {
		changed = s.try(s.with(slices.DeleteFunc(slices.Clone(s.best.ops), func(o Op) bool {
			m, ok := o.member()
			return ok && m == mem
		}))) || changed
	}
	var workers []uint64
	for i := range s.best.ops {
		if w := s.best.ops[i].worker(); !slices.Contains(workers, w) {
			workers = append(workers, w)
		}
	}
	for _, w := range workers {
		changed = s.try(s.with(slices.DeleteFunc(slices.Clone(s.best.ops), func(o Op) bool {
			return o.worker() == w
		}))) || changed
	}
	return changed
}

// foldMembers rewrites every op of one member onto another.
func (s *shrinker) foldMembers() bool {
	changed := false
	for _, from := range members(s.best.ops) {
		for _, to := range members(s.best.ops) {
			if from == to {
				continue
			}
			ops := slices.Clone(s.best.ops)
			for i := range ops {
				switch {
				case ops[i].Kind == OpEvent && ops[i].Event.Member == from:
					ops[i].Event.Member = to
				case ops[i].Kind == OpRemoveMember && ops[i].Member == from:
					ops[i].Member = to
				}
			}
			if s.try(s.with(ops)) {
				changed = true
				break // from no longer appears
			}
		}
	}
	return changed
}

// mergeStores merges a store into the same member's next store when that
// one continues its chain.
func (s *shrinker) mergeStores() bool {
	changed := false
	for i := 0; i < len(s.best.ops); i++ {
		a := &s.best.ops[i]
		if a.Kind != OpEvent || a.Event.Kind != kv.Stored {
			continue
		}
		for j := i + 1; j < len(s.best.ops); j++ {
			b := &s.best.ops[j]
			if mem, ok := b.member(); !ok || mem != a.Event.Member {
				continue
			}
			if b.Kind == OpEvent && b.Event.Kind == kv.Stored && b.Event.HasParent &&
				b.Event.Parent == a.Event.Blocks[len(a.Event.Blocks)-1].External {
				ops := slices.Clone(s.best.ops)
				ops[i].Event.Blocks = slices.Concat(a.Event.Blocks, b.Event.Blocks)
				ops = slices.Delete(ops, j, j+1)
				changed = s.try(s.with(ops)) || changed
			}
			break
		}
	}
	return changed
}

// trimEvents drops the last or first block of stores and single hashes of
// removals, and moves stores and removed hashes towards the root.
func (s *shrinker) trimEvents() bool {
	changed := false
	for i := 0; i < len(s.best.ops); i++ {
		ev := s.best.ops[i].Event
		if s.best.ops[i].Kind != OpEvent {
			continue
		}
		switch ev.Kind {
		case kv.Stored:
			if len(ev.Blocks) > 1 {
				tail := ev
				tail.Blocks = slices.Clip(ev.Blocks[:len(ev.Blocks)-1])
				if s.tryEvent(i, tail) {
					changed = true
					continue
				}
				head := ev
				head.HasParent, head.Parent = true, ev.Blocks[0].External
				head.StartPosition++
				head.Blocks = ev.Blocks[1:]
				if s.tryEvent(i, head) {
					changed = true
					continue
				}
			}
			// Shift the run up by one block (its parent joins it, its last
			// block leaves), so that the stores above can lose their tails.
			for chain := storedChain(s.best.ops[:i]); ev.HasParent; {
				p, ok := chain[ev.Parent]
				if !ok {
					break
				}
				up := ev
				up.HasParent, up.Parent = p.hasParent, p.parent
				up.StartPosition = max(ev.StartPosition, 1) - 1
				up.Blocks = append([]kv.Block{{External: ev.Parent, Local: p.local}}, ev.Blocks[:len(ev.Blocks)-1]...)
				if !s.tryEvent(i, up) {
					break
				}
				changed = true
				ev = up
			}
		case kv.Removed:
			for k := 0; k < len(ev.Removed) && len(ev.Removed) > 1; k++ {
				cut := ev
				cut.Removed = slices.Delete(slices.Clone(ev.Removed), k, k+1)
				if s.tryEvent(i, cut) {
					changed = true
					ev = cut
					k--
				}
			}
			// Move each removed hash to its parent, so that the stores
			// above it can lose their tails.
			chain := storedChain(s.best.ops[:i])
			for k := range ev.Removed {
				for {
					p, ok := chain[ev.Removed[k]]
					if !ok || !p.hasParent {
						break
					}
					up := ev
					up.Removed = slices.Clone(ev.Removed)
					up.Removed[k] = p.parent
					if !s.tryEvent(i, up) {
						break
					}
					changed = true
					ev = up
				}
			}
		}
	}
	return changed
}

// storedBlock is what a store said about one block: its local hash and its
// chain parent.
type storedBlock struct {
	local     uint64
	parent    uint64
	hasParent bool
}

// storedChain maps each external hash stored in ops to its latest store.
func storedChain(ops []Op) map[uint64]storedBlock {
	chain := make(map[uint64]storedBlock)
	for i := range ops {
		ev := &ops[i].Event
		if ops[i].Kind != OpEvent || ev.Kind != kv.Stored {
			continue
		}
		parent, has := ev.Parent, ev.HasParent
		for _, b := range ev.Blocks {
			chain[b.External] = storedBlock{local: b.Local, parent: parent, hasParent: has}
			parent, has = b.External, true
		}
	}
	return chain
}

// tryEvent tries the best case with op i's event replaced by ev.
func (s *shrinker) tryEvent(i int, ev kv.Event) bool {
	ops := slices.Clone(s.best.ops)
	ops[i].Event = ev
	return s.try(s.with(ops))
}

// trimProbe keeps one probe query and drops blocks off its end.
func (s *shrinker) trimProbe() bool {
	changed := false
	for len(s.best.probe) > 1 {
		kept := false
		for _, q := range s.best.probe {
			if s.try(candidate{ops: s.best.ops, probe: []Query{q}}) {
				kept, changed = true, true
				break
			}
		}
		if !kept {
			break
		}
	}
	for len(s.best.probe) == 1 && len(s.best.probe[0].Locals) > 1 {
		q := s.best.probe[0]
		n := len(q.Locals) - 1
		if !s.try(candidate{ops: s.best.ops, probe: []Query{{Locals: q.Locals[:n:n], Chain: q.Chain[:n:n]}}}) {
			break
		}
		changed = true
	}
	return changed
}

// labels names hashes h1, h2, … in order of first appearance.
type labels struct {
	ids   map[uint64]int
	order []uint64
}

func (l *labels) name(h uint64) string {
	id, ok := l.ids[h]
	if !ok {
		l.order = append(l.order, h)
		id = len(l.order)
		l.ids[h] = id
	}
	return fmt.Sprintf("h%d", id)
}

// String lists the case: one numbered line per op with hashes named
// h1, h2, …, the probe with the violation it produces, and the legend of
// the full hash values.
func (c *Case) String() string {
	l := &labels{ids: make(map[uint64]int)}
	var b strings.Builder
	fmt.Fprintf(&b, "shrunk case (seed %d): %d ops, from %d, in %d replays; replay serially, then probe:\n",
		c.Seed, len(c.Ops), c.From, c.Replays)
	for i := range c.Ops {
		fmt.Fprintf(&b, "  %3d  %s\n", i+1, c.Ops[i].format(l))
	}
	for _, q := range c.Probe {
		fmt.Fprintf(&b, "  probe locals %s\n", nameList(l, q.Locals))
	}
	switch v := &c.Violation; v.Kind {
	case ApplyError:
		fmt.Fprintf(&b, "  → %s at op %d: %v\n", v.Kind, v.Op+1, v.Err)
	case Overcount, Undercount:
		fmt.Fprintf(&b, "  → %s: member %s scored %d on locals %s, want %d..%d (reach_len..held_len)\n",
			v.Kind, v.Member, v.Score, nameList(l, v.Query.Locals), v.Reach, v.Held)
	default:
		fmt.Fprintf(&b, "  → %v\n", v)
	}
	b.WriteString("  hashes:")
	for i, h := range l.order {
		fmt.Fprintf(&b, " h%d=%#x", i+1, h)
	}
	return b.String()
}
