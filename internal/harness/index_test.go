package harness

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// fault selects one deliberate bug of testIndex.
type fault uint8

const (
	faultNone            fault = iota
	faultIgnoreRemovals        // removals are acknowledged and ignored: overcounts
	faultDropLastBlock         // multi-block stores lose their last block: undercounts
	faultClearWorker           // cleared empties the whole worker: undercounts on sibling ranks
	faultRejectDuplicate       // a store of blocks all held already is an error: apply errors
	faultHeldScores            // scores held_len instead of reach_len: holes, still correct
	faultFalsePositive         // some members score one block too many: a probabilistic index
	faultDuplicateMember       // Match reports every member twice: malformed
)

// errTestParent is testIndex's ParentBlockNotFound.
var errTestParent = errors.New("testindex: parent not found")

// testIndex is a deliberately simple exact index for testing the harness:
// its own Model behind a mutex, scoring each member's reach_len. It rejects
// stores below a parent that is not reachable and reports removals of
// blocks it does not hold, as an engine would. A fault turns it into a
// broken variant.
type testIndex struct {
	mu    sync.RWMutex
	fault fault
	m     *Model
}

func newTestIndex(f fault) func() kv.Index {
	return func() kv.Index {
		scope := ClearRank
		if f == faultClearWorker {
			scope = ClearWorker
		}
		return &testIndex{fault: f, m: NewModel(scope)}
	}
}

func (x *testIndex) Apply(ev *kv.Event) error {
	if err := ev.Validate(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	switch ev.Kind {
	case kv.Stored:
		parentKnown := x.m.Reachable(ev.Member, ev.Parent)
		if x.fault == faultHeldScores {
			// Like dynkv, accept a store below any held parent.
			parentKnown = x.m.Held(ev.Member, ev.Parent)
		}
		if ev.HasParent && !parentKnown {
			return fmt.Errorf("store %s below %#x: %w", ev.Member, ev.Parent, errTestParent)
		}
		bl := ev.Blocks
		if x.fault == faultDropLastBlock && len(bl) > 1 {
			bl = bl[:len(bl)-1]
		}
		dup := true
		for _, b := range bl {
			dup = dup && x.m.Held(ev.Member, b.External)
		}
		if x.fault == faultRejectDuplicate && dup {
			return fmt.Errorf("testindex: duplicate store of %d blocks", len(bl))
		}
		x.m.Store(ev.Member, ev.HasParent, ev.Parent, bl)
	case kv.Removed:
		if x.fault == faultIgnoreRemovals {
			return nil
		}
		var missing error
		for _, h := range ev.Removed {
			if !x.m.Held(ev.Member, h) && missing == nil {
				missing = fmt.Errorf("testindex: remove %#x: block not found", h)
			}
		}
		x.m.Remove(ev.Member, ev.Removed)
		return missing
	case kv.Cleared:
		x.m.Clear(ev.Member)
	}
	return nil
}

func (x *testIndex) RemoveMember(m kv.Member) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.m.RemoveMember(m)
	return nil
}

func (x *testIndex) RemoveWorker(w uint64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.m.RemoveWorker(w)
	return nil
}

func (x *testIndex) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	chain := kv.AppendChain(nil, false, 0, locals)
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, mem := range x.m.Members() {
		held, score := x.m.Bounds(mem, chain)
		switch x.fault {
		case faultHeldScores:
			score = held
		case faultFalsePositive:
			if score < len(chain) && mix(chain[score]^mem.Worker<<8^uint64(mem.Rank))%100 < 3 {
				score++
			}
		}
		if score > 0 {
			dst = append(dst, kv.Overlap{Member: mem, Blocks: score})
			if x.fault == faultDuplicateMember {
				dst = append(dst, kv.Overlap{Member: mem, Blocks: score})
			}
		}
	}
	return dst
}

// recorder is a TB that records failures instead of failing the test, so
// that tests can assert that a broken index is caught.
type recorder struct {
	t      *testing.T
	logs   int
	errors []string
	fatal  string
}

func (r *recorder) Helper() {}

func (r *recorder) Logf(format string, args ...any) {
	r.logs++
	r.t.Logf(format, args...)
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

// fixedIndex answers every Match with the same overlaps; its mutations do
// nothing.
type fixedIndex struct {
	scores []kv.Overlap
	err    error
}

func (x *fixedIndex) Apply(*kv.Event) error { return x.err }

func (x *fixedIndex) RemoveMember(kv.Member) error { return x.err }

func (x *fixedIndex) RemoveWorker(uint64) error { return x.err }

func (x *fixedIndex) Match(dst []kv.Overlap, _ []uint64) []kv.Overlap {
	return append(dst, x.scores...)
}
