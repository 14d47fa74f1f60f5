package radix_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
)

// unchanged applies ev, which must fail with want, and checks that the
// index's snapshot, stats and tree sizes did not move.
func unchanged(t *testing.T, x *radix.Index, ev *kv.Event, want error) {
	t.Helper()
	snap, stats, sizes := x.Snapshot(), x.Stats(), fmt.Sprint(x.TreeSizes(nil))
	err := x.Apply(ev)
	if !errors.Is(err, want) {
		t.Errorf("Apply(%+v) = %v, want %v", ev, err, want)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "radix: ") {
		t.Errorf("Apply(%+v) error %q lacks the package prefix", ev, err)
	}
	if diff := snap.Diff(x.Snapshot()); diff != "" {
		t.Errorf("failed Apply(%+v) changed the snapshot: %s", ev, diff)
	}
	if got := x.Stats(); got != stats {
		t.Errorf("failed Apply(%+v) changed Stats: %+v, was %+v", ev, got, stats)
	}
	if got := fmt.Sprint(x.TreeSizes(nil)); got != sizes {
		t.Errorf("failed Apply(%+v) changed TreeSizes: %s, was %s", ev, got, sizes)
	}
}

func TestApply_RejectedEventsChangeNothing(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)), storeEvent(w(1), nil, seq(1, 2)))
	c := chainOf(seq(1, 5))

	unchanged(t, x, nil, radix.ErrInvalidEvent)
	unchanged(t, x, &kv.Event{Member: w(0)}, radix.ErrInvalidEvent)
	unchanged(t, x, &kv.Event{Member: w(0), Kind: kv.Stored, Removed: []uint64{c[0]}}, radix.ErrInvalidEvent)

	// Unknown parent, for a known and for an unknown member (which stays unknown).
	unchanged(t, x, storeEvent(w(1), seq(1, 3), seq(4, 5)), radix.ErrParentNotFound)
	unchanged(t, x, storeEvent(w(9), seq(1, 3), seq(4, 5)), radix.ErrParentNotFound)
	if _, known := x.TreeSize(w(9)); known {
		t.Errorf("TreeSize(%v) known after a rejected store, want unknown", w(9))
	}

	// The parent is one of the blocks; a block is named twice (short and
	// long chains take different checks).
	self := storeEvent(w(0), seq(1, 3), seq(4, 5))
	self.Blocks[1].External = self.Parent
	unchanged(t, x, self, radix.ErrInvalidBlockSequence)
	twice := storeEvent(w(0), nil, seq(1, 4))
	twice.Blocks[3].External = twice.Blocks[1].External
	unchanged(t, x, twice, radix.ErrInvalidBlockSequence)
	long := storeEvent(w(0), nil, seq(1, 40))
	long.Blocks[39].External = long.Blocks[20].External
	unchanged(t, x, long, radix.ErrInvalidBlockSequence)

	// A held hash at a second position; a held position under a second hash.
	moved := storeEvent(w(0), nil, []uint64{7, 8})
	moved.Blocks[1].External = c[2]
	unchanged(t, x, moved, radix.ErrConflictingBlock)
	rekeyed := storeEvent(w(0), nil, seq(1, 4))
	rekeyed.Blocks[2].External = 12345
	unchanged(t, x, rekeyed, radix.ErrConflictingBlock)

	var be *radix.BlockError
	err := x.Apply(rekeyed)
	if !errors.As(err, &be) || be.Member != w(0) || be.Hash != 12345 {
		t.Errorf("Apply(rekeyed) = %v, want *BlockError for member %v hash 12345", err, w(0))
	}

	wantScores(t, x, seq(1, 5), map[kv.Member]int{w(0): 3, w(1): 2})
}

func TestApply_EmptyStoreIsANoOp(t *testing.T) {
	x := radix.New(radix.Config{})
	mustApply(t, x, &kv.Event{Member: w(0), Kind: kv.Stored})
	if _, known := x.TreeSize(w(0)); known {
		t.Errorf("TreeSize(%v) known after an empty store, want unknown", w(0))
	}
}

func TestApply_RemovalWithUnknownHashes(t *testing.T) {
	c := chainOf(seq(1, 3))
	cases := []struct {
		name             string
		cfg              radix.Config
		missing, removed int
		want             map[kv.Member]int
	}{
		// CUR: skip the unknown hash and remove the rest.
		{"continue", radix.Config{}, 2, 2, map[kv.Member]int{w(0): 1}},
		// G2025: stop at the first unknown hash; block 2 (c[1]) stays.
		{"stop", radix.Config{StopAtUnknownRemoval: true}, 1, 1, map[kv.Member]int{w(0): 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := radix.New(tc.cfg)
			mustApply(t, x, storeEvent(w(0), nil, seq(1, 3)))
			err := x.Apply(&kv.Event{Member: w(0), EventID: 7, Kind: kv.Removed, Removed: []uint64{c[2], 999, c[1], 998}})
			var re *radix.RemoveError
			if !errors.As(err, &re) || !errors.Is(err, radix.ErrBlockNotFound) {
				t.Fatalf("Apply(remove) = %v, want a *RemoveError", err)
			}
			if re.First != 999 || re.Missing != tc.missing || re.Removed != tc.removed || re.EventID != 7 {
				t.Errorf("Apply(remove) = %+v, want First 999, Missing %d, Removed %d, event 7", re, tc.missing, tc.removed)
			}
			wantScores(t, x, seq(1, 3), tc.want)
		})
	}
}

func TestApply_MembersWithDifferentExternalHashesShareNodes(t *testing.T) {
	x := radix.New(radix.Config{})
	own := func(m kv.Member, salt uint64) *kv.Event {
		ev := storeEvent(m, nil, seq(1, 3))
		for i := range ev.Blocks {
			ev.Blocks[i].External ^= salt
		}
		return ev
	}
	mustApply(t, x, own(w(0), 0), own(w(1), 0xff00))
	if st := x.Stats(); st.Nodes != 3 || st.Blocks != 6 {
		t.Errorf("Stats() = %+v, want 3 shared nodes and 6 held blocks", st)
	}
	c := chainOf(seq(1, 3))
	for _, d := range x.MatchDetailed(nil, seq(1, 3)) {
		want := c[2]
		if d.Member == w(1) {
			want ^= 0xff00
		}
		if d.Blocks != 3 || d.Last != want {
			t.Errorf("MatchDetailed entry %+v, want 3 blocks ending at %d", d, want)
		}
	}
	// Removing by w1's own hash cuts only w1.
	mustApply(t, x, &kv.Event{Member: w(1), Kind: kv.Removed, Removed: []uint64{c[1] ^ 0xff00}})
	wantScores(t, x, seq(1, 3), map[kv.Member]int{w(0): 3, w(1): 1})
	y := radix.New(radix.Config{})
	for _, ev := range x.Dump() {
		mustApply(t, y, &ev)
	}
	if diff := x.Snapshot().Diff(y.Snapshot()); diff != "" {
		t.Errorf("Snapshot after replay differs: %s", diff)
	}
}
