package harness

import (
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

func ov(m kv.Member, blocks int) kv.Overlap { return kv.Overlap{Member: m, Blocks: blocks} }

// TestCheck_Verdicts pins every verdict of §3.6 on one model state: member
// m0 holds [1 2 3 4 5] with reach_len 2 (block 3 removed and re-stored),
// m1 holds [1 2] exactly, and m2 is unknown.
func TestCheck_Verdicts(t *testing.T) {
	chain := kv.AppendChain(nil, false, 0, []uint64{1, 2, 3, 4, 5})
	q := Query{Locals: []uint64{1, 2, 3, 4, 5}, Chain: chain}
	m1 := kv.Member{Worker: 1}
	m2 := kv.Member{Worker: 2}
	m := NewModel(ClearRank)
	var all []kv.Block
	for i, h := range chain {
		all = append(all, kv.Block{External: h, Local: q.Locals[i]})
	}
	m.Store(m0, false, 0, all)
	m.Remove(m0, chain[1:2])
	m.Store(m0, true, chain[0], all[1:2])
	m.Store(m1, false, 0, all[:2])
	if held, reach := m.Bounds(m0, chain); held != 5 || reach != 2 {
		t.Fatalf("setup: Bounds(m0) = (%d, %d), want (5, 2)", held, reach)
	}
	cases := []struct {
		name   string
		scores []kv.Overlap
		want   Counters
		kinds  []ViolationKind
	}{
		{"reach_len is a hole", []kv.Overlap{ov(m0, 2), ov(m1, 2)},
			Counters{Queries: 1, MemberChecks: 2, Holes: 1, Exact: 1}, nil},
		{"held_len is exact", []kv.Overlap{ov(m0, 5), ov(m1, 2)},
			Counters{Queries: 1, MemberChecks: 2, Exact: 2}, nil},
		{"hole", []kv.Overlap{ov(m0, 4), ov(m1, 2)},
			Counters{Queries: 1, MemberChecks: 2, Holes: 1, Exact: 1}, nil},
		{"undercount below reach", []kv.Overlap{ov(m0, 1), ov(m1, 2)},
			Counters{Queries: 1, MemberChecks: 2, Undercounts: 1, UndercountBlocks: 1, Exact: 1}, []ViolationKind{Undercount}},
		{"missing member undercounts", []kv.Overlap{ov(m0, 2)},
			Counters{Queries: 1, MemberChecks: 2, Holes: 1, Undercounts: 1, UndercountBlocks: 2}, []ViolationKind{Undercount}},
		{"overcount above held", []kv.Overlap{ov(m0, 2), ov(m1, 4)},
			Counters{Queries: 1, MemberChecks: 2, Holes: 1, Overcounts: 1, OvercountBlocks: 2}, []ViolationKind{Overcount}},
		{"unknown member scoring", []kv.Overlap{ov(m0, 2), ov(m1, 2), ov(m2, 1)},
			Counters{Queries: 1, MemberChecks: 3, Holes: 1, Exact: 1, Overcounts: 1, OvercountBlocks: 1}, []ViolationKind{Overcount}},
		{"duplicate member", []kv.Overlap{ov(m0, 2), ov(m1, 2), ov(m1, 2)},
			Counters{Queries: 1, MemberChecks: 2, Holes: 1, Exact: 1, Malformed: 1}, []ViolationKind{Malformed}},
		{"depth beyond the query", []kv.Overlap{ov(m0, 2), ov(m1, 2), ov(m2, 6)},
			Counters{Queries: 1, MemberChecks: 3, Holes: 1, Exact: 1, Malformed: 1, Overcounts: 1, OvercountBlocks: 6}, []ViolationKind{Malformed, Overcount}},
	}
	for _, c := range cases {
		var got Counters
		vs := Check(&fixedIndex{scores: c.scores}, m, q, &got, nil)
		if got != c.want {
			t.Errorf("%s: Check(%v) counters = %+v, want %+v", c.name, c.scores, got, c.want)
		}
		if len(vs) != len(c.kinds) {
			t.Errorf("%s: Check(%v) = %d violations %v, want kinds %v", c.name, c.scores, len(vs), vs, c.kinds)
			continue
		}
		for i, v := range vs {
			if v.Kind != c.kinds[i] {
				t.Errorf("%s: violation %d is %s, want %s", c.name, i, v.Kind, c.kinds[i])
			}
		}
	}
}

// TestCheck_ViolationFields checks what an undercount violation carries.
func TestCheck_ViolationFields(t *testing.T) {
	q := NewQuery([]uint64{7, 8})
	m := NewModel(ClearRank)
	m.Store(m0, false, 0, []kv.Block{{External: q.Chain[0], Local: 7}, {External: q.Chain[1], Local: 8}})
	vs := Check(&fixedIndex{}, m, q, &Counters{}, nil)
	if len(vs) != 1 {
		t.Fatalf("Check(no scores) = %v, want one undercount", vs)
	}
	v := vs[0]
	if v.Kind != Undercount || v.Member != m0 || v.Score != 0 || v.Held != 2 || v.Reach != 2 || len(v.Query.Locals) != 2 {
		t.Errorf("violation = %+v, want undercount of %s score 0 held 2 reach 2", v, m0)
	}
	if got, want := v.Error(), "harness: op 0: undercount: Match(2 blocks) member 0/0 = 0, want 2..2 (reach_len..held_len)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// detailIndex is a fixedIndex that also reports fixed detailed matches.
type detailIndex struct {
	fixedIndex
	details []Detail
}

func (x *detailIndex) MatchDetails(dst []Detail, _ []uint64) []Detail {
	return append(dst, x.details...)
}

// TestCheck_DetailedMatches: details must list Match's members and depths
// with the chain hash of the last matched block.
func TestCheck_DetailedMatches(t *testing.T) {
	q := NewQuery([]uint64{7, 8})
	m := NewModel(ClearRank)
	m.Store(m0, false, 0, []kv.Block{{External: q.Chain[0], Local: 7}, {External: q.Chain[1], Local: 8}})
	scores := []kv.Overlap{ov(m0, 2)}
	cases := []struct {
		name    string
		details []Detail
		bad     int
	}{
		{"agree", []Detail{{Member: m0, Blocks: 2, Last: q.Chain[1]}}, 0},
		{"wrong last hash", []Detail{{Member: m0, Blocks: 2, Last: q.Chain[0]}}, 1},
		{"wrong depth", []Detail{{Member: m0, Blocks: 1, Last: q.Chain[0]}}, 1},
		{"missing member", nil, 1},
		{"extra member", []Detail{{Member: m0, Blocks: 2, Last: q.Chain[1]}, {Member: kv.Member{Worker: 9}, Blocks: 1, Last: q.Chain[0]}}, 1},
	}
	for _, c := range cases {
		var got Counters
		vs := Check(&detailIndex{fixedIndex{scores: scores}, c.details}, m, q, &got, nil)
		if len(vs) != c.bad || got.DetailMismatches != c.bad || got.DetailChecks != len(c.details) {
			t.Errorf("%s: Check = %v, counters %+v; want %d detail mismatches of %d checks", c.name, vs, got, c.bad, len(c.details))
		}
		for _, v := range vs {
			if v.Kind != DetailMismatch {
				t.Errorf("%s: violation %s, want %s", c.name, v.Kind, DetailMismatch)
			}
		}
	}
}
