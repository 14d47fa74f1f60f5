package dynamo

import (
	"strings"

	"github.com/goindex/goindex/goindex/kv"
)

// GroupFilter selects how the normalizer drops events of non-main
// attention groups (hybrid models publish one event stream per KV cache
// group; only full attention reflects the prefix cache).
type GroupFilter uint8

// The group filters.
const (
	// GroupFilterLearned is CUR: an event with kv_cache_spec_kind is kept
	// iff the kind is main attention, and teaches that kind to its
	// (dp_rank, group_idx); an event with only group_idx uses the learned
	// kind, or is kept only for group 0 when nothing was learned.
	GroupFilterLearned GroupFilter = iota
	// GroupFilterZeroOnly is G26a: kind present ⇒ keep iff main; else drop
	// iff group_idx is present and not 0. Nothing is learned.
	GroupFilterZeroOnly
)

// maxLearnedGroups bounds the (dp_rank, group_idx) kinds a normalizer
// remembers, so a hostile engine cannot grow it without bound; real models
// have a handful of groups per rank.
const maxLearnedGroups = 1024

// NormalizerConfig configures a Normalizer for one engine source.
type NormalizerConfig struct {
	WorkerID uint64 // the worker whose engine this is; required
	// DpRank is the rank the source was registered with; a batch's
	// data_parallel_rank overrides it. Optional; default: 0.
	DpRank uint32
	// BlockSize is Dynamo's kv_block_size; events of another block size
	// publish no blocks. Required, in [1, MaxBlockSize].
	BlockSize int
	// PadImageTokens and ImageTokenID select multimodal scheme 2 for
	// tokens_hash, as HasherConfig does. Optional; default: scheme 1.
	PadImageTokens bool
	ImageTokenID   uint32
	// GroupFilter selects the attention-group rule; optional; default:
	// GroupFilterLearned.
	GroupFilter GroupFilter
}

// NormalizerStats counts what a Normalizer did; the counters stand in for
// Dynamo's (rate-limited) warnings.
type NormalizerStats struct {
	Events          uint64 // engine events seen
	Published       uint64 // router events produced (event ids assigned)
	FilteredGroup   uint64 // dropped: non-main attention group
	FilteredRemote  uint64 // dropped: locality other than LOCAL
	DuplicateStores uint64 // stores with a repeated hash, published as empty Removed
	TruncatedStores uint64 // stores cut short: block_size mismatch or token_ids ran out
	UnknownMedia    uint64 // media not in the tier table, published as device
}

// groupKey names one KV cache group of one dp rank.
type groupKey struct {
	rank  uint32
	group uint32
}

// Normalizer turns one engine source's EngineBatches into RouterEvents with
// Dynamo's conversion and filter rules (dynamo-compat §2.6 rules 1–7):
// non-main attention groups and non-local events are dropped without
// consuming an event id; kept events get consecutive event ids from 0;
// medium maps to a storage tier; a store whose hashes repeat (parent
// included) becomes an empty Removed; blocks are consumed block_size tokens
// at a time (plus one in EAGLE) and publication stops at the first block
// whose size differs from BlockSize or whose tokens run out; tokens_hash is
// the local hash salted with the event's lora_name and cache salt, with the
// block's mm info and the EAGLE window; start_position is null.
//
// A Normalizer is stateful per engine source (the event-id counter, the
// learned group kinds, the stats): use one per (worker, ZMQ endpoint), from
// one goroutine at a time.
type Normalizer struct {
	cfg     NormalizerConfig
	nextID  uint64
	kinds   map[groupKey]bool // learned: is this group main attention?
	stats   NormalizerStats
	scratch blockScratch
	mm      []uint64
}

// NewNormalizer returns a Normalizer for cfg.
func NewNormalizer(cfg NormalizerConfig) (*Normalizer, error) {
	if cfg.BlockSize <= 0 || cfg.BlockSize > MaxBlockSize {
		return nil, &LimitError{What: "block size", Got: cfg.BlockSize, Min: 1, Max: MaxBlockSize}
	}
	if cfg.GroupFilter > GroupFilterZeroOnly {
		return nil, malformed("dynamo: unknown group filter %d", cfg.GroupFilter)
	}
	return &Normalizer{cfg: cfg, kinds: make(map[groupKey]bool)}, nil
}

// Stats returns the counters so far.
func (n *Normalizer) Stats() NormalizerStats { return n.stats }

