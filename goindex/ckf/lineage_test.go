package ckf

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// TestProducer_LineageRoundTripsThroughRootStores exports every member's
// lineage after random streams (aliases, shared blocks, removals, clears)
// and applies it to a new producer as one-block root stores, as a relay
// restoring a checkpoint does: the new producer holds exactly the model's
// mappings and owner counts, and every canonical is resident.
func TestProducer_LineageRoundTripsThroughRootStores(t *testing.T) {
	seed := testSeed(t, 41)
	for round := range 20 {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		p := newTestProducer(t, 4096, Config{})
		md := newModel(false)
		g := &streamGen{rng: rng, md: md}
		for w := range uint64(3) {
			for r := range uint32(2) {
				g.members = append(g.members, kv.Member{Worker: 10 + w, Rank: r})
			}
		}
		for range 200 {
			o := g.next()
			switch o.lifecycle {
			case 0:
				_, _ = p.Apply(&o.ev)
				_ = md.apply(&o.ev)
			case 1:
				_, _ = p.RemoveMember(o.ev.Member)
				delete(md.lin, o.ev.Member)
			case 2:
				_, _ = p.RemoveWorker(o.ev.Member.Worker)
				md.removeWorker(o.ev.Member.Worker)
			}
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
				ev := kv.Event{Member: m, Kind: kv.Stored, Blocks: []kv.Block{{External: mp.Source, Local: mp.Canonical}}}
				if _, err := q.Apply(&ev); err != nil {
					t.Fatalf("seed %d round %d: restore %v %#x→%#x: %v", seed, round, m, mp.Source, mp.Canonical, err)
				}
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
