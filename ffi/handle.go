package main

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goindex/goindex/goindex/ckfindex"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
	"github.com/goindex/goindex/goindex/score"
)

// Counter modes of goindex_counters.mode.
const (
	modeExact  = 1
	modeCKF    = 2
	modeGlobal = 3
)

// counters is goindex_counters in Go memory.
type counters struct {
	mode                                             uint32
	blocks, members, lanesReady, memoryBytes         uint64
	capacityOmissions, eventsApplied, eventsRejected uint64
	probes                                           uint64
	framesApplied, framesRejected, framesIgnored     uint64
	replicaGeneration                                uint64
}

// index is a handle's index: exactly one field is set, by mode. It is a
// struct rather than an interface so that match calls each index's Match
// directly (no dynamic dispatch on the probe path).
//
// The handle relies on documented properties of all three: Match (and the
// counters) may run concurrently with mutations, and Match only reads its
// query during the call. So probes take no handle lock and pass the host's
// query without a copy.
type index struct {
	exact  *radix.Index
	ckf    *ckfindex.Index
	global *globalIndex
}

// match appends the overlaps of the query locals to dst.
func (ix *index) match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	switch {
	case ix.exact != nil:
		return ix.exact.Match(dst, locals)
	case ix.ckf != nil:
		return ix.ckf.Match(dst, locals)
	}
	return ix.global.Match(dst, locals)
}

// events returns the index of a mode fed with KV events, or nil in global
// mode.
func (ix *index) events() kv.Index {
	switch {
	case ix.exact != nil:
		return ix.exact
	case ix.ckf != nil:
		return ix.ckf
	}
	return nil
}

// count fills the index's share of goindex_stats. Exact mode reports memory
// as tree nodes × 64 bytes (one cache line each, the radix arena's layout);
// the members' lookups are not counted.
func (ix *index) count(c *counters) {
	switch {
	case ix.exact != nil:
		st := ix.exact.Stats()
		c.mode, c.blocks, c.members, c.memoryBytes = modeExact, uint64(st.Blocks), uint64(st.Members), uint64(st.Nodes)*64
	case ix.ckf != nil:
		st := ix.ckf.Stats()
		c.mode, c.blocks, c.members, c.lanesReady = modeCKF, st.TrackedBlocks, uint64(st.Members), uint64(st.ReadyLanes)
		c.memoryBytes, c.capacityOmissions = st.MemoryBytes, st.CapacityOmissions
	default:
		ix.global.count(c)
	}
}

// ids is a table of objects under ids that count up from 1 and are never
// reused, so a stale id can only miss. Id n is slot n−1 of a table every
// lookup reads without a lock (an atomic load of the table, then of the
// slot: a sync.Map lookup cost about 25 ns of a 600 ns probe, BenchmarkProbe
// impl=handle) and that add replaces with a larger copy when it is full. A
// removed object's slot stays, nil: 8 bytes per id ever issued.
type ids[T any] struct {
	mu    sync.Mutex // add and remove
	n     int        // ids ever issued, under mu
	table atomic.Pointer[[]atomic.Pointer[T]]
}

// get returns the live object id, or nil.
func (r *ids[T]) get(id uint64) *T {
	t := r.table.Load()
	if t == nil || id-1 >= uint64(len(*t)) { // id 0 wraps and misses
		return nil
	}
	return (*t)[id-1].Load()
}

// add registers v under a fresh id and returns it.
func (r *ids[T]) add(v *T) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var old []atomic.Pointer[T]
	if t := r.table.Load(); t != nil {
		old = *t
	}
	if r.n == len(old) {
		grown := make([]atomic.Pointer[T], max(2*len(old), 16))
		for i := range old {
			grown[i].Store(old[i].Load())
		}
		r.table.Store(&grown)
		old = grown
	}
	r.n++
	old[r.n-1].Store(v)
	return uint64(r.n)
}

// remove unregisters id and returns its object, or nil when id is not live.
func (r *ids[T]) remove(id uint64) *T {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.table.Load()
	if t == nil || id-1 >= uint64(len(*t)) {
		return nil
	}
	return (*t)[id-1].Swap(nil)
}

// registry is the process's handle and plugin-state tables, the one piece
// of package-level mutable state (STYLE.md), and the detail of the last
// failed goindex_open.
type registry struct {
	ids[handle]
	plugins ids[pluginState] // Dynamo worker-selector states (plugin.go)

	openMu  sync.Mutex
	openErr string // detail of the last failed goindex_open (handle 0)
}

var handles registry

// failOpen records err as the last goindex_open failure and returns its code.
func (r *registry) failOpen(err error) status {
	r.openMu.Lock()
	r.openErr = "goindex_open: " + err.Error()
	r.openMu.Unlock()
	return code(err)
}

func (r *registry) openError() string {
	r.openMu.Lock()
	defer r.openMu.Unlock()
	return r.openErr
}

