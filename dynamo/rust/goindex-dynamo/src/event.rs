//! Dynamo's identities, KV events and overlap scores, with Dynamo's names
//! and field names (`dynamo-compat` §2.1–§2.2), so router code written
//! against Dynamo's indexer types reads the same here.

use std::collections::HashMap;

/// WorkerId is Dynamo's worker (runtime instance) id; it changes when the
/// worker restarts.
pub type WorkerId = u64;

/// DpRank is a worker's data-parallel rank, 0 when data parallelism is off.
pub type DpRank = u32;

/// LocalBlockHash is a block's tokens hash (Dynamo's `tokens_hash`):
/// XXH3-64 of the block's tokens, position-independent. Queries and the
/// shared tree use it. `repr(transparent)`: a slice of them is a slice of
/// u64 to the C ABI.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalBlockHash(pub u64);

/// ExternalSequenceBlockHash is the engine's hash of a block in its
/// sequence (Dynamo's `block_hash` and `parent_hash`): an opaque per-member
/// key the index never recomputes. `repr(transparent)` over u64.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExternalSequenceBlockHash(pub u64);

impl From<u64> for ExternalSequenceBlockHash {
    fn from(hash: u64) -> Self {
        ExternalSequenceBlockHash(hash)
    }
}

impl From<i64> for ExternalSequenceBlockHash {
    /// from reinterprets the 64 bits: TRT-LLM and the standalone indexer
    /// send hashes as signed i64, and both encodings name one block (§2.3).
    fn from(hash: i64) -> Self {
        ExternalSequenceBlockHash(hash as u64)
    }
}

/// WorkerWithDpRank is the unit that owns blocks and receives scores: a
/// worker's data-parallel rank (the library's "member").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkerWithDpRank {
    /// worker_id is the worker.
    pub worker_id: WorkerId,
    /// dp_rank is the rank inside it.
    pub dp_rank: DpRank,
}

impl WorkerWithDpRank {
    /// new returns rank `dp_rank` of worker `worker_id`.
    pub fn new(worker_id: WorkerId, dp_rank: DpRank) -> Self {
        WorkerWithDpRank { worker_id, dp_rank }
    }

    /// from_worker_id returns rank 0 of `worker_id`.
    pub fn from_worker_id(worker_id: WorkerId) -> Self {
        WorkerWithDpRank { worker_id, dp_rank: 0 }
    }
}

/// StorageTier is the cache tier a [`RouterEvent`]'s blocks live in
/// (Dynamo's `storage_tier`, `dynamo-current` §2.2). Only
/// [`StorageTier::Device`] feeds this index: Dynamo keeps the lower tiers in
/// indexes of their own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StorageTier {
    /// Device is `"device"`, GPU memory: the default, and what wires that
    /// carry no tier mean.
    #[default]
    Device,
    /// HostPinned is `"host_pinned"`, pinned host memory.
    HostPinned,
    /// Disk is `"disk"`, local disk or NVMe.
    Disk,
    /// External is `"external"`, remote or shared storage.
    External,
    /// Unknown is a `storage_tier` that is nil, not a string, or a name
    /// Dynamo does not define (a newer release's tier). Such an event is
    /// unsupported ([`RouterEvent::targets_primary`]).
    Unknown,
}

impl StorageTier {
    /// from_wire reads a present `storage_tier` name: a known name's tier,
    /// else [`StorageTier::Unknown`] (an absent field is
    /// [`StorageTier::Device`], the default).
    pub fn from_wire(name: &str) -> StorageTier {
        match name {
            "device" => StorageTier::Device,
            "host_pinned" => StorageTier::HostPinned,
            "disk" => StorageTier::Disk,
            "external" => StorageTier::External,
            _ => StorageTier::Unknown,
        }
    }

    /// as_str returns the tier's wire name, `"unknown"` for
    /// [`StorageTier::Unknown`].
    pub fn as_str(self) -> &'static str {
        match self {
            StorageTier::Device => "device",
            StorageTier::HostPinned => "host_pinned",
            StorageTier::Disk => "disk",
            StorageTier::External => "external",
            StorageTier::Unknown => "unknown",
        }
    }
}

