package hostindex

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckfindex"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
	"github.com/goindex/goindex/goindex/score"
)

// Mode is an Index's mode; its numbers are goindex_counters.mode's.
type Mode uint32

// The three modes.
const (
	Exact  Mode = 1 // goindex/radix: Dynamo's exact semantics
	CKF    Mode = 2 // goindex/ckfindex: one cuckoo-filter lane per member
	Global Mode = 3 // one lane per DC: fed relay frames, or an attached replica file
)

var modes = map[string]Mode{"exact": Exact, "ckf": CKF, "global": Global}

// Index is one open index of any mode. Exactly one of exact, ckf and global
// is set; a struct rather than an interface so that Match calls each
// index's Match directly (no dynamic dispatch on the probe path).
//
// All three allow Match and their counters concurrently with their
// mutations, and Match reads its query only during the call: so probes,
// scores and counters take no lock, and may be given views of memory the
// caller owns. Event calls (Apply, RemoveWorker, RemoveMember, ApplyFrame,
// SetRTT, AttachReplica) and Close serialize on mu.
type Index struct {
	cfg     Config
	mode    Mode
	exact   *radix.Index
	ckf     *ckfindex.Index
	global  *global
	scorers map[score.Policy]*score.Scorer // one per ABI policy, immutable
	hasher  *dynamo.Hasher                 // unsalted, the config's block size
	// overlaps pools the probe results Score looks candidates' depths up in
	// (*[]kv.Overlap).
	overlaps sync.Pool

	mu     sync.Mutex
	closed atomic.Bool

	eventsApplied  atomic.Uint64
	eventsRejected atomic.Uint64
	degraded       atomic.Uint64 // scores answered degraded
	// probes is bumped by every probe on every thread: its own cache line
	// keeps those stores off the fields above.
	_      [64]byte
	probes atomic.Uint64
	_      [56]byte
}

