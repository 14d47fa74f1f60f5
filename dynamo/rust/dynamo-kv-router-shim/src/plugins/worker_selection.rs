//! `dynamo_kv_router::plugins::worker_selection`: the filter, scorer and
//! picker contracts and their inputs (upstream `worker_selection.rs`,
//! `inputs.rs`, `context.rs`).

use std::fmt;
use std::ops::BitOr;
use std::sync::Arc;

use crate::protocols::WorkerWithDpRank;
use crate::{KvRouterConfig, RoutingPartitionRef, WorkerType};

/// Creates one policy per routing partition.
pub type WorkerSelectionPolicyFactory =
    Arc<dyn for<'a> Fn(&KvRouterConfig, WorkerType, RoutingPartitionRef<'a>) -> WorkerSelectionPolicy + Send + Sync>;

/// Adds one finite cost contribution to each eligible worker.
pub trait WorkerScorer: Send {
    /// The worker-signal groups this scorer reads.
    fn required_worker_inputs(&self) -> WorkerInputs {
        WorkerInputs::NONE
    }

    /// Writes one finite, lower-is-better cost per candidate into `costs`
    /// (same length, NaN-initialised by the host).
    fn score(
        &mut self,
        context: &WorkerSelectionContext<'_>,
        candidates: WorkerCandidates<'_>,
        costs: &mut [f64],
    ) -> Result<(), WorkerSelectionPolicyError>;
}

/// Keeps or rejects one eligible worker.
pub trait WorkerFilter: Send {
    /// The worker-signal groups this filter reads.
    fn required_worker_inputs(&self) -> WorkerInputs {
        WorkerInputs::NONE
    }

    /// `true` keeps the worker.
    fn keep(
        &mut self,
        context: &WorkerSelectionContext<'_>,
        candidate: WorkerCandidate<'_>,
    ) -> Result<bool, WorkerSelectionPolicyError>;
}

/// Selects one row after all scorers ran.
pub trait WorkerPicker: Send {
    /// The optional worker-signal columns this picker reads.
    fn required_worker_inputs(&self) -> WorkerInputs {
        WorkerInputs::NONE
    }

    /// Returns one row index of the scored candidate table.
    fn pick(
        &mut self,
        context: &WorkerSelectionContext<'_>,
        input: WorkerInputView<'_>,
    ) -> Result<usize, WorkerSelectionPolicyError>;
}

/// A policy's failure for one selection.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSelectionPolicyError {
    message: String,
}

impl WorkerSelectionPolicyError {
    /// A selection failure with a message.
    pub fn failed(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }
}

impl fmt::Display for WorkerSelectionPolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for WorkerSelectionPolicyError {}

/// Optional worker-signal groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerInputs(u8);

impl WorkerInputs {
    /// No optional inputs.
    pub const NONE: Self = Self(0);
    /// KV-cache overlap and request-level cache context.
    pub const CACHE: Self = Self(1 << 0);
    /// Active load.
    pub const LOAD: Self = Self(1 << 1);
    /// Preferred-taint metadata.
    pub const PREFERRED_TAINT: Self = Self(1 << 2);
    /// Host-owned active-request counts.
    pub const OCCUPANCY: Self = Self(1 << 5);

    /// Whether every group of `other` is in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for WorkerInputs {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self::Output {
        Self(self.0 | rhs.0)
    }
}

/// One worker's KV-cache overlap.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkerCacheInput {
    pub(crate) effective_overlap_blocks: f64,
    pub(crate) estimated_cached_tokens: usize,
    pub(crate) device_overlap_blocks: f64,
    pub(crate) host_overlap_blocks: f64,
    pub(crate) disk_overlap_blocks: f64,
}

impl WorkerCacheInput {
    /// The host's weighted estimate: (blocks, tokens).
    pub fn accounting_cache_estimate(&self) -> (f64, usize) {
        (self.effective_overlap_blocks, self.estimated_cached_tokens)
    }

    /// Device-resident overlap in blocks.
    pub fn device_overlap_blocks(&self) -> f64 {
        self.device_overlap_blocks
    }

    /// Host-pinned overlap in blocks.
    pub fn host_overlap_blocks(&self) -> f64 {
        self.host_overlap_blocks
    }

    /// Disk overlap in blocks.
    pub fn disk_overlap_blocks(&self) -> f64 {
        self.disk_overlap_blocks
    }
}

/// One worker's active load.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkerLoadInput {
    pub(crate) available: bool,
    pub(crate) active_prefill_tokens: usize,
    pub(crate) decode_cost_blocks: f64,
    pub(crate) active_requests: usize,
}

impl WorkerLoadInput {
    /// Whether the host had a load observation for this worker.
    pub fn is_available(&self) -> bool {
        self.available
    }

    /// Tokens in the worker's prefill stage.
    pub fn active_prefill_tokens(&self) -> usize {
        self.active_prefill_tokens
    }

