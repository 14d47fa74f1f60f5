package ckf

import (
	"unsafe"

	"github.com/goindex/goindex/goindex/kv"
)

// A batch is applied in chunks of events: a chunk ends at the event that
// brings it to batchChunkBlocks blocks, or at batchChunkEvents events.
// While chunk k is applied, the owner and filter lines of chunk k+1 and
// the lineage lines of chunk k+2 are prefetched, spread over its events.
// 32 blocks measured best at 16 × 2.1M blocks (BenchmarkIngest
// impl=batch): 16 and 64 gained less, 128 and 512 nothing.
const (
	batchChunkBlocks = 32
	batchChunkEvents = 8
)

// prep is what the look-ahead computed for one event of a chunk: a hint,
// used only when it still holds when the event is applied.
type prep struct {
	off, n int    // its range in chunkScratch.canon and .probes
	prev   uint64 // Stored with a parent: the parent's canonical the chain starts from
	ok     bool   // Stored: the chain and probes were computed (from prev); Removed: canon and probes were looked up
}

// chunkScratch holds the look-ahead of one chunk: per Stored event the
// chain and probe of each block, per Removed event the canonical each id
// mapped to (0 and the zero Probe if none) and its probe.
type chunkScratch struct {
	preps  []prep
	canon  []uint64
	probes []Probe
}

// batchScratch is ApplyBatch's reusable memory: two chunks' look-ahead
// (the one being applied and the next) and the addresses to prefetch.
type batchScratch struct {
	chunks [2]chunkScratch
	addrs  []uintptr // lines to prefetch while the current chunk is applied
}

// ApplyBatch applies evs in order with exactly the results of calling
// Apply on each in turn, and calls each(i, step, err) right after event i
// with what Apply would have returned for it. The caller drains there when
// step is StepPublish, so publication boundaries fall where they would
// one event at a time, and each may call any method of the producer.
// evs must not change during the call.
//
// Ahead of applying events it computes the addresses of their lineage,
// owner, filter and dirty-index lines and prefetches them, so that the
// cache misses of many events overlap the work of earlier ones
// (BenchmarkIngest impl=batch against impl=presized).
func (p *Producer) ApplyBatch(evs []kv.Event, each func(i int, step Step, err error)) {
	bs := &p.batch
	end1 := p.chunkEnd(evs, 0)
	end2 := p.chunkEnd(evs, end1)
	bs.addrs = bs.addrs[:0]
	p.lineageLines(evs[:end2])
	prefetchLines(bs.addrs)
	bs.addrs = bs.addrs[:0]
	p.prepare(&bs.chunks[0], evs[:end1])
	prefetchLines(bs.addrs)
	for start, k := 0, 0; start < len(evs); k++ {
		end := end1
		end1, end2 = end2, p.chunkEnd(evs, end2)
		cur := &bs.chunks[k&1]
		bs.addrs = bs.addrs[:0]
		p.prepare(&bs.chunks[(k+1)&1], evs[end:end1])
		p.lineageLines(evs[end1:end2])
		sent := 0 // bs.addrs[:sent] are prefetched
		for i := start; i < end; i++ {
			// Spread the prefetches over the chunk's events: a burst
			// would wait for free miss buffers instead of working.
			q := sent + (len(bs.addrs)-sent+end-i-1)/(end-i)
			prefetchLines(bs.addrs[sent:q])
			sent = q
			step, err := p.apply(&evs[i], &cur.preps[i-start], cur)
			each(i, step, err)
		}
		start = end
	}
}

// chunkEnd returns the end of the chunk of evs that starts at from.
func (p *Producer) chunkEnd(evs []kv.Event, from int) int {
	blocks, i := 0, from
	for i < len(evs) && i-from < batchChunkEvents && blocks < batchChunkBlocks {
		blocks += len(evs[i].Blocks) + len(evs[i].Removed)
		i++
	}
	return i
}

// lineageLines appends to the batch's addresses the lineage home slot of
// every block id of evs (and of each Stored event's parent) whose member
// exists now.
func (p *Producer) lineageLines(evs []kv.Event) {
	addrs := p.batch.addrs
	for i := range evs {
		ev := &evs[i]
		lin := p.members[ev.Member]
		if lin == nil {
			continue
		}
		switch ev.Kind {
		case kv.Stored:
			if ev.HasParent {
				addrs = append(addrs, lin.addr(ev.Parent))
			}
			for _, b := range ev.Blocks {
				addrs = append(addrs, lin.addr(b.External))
			}
		case kv.Removed:
			for _, src := range ev.Removed {
				addrs = append(addrs, lin.addr(src))
			}
		}
	}
	p.batch.addrs = addrs
}

// prepare computes the look-ahead of every event of evs into cs, from the
// state as it is now, and prefetches their owner and filter lines: a
// Stored event's chain and probes (when its parent is known now), a
// Removed event's current canonicals and their probes; it appends their
// owner, filter and dirty-index lines (bucket A's) to the batch's
// addresses.
func (p *Producer) prepare(cs *chunkScratch, evs []kv.Event) {
	cs.preps, cs.canon, cs.probes = cs.preps[:0], cs.canon[:0], cs.probes[:0]
	addrs := p.batch.addrs
	for i := range evs {
		ev := &evs[i]
		pr := prep{off: len(cs.canon)}
		lin := p.members[ev.Member]
		switch ev.Kind {
		case kv.Stored:
			chained := ev.HasParent
			if chained {
				var c *uint64
				if lin != nil {
					c = lin.find(ev.Parent)
				}
				if c == nil {
					break
				}
				pr.prev = *c
			}
			prev := pr.prev
			for _, b := range ev.Blocks {
				c := b.Local
				if chained {
					c = kv.ChainHash(prev, b.Local)
				}
				prev, chained = c, true
				probe := p.f.primary(c)
				cs.canon = append(cs.canon, c)
				cs.probes = append(cs.probes, probe)
				addrs = append(addrs, p.owners.addr(c), p.tab.addr(probe.A), p.win.addr(probe.A))
			}
			pr.ok = true
		case kv.Removed:
			if lin == nil {
				break
			}
			for _, src := range ev.Removed {
				var c uint64
				var probe Probe
				if v := lin.find(src); v != nil {
					c, probe = *v, p.f.primary(*v)
					addrs = append(addrs, p.owners.addr(c), p.tab.addr(probe.A), p.win.addr(probe.A))
				}
				cs.canon = append(cs.canon, c)
				cs.probes = append(cs.probes, probe)
			}
			pr.ok = true
		}
		pr.n = len(cs.canon) - pr.off
		cs.preps = append(cs.preps, pr)
	}
	p.batch.addrs = addrs
}

// addr returns the address of key's home slot, for prefetchLines.
func (m *flatMap[V]) addr(key uint64) uintptr {
	return uintptr(unsafe.Pointer(&m.slots[m.home(key)]))
}

// addr returns the address of bucket b's entry index in the dirty window,
// for prefetchLines (its dirty bit shares a line with 511 neighbours').
func (w *window) addr(b uint32) uintptr { return uintptr(unsafe.Pointer(&w.at[b])) }

// addr returns the address of bucket b's word, for prefetchLines.
func (t *table) addr(b uint32) uintptr { return uintptr(unsafe.Pointer(&t.words[b])) }