// handle is one open index. Event calls and close serialize on mu; probes,
// scores and stats take no lock: they load ix, which close sets to nil, so
// a call that starts after close returns GOINDEX_EHANDLE (one racing close
// finishes on the old index, which stays valid). errMu guards lastErr only,
// so recording a failure never waits for an event call.
type handle struct {
	cfg     config
	scorers map[score.Policy]*score.Scorer // one per ABI policy, immutable

	mu sync.Mutex
	ix atomic.Pointer[index]

	errMu   sync.Mutex
	lastErr string

	pool sync.Pool // *scratch
	// wideProbes is set once a goindex_probe result had more entries than
	// its stack buffer holds; from then on its probes use the pool.
	wideProbes atomic.Bool

	eventsApplied  atomic.Uint64
	eventsRejected atomic.Uint64
	// probes is bumped by every probe on every host thread: its own cache
	// line keeps those stores off the fields above.
	_      [64]byte
	probes atomic.Uint64
	_      [56]byte
}

// newHandle builds the index the config asks for.
func newHandle(cfg config) (*handle, error) {
	h := &handle{cfg: cfg, scorers: make(map[score.Policy]*score.Scorer, len(abiPolicies))}
	for _, p := range abiPolicies {
		s, err := score.New(score.Config{
			Policy:             p,
			BlockSize:          cfg.BlockSize,
			PrefillTokensPerMs: cfg.PrefillTokensPerMs,
			QueueTokensPerMs:   cfg.QueueTokensPerMs,
			DecodeBlocksPerMs:  cfg.DecodeBlocksPerMs,
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errConfig, err)
		}
		h.scorers[p] = s
	}
	worker := cfg.ClearScope == "worker"
	switch cfg.Mode {
	case "exact":
		scope := radix.ClearRank
		if worker {
			scope = radix.ClearWorker
		}
		h.ix.Store(&index{exact: radix.New(radix.Config{ClearScope: scope})})
	case "ckf":
		scope := ckfindex.ClearRank
		if worker {
			scope = ckfindex.ClearWorker
		}
		ix, err := ckfindex.New(ckfindex.Config{Lanes: cfg.Lanes, ExpectedBlocksPerLane: cfg.ExpectedBlocksPerLane,
			Seed: cfg.Seed, MaxKicks: cfg.MaxKicks, ClearScope: scope})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errConfig, err)
		}
		h.ix.Store(&index{ckf: ix})
	default:
		g, err := newGlobal(&h.cfg)
		if err != nil {
			return nil, err
		}
		h.ix.Store(&index{global: g})
	}
	return h, nil
}

// fail records err as the handle's last error, prefixed by the call's name,
// and returns its code.
func (h *handle) fail(call string, err error) status {
	h.errMu.Lock()
	h.lastErr = call + ": " + err.Error()
	h.errMu.Unlock()
	return code(err)
}

func (h *handle) lastError() string {
	h.errMu.Lock()
	defer h.errMu.Unlock()
	return h.lastErr
}

// global reports whether the handle is in global mode (its config is
// immutable, so this needs no lock).
func (h *handle) global() bool { return h.cfg.Mode == "global" }

// needMode checks that a mode-specific call fits the handle: global calls
// (frames, replicas, RTTs) need global mode, KV events the other two.
func (h *handle) needMode(global bool) error {
	switch {
	case global && !h.global():
		return fmt.Errorf("%w: the handle is in %s mode; relay frames, replicas and RTTs need mode global", errMode, h.cfg.Mode)
	case !global && h.global():
		return fmt.Errorf("%w: a global handle's lanes are DCs fed by goindex_apply_frame or goindex_attach_replica, not KV events", errMode)
	}
	return nil
}

// update runs a KV event call fn on the index, one at a time, and counts its
// outcome. The deferred unlock keeps the handle closable after a panic.
func (h *handle) update(fn func(ix kv.Index) error) error {
	return h.locked(func(ix *index) error {
		ev := ix.events()
		if ev == nil {
			return h.needMode(false)
		}
		if err := fn(ev); err != nil {
			h.eventsRejected.Add(1)
			return err
		}
		h.eventsApplied.Add(1)
		return nil
	})
}

// locked runs fn on the index under the handle's event lock.
func (h *handle) locked(fn func(ix *index) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ix := h.ix.Load()
	if ix == nil {
		return errHandle
	}
	return fn(ix)
}

// counters returns goindex_stats's figures.
func (h *handle) counters() (counters, error) {
	var c counters
	ix := h.ix.Load()
	if ix == nil {
		return c, errHandle
	}
	ix.count(&c)
	c.eventsApplied, c.eventsRejected, c.probes = h.eventsApplied.Load(), h.eventsRejected.Load(), h.probes.Load()
	return c, nil
}

// close drops the index once the event call in flight, if any, is done; a
// global index also unmaps its replica once no probe uses it.
func (h *handle) close() {
	h.mu.Lock()
	ix := h.ix.Swap(nil)
	h.mu.Unlock()
	if ix != nil && ix.global != nil {
		ix.global.close()
	}
}
