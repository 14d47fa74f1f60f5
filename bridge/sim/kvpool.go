package sim

import (
	"container/list"
	"maps"
	"slices"

	"github.com/goindex/goindex/goindex/kv"
)

// kvPool is one worker's paged KV memory with automatic prefix caching, the
// model of vLLM's block manager (docs.vllm.ai, "Automatic Prefix Caching"
// design: a block is cached under the hash of its prefix; a block held by
// a running request is pinned; an unpinned cached block stays reusable
// until its memory is needed, and then the least recently freed one goes
// first).
//
// Memory: Capacity blocks in all, shared by
//   - registered blocks: prompt blocks whose KV is computed, known by
//     their sequence hash (the engine's external block hash) and reported
//     with Stored events. A registered block is pinned while any running
//     request holds it (refs > 0) and evictable otherwise; the evictable
//     ones form an LRU list;
//   - private blocks: memory a running request holds that no other request
//     can hit: prompt blocks admitted but not computed yet, and the blocks
//     of generated tokens (their contents are not in the trace, so no
//     later prompt can match them).
//
// private + registered ≤ Capacity always holds; allocating evicts
// evictable blocks, oldest first, and reports them in one Removed event.
//
// Eviction order: a request frees its blocks tail first, so a block is
// never freed after its parent, and a block is never pinned without its
// parent (a request holds its whole prefix). So the oldest evictable block
// never has a registered child: evictions go leaf-first and no Removed
// event strands a cached block under a removed parent, the rule Dynamo's
// indexers (and goindex's relay) rely on.
type kvPool struct {
	member   kv.Member
	capacity int
	byHash   map[uint64]int32 // registered blocks: sequence hash → slot
	slots    []poolSlot
	free     []int32
	lru      list.List // evictable slots (int32), the least recently freed first
	private  int       // private blocks held
	pinned   int       // registered blocks with refs > 0
	nextID   uint64
	removed  []uint64 // scratch: the hashes one call evicts
}

type poolSlot struct {
	hash, local uint64
	refs        int32
	evictable   *list.Element // in lru while refs is 0
}

func newKVPool(member kv.Member, capacity int) *kvPool {
	return &kvPool{member: member, capacity: capacity, byHash: make(map[uint64]int32)}
}

// clone returns a deep copy of p: the same blocks, pins, LRU order and
// event ids, sharing no memory with p, so either evolves without the
// other.
func (p *kvPool) clone() *kvPool {
	c := &kvPool{member: p.member, capacity: p.capacity, byHash: maps.Clone(p.byHash), slots: slices.Clone(p.slots),
		free: slices.Clone(p.free), private: p.private, pinned: p.pinned, nextID: p.nextID}
	for e := p.lru.Front(); e != nil; e = e.Next() {
		i := e.Value.(int32)
		c.slots[i].evictable = c.lru.PushBack(i)
	}
	return c
}

// cached is the number of registered blocks (pinned or evictable): what the
// worker reports as cached.
func (p *kvPool) cached() int { return len(p.byHash) }

// held is the blocks running requests hold: private plus pinned.
func (p *kvPool) held() int { return p.private + p.pinned }

// allocatable is the blocks a new allocation may take: empty memory plus
// evictable cached blocks.
func (p *kvPool) allocatable() int { return p.capacity - p.held() }

// match returns how many leading blocks of seqs are registered, without
// touching them.
func (p *kvPool) match(seqs []uint64) int {
	for i, h := range seqs {
		if _, ok := p.byHash[h]; !ok {
			return i
		}
	}
	return len(seqs)
}

// admitCost returns the blocks an admission of a request holding need
// blocks, the first hit of them registered, takes from allocatable memory:
// its private blocks plus the hit blocks that are evictable now (pinning
// them takes them out of the evictable set).
func (p *kvPool) admitCost(seqs []uint64, hit, need int) int {
	cost := need - hit
	for _, h := range seqs[:hit] {
		if p.slots[p.byHash[h]].refs == 0 {
			cost++
		}
	}
	return cost
}

