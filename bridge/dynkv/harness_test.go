package dynkv

import (
	"testing"

	"github.com/goindex/goindex/goindex/harness"
	"github.com/goindex/goindex/goindex/kv"
)

// storeIndex drives a Store through kv.Index so the differential harness can
// hold the module's semantics against Dynamo's exact model. Removing a member
// retires and resets it (the harness's workers may return under the same id,
// which the module allows only after RESET_WORKER).
type storeIndex struct{ s *Store }

func (x storeIndex) Apply(ev *kv.Event) error {
	e := Event{Rank: Rank{ev.Member.Worker, ev.Member.Rank}, EventID: ev.EventID}
	switch ev.Kind {
	case kv.Stored:
		e.Kind, e.Parent = KindStore, RootParent
		if ev.HasParent {
			e.Parent = ev.Parent
		}
		for _, b := range ev.Blocks {
			e.Blocks = append(e.Blocks, Block{External: b.External, Local: b.Local})
		}
	case kv.Removed:
		e.Kind, e.Hashes = KindRemove, ev.Removed
	case kv.Cleared:
		e.Kind = KindClear
	}
	_, err := x.s.Apply(e)
	return err
}

func (x storeIndex) RemoveMember(m kv.Member) error {
	r := Rank{m.Worker, m.Rank}
	x.s.RemoveWorker(r)
	x.s.ResetWorker(r)
	return nil
}

func (x storeIndex) RemoveWorker(worker uint64) error {
	x.s.mu.RLock()
	var ranks []Rank
	for r := range x.s.ranks {
		if r.Worker == worker {
			ranks = append(ranks, r)
		}
	}
	x.s.mu.RUnlock()
	for _, r := range ranks {
		x.RemoveMember(kv.Member{Worker: r.Worker, Rank: r.DPRank})
	}
	return nil
}

func (x storeIndex) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	for _, e := range x.s.Match(locals) {
		dst = append(dst, kv.Overlap{Member: kv.Member{Worker: e.Rank.Worker, Rank: e.Rank.DPRank}, Blocks: int(e.Matched)})
	}
	return dst
}

// TestStore_WithinHarnessBounds runs the §3.7 randomized workload: the module
// counts contiguous held blocks, so every score must lie in
// [reach_len, held_len] of the reference model, with worker-wide clears.
func TestStore_WithinHarnessBounds(t *testing.T) {
	newIndex := func() kv.Index { return storeIndex{NewStore()} }
	for _, mode := range []harness.Mode{harness.Serial, harness.ConcurrentReaders} {
		rep := harness.Run(t, newIndex, harness.Options{Mode: mode, ClearScope: harness.ClearWorker, Short: testing.Short()})
		if rep.Counters.Queries == 0 {
			t.Errorf("%v: harness checked no queries", mode)
		}
		t.Logf("%v: %s", mode, &rep.Counters)
	}
}
