package harness

import (
	"errors"
	"strings"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// TestShrink_NilWhenNotReproducible: a violation the serial replay does not
// reproduce (here: a correct index) is not shrunk.
func TestShrink_NilWhenNotReproducible(t *testing.T) {
	ops := Generate(2, GenConfig{Steps: 100})
	v := &Violation{Kind: Overcount, Op: len(ops) - 1, Member: m0, Query: ops[len(ops)-1].Queries[0]}
	if c := Shrink(newTestIndex(faultNone), ops, v, ShrinkConfig{Strict: true}); c != nil {
		t.Errorf("Shrink(correct index) = %s, want nil", c)
	}
}

// TestShrink_RespectsBudgetAndInput: the replay budget is honoured and the
// input workload is left as it was.
func TestShrink_RespectsBudgetAndInput(t *testing.T) {
	ops := Generate(1, GenConfig{Steps: 400})
	before := make([]string, len(ops))
	for i := range ops {
		before[i] = ops[i].String()
	}
	out := execute(newTestIndex(faultIgnoreRemovals)(), ops, &runConfig{strict: true})
	if out.fail == nil {
		t.Fatalf("ignoring removals did not fail on seed 1")
	}
	c := Shrink(newTestIndex(faultIgnoreRemovals), ops, out.fail, ShrinkConfig{Strict: true, MaxReplays: 3})
	if c == nil || c.Replays > 3 {
		t.Fatalf("Shrink(budget 3) = %v, want a case within 3 replays", c)
	}
	for i := range ops {
		if s := ops[i].String(); s != before[i] {
			t.Fatalf("Shrink modified op %d: %s, was %s", i, s, before[i])
		}
	}
}

// TestCase_StringNamesHashes pins the printed form of a shrunk case.
func TestCase_StringNamesHashes(t *testing.T) {
	q := NewQuery([]uint64{5})
	c := &Case{
		Seed: 9, Kind: Overcount, From: 40, Replays: 12,
		Ops: []Op{
			{Kind: OpEvent, Event: kv.Event{Member: m0, EventID: 1, Kind: kv.Stored, HasStart: true, Blocks: []kv.Block{{External: 5, Local: 5}}}},
			{Kind: OpEvent, Event: kv.Event{Member: m0, EventID: 2, Kind: kv.Removed, Removed: []uint64{5}}},
			{Kind: OpRemoveMember, Member: kv.Member{Worker: 3, Rank: 1}},
			{Kind: OpRemoveWorker, Worker: 4},
		},
		Probe:     []Query{q},
		Violation: Violation{Kind: Overcount, Member: m0, Query: q, Score: 1},
	}
	want := strings.Join([]string{
		"shrunk case (seed 9): 4 ops, from 40, in 12 replays; replay serially, then probe:",
		"    1  stored   0/0 ev 1 root start 0 blocks [h1] locals [h1]",
		"    2  removed  0/0 ev 2 [h1]",
		"    3  remove-member 3/1",
		"    4  remove-worker 4",
		"  probe locals [h1]",
		"  → overcount: member 0/0 scored 1 on locals [h1], want 0..0 (reach_len..held_len)",
		"  hashes: h1=0x5",
	}, "\n")
	if got := c.String(); got != want {
		t.Errorf("Case.String() =\n%s\nwant\n%s", got, want)
	}
	if got := c.Ops[0].String(); !strings.Contains(got, "blocks [0000000000000005]") {
		t.Errorf("Op.String() = %q, want full hexadecimal hashes", got)
	}
}

// TestOp_ApplyRejectsInvalidKind: an Op of no kind is ErrOpKind.
func TestOp_ApplyRejectsInvalidKind(t *testing.T) {
	var op Op
	if err := op.Apply(&fixedIndex{}); !errors.Is(err, ErrOpKind) {
		t.Errorf("Op{}.Apply = %v, want ErrOpKind", err)
	}
	if got := NewModel(ClearRank).Apply(&op); got != MayReject {
		t.Errorf("Model.Apply(Op{}) = %s, want %s", got, MayReject)
	}
}
