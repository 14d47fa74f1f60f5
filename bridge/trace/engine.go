package trace

import (
	"fmt"

	"github.com/goindex/goindex/goindex/kv"
)

// Engine capacity limits.
const (
	// DefaultCapacityBlocks is upstream mooncake_bench's current mock-engine
	// num_gpu_blocks (it was 1,048,576 earlier).
	DefaultCapacityBlocks = 16384
	// MaxCapacityBlocks bounds a cache so that its slots fit int32 indices.
	MaxCapacityBlocks = 1<<31 - 2
)

// EngineConfig configures an Engine.
type EngineConfig struct {
	Member         kv.Member // the worker whose events the engine emits; optional; default: 0/0
	CapacityBlocks int       // cache size in KV blocks; optional; default: DefaultCapacityBlocks
}

// Result says what serving one request did to an engine's cache.
type Result struct {
	PromptBlocks  int // blocks in the request's prompt
	CachedBlocks  int // leading prompt blocks already cached on arrival (the prefix hit)
	StoredBlocks  int // blocks stored for this request
	EvictedBlocks int // blocks evicted to make room
}

// Engine is a mock inference engine with prefix caching: one worker's KV
// cache of CapacityBlocks blocks with LRU eviction, fed one request at a
// time, emitting the kv.Events a real engine would publish.
//
// Cache model. A request's blocks are identified by their sequence hashes
// (kv.AppendChain over the local hashes), which also serve as the engine's
// external block hashes. That scheme is [unverified] against upstream's mock
// engine, whose external hashes the spec could not establish (dynamo-compat
// §6); any scheme unique per prefix gives the router the same structure. The
// cache is prefix-closed: a block is cached only below its cached parent.
//
// Serving a request: the cached prefix is the hit; if the prompt extends past
// it, the engine evicts least-recently-used blocks until the rest fits and
// stores the rest below the last hit block. A prompt longer than the capacity
// is stored only up to the capacity (the tail is computed but not cached).
//
// Recency: every block of a request's prompt is used when it is served, and
// within one request a parent counts as used after its children. So a block
// is never older than any of its descendants, the least recently used block
// is always a leaf, and evictions go leaf-first: parents outlive children and
// the published Removed list never strands a cached block under a removed
// parent.
//
// An Engine is not safe for concurrent use.
type Engine struct {
	member   kv.Member
	capacity int
	byHash   map[uint64]int32 // external hash → slot
	// slots[0] is the sentinel of the circular LRU list (next = oldest,
	// prev = newest); blocks use slots 1….
	slots       []slot
	free        []int32
	seq         []uint64 // scratch: the request's sequence hashes
	path        []int32  // scratch: the request's cached slots, root first
	nextEventID uint64
}

type slot struct {
	hash       uint64
	prev, next int32
}

// NewEngine returns an empty Engine for cfg.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.CapacityBlocks == 0 {
		cfg.CapacityBlocks = DefaultCapacityBlocks
	}
	if cfg.CapacityBlocks < 1 || cfg.CapacityBlocks > MaxCapacityBlocks {
		return nil, fmt.Errorf("%w: capacity %d blocks not in [1, %d]", ErrConfig, cfg.CapacityBlocks, MaxCapacityBlocks)
	}
	return &Engine{
		member:   cfg.Member,
		capacity: cfg.CapacityBlocks,
		byHash:   make(map[uint64]int32),
		slots:    make([]slot, 1),
	}, nil
}

// Member returns the member whose events the engine emits.
func (e *Engine) Member() kv.Member { return e.member }

// Capacity returns the cache size in blocks.
func (e *Engine) Capacity() int { return e.capacity }

// Blocks returns how many blocks are cached.
func (e *Engine) Blocks() int { return len(e.byHash) }

// Lookup returns how many leading blocks of the prompt with local hashes
// locals are cached, without using them (recency is unchanged).
func (e *Engine) Lookup(locals []uint64) int {
	var h uint64
	for i, l := range locals {
		if i == 0 {
			h = l
		} else {
			h = kv.ChainHash(h, l)
		}
		if _, ok := e.byHash[h]; !ok {
			return i
		}
	}
	return len(locals)
}

// Serve serves one request whose prompt has local hashes locals: it appends
// to dst the events this emits, at most a Removed (evicted external hashes,
// leaf-first) followed by a Stored (the uncached part, with HasParent and
// Parent naming the last hit block), and returns dst with what happened.
// Event ids count from 0 per engine. The events' slices are new and belong
// to the caller.
func (e *Engine) Serve(dst []kv.Event, locals []uint64) ([]kv.Event, Result) {
	e.seq = kv.AppendChain(e.seq[:0], false, 0, locals)
	e.path = e.path[:0]
	for _, h := range e.seq {
		i, ok := e.byHash[h]
		if !ok {
			break
		}
		e.path = append(e.path, i)
	}
	hit := len(e.path)
	res := Result{PromptBlocks: len(locals), CachedBlocks: hit}
	e.touchPath()
	keep := min(len(locals), e.capacity)
	if keep <= hit {
		return dst, res
	}
	need := keep - hit
	// The hit path is now the most recent, and hit + need ≤ capacity, so
	// the evictions below never reach it.
	var removed []uint64
	for len(e.byHash)+need > e.capacity {
		removed = append(removed, e.evictOldest())
	}
	if len(removed) > 0 {
		dst = append(dst, kv.Event{Member: e.member, EventID: e.eventID(), Kind: kv.Removed, Removed: removed})
	}
	stored := kv.Event{Member: e.member, EventID: e.eventID(), Kind: kv.Stored, Blocks: make([]kv.Block, 0, need)}
	if hit > 0 {
		stored.HasParent, stored.Parent = true, e.seq[hit-1]
	}
	for j := hit; j < keep; j++ {
		e.path = append(e.path, e.insert(e.seq[j]))
		stored.Blocks = append(stored.Blocks, kv.Block{External: e.seq[j], Local: locals[j]})
	}
	e.touchPath()
	res.StoredBlocks, res.EvictedBlocks = need, len(removed)
	return append(dst, stored), res
}

func (e *Engine) eventID() uint64 {
	id := e.nextEventID
	e.nextEventID++
	return id
}

// touchPath marks the blocks of e.path used, deepest first, so that each
// parent ends up more recent than its children.
func (e *Engine) touchPath() {
	for j := len(e.path) - 1; j >= 0; j-- {
		i := e.path[j]
		e.unlink(i)
		e.pushNewest(i)
	}
}

func (e *Engine) unlink(i int32) {
	s := &e.slots[i]
	e.slots[s.prev].next = s.next
	e.slots[s.next].prev = s.prev
}

func (e *Engine) pushNewest(i int32) {
	newest := e.slots[0].prev
	e.slots[i].prev, e.slots[i].next = newest, 0
	e.slots[newest].next = i
	e.slots[0].prev = i
}

// insert caches a new block as the newest and returns its slot.
func (e *Engine) insert(hash uint64) int32 {
	var i int32
	if n := len(e.free); n > 0 {
		i, e.free = e.free[n-1], e.free[:n-1]
	} else {
		e.slots = append(e.slots, slot{})
		i = int32(len(e.slots) - 1)
	}
	e.slots[i] = slot{hash: hash}
	e.pushNewest(i)
	e.byHash[hash] = i
	return i
}

// evictOldest drops the least recently used block, always a leaf (see the
// recency rule on Engine), and returns its external hash.
func (e *Engine) evictOldest() uint64 {
	i := e.slots[0].next
	h := e.slots[i].hash
	e.unlink(i)
	delete(e.byHash, h)
	e.free = append(e.free, i)
	return h
}
