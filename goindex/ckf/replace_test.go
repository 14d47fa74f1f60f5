package ckf

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// dumpOf turns root runs of a member into a Dynamo-style dump: one Stored
// event per block, parents first.
func dumpOf(m kv.Member, runs []kv.Event) RankDump {
	d := RankDump{Member: m}
	for _, ev := range runs {
		for i, b := range ev.Blocks {
			one := kv.Event{Member: m, Kind: kv.Stored, Blocks: []kv.Block{b}}
			if i > 0 {
				one.HasParent, one.Parent = true, ev.Blocks[i-1].External
			}
			d.Events = append(d.Events, one)
		}
	}
	return d
}

func TestProducer_ReplaceRanksRebuildsFromRetainedLineagesAndDumps(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t, 31), 0))
	p := newTestProducer(t, 256, Config{})
	md := newModel(false)
	members := []kv.Member{memberA, memberB, {Worker: 3, Rank: 1}}
	for range 60 {
		ev := rootRun(members[rng.IntN(3)], 1+rng.Uint64N(30), 1+rng.IntN(5))
		mustApply(t, p, ev)
		md.apply(&ev)
	}
	replica := p.AppendWords(nil)
	p.Drain(nil)
	// Member A lost events: its true state is now two runs, one new.
	truth := []kv.Event{rootRun(memberA, 2, 3), rootRun(memberA, 500, 4)}
	st, err := p.ReplaceRanks([]RankDump{dumpOf(memberA, truth), {Member: kv.Member{Worker: 9}}})
	if err != nil || st != StepPublish {
		t.Fatalf("ReplaceRanks = %v, %v; want publish, nil", st, err)
	}
	delete(md.lin, memberA)
	for _, ev := range truth {
		md.apply(&ev)
	}
	checkProducer(t, p, md, nil, 0)
	for c, o := range p.owners.all() {
		if !o.resident {
			t.Errorf("after ReplaceRanks canonical %#x is not resident, want every block admitted at this load", c)
		}
	}
	checkBatch(t, replica, p, p.Drain(nil), 0)
}

func TestProducer_FailedReplaceRanksChangesNothing(t *testing.T) {
	p := newTestProducer(t, 64, Config{})
	mustApply(t, p, rootRun(memberA, 1, 4))
	mustApply(t, p, rootRun(memberB, 7, 2))
	words, stats, dirty := p.AppendWords(nil), p.Stats(), p.DirtyBuckets()
	bad := []struct {
		name  string
		dumps []RankDump
		want  error
	}{
		{"missing parent", []RankDump{{Member: memberA, Events: []kv.Event{
			{Member: memberA, Kind: kv.Stored, HasParent: true, Parent: 0xDEAD, Blocks: []kv.Block{{External: 1, Local: 1}}}}}}, ErrParentBlockNotFound},
		{"removal in dump", []RankDump{{Member: memberA, Events: []kv.Event{removal(memberA, 1)}}}, ErrBadEvent},
		{"other member's event", []RankDump{{Member: memberA, Events: []kv.Event{rootRun(memberB, 1, 1)}}}, ErrBadEvent},
		{"member twice", []RankDump{{Member: memberA}, {Member: memberA}}, ErrBadEvent},
		{"remap", []RankDump{{Member: memberA, Events: []kv.Event{rootRun(memberA, 1, 2),
			{Member: memberA, Kind: kv.Stored, Blocks: []kv.Block{{External: rootRun(memberA, 1, 2).Blocks[1].External, Local: 99}}}}}}, ErrInvalidBlockSequence},
	}
	for _, b := range bad {
		if _, err := p.ReplaceRanks(b.dumps); !errors.Is(err, b.want) {
			t.Errorf("ReplaceRanks(%s) = %v, want %v", b.name, err, b.want)
		}
		if !slices.Equal(words, p.AppendWords(nil)) || p.Stats() != stats || p.DirtyBuckets() != dirty {
			t.Errorf("failed ReplaceRanks(%s) changed the producer", b.name)
		}
	}
}
