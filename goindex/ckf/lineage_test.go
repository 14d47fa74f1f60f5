package ckf

import (
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// TestProducer_LineageRoundTripsThroughRestore exports every member's
// lineage after random streams (aliases, shared blocks, removals, clears)
// and restores it into a new producer, as a relay restoring a checkpoint
// does: the new producer holds exactly the model's mappings and owner
// counts, and every canonical is resident.
func TestProducer_LineageRoundTripsThroughRestore(t *testing.T) {
	seed := testSeed(t, 41)
	for round := range 20 {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		p := newTestProducer(t, 4096, Config{})
		md := newModel(false)
		g := newStreamGen(rng, md)
		for range 200 {
			o := g.next()
			_, _, _ = o.apply(p, md)
		}
		members := p.AppendMembers(nil)
		if len(members) != len(md.lin) {
			t.Fatalf("seed %d round %d: AppendMembers = %d members, model has %d", seed, round, len(members), len(md.lin))
		}
		for i := 1; i < len(members); i++ {
			if !members[i-1].Less(members[i]) {
				t.Errorf("seed %d round %d: AppendMembers not ordered: %v before %v", seed, round, members[i-1], members[i])
			}
		}
		q := newTestProducer(t, 4096, Config{})
		for _, m := range members {
			lin := p.AppendLineage(nil, m)
			got := map[uint64]uint64{}
			for _, mp := range lin {
				got[mp.Source] = mp.Canonical
			}
			if err := q.Restore(m, lin); err != nil {
				t.Fatalf("seed %d round %d: Restore(%v, %d mappings): %v", seed, round, m, len(lin), err)
			}
			if !maps.Equal(got, md.lin[m]) {
				t.Errorf("seed %d round %d: AppendLineage(%v) = %d mappings, differs from the model's %d", seed, round, m, len(got), len(md.lin[m]))
			}
		}
		for _, m := range q.AppendMembers(nil) {
			got := map[uint64]uint64{}
			for _, mp := range q.AppendLineage(nil, m) {
				got[mp.Source] = mp.Canonical
			}
			if !maps.Equal(got, md.lin[m]) {
				t.Errorf("seed %d round %d: restored lineage of %v differs from the model's", seed, round, m)
			}
		}
		owners := md.owners()
		if s := q.Stats(); s.Canonicals != uint64(len(owners)) || s.Resident != s.Canonicals || int(s.Members) != len(md.lin) {
			t.Errorf("seed %d round %d: restored producer %d members, %d canonicals, %d resident; want %d, %d, all resident",
				seed, round, s.Members, s.Canonicals, s.Resident, len(md.lin), len(owners))
		}
		for c, n := range owners {
			if o := q.owners.find(c); o == nil || o.count != n || !o.resident {
				t.Errorf("seed %d round %d: restored owner of %#x = %+v, want count %d, resident", seed, round, c, o, n)
			}
		}
	}
}

// TestProducer_RestoreRefusesWithoutChanging checks that Restore refuses a
// member that maps blocks already and a source block given two canonicals,
// changing nothing, and takes a repeated identical mapping once.
func TestProducer_RestoreRefusesWithoutChanging(t *testing.T) {
	p := newTestProducer(t, 64, Config{})
	mustApply(t, p, rootRun(memberA, 1, 3))
	words, stats := p.AppendWords(nil), p.Stats()
	for name, c := range map[string]struct {
		m  kv.Member
		mp []Mapping
	}{
		"member with blocks": {memberA, []Mapping{{Source: 9, Canonical: 9}}},
		"two canonicals":     {memberB, []Mapping{{Source: 5, Canonical: 50}, {Source: 5, Canonical: 51}}},
	} {
		if err := p.Restore(c.m, c.mp); !errors.Is(err, ErrBadEvent) {
			t.Errorf("Restore(%s) = %v, want ErrBadEvent", name, err)
		}
	}
	if !slices.Equal(p.AppendWords(nil), words) || p.Stats().TrackedBlocks != stats.TrackedBlocks || p.Stats().Members != stats.Members {
		t.Errorf("a refused Restore changed the producer")
	}
	if err := p.Restore(memberB, []Mapping{{Source: 5, Canonical: 50}, {Source: 5, Canonical: 50}}); err != nil {
		t.Fatalf("Restore(repeated mapping): %v", err)
	}
	if got := p.AppendLineage(nil, memberB); len(got) != 1 || got[0] != (Mapping{Source: 5, Canonical: 50}) {
		t.Errorf("AppendLineage(B) after Restore = %v, want the one mapping", got)
	}
}
