package dynamo

import (
	"fmt"

	"github.com/goindex/goindex/goindex/kv"
)

// StorageTier says which cache tier an event's blocks live in. Only
// TierDevice feeds the primary (GPU) index; Dynamo keeps the other tiers in
// separate lower-tier indexes, so callers filter on it.
type StorageTier uint8

// The storage tiers, in Dynamo's order. The zero value is the default,
// device, as on G2025 wires that carry no tier.
const (
	TierDevice StorageTier = iota
	TierHostPinned
	TierDisk
	TierExternal
	// TierUnknown is what the decoders make of a storage_tier that is nil,
	// not a string, or a name Dynamo does not define (a newer release's
	// tier). Dynamo's serde decoding fails the whole message on it; goindex
	// refuses only that event (TargetsPrimary), since an unknown tier is
	// never the primary one and the message's other events are good.
	TierUnknown
)

var tierNames = [...]string{"device", "host_pinned", "disk", "external", "unknown"}

// String returns the tier's wire name ("device", "host_pinned", …), or
// "unknown" for TierUnknown.
func (t StorageTier) String() string {
	if int(t) < len(tierNames) {
		return tierNames[t]
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// ParseStorageTier parses a wire tier name; a name Dynamo does not define
// (including "unknown") returns ErrUnknownStorageTier.
func ParseStorageTier(s string) (StorageTier, error) {
	for i, n := range tierNames[:TierUnknown] {
		if s == n {
			return StorageTier(i), nil
		}
	}
	return 0, detailed(ErrUnknownStorageTier, "%q", s)
}

// wireTier is the decoders' reading of a present storage_tier: a known
// name's tier, else TierUnknown.
func wireTier(s string, isString bool) StorageTier {
	if t, err := ParseStorageTier(s); err == nil && isString {
		return t
	}
	return TierUnknown
}

// Residency is a RouterEvent's residency_domain. CUR wires may carry it;
// older ones omit it (ResidencyAbsent).
type Residency uint8

// The residency domains.
const (
	ResidencyAbsent     Residency = iota // field omitted
	ResidencyWorker                      // "worker": blocks owned by the emitting worker
	ResidencyCacheOwner                  // "cache_owner": blocks owned by a shared cache owner
	// ResidencyUnsupported is a residency_domain present but explicitly
	// nil, not a string, or an unknown name. Dynamo's decoder keeps such an
	// event (its WireResidencyDomain is Invalid or Unknown) and refuses it
	// when it resolves the domain; goindex does the same: the event decodes
	// and TargetsPrimary refuses it, so the rest of its message is taken.
	ResidencyUnsupported
	residencyCount
)

var residencyNames = [residencyCount]string{"", "worker", "cache_owner", "unsupported"}

// String returns the residency's wire name, "" for ResidencyAbsent.
func (r Residency) String() string {
	if r < residencyCount {
		return residencyNames[r]
	}
	return fmt.Sprintf("residency(%d)", uint8(r))
}

// ParseResidency parses a wire residency name; anything but "worker" and
// "cache_owner" returns ErrUnsupportedResidency.
func ParseResidency(s string) (Residency, error) {
	switch s {
	case "worker":
		return ResidencyWorker, nil
	case "cache_owner":
		return ResidencyCacheOwner, nil
	}
	return 0, detailed(ErrUnsupportedResidency, "%q", s)
}

// wireResidency is the decoders' reading of a present residency_domain: a
// known name's domain, else ResidencyUnsupported.
func wireResidency(s string, isString bool) Residency {
	if r, err := ParseResidency(s); err == nil && isString {
		return r
	}
	return ResidencyUnsupported
}

// RouterEvent mirrors Dynamo's RouterEvent (CUR field order): the emitting
// worker, the tier and residency of the blocks, and the cache event. Its
// state_source field (the cache owner of cache-owner events, which never
// reach the primary index) is not modelled; decoders skip it.
type RouterEvent struct {
	WorkerID    uint64
	StorageTier StorageTier
	Residency   Residency
	Event       CacheEvent
	SessionID   string // optional (CUR, newest); "" when absent
}

// CacheEvent mirrors Dynamo's KvCacheEvent. Kind selects which of Stored and
// Removed is meaningful; a Cleared event uses neither.
type CacheEvent struct {
	EventID uint64
	Kind    kv.Kind
	Stored  StoreData // when Kind == kv.Stored
	Removed []uint64  // external block hashes, when Kind == kv.Removed
	DpRank  uint32
}

// StoreData is a stored run: Blocks chain below Parent (or the root when
// HasParent is false); block k's parent is block k−1.
type StoreData struct {
	HasParent bool
	Parent    uint64 // external hash; valid when HasParent
	// HasStart and StartPosition carry start_position (positional backends).
	HasStart      bool
	StartPosition uint32
	Blocks        []StoredBlock
}

// StoredBlock is one stored block: the engine's opaque external hash, the
// local hash of its tokens, and its multimodal objects (nil when none).
type StoredBlock struct {
	BlockHash  uint64
	TokensHash uint64
	MM         *MMExtraInfo
}

// MMExtraInfo is a block's mm_extra_info: the multimodal objects whose
// tokens fall into the block.
type MMExtraInfo struct {
	Objects []MMObject
}

// MMObject is one multimodal object: its mm hash and its token ranges
// [start, end) as the engine reported them (possibly none).
type MMObject struct {
	Hash    uint64
	Offsets [][2]uint64
}

// AppendHashes appends the mm hash of every object to dst and returns it.
// A nil receiver appends nothing.
func (m *MMExtraInfo) AppendHashes(dst []uint64) []uint64 {
	if m == nil {
		return dst
	}
	for _, o := range m.Objects {
		dst = append(dst, o.Hash)
	}
	return dst
}

// TargetsPrimary reports whether the event changes the primary index (the
// device-tier blocks each worker owns), by Dynamo's rules
// (RouterEvent::targets_primary in its kv-router protocols):
//   - A Cleared event without residency_domain (legacy) clears every domain
//     and one with "worker" the worker domain: both clear the member's
//     primary blocks, whatever its tier (a clear's tier is a placeholder).
//     One with "cache_owner" leaves the primary index alone.
//   - A Stored or Removed event targets it when worker-owned (domain absent
//     or "worker") and of the device tier. Cache-owner blocks live in lower
//     tiers; a cache-owner store or remove on the device tier is
//     unsupported.
//
// An unsupported event returns ErrUnsupportedResidency (explicitly null or
// unknown residency_domain, a cache-owner store or remove on the device
// tier) or ErrUnknownStorageTier; a caller skips it and takes the others.
func (e *RouterEvent) TargetsPrimary() (bool, error) {
	switch {
	case e.StorageTier >= TierUnknown:
		return false, ErrUnknownStorageTier
	case e.Residency >= ResidencyUnsupported:
		return false, ErrUnsupportedResidency
	case e.Event.Kind == kv.Cleared:
		return e.Residency != ResidencyCacheOwner, nil
	case e.Residency == ResidencyCacheOwner:
		if e.StorageTier == TierDevice {
			return false, detailed(ErrUnsupportedResidency, "(a cache owner's %v event on the device tier)", e.Event.Kind)
		}
		return false, nil
	}
	return e.StorageTier == TierDevice, nil
}

// Validate checks that the event is one a decoder could have produced: a
// tier and residency of their ranges (TierUnknown and ResidencyUnsupported
// included: the encoders write them as nil, which decodes back to them), a
// known kind, and at most MaxBlocksPerEvent blocks or removed hashes.
func (e *RouterEvent) Validate() error {
	if e.StorageTier > TierUnknown {
		return detailed(ErrUnknownStorageTier, "%v", e.StorageTier)
	}
	if e.Residency >= residencyCount {
		return detailed(ErrUnsupportedResidency, "%v", e.Residency)
	}
	switch e.Event.Kind {
	case kv.Stored, kv.Removed, kv.Cleared:
	default:
		return malformed("dynamo: invalid event kind %v", e.Event.Kind)
	}
	if n := max(len(e.Event.Stored.Blocks), len(e.Event.Removed)); n > MaxBlocksPerEvent {
		return &LimitError{What: "blocks", Got: n, Min: 0, Max: MaxBlocksPerEvent}
	}
	return nil
}

// KV converts the event to goindex's vocabulary: the member is
// (WorkerID, DpRank), each block becomes (external, local). The tier and
// residency are not carried; filter with TargetsPrimary first. The result owns
// fresh slices. An event that fails Validate returns its error.
func (e *RouterEvent) KV() (kv.Event, error) {
	if err := e.Validate(); err != nil {
		return kv.Event{}, err
	}
	c := &e.Event
	out := kv.Event{
		Member:  kv.Member{Worker: e.WorkerID, Rank: c.DpRank},
		EventID: c.EventID,
		Kind:    c.Kind,
	}
	switch c.Kind {
	case kv.Stored:
		s := &c.Stored
		out.HasParent, out.Parent = s.HasParent, s.Parent
		out.HasStart, out.StartPosition = s.HasStart, s.StartPosition
		out.Blocks = make([]kv.Block, len(s.Blocks))
		for i, b := range s.Blocks {
			out.Blocks[i] = kv.Block{External: b.BlockHash, Local: b.TokensHash}
		}
	case kv.Removed:
		out.Removed = append([]uint64(nil), c.Removed...)
	}
	return out, nil
}