// Open builds the index cfg asks for; cfg must have passed Check (ParseConfig
// does). A config the indexes refuse is ErrConfig.
func Open(cfg Config) (*Index, error) {
	ix := &Index{cfg: cfg, mode: modes[cfg.Mode], scorers: make(map[score.Policy]*score.Scorer, len(policies))}
	for _, p := range policies {
		s, err := score.New(score.Config{Policy: p, BlockSize: cfg.BlockSize, PrefillTokensPerMs: cfg.PrefillTokensPerMs,
			QueueTokensPerMs: cfg.QueueTokensPerMs, DecodeBlocksPerMs: cfg.DecodeBlocksPerMs})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		ix.scorers[p] = s
	}
	var err error
	if ix.hasher, err = dynamo.NewHasher(dynamo.HasherConfig{BlockSize: cfg.BlockSize}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	worker := cfg.ClearScope == "worker"
	switch ix.mode {
	case Exact:
		scope := radix.ClearRank
		if worker {
			scope = radix.ClearWorker
		}
		ix.exact = radix.New(radix.Config{ClearScope: scope})
	case CKF:
		scope := ckfindex.ClearRank
		if worker {
			scope = ckfindex.ClearWorker
		}
		if ix.ckf, err = ckfindex.New(ckfindex.Config{Lanes: cfg.Lanes, ExpectedBlocksPerLane: cfg.ExpectedBlocksPerLane,
			Seed: cfg.Seed, MaxKicks: cfg.MaxKicks, ClearScope: scope}); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	default:
		if ix.global, err = newGlobal(&ix.cfg); err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// Config returns the index's config (read only).
func (ix *Index) Config() *Config { return &ix.cfg }

// Mode returns the index's mode.
func (ix *Index) Mode() Mode { return ix.mode }

// events returns the index of a mode fed with KV events, or nil in global
// mode.
func (ix *Index) events() kv.Index {
	switch {
	case ix.exact != nil:
		return ix.exact
	case ix.ckf != nil:
		return ix.ckf
	}
	return nil
}

// NeedMode checks that a mode-specific call fits the index: global calls
// (frames, replicas, RTTs) need mode global, KV events the other two.
func (ix *Index) NeedMode(global bool) error {
	switch {
	case global && ix.mode != Global:
		return fmt.Errorf("%w: the index is in %s mode; relay frames, replicas and RTTs need mode global", ErrMode, ix.cfg.Mode)
	case !global && ix.mode == Global:
		return fmt.Errorf("%w: a global index's lanes are DCs fed by relay frames or a replica file, not KV events", ErrMode)
	}
	return nil
}

// locked runs fn under the event lock, unless the index is closed.
func (ix *Index) locked(fn func() error) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed.Load() {
		return ErrClosed
	}
	return fn()
}

// update runs a KV event call fn, one at a time, and counts its outcome.
func (ix *Index) update(fn func(ev kv.Index) error) error {
	return ix.locked(func() error {
		ev := ix.events()
		if ev == nil {
			return ix.NeedMode(false)
		}
		if err := fn(ev); err != nil {
			ix.eventsRejected.Add(1)
			return err
		}
		ix.eventsApplied.Add(1)
		return nil
	})
}

// Apply applies one KV event (exact and ckf modes). The index may keep the
// event's slices.
func (ix *Index) Apply(ev *kv.Event) error {
	return ix.update(func(x kv.Index) error { return x.Apply(ev) })
}

// RemoveWorker drops every rank of worker (exact and ckf modes).
func (ix *Index) RemoveWorker(worker uint64) error {
	return ix.update(func(x kv.Index) error { return x.RemoveWorker(worker) })
}

// RemoveMember drops one member (exact and ckf modes).
func (ix *Index) RemoveMember(m kv.Member) error {
	return ix.update(func(x kv.Index) error { return x.RemoveMember(m) })
}

// HashTokens appends the local block hashes of tokens with the index's
// block size and the given salts (empty: none) to dst.
func (ix *Index) HashTokens(dst []uint64, tokens []uint32, lora, namespace string) ([]uint64, error) {
	h := ix.hasher
	if lora != "" || namespace != "" {
		var err error
		if h, err = dynamo.NewHasher(dynamo.HasherConfig{BlockSize: ix.cfg.BlockSize, LoRA: lora, Namespace: namespace}); err != nil {
			return dst, fmt.Errorf("hostindex: hasher: %w", err)
		}
	}
	return h.AppendLocal(dst, tokens), nil
}

// Counters are an Index's figures (goindex_counters).
type Counters struct {
	Mode              Mode
	Blocks            uint64 // exact ownership entries; global: the ready lanes' DCs' last reported active blocks
	Members           uint64 // members known; global: lanes
	LanesReady        uint64 // ckf and global: lanes with an installed snapshot
	MemoryBytes       uint64 // approximate; exact: tree nodes × 64 (one cache line each); global: the lanes' table
	CapacityOmissions uint64 // ckf: blocks tracked but not in the filter
	EventsApplied     uint64
	EventsRejected    uint64
	Probes            uint64 // probe and score calls
	FramesApplied     uint64 // global: relay frames that changed a lane
	FramesRejected    uint64 // global: relay frames that returned an error
	FramesIgnored     uint64 // global: relay frames accepted but ignored
	ReplicaGeneration uint64 // global: attached replica's generation, 0: none
	DegradedScores    uint64 // scores answered degraded (ScoreQuery.Open)
	ReplicaState      uint32 // global: the attached replica's health as a follow.Reason (0 healthy, 1 missing, 2 damaged, 3 consumer stale)
	LanesBad          uint64 // global: mask of lanes failing their integrity check
	IntegrityFailures uint64 // global: lanes found failing it
	ReplicaFaults     uint64 // global: searches of the mapping that faulted
}

// Counters returns the index's figures, read while other calls may be
// changing them (not all at one instant).
func (ix *Index) Counters() Counters {
	c := Counters{Mode: ix.mode, EventsApplied: ix.eventsApplied.Load(), EventsRejected: ix.eventsRejected.Load(), Probes: ix.probes.Load(),
		DegradedScores: ix.degraded.Load()}
	switch {
	case ix.exact != nil:
		st := ix.exact.Stats()
		c.Blocks, c.Members, c.MemoryBytes = uint64(st.Blocks), uint64(st.Members), uint64(st.Nodes)*64
	case ix.ckf != nil:
		st := ix.ckf.Stats()
		c.Blocks, c.Members, c.LanesReady = st.TrackedBlocks, uint64(st.Members), uint64(st.ReadyLanes)
		c.MemoryBytes, c.CapacityOmissions = st.MemoryBytes, st.CapacityOmissions
	default:
		ix.global.count(&c)
	}
	return c
}

// Close marks the index closed once the event call in flight, if any, is
// done: later event calls return ErrClosed; a global index's replica is
// unmapped once no probe reads it. Probes racing Close finish on the old
// state.
func (ix *Index) Close() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed.Swap(true) {
		return
	}
	if ix.global != nil {
		ix.global.close()
	}
}
