package radix

import (
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

func TestMatch_DoesNotAllocate(t *testing.T) {
	for _, n := range []int{16, 100} { // 100 members puts slots 64.. in wide sets
		x := New(Config{})
		q := make([]uint64, 64)
		for i := range q {
			q[i] = uint64(i + 1)
		}
		c := kv.AppendChain(nil, false, 0, q)
		for m := range n {
			depth := 1 + m%len(q)
			ev := &kv.Event{Member: kv.Member{Worker: uint64(m)}, Kind: kv.Stored}
			for i := range depth {
				ev.Blocks = append(ev.Blocks, kv.Block{External: c[i], Local: q[i]})
			}
			if err := x.Apply(ev); err != nil {
				t.Fatalf("setup Apply: %v", err)
			}
		}
		dst := make([]kv.Overlap, 0, n)
		if allocs := testing.AllocsPerRun(100, func() { dst = x.Match(dst[:0], q) }); allocs != 0 {
			t.Errorf("Match(members=%d, blocks=%d) allocated %.1f times per call, want 0", n, len(q), allocs)
		}
		if len(dst) != n {
			t.Errorf("Match(members=%d) returned %d overlaps, want %d", n, len(dst), n)
		}
	}
}
