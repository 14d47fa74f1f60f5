package radix

import (
	"fmt"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// fuzzBytes hands out the fuzzer's bytes, then zeros.
type fuzzBytes struct {
	data []byte
}

func (b *fuzzBytes) next() int {
	if len(b.data) == 0 {
		return 0
	}
	v := b.data[0]
	b.data = b.data[1:]
	return int(v)
}

// path reads a path of 1 to 6 locals over {1, 2, 3}.
func (b *fuzzBytes) path() []uint64 {
	p := make([]uint64, 1+b.next()%6)
	for i := range p {
		p[i] = uint64(1 + b.next()%3)
	}
	return p
}

// FuzzIndex_MatchesModel drives the index and the reference model with an
// operation stream decoded from arbitrary bytes and requires exact scores,
// intact invariants and a faithful Dump after every step.
func FuzzIndex_MatchesModel(f *testing.F) {
	f.Add([]byte{0, 0, 2, 0, 1, 2, 0, 3, 4, 1, 2, 0, 1})
	f.Add([]byte{1, 0, 0, 5, 0, 1, 2, 0, 1, 2, 0, 5, 4, 0, 5, 0, 1, 2, 0, 1, 2, 2, 7, 0, 1})
	f.Add([]byte{2, 1, 1, 3, 0, 1, 2, 2, 0, 3, 4, 1, 1, 2, 1, 6, 3, 1, 0, 2, 5, 1, 0})
	// shrunk-5 in this encoding: store [1,2,3]; store [1]→[4]; remove [1];
	// store [1,2]; remove chain positions 2, 1.
	f.Add([]byte{0, 0, 0, 2, 0, 1, 2, 0, 3, 0, 0, 1, 0, 3, 1, 2, 4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 2, 4, 0, 2, 2, 0, 1, 2, 2, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &fuzzBytes{data: data}
		flags := b.next()
		cfg := Config{ClearScope: ClearScope(flags & 1), StopAtUnknownRemoval: flags&2 != 0}
		d := newDriver(t, cfg, fmt.Sprintf("fuzz %x", data))
		ms := members(2, 2)
		for step := 0; step < 48 && len(b.data) > 0; step++ {
			m := ms[b.next()%len(ms)]
			p := b.path()
			switch op := b.next() % 8; op {
			case 0, 1, 2:
				i := b.next() % len(p)
				j := i + 1 + b.next()%(len(p)-i)
				d.store(m, p, i, j)
			case 3, 4:
				c := kv.AppendChain(nil, false, 0, p)
				hs := []uint64{c[b.next()%len(c)]}
				if b.next()%2 == 1 {
					hs = append(hs, c[b.next()%len(c)])
				}
				d.remove(m, hs)
			case 5:
				d.clear(m)
			case 6:
				if b.next()%2 == 0 {
					d.removeMember(m)
				} else {
					d.removeWorker(m.Worker)
				}
			default:
				d.checkCompact()
			}
			d.verify(p)
			d.verify(b.path())
		}
		d.checkInvariants()
		d.checkReplay([][]uint64{{1, 2, 3, 1, 2, 3}, {1, 1, 1}, {2, 3}})
	})
}
