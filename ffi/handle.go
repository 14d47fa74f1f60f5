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
	modeExact = 1
	modeCKF   = 2
)

// counters is goindex_counters in Go memory.
type counters struct {
	mode                                             uint32
	blocks, members, lanesReady, memoryBytes         uint64
	capacityOmissions, eventsApplied, eventsRejected uint64
	probes                                           uint64
}

// index is what a handle needs of its index: the kv.Index calls and the
// index's share of goindex_stats. Each mode wraps its package's index.
// Beyond kv.Index, the handle relies on two documented properties of
// radix.Index and ckfindex.Index: Match (and Stats) may run concurrently
// with mutations, and Match only reads its query during the call. So
// probes take no handle lock and pass the host's query without a copy.
type index interface {
	kv.Index
	count(c *counters)
}

// exactIndex is mode "exact": the radix tree.
type exactIndex struct{ *radix.Index }

// count reports memory as tree nodes × 64 bytes (one cache line each, the
// radix arena's layout); the members' lookups are not counted.
func (x exactIndex) count(c *counters) {
	st := x.Stats()
	c.mode, c.blocks, c.members, c.memoryBytes = modeExact, uint64(st.Blocks), uint64(st.Members), uint64(st.Nodes)*64
}

// ckfIndex is mode "ckf": one cuckoo-filter lane per member.
type ckfIndex struct{ *ckfindex.Index }

func (x ckfIndex) count(c *counters) {
	st := x.Stats()
	c.mode, c.blocks, c.members, c.lanesReady = modeCKF, st.TrackedBlocks, uint64(st.Members), uint64(st.ReadyLanes)
	c.memoryBytes, c.capacityOmissions = st.MemoryBytes, st.CapacityOmissions
}

// registry is the process's handle table, the one piece of package-level
// mutable state (STYLE.md). Handles count up from 1 and are never reused, so
// a stale handle can only miss. Handle id is slot id−1 of a table that every
// call reads without a lock (an atomic load of the table, then of the slot:
// a sync.Map lookup cost about 25 ns of a 600 ns probe, BenchmarkProbe
// impl=handle) and that open replaces with a larger copy when it is full.
// A closed handle's slot stays, nil: 8 bytes per handle ever opened.
type registry struct {
	mu    sync.Mutex // open and close
	n     int        // handles ever opened, under mu
	table atomic.Pointer[[]atomic.Pointer[handle]]

	openMu  sync.Mutex
	openErr string // detail of the last failed goindex_open (handle 0)
}

var handles registry

// get returns the live handle id, or nil.
func (r *registry) get(id uint64) *handle {
	t := r.table.Load()
	if t == nil || id-1 >= uint64(len(*t)) { // id 0 wraps and misses
		return nil
	}
	return (*t)[id-1].Load()
}

// add registers h under a fresh id and returns it.
func (r *registry) add(h *handle) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var old []atomic.Pointer[handle]
	if t := r.table.Load(); t != nil {
		old = *t
	}
	if r.n == len(old) {
		grown := make([]atomic.Pointer[handle], max(2*len(old), 16))
		for i := range old {
			grown[i].Store(old[i].Load())
		}
		r.table.Store(&grown)
		old = grown
	}
	r.n++
	h.id = uint64(r.n)
	old[r.n-1].Store(h)
	return h.id
}

// remove unregisters id and returns its handle, or nil when id is not live.
func (r *registry) remove(id uint64) *handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.table.Load()
	if t == nil || id-1 >= uint64(len(*t)) {
		return nil
	}
	return (*t)[id-1].Swap(nil)
}

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
	id      uint64
	cfg     config
	scorers map[score.Policy]*score.Scorer // one per ABI policy, immutable

	mu sync.Mutex
	ix atomic.Pointer[index]

	errMu   sync.Mutex
	lastErr string

	pool sync.Pool // *scratch

	eventsApplied  atomic.Uint64
	eventsRejected atomic.Uint64
	probes         atomic.Uint64
}

// newHandle builds the index the config asks for.
func newHandle(cfg config) (*handle, error) {
	h := &handle{cfg: cfg, scorers: make(map[score.Policy]*score.Scorer, len(abiPolicies))}
	for _, p := range abiPolicies {
		s, err := score.New(score.Config{
			Policy:             p,
			BlockSize:          cfg.BlockSize,
			PrefillTokensPerMs: cfg.PrefillTokensPerMs,
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
		h.setIndex(exactIndex{radix.New(radix.Config{ClearScope: scope})})
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
		h.setIndex(ckfIndex{ix})
	default:
		return nil, fmt.Errorf("%w: mode global (lanes fed by relay frames or a shared replica) is not wired into the library yet", errUnavailable)
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

func (h *handle) setIndex(ix index) { h.ix.Store(&ix) }

// update runs an event call fn on the index, one at a time, and counts its
// outcome. The deferred unlock keeps the handle closable after a panic.
func (h *handle) update(fn func(ix index) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ix := h.ix.Load()
	if ix == nil {
		return errHandle
	}
	if err := fn(*ix); err != nil {
		h.eventsRejected.Add(1)
		return err
	}
	h.eventsApplied.Add(1)
	return nil
}

// read runs fn on the index, concurrently with anything.
func (h *handle) read(fn func(ix index) error) error {
	ix := h.ix.Load()
	if ix == nil {
		return errHandle
	}
	return fn(*ix)
}

// counters returns goindex_stats's figures.
func (h *handle) counters() (counters, error) {
	var c counters
	err := h.read(func(ix index) error {
		ix.count(&c)
		return nil
	})
	c.eventsApplied, c.eventsRejected, c.probes = h.eventsApplied.Load(), h.eventsRejected.Load(), h.probes.Load()
	return c, err
}

// close drops the index once the event call in flight, if any, is done.
func (h *handle) close() {
	h.mu.Lock()
	h.ix.Store(nil)
	h.mu.Unlock()
}