// admit pins the first hit blocks of seqs (all registered) and allocates
// need − hit private blocks, evicting as needed. It appends to dst the
// Removed event of any eviction. The caller has checked admitCost against
// allocatable, or admits a lone request (need ≤ capacity).
func (p *kvPool) admit(dst []kv.Event, seqs []uint64, hit, need int) []kv.Event {
	for _, h := range seqs[:hit] {
		p.pin(p.byHash[h])
	}
	return p.grow(dst, need-hit)
}

// grow allocates n private blocks, evicting the oldest evictable blocks
// while memory is short, and appends their Removed event to dst.
func (p *kvPool) grow(dst []kv.Event, n int) []kv.Event {
	p.private += n
	p.removed = p.removed[:0]
	for p.private+len(p.byHash) > p.capacity {
		e := p.lru.Front()
		if e == nil {
			break // nothing evictable: the caller admitted a request alone past the capacity check
		}
		oldest := p.lru.Remove(e).(int32)
		p.removed = append(p.removed, p.slots[oldest].hash)
		delete(p.byHash, p.slots[oldest].hash)
		p.slots[oldest] = poolSlot{}
		p.free = append(p.free, oldest)
	}
	if len(p.removed) == 0 {
		return dst
	}
	ev := kv.Event{Member: p.member, EventID: p.eventID(), Kind: kv.Removed, Removed: append([]uint64(nil), p.removed...)}
	return append(dst, ev)
}

// register turns blocks [from, to) of a request's prompt, computed and so
// far private, into registered blocks it pins, and appends the Stored
// events that publish them (a new event whenever the chain meets a block
// another request registered meanwhile: that copy is pinned instead and
// the private one released). Block from−1, if any, is registered and
// pinned by the request.
func (p *kvPool) register(dst []kv.Event, seqs, locals []uint64, from, to int) []kv.Event {
	var cur *kv.Event
	for j := from; j < to; j++ {
		p.private--
		if i, ok := p.byHash[seqs[j]]; ok {
			p.pin(i)
			cur = nil
			continue
		}
		if cur == nil {
			dst = append(dst, kv.Event{Member: p.member, EventID: p.eventID(), Kind: kv.Stored})
			cur = &dst[len(dst)-1]
			if j > 0 {
				cur.HasParent, cur.Parent = true, seqs[j-1]
			}
		}
		cur.Blocks = append(cur.Blocks, kv.Block{External: seqs[j], Local: locals[j]})
		i := p.newSlot(seqs[j], locals[j])
		p.slots[i].refs = 1
		p.pinned++
	}
	return dst
}

// release unpins the registered blocks seqs[:n] of a request, tail first,
// and frees its private blocks.
func (p *kvPool) release(seqs []uint64, n, private int) {
	for j := n - 1; j >= 0; j-- {
		i := p.byHash[seqs[j]]
		s := &p.slots[i]
		s.refs--
		if s.refs == 0 {
			p.pinned--
			s.evictable = p.lru.PushBack(i)
		}
	}
	p.private -= private
}

func (p *kvPool) pin(i int32) {
	s := &p.slots[i]
	if s.refs == 0 {
		p.lru.Remove(s.evictable)
		s.evictable = nil
		p.pinned++
	}
	s.refs++
}

func (p *kvPool) newSlot(hash, local uint64) int32 {
	var i int32
	if n := len(p.free); n > 0 {
		i, p.free = p.free[n-1], p.free[:n-1]
	} else {
		i = int32(len(p.slots))
		p.slots = append(p.slots, poolSlot{})
	}
	p.slots[i] = poolSlot{hash: hash, local: local}
	p.byHash[hash] = i
	return i
}

func (p *kvPool) eventID() uint64 {
	id := p.nextID
	p.nextID++
	return id
}