/// ResidencyDomain is a present `residency_domain` of a [`RouterEvent`]
/// (`dynamo-current` §2.2): who owns the event's blocks. An absent field
/// (older wires) is `None` in [`RouterEvent::residency_domain`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResidencyDomain {
    /// Worker is `"worker"`: blocks owned by the emitting worker.
    Worker,
    /// CacheOwner is `"cache_owner"`: blocks owned by a shared cache owner
    /// (named by Dynamo's `state_source`). They never reach this index.
    CacheOwner,
    /// Unsupported is a `residency_domain` present but explicitly nil, not a
    /// string, or another name. Dynamo's router refuses such an event
    /// ([`RouterEvent::targets_primary`]).
    Unsupported,
}

impl ResidencyDomain {
    /// from_wire reads a present `residency_domain` name: `"worker"` or
    /// `"cache_owner"`, else [`ResidencyDomain::Unsupported`].
    pub fn from_wire(name: &str) -> ResidencyDomain {
        match name {
            "worker" => ResidencyDomain::Worker,
            "cache_owner" => ResidencyDomain::CacheOwner,
            _ => ResidencyDomain::Unsupported,
        }
    }

    /// as_str returns the domain's wire name, `"unsupported"` for
    /// [`ResidencyDomain::Unsupported`].
    pub fn as_str(self) -> &'static str {
        match self {
            ResidencyDomain::Worker => "worker",
            ResidencyDomain::CacheOwner => "cache_owner",
            ResidencyDomain::Unsupported => "unsupported",
        }
    }
}

/// UnsupportedEvent is why [`RouterEvent::targets_primary`] refuses an
/// event that Dynamo's router refuses too; a caller skips that event and
/// takes the others. The Go side's sentinels have the same names
/// (`dynamo.ErrUnknownStorageTier`, `dynamo.ErrUnsupportedResidency`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnsupportedEvent {
    /// UnknownStorageTier: the tier is [`StorageTier::Unknown`].
    UnknownStorageTier,
    /// UnsupportedResidency: the domain is [`ResidencyDomain::Unsupported`],
    /// or a cache owner's store or removal names the device tier.
    UnsupportedResidency,
}

impl std::fmt::Display for UnsupportedEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UnsupportedEvent::UnknownStorageTier => "unknown storage_tier",
            UnsupportedEvent::UnsupportedResidency => "unsupported residency_domain",
        })
    }
}

impl std::error::Error for UnsupportedEvent {}

/// RouterEvent is one KV event of one worker, as the router receives it:
/// the worker, the tier and residency of the blocks, and the change.
///
/// Only events for the primary index (worker-owned device-tier blocks)
/// change this index; [`RouterEvent::targets_primary`] is the rule, and
/// [`Indexer::apply_event`](crate::Indexer::apply_event) skips the other
/// events. Dynamo's `state_source` (the cache owner of cache-owner events,
/// which never reach this index) and `session_id` have no field here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterEvent {
    /// worker_id is the worker that emitted the event.
    pub worker_id: WorkerId,
    /// storage_tier is the tier of the event's blocks; [`StorageTier::Device`]
    /// when the wire has none.
    pub storage_tier: StorageTier,
    /// residency_domain is the owner domain of the blocks, `None` when the
    /// wire omits the field (legacy).
    pub residency_domain: Option<ResidencyDomain>,
    /// event is what happened.
    pub event: KvCacheEvent,
}

impl RouterEvent {
    /// new returns `event` of `worker_id` on the device tier with no
    /// residency domain: a legacy event, which targets the primary index.
    /// Set [`RouterEvent::storage_tier`] and
    /// [`RouterEvent::residency_domain`] for newer wires.
    pub fn new(worker_id: WorkerId, event: KvCacheEvent) -> Self {
        RouterEvent { worker_id, storage_tier: StorageTier::Device, residency_domain: None, event }
    }

    /// member returns the (worker, dp rank) the event applies to.
    pub fn member(&self) -> WorkerWithDpRank {
        WorkerWithDpRank::new(self.worker_id, self.event.dp_rank)
    }

