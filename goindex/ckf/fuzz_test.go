package ckf

import (
	"errors"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// FuzzProducer_Apply drives a small producer with event streams decoded
// from the fuzzer's bytes (member, kind, parent choice, ids and locals all
// come from the input) and checks it against the exact model after every
// event, and the replica after every drain. No input may panic, break an
// invariant, or make a drained replica diverge.
func FuzzProducer_Apply(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 1, 2, 3})
	f.Add([]byte{0, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 0, 2, 0, 1})
	f.Add([]byte{0, 1, 0, 2, 5, 6, 0, 1, 1, 1, 4, 1, 0, 3, 0, 2, 1, 5, 0, 0, 2, 1, 0, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		fm := mustFormat(t, 4)
		p, err := New(Config{Format: fm, MaxKicks: 3, BatchEvents: 2})
		if err != nil {
			t.Fatal(err)
		}
		md := newModel(false)
		replica := make([]uint64, 4)
		var resident map[uint64]bool
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		for step := 0; len(data) > 0 && step < 200; step++ {
			head := next()
			m := kv.Member{Worker: uint64(head >> 4 & 3)}
			ev := kv.Event{Member: m}
			srcs := slices.Sorted(func(yield func(uint64) bool) {
				for k := range md.lin[m] {
					if !yield(k) {
						return
					}
				}
			})
			pick := func() uint64 { // a mapped id, or an unmapped one
				b := next()
				if int(b) < len(srcs) {
					return srcs[b]
				}
				return uint64(b)
			}
			switch head & 3 {
			case 0, 1:
				ev.Kind = kv.Stored
				if b := next(); b&1 != 0 {
					ev.HasParent, ev.Parent = true, pick()
				} else if b&2 != 0 {
					ev.HasStart, ev.StartPosition = true, uint32(b>>2&1)
				}
				for range next() & 7 {
					ev.Blocks = append(ev.Blocks, kv.Block{External: pick(), Local: uint64(next() & 7)})
				}
			case 2:
				ev.Kind = kv.Removed
				for range next() & 7 {
					ev.Removed = append(ev.Removed, pick())
				}
			case 3:
				ev.Kind = kv.Cleared
			}
			st, err := p.Apply(&ev)
			want := md.apply(&ev)
			if (want != nil && !errors.Is(err, want)) || (want == nil && err != nil && !errors.Is(err, ErrCapacityExhausted)) {
				t.Fatalf("step %d: Apply(%+v) = %v, model says %v", step, ev, err, want)
			}
			resident = checkProducer(t, p, md, resident, step)
			if st == StepPublish {
				checkBatch(t, replica, p, p.Drain(nil), step)
			}
		}
	})
}
