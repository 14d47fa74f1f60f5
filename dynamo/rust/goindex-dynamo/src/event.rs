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

/// RouterEvent is one KV event of one worker, as the router receives it.
///
/// Dynamo's newer RouterEvent also carries a storage tier; only device-tier
/// events belong in this index (lower tiers have indexes of their own), so
/// the caller filters on the tier before applying.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterEvent {
    /// worker_id is the worker that emitted the event.
    pub worker_id: WorkerId,
    /// event is what happened.
    pub event: KvCacheEvent,
}

impl RouterEvent {
    /// new returns `event` of `worker_id`.
    pub fn new(worker_id: WorkerId, event: KvCacheEvent) -> Self {
        RouterEvent { worker_id, event }
    }

    /// member returns the (worker, dp rank) the event applies to.
    pub fn member(&self) -> WorkerWithDpRank {
        WorkerWithDpRank::new(self.worker_id, self.event.dp_rank)
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
    /// `"clear_scope": "worker"`).
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