    /// targets_primary reports whether the event changes the primary index
    /// (the device-tier blocks each worker owns), by Dynamo's rules
    /// (`RouterEvent::targets_primary` in its kv-router protocols), the same
    /// as the Go side's `dynamo.RouterEvent.TargetsPrimary`:
    ///
    /// - an unknown tier or an unsupported domain is unsupported, whatever
    ///   the kind;
    /// - a [`KvCacheEventData::Cleared`] without a domain (legacy) clears
    ///   every domain and one with [`ResidencyDomain::Worker`] the worker's:
    ///   both clear the member's primary blocks, whatever the tier (a
    ///   clear's tier is a placeholder). One with
    ///   [`ResidencyDomain::CacheOwner`] leaves the primary index alone;
    /// - a store or removal targets it when worker-owned (no domain or
    ///   [`ResidencyDomain::Worker`]) and of the device tier. Cache-owner
    ///   blocks live in lower tiers; a cache owner's store or removal on the
    ///   device tier is unsupported.
    ///
    /// `Ok(false)` is an event for another index (a lower tier, a cache
    /// owner); `Err` one that Dynamo's router refuses.
    pub fn targets_primary(&self) -> std::result::Result<bool, UnsupportedEvent> {
        match (self.storage_tier, self.residency_domain, &self.event.data) {
            (StorageTier::Unknown, _, _) => Err(UnsupportedEvent::UnknownStorageTier),
            (_, Some(ResidencyDomain::Unsupported), _) => Err(UnsupportedEvent::UnsupportedResidency),
            (_, domain, KvCacheEventData::Cleared) => Ok(domain != Some(ResidencyDomain::CacheOwner)),
            (StorageTier::Device, Some(ResidencyDomain::CacheOwner), _) => Err(UnsupportedEvent::UnsupportedResidency),
            (_, Some(ResidencyDomain::CacheOwner), _) => Ok(false),
            (tier, _, _) => Ok(tier == StorageTier::Device),
        }
    }
}

/// KvCacheEvent is one event of a worker's rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvCacheEvent {
    /// event_id is the publisher's event number; the library records it for
    /// diagnostics and does not order by it (ordering and gap detection
    /// belong to the subscriber, §3.1).
    pub event_id: u64,
    /// data is the change.
    pub data: KvCacheEventData,
    /// dp_rank is the emitting rank.
    pub dp_rank: DpRank,
}

/// KvCacheEventData is the change an event carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvCacheEventData {
    /// Stored adds a chain of blocks below a parent (or the root).
    Stored(KvCacheStoreData),
    /// Removed drops blocks by external hash; a mid-chain removal makes the
    /// rank's descendants of that block unreachable.
    Removed(KvCacheRemoveData),
    /// Cleared drops every block of the rank (or of the whole worker, with
    /// `"clear_scope": "worker"`). With a residency domain it clears only
    /// that domain, so a cache owner's clear leaves the index alone
    /// ([`RouterEvent::targets_primary`]).
    Cleared,
}

/// KvCacheStoreData is a stored event: `blocks[k]`'s parent is
/// `blocks[k-1]`, and `blocks[0]`'s is `parent_hash`.
///
/// Dynamo's positional `start_position` and per-block multimodal info have
/// no field here: the index navigates by tokens hash, into which the
/// publisher has already folded any multimodal content.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvCacheStoreData {
    /// parent_hash is the external hash of the block the chain continues,
    /// `None` for a chain from the root. The rank must hold it.
    pub parent_hash: Option<ExternalSequenceBlockHash>,
    /// blocks is the chain, root side first.
    pub blocks: Vec<KvCacheStoredBlockData>,
}

/// KvCacheStoredBlockData is one stored block's two identities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KvCacheStoredBlockData {
    /// block_hash is the engine's external hash of the block.
    pub block_hash: ExternalSequenceBlockHash,
    /// tokens_hash is the block's local hash.
    pub tokens_hash: LocalBlockHash,
}

/// KvCacheRemoveData is a removed event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvCacheRemoveData {
    /// block_hashes are the external hashes the rank dropped.
    pub block_hashes: Vec<ExternalSequenceBlockHash>,
}

/// OverlapScores is the result of a match: for every rank with a positive
/// score, the number of leading query blocks it holds through a reachable
/// chain, in KV blocks (Dynamo's `OverlapScores::scores`). Ranks that match
/// nothing are absent.
///
/// Dynamo's `frequencies` and `tree_sizes` are not filled: the C ABI's
/// probe returns depths only.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OverlapScores {
    /// scores maps each matching rank to its prefix depth in blocks (> 0).
    pub scores: HashMap<WorkerWithDpRank, u32>,
}
