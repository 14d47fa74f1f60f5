//! Dynamo's `WorkerScorer` / `WorkerPicker` over the [`Scorer`] (feature
//! `dynamo`). The trait shapes are those of `ai-dynamo/dynamo`
//! `lib/kv-router/src/plugins/worker_selection.rs` at 19cd890 (one scorer
//! call per selection, one cost per worker: Dynamo v1.6.x / v1.7.0), with
//! registration as in `plugins/registry.rs` at 4700f83.
//!
//! - [`GoindexScorer`] asks for CACHE and LOAD and writes each worker's
//!   goindex cost in ms: Dynamo's weighted cached-token estimate is the
//!   worker's cache, its active prefill tokens and decode blocks its load.
//!   It fails open: a worker without a load observation is ranked after
//!   every worker with one (never a non-finite cost that fails the
//!   request), and where goindex's cost cannot be had (the library could
//!   not be loaded or refused the call) each worker gets Dynamo's own
//!   default cost ([`fallback_costs`]), so routing stays load- and
//!   cache-aware instead of piling onto one worker.
//! - [`LowestCostPicker`] picks the lowest total, ties broken by worker id
//!   and rank, so the choice never depends on row order.
//! - [`register`] adds the policy type [`POLICY_TYPE`] to a registry. Its
//!   one YAML parameter, `config`, is the JSON config of [`Scorer::new`]
//!   (the same as the C plugin's `DYN_ROUTER_WORKER_SELECTOR_CONFIG`); it
//!   is checked once at startup, and each routing partition gets its own
//!   state.

use std::collections::HashMap;
use std::sync::Arc;

use dynamo_kv_router::plugins::worker_selection::{
    WorkerCandidates, WorkerInputView, WorkerInputs, WorkerPicker, WorkerScorer, WorkerSelectionContext,
    WorkerSelectionPolicy, WorkerSelectionPolicyError, WorkerSelectionPolicyFactory,
};
use dynamo_kv_router::plugins::{
    RouterPluginRegistry, WorkerSelectionPolicyParameters, WorkerSelectionPolicyProviderError,
    WorkerSelectionPolicyRegistryError,
};
use dynamo_kv_router::{KvRouterConfig, WorkerType};

use crate::{fallback_costs, Error, Health, Load, Scorer, Worker, NOT_LOADED};

/// POLICY_TYPE is the type name router-policy YAML selects.
pub const POLICY_TYPE: &str = "goindex";

/// GoindexScorer writes goindex's per-worker cost.
pub struct GoindexScorer {
    scorer: Result<Scorer, Error>,
    workers: Vec<Worker>,
    health: Health,
}

impl GoindexScorer {
    /// new wraps the result of making a library state; with an error (the
    /// library could not be loaded, or refused the config) it scores every
    /// worker by [`fallback_costs`] and [`health`](Self::health) says why.
    pub fn new(scorer: Result<Scorer, Error>) -> Self {
        GoindexScorer { scorer, workers: Vec::new(), health: Health::Fresh }
    }

    /// health is the last selection's: degraded when the replica was
    /// missing or stale, or the library refused the call.
    pub fn health(&self) -> &Health {
        &self.health
    }
}

impl WorkerScorer for GoindexScorer {
    fn required_worker_inputs(&self) -> WorkerInputs {
        WorkerInputs::CACHE | WorkerInputs::LOAD
    }

    fn score(
        &mut self,
        context: &WorkerSelectionContext<'_>,
        candidates: WorkerCandidates<'_>,
        costs: &mut [f64],
    ) -> Result<(), WorkerSelectionPolicyError> {
        self.workers.clear();
        self.workers.extend(candidates.iter().map(|c| Worker {
            cached_tokens: c.cache().map_or(0, |cache| cache.accounting_cache_estimate().1 as u64),
            load: c.load().filter(|load| load.is_available()).map(|load| Load {
                active_prefill_tokens: load.active_prefill_tokens() as u64,
                active_decode_blocks: load.decode_cost_blocks().max(0.0).round() as u64,
            }),
            capacity_blocks: None, // Dynamo's worker inputs carry no KV capacity
        }));
        let (block_size, isl) = (context.block_size(), context.prompt_tokens() as u64);
        let scored = match self.scorer.as_mut() {
            Ok(scorer) => scorer.costs(block_size, isl, &self.workers, costs).map_err(|err| err.to_string()),
            Err(err) => Err(format!("no goindex state ({err})")),
        };
        match scored {
            Ok(health) => self.health = health,
            Err(why) => {
                fallback_costs(block_size, isl, &self.workers, costs);
                self.health = Health::Degraded(format!("{why}; Dynamo's default cost"));
            }
        }
        // A worker without load ranks after every worker with one.
        let worst = costs.iter().copied().filter(|c| c.is_finite()).fold(0.0, f64::max);
        for cost in costs.iter_mut().filter(|c| !c.is_finite()) {
            *cost = worst + 1.0;
        }
        Ok(())
    }
}

/// LowestCostPicker picks the row with the lowest total cost.
pub struct LowestCostPicker;

impl WorkerPicker for LowestCostPicker {
    fn pick(
        &mut self,
        _context: &WorkerSelectionContext<'_>,
        input: WorkerInputView<'_>,
    ) -> Result<usize, WorkerSelectionPolicyError> {
        input
            .candidates()
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| a.cost().total_cmp(&b.cost()).then_with(|| a.worker().cmp(&b.worker())))
            .map(|(row, _)| row)
            .ok_or_else(|| WorkerSelectionPolicyError::failed("goindex: no candidate to pick"))
    }
}

/// policy builds the policy of one routing partition from a checked config.
pub fn policy(config_json: &str, router: &KvRouterConfig, worker_type: WorkerType) -> WorkerSelectionPolicy {
    WorkerSelectionPolicy::new(
        router.clone(),
        worker_type.as_str(),
        vec![Box::new(GoindexScorer::new(Scorer::new(config_json)))],
        Box::new(LowestCostPicker),
    )
}

/// provider reads the instance's `config` parameter, checks it with the
/// library, and returns the factory of per-partition policies.
fn provider(
    parameters: &WorkerSelectionPolicyParameters,
) -> Result<WorkerSelectionPolicyFactory, WorkerSelectionPolicyProviderError> {
    let mut keys: HashMap<String, String> = parameters.deserialize()?;
    let config = keys.remove("config").unwrap_or_else(|| "{}".to_owned());
    if let Some(key) = keys.keys().next() {
        return Err(WorkerSelectionPolicyProviderError::new(format!(
            "goindex: unknown parameter {key:?} (the one parameter is \"config\", goindex's JSON config)"
        )));
    }
    // A bad config is refused at startup; a library that cannot be loaded
    // is not: the policy routes on Dynamo's default cost, and says so on
    // the host's stderr (this crate has no logger of the host's).
    match Scorer::new(&config) {
        Err(err) if err.code == NOT_LOADED => {
            eprintln!("{err}; the {POLICY_TYPE} policy routes on Dynamo's default cost (prefill and decode blocks)")
        }
        Err(err) => return Err(WorkerSelectionPolicyProviderError::new(err.to_string())),
        Ok(_) => {}
    }
    Ok(Arc::new(move |router, worker_type, _partition| policy(&config, router, worker_type)))
}

/// register adds [`POLICY_TYPE`] to the registry; call it from your catalog.
pub fn register(registry: &mut RouterPluginRegistry) -> Result<(), WorkerSelectionPolicyRegistryError> {
    registry.register_worker_selection(POLICY_TYPE, Arc::new(provider))
}