// Append normalizes every event of b, appends the kept ones to dst and
// returns it. The appended events share hash slices and mm infos with b;
// do not modify b afterwards.
func (n *Normalizer) Append(dst []RouterEvent, b *EngineBatch) []RouterEvent {
	rank := n.cfg.DpRank
	if b.HasDpRank {
		rank = b.DpRank
	}
	for i := range b.Events {
		ev := &b.Events[i]
		n.stats.Events++
		if ev.Kind != kv.Cleared { // clears carry no group or locality
			if !n.keepGroup(rank, ev) {
				n.stats.FilteredGroup++
				continue
			}
			if ev.HasLocality && ev.Locality != "LOCAL" {
				n.stats.FilteredRemote++
				continue
			}
		}
		out := RouterEvent{
			WorkerID:  n.cfg.WorkerID,
			Residency: ResidencyWorker,
			Event:     CacheEvent{EventID: n.nextID, Kind: ev.Kind, DpRank: rank},
		}
		if ev.Kind != kv.Cleared {
			tier, known := MediumTier(ev.Medium)
			if !known {
				n.stats.UnknownMedia++
			}
			out.StorageTier = tier
		}
		switch ev.Kind {
		case kv.Stored:
			n.convertStored(ev, &out.Event)
		case kv.Removed:
			out.Event.Removed = ev.BlockHashes
		}
		n.nextID++
		n.stats.Published++
		dst = append(dst, out)
	}
	return dst
}

// keepGroup applies rule 1 (attention-group filtering) and learns kinds.
func (n *Normalizer) keepGroup(rank uint32, ev *EngineEvent) bool {
	key := groupKey{rank: rank, group: ev.GroupIdx}
	if ev.HasSpecKind {
		main := mainAttention(ev.SpecKind)
		if ev.HasGroup && n.cfg.GroupFilter == GroupFilterLearned {
			if _, seen := n.kinds[key]; seen || len(n.kinds) < maxLearnedGroups {
				n.kinds[key] = main
			}
		}
		return main
	}
	if !ev.HasGroup {
		return true
	}
	if n.cfg.GroupFilter == GroupFilterLearned {
		if main, ok := n.kinds[key]; ok {
			return main
		}
	}
	return ev.GroupIdx == 0
}

// mainAttention reports whether a kv_cache_spec_kind is one of the kinds
// whose blocks mirror the prefix cache.
func mainAttention(kind string) bool {
	switch kind {
	case "full_attention", "mla_attention", "sink_full_attention":
		return true
	}
	return false
}

// MediumTier maps an engine's medium string to a storage tier (rule 4,
// case-insensitive): GPU/DEVICE → device; CPU/CPU_PINNED/CPU_TIER1 →
// host_pinned; CPU_TIER2/DISK/NVME/STORAGE → disk; EXTERNAL/NETWORK/REMOTE/
// SHARED → external; "" (absent) → device. Any other medium maps to device,
// Dynamo's default, with known false.
func MediumTier(medium string) (tier StorageTier, known bool) {
	switch strings.ToUpper(medium) {
	case "", "GPU", "DEVICE":
		return TierDevice, true
	case "CPU", "CPU_PINNED", "CPU_TIER1":
		return TierHostPinned, true
	case "CPU_TIER2", "DISK", "NVME", "STORAGE":
		return TierDisk, true
	case "EXTERNAL", "NETWORK", "REMOTE", "SHARED":
		return TierExternal, true
	}
	return TierDevice, false
}

// convertStored applies rules 5–7 to one BlockStored.
func (n *Normalizer) convertStored(ev *EngineEvent, out *CacheEvent) {
	if hasDuplicate(ev) {
		n.stats.DuplicateStores++
		out.Kind = kv.Removed
		out.Removed = []uint64{}
		return
	}
	s := &out.Stored
	s.HasParent, s.Parent = ev.HasParent, ev.Parent
	h := Hasher{
		blockSize:  n.cfg.BlockSize,
		seed:       SaltedSeed(ev.LoRAName, ev.CacheSalt),
		eagle:      ev.Eagle,
		padImage:   n.cfg.PadImageTokens,
		imageToken: n.cfg.ImageTokenID,
	}
	window := h.Window()
	if ev.BlockSize != uint64(n.cfg.BlockSize) {
		if len(ev.BlockHashes) > 0 {
			n.stats.TruncatedStores++
		}
		s.Blocks = []StoredBlock{}
		return
	}
	s.Blocks = make([]StoredBlock, 0, len(ev.BlockHashes))
	for i, bh := range ev.BlockHashes {
		start := i * n.cfg.BlockSize
		if start+window > len(ev.TokenIDs) {
			n.stats.TruncatedStores++
			break
		}
		var mm *MMExtraInfo
		if i < len(ev.BlockMM) {
			mm = ev.BlockMM[i]
		}
		n.mm = mm.AppendHashes(n.mm[:0])
		s.Blocks = append(s.Blocks, StoredBlock{
			BlockHash:  bh,
			TokensHash: h.hashWindow(&n.scratch, ev.TokenIDs[start:start+window], n.mm),
			MM:         mm,
		})
	}
}

// hasDuplicate reports whether a hash repeats among the parent and the
// block hashes (rule 5).
func hasDuplicate(ev *EngineEvent) bool {
	seen := make(map[uint64]struct{}, len(ev.BlockHashes)+1)
	if ev.HasParent {
		seen[ev.Parent] = struct{}{}
	}
	for _, h := range ev.BlockHashes {
		if _, dup := seen[h]; dup {
			return true
		}
		seen[h] = struct{}{}
	}
	return false
}
