package ckfindex

import (
	"errors"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

func store(m kv.Member, locals ...uint64) *kv.Event {
	chain := kv.AppendChain(nil, false, 0, locals)
	ev := &kv.Event{Member: m, Kind: kv.Stored}
	for i, l := range locals {
		ev.Blocks = append(ev.Blocks, kv.Block{External: chain[i], Local: l})
	}
	return ev
}

func depthOf(x *Index, m kv.Member, locals ...uint64) int {
	for _, o := range x.Match(nil, locals) {
		if o.Member == m {
			return o.Blocks
		}
	}
	return 0
}

func mustNew(t *testing.T, cfg Config) *Index {
	t.Helper()
	x, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return x
}

func TestIndex_LanesAreFreedAndReused(t *testing.T) {
	x := mustNew(t, Config{Lanes: 2, ExpectedBlocksPerLane: 64})
	for w := uint64(1); w <= 100; w++ {
		m := kv.Member{Worker: w}
		if err := x.Apply(store(m, 1, 2, 3)); err != nil {
			t.Fatalf("store for member %v: %v", m, err)
		}
		if d := depthOf(x, m, 1, 2, 3); d != 3 {
			t.Fatalf("member %v depth = %d, want 3", m, d)
		}
		if err := x.RemoveWorker(w); err != nil {
			t.Fatalf("RemoveWorker(%d): %v", w, err)
		}
		if d := depthOf(x, m, 1, 2, 3); d != 0 {
			t.Fatalf("removed member %v depth = %d, want 0", m, d)
		}
	}
	if st := x.Stats(); st.Members != 0 || st.ReadyLanes != 0 || st.TrackedBlocks != 0 {
		t.Errorf("after all removals Stats = %+v, want empty", st)
	}
}

func TestIndex_NoFreeLaneChangesNothing(t *testing.T) {
	x := mustNew(t, Config{Lanes: 1, ExpectedBlocksPerLane: 64})
	a, b := kv.Member{Worker: 1}, kv.Member{Worker: 2}
	if err := x.Apply(store(a, 1)); err != nil {
		t.Fatalf("store a: %v", err)
	}
	if err := x.Apply(store(b, 1)); !errors.Is(err, ErrNoFreeLane) {
		t.Errorf("store b with no free lane: err = %v, want ErrNoFreeLane", err)
	}
	if got := x.Match(nil, []uint64{1}); len(got) != 1 || got[0].Member != a {
		t.Errorf("Match = %+v, want only member a", got)
	}
	// A removal for a member that holds nothing changes nothing and says
	// its blocks were unknown, as the radix tree does.
	var re *RemoveError
	if err := x.Apply(&kv.Event{Member: b, Kind: kv.Removed, Removed: []uint64{1}}); !errors.As(err, &re) || re.Missing != 1 || re.Removed != 0 {
		t.Errorf("remove for an unknown member = %v, want a RemoveError of 1 unknown block", err)
	}
}

// A removal naming blocks the member never stored removes the known ones
// and returns ErrBlockNotFound with the counts; one of known blocks only
// returns nil.
func TestIndex_RemovalOfUnknownBlocksIsErrBlockNotFound(t *testing.T) {
	x := mustNew(t, Config{Lanes: 2, ExpectedBlocksPerLane: 64})
	a := kv.Member{Worker: 1}
	if err := x.Apply(store(a, 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	err := x.Apply(&kv.Event{Member: a, Kind: kv.Removed, Removed: []uint64{kv.AppendChain(nil, false, 0, []uint64{1, 2, 3})[2], 99}})
	var re *RemoveError
	if !errors.Is(err, ErrBlockNotFound) || !errors.As(err, &re) || re.Missing != 1 || re.Removed != 1 || re.Member != a {
		t.Errorf("remove [block 3, 99] = %v, want ErrBlockNotFound with 1 unknown and 1 removed", err)
	}
	if d := depthOf(x, a, 1, 2, 3); d != 2 {
		t.Errorf("depth after removing block 3 = %d, want 2 (the known block was removed)", d)
	}
	if err := x.Apply(&kv.Event{Member: a, Kind: kv.Removed, Removed: []uint64{kv.AppendChain(nil, false, 0, []uint64{1, 2, 3})[1]}}); err != nil {
		t.Errorf("remove of a held block = %v, want nil", err)
	}
}

func TestIndex_ClearScopes(t *testing.T) {
	for _, c := range []struct {
		scope ClearScope
		want  int // rank 1's depth after rank 0's clear
	}{{ClearRank, 2}, {ClearWorker, 0}} {
		x := mustNew(t, Config{Lanes: 4, ExpectedBlocksPerLane: 64, ClearScope: c.scope})
		r0, r1 := kv.Member{Worker: 7, Rank: 0}, kv.Member{Worker: 7, Rank: 1}
		x.Apply(store(r0, 1, 2))
		x.Apply(store(r1, 1, 2))
		if err := x.Apply(&kv.Event{Member: r0, Kind: kv.Cleared}); err != nil {
			t.Fatalf("clear: %v", err)
		}
		if d0, d1 := depthOf(x, r0, 1, 2), depthOf(x, r1, 1, 2); d0 != 0 || d1 != c.want {
			t.Errorf("scope %d: depths after clear = %d, %d; want 0, %d", c.scope, d0, d1, c.want)
		}
	}
}

func TestIndex_CapacityOmissionIsTrackedNotLost(t *testing.T) {
	x := mustNew(t, Config{Lanes: 1, ExpectedBlocksPerLane: 1}) // 2 buckets = 8 slots
	m := kv.Member{Worker: 1}
	locals := make([]uint64, 12)
	for i := range locals {
		locals[i] = uint64(i + 100)
	}
	err := x.Apply(store(m, locals...))
	if !IsCapacity(err) {
		t.Fatalf("storing 12 blocks in 8 slots: err = %v, want capacity exhausted", err)
	}
	st := x.Stats()
	if st.TrackedBlocks != 12 || st.Resident != 8 || st.CapacityOmissions != 4 {
		t.Errorf("Stats = %+v, want 12 tracked, 8 resident, 4 omitted", st)
	}
	if d := depthOf(x, m, locals...); d != 8 {
		t.Errorf("depth = %d, want the 8 admitted leading blocks", d)
	}
}

func TestIndex_MatchDoesNotAllocate(t *testing.T) {
	x := mustNew(t, Config{Lanes: 16, ExpectedBlocksPerLane: 1024})
	locals := make([]uint64, 64)
	for i := range locals {
		locals[i] = uint64(i)
	}
	for w := uint64(0); w < 16; w++ {
		x.Apply(store(kv.Member{Worker: w}, locals[:w+1]...))
	}
	dst := make([]kv.Overlap, 0, 16)
	x.Match(dst, locals) // warm the scratch
	if n := testing.AllocsPerRun(100, func() { dst = x.Match(dst[:0], locals) }); n != 0 && !raceEnabled {
		t.Errorf("Match allocates %v times per call, want 0", n)
	}
	if len(dst) != 16 {
		t.Errorf("Match found %d members, want 16", len(dst))
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Lanes: 65}, {Lanes: -1}, {ClearScope: 9}, {MaxKicks: 5000}, {ExpectedBlocksPerLane: 1 << 40}} {
		if _, err := New(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(%+v) err = %v, want ErrBadConfig", cfg, err)
		}
	}
}