    /// Projected active decode footprint in KV blocks.
    pub fn decode_cost_blocks(&self) -> f64 {
        self.decode_cost_blocks
    }

    /// Active requests.
    pub fn active_requests(&self) -> usize {
        self.active_requests
    }
}

/// The host's row of one worker.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CandidateData {
    pub(crate) worker: WorkerWithDpRank,
    pub(crate) cache: WorkerCacheInput,
    pub(crate) load: WorkerLoadInput,
}

/// One worker, restricted to the component's declared inputs.
#[derive(Clone, Copy)]
pub struct WorkerCandidate<'a> {
    data: &'a CandidateData,
    inputs: WorkerInputs,
}

impl<'a> WorkerCandidate<'a> {
    /// The worker's identity.
    pub fn worker(self) -> WorkerWithDpRank {
        self.data.worker
    }

    /// The cache snapshot, when the component declared CACHE.
    pub fn cache(self) -> Option<&'a WorkerCacheInput> {
        self.inputs.contains(WorkerInputs::CACHE).then_some(&self.data.cache)
    }

    /// The load snapshot, when the component declared LOAD.
    pub fn load(self) -> Option<&'a WorkerLoadInput> {
        self.inputs.contains(WorkerInputs::LOAD).then_some(&self.data.load)
    }
}

/// The candidate batch of one scorer call.
#[derive(Clone, Copy)]
pub struct WorkerCandidates<'a> {
    pub(crate) rows: &'a [CandidateData],
    pub(crate) inputs: WorkerInputs,
}

impl<'a> WorkerCandidates<'a> {
    /// Number of workers (the cost buffer's length).
    pub fn len(self) -> usize {
        self.rows.len()
    }

    /// Whether there are none.
    pub fn is_empty(self) -> bool {
        self.rows.is_empty()
    }

    /// One row, or None out of range.
    pub fn get(self, row: usize) -> Option<WorkerCandidate<'a>> {
        self.rows.get(row).map(|data| WorkerCandidate { data, inputs: self.inputs })
    }

    /// The rows in order.
    pub fn iter(self) -> impl ExactSizeIterator<Item = WorkerCandidate<'a>> + DoubleEndedIterator + Clone {
        self.rows.iter().map(move |data| WorkerCandidate { data, inputs: self.inputs })
    }
}

/// One worker and its total cost after every scorer.
#[derive(Clone, Copy, Debug)]
pub struct ScoredWorkerCandidate {
    pub(crate) worker: WorkerWithDpRank,
    pub(crate) cost: f64,
}

impl ScoredWorkerCandidate {
    /// The worker's identity.
    pub fn worker(&self) -> WorkerWithDpRank {
        self.worker
    }

    /// The sum of the scorers' contributions.
    pub fn cost(&self) -> f64 {
        self.cost
    }
}

/// The picker's index-aligned view.
#[derive(Clone, Copy)]
pub struct WorkerInputView<'a> {
    pub(crate) candidates: &'a [ScoredWorkerCandidate],
    pub(crate) cache: Option<&'a [WorkerCacheInput]>,
    pub(crate) load: Option<&'a [WorkerLoadInput]>,
}

impl<'a> WorkerInputView<'a> {
    /// The candidates and their total costs.
    pub fn candidates(self) -> &'a [ScoredWorkerCandidate] {
        self.candidates
    }

    /// Cache inputs, when the picker requested them.
    pub fn cache(self) -> Option<&'a [WorkerCacheInput]> {
        self.cache
    }

    /// Load inputs, when the picker requested them.
    pub fn load(self) -> Option<&'a [WorkerLoadInput]> {
        self.load
    }
}

/// Request-level values of one selection.
pub struct WorkerSelectionContext<'a> {
    pub(crate) prompt_tokens: usize,
    pub(crate) request_blocks: u64,
    pub(crate) block_size: u32,
    pub(crate) _request: std::marker::PhantomData<&'a ()>,
}

impl WorkerSelectionContext<'_> {
    /// The prompt's length in tokens.
    pub fn prompt_tokens(&self) -> usize {
        self.prompt_tokens
    }

    /// The prompt's size in KV blocks.
    pub fn request_blocks(&self) -> u64 {
        self.request_blocks
    }

    /// Tokens per KV block.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }
}

/// A configured policy: scorers and one picker.
pub struct WorkerSelectionPolicy {
    pub(crate) worker_type: &'static str,
    pub(crate) scorers: Vec<Box<dyn WorkerScorer>>,
    pub(crate) picker: Box<dyn WorkerPicker>,
}

impl WorkerSelectionPolicy {
    /// A policy of scorers and one picker for a worker pool.
    pub fn new(
        _config: KvRouterConfig,
        worker_type: &'static str,
        scorers: Vec<Box<dyn WorkerScorer>>,
        picker: Box<dyn WorkerPicker>,
    ) -> Self {
        Self { worker_type, scorers, picker }
    }
}
