//! Shim only: Dynamo's side of a selection, for tests. [`select`] runs a
//! policy the way the upstream host does: every scorer gets the rows with
//! its own declared inputs and NaN-initialised costs, a non-finite
//! contribution or total stops the selection, the totals go to the picker,
//! and a row out of range is refused.

use crate::plugins::worker_selection::{
    CandidateData, ScoredWorkerCandidate, WorkerCacheInput, WorkerCandidates, WorkerInputView, WorkerInputs,
    WorkerLoadInput, WorkerScorer, WorkerSelectionContext, WorkerSelectionPolicy, WorkerSelectionPolicyError,
};
use crate::protocols::WorkerWithDpRank;

/// One worker as the host sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Row {
    /// The worker.
    pub worker: WorkerWithDpRank,
    /// Weighted cached tokens (the host's accounting estimate).
    pub cached_tokens: usize,
    /// Device-resident overlap in blocks.
    pub device_overlap_blocks: f64,
    /// Whether a load observation exists.
    pub load_available: bool,
    /// Tokens in the prefill stage.
    pub active_prefill_tokens: usize,
    /// Decode footprint in blocks.
    pub decode_cost_blocks: f64,
    /// Active requests.
    pub active_requests: usize,
}

/// The outcome of one selection: the chosen worker and each row's total.
#[derive(Debug)]
pub struct Selected {
    /// The picked worker.
    pub worker: WorkerWithDpRank,
    /// Every row's total cost, in row order.
    pub totals: Vec<f64>,
}

/// The worker type label the policy was built with.
pub fn worker_type(policy: &WorkerSelectionPolicy) -> &'static str {
    policy.worker_type
}

/// Runs one selection of `policy` over `rows` for a prompt of
/// `prompt_tokens` tokens in blocks of `block_size`.
pub fn select(
    policy: &mut WorkerSelectionPolicy,
    prompt_tokens: usize,
    block_size: u32,
    rows: &[Row],
) -> Result<Selected, WorkerSelectionPolicyError> {
    let data = candidate_data(rows, block_size);
    if data.is_empty() {
        return Err(WorkerSelectionPolicyError::failed("no eligible worker"));
    }
    let context = context(prompt_tokens, block_size);
    let mut totals = vec![0.0; data.len()];
    let mut costs = vec![f64::NAN; data.len()];
    for scorer in &mut policy.scorers {
        costs.fill(f64::NAN);
        let inputs = scorer.required_worker_inputs();
        scorer.score(&context, WorkerCandidates { rows: &data, inputs }, &mut costs)?;
        for (total, cost) in totals.iter_mut().zip(&costs) {
            if !cost.is_finite() {
                return Err(WorkerSelectionPolicyError::failed(format!("scorer wrote a non-finite cost {cost}")));
            }
            *total += cost;
            if !total.is_finite() {
                return Err(WorkerSelectionPolicyError::failed("non-finite total cost"));
            }
        }
    }
    let scored: Vec<ScoredWorkerCandidate> =
        data.iter().zip(&totals).map(|(d, &cost)| ScoredWorkerCandidate { worker: d.worker, cost }).collect();
    let inputs = policy.picker.required_worker_inputs();
    let cache: Vec<WorkerCacheInput> = data.iter().map(|d| d.cache).collect();
    let load: Vec<WorkerLoadInput> = data.iter().map(|d| d.load).collect();
    let view = WorkerInputView {
        candidates: &scored,
        cache: inputs.contains(WorkerInputs::CACHE).then_some(&cache[..]),
        load: inputs.contains(WorkerInputs::LOAD).then_some(&load[..]),
    };
    let row = policy.picker.pick(&context, view)?;
    let worker = scored
        .get(row)
        .ok_or_else(|| WorkerSelectionPolicyError::failed(format!("picker returned row {row} of {}", scored.len())))?
        .worker;
    Ok(Selected { worker, totals })
}

/// Runs one scorer alone over `rows`, as [`select`] does for each of a
/// policy's scorers, and returns the costs it wrote (NaN where it wrote
/// none), so that a test can read the scorer's state afterwards.
pub fn score(
    scorer: &mut dyn WorkerScorer,
    prompt_tokens: usize,
    block_size: u32,
    rows: &[Row],
) -> Result<Vec<f64>, WorkerSelectionPolicyError> {
    let data = candidate_data(rows, block_size);
    let mut costs = vec![f64::NAN; data.len()];
    let inputs = scorer.required_worker_inputs();
    scorer.score(&context(prompt_tokens, block_size), WorkerCandidates { rows: &data, inputs }, &mut costs)?;
    Ok(costs)
}

/// The selection context of a prompt of `prompt_tokens` tokens.
fn context<'a>(prompt_tokens: usize, block_size: u32) -> WorkerSelectionContext<'a> {
    WorkerSelectionContext {
        prompt_tokens,
        request_blocks: prompt_tokens.div_ceil(block_size as usize) as u64,
        block_size,
        _request: std::marker::PhantomData,
    }
}

/// The host's rows of `rows`.
fn candidate_data(rows: &[Row], block_size: u32) -> Vec<CandidateData> {
    rows.iter()
        .map(|r| CandidateData {
            worker: r.worker,
            cache: WorkerCacheInput {
                effective_overlap_blocks: r.cached_tokens as f64 / f64::from(block_size),
                estimated_cached_tokens: r.cached_tokens,
                device_overlap_blocks: r.device_overlap_blocks,
                host_overlap_blocks: 0.0,
                disk_overlap_blocks: 0.0,
            },
            load: WorkerLoadInput {
                available: r.load_available,
                active_prefill_tokens: r.active_prefill_tokens,
                decode_cost_blocks: r.decode_cost_blocks,
                active_requests: r.active_requests,
            },
        })
        .collect()
}
