//! A test stand-in for the worker-selection plugin surface of NVIDIA
//! Dynamo's `dynamo-kv-router` crate, so that goindex-scorer's Dynamo module
//! compiles and runs offline (Dynamo's crates cannot be fetched here).
//!
//! Every public name below is declared with the signature upstream gives it
//! in `ai-dynamo/dynamo`:
//!
//! - the traits `WorkerScorer`, `WorkerFilter`, `WorkerPicker` and the
//!   factory type: `lib/kv-router/src/plugins/worker_selection.rs` at
//!   19cd8900233d5df7b42dbec569b05efcfd31da0e (batch scoring: one call per
//!   selection writes one cost per worker, as the v1.6.x and v1.7.0 docs
//!   "Write Custom Routing Strategies" describe);
//! - `WorkerInputs`, `WorkerCandidate(s)`, `WorkerCacheInput`,
//!   `WorkerLoadInput`, `ScoredWorkerCandidate`, `WorkerInputView`:
//!   `lib/kv-router/src/plugins/worker_selection/inputs.rs` at
//!   1dca8375be40936984a56becdccaca7841749cf3;
//! - `WorkerSelectionContext`: `worker_selection/context.rs` at the same
//!   commit (only the accessors goindex reads);
//! - `RouterPluginRegistry`, `WorkerSelectionPolicyParameters` and their
//!   errors: `lib/kv-router/src/plugins/registry.rs` at
//!   4700f833018f2de77814738ca8aa14854a4ac0f0;
//! - `WorkerSelectionPolicy::new(config, worker_type, scorers, picker)` as
//!   the built-in policies in `lib/router-plugins/builtin` call it.
//!
//! What upstream keeps crate-private (building rows, running a policy) the
//! shim puts in [`host`], which plays Dynamo's part in tests: it builds the
//! candidate table, calls the scorers with NaN-initialised costs, rejects a
//! non-finite contribution, sums, calls the picker and checks its row.
//! Parameters deserialize through [`plugins::DeserializeOwned`], which the
//! shim implements for the one type goindex reads (a map of strings);
//! upstream's is serde's, which covers the same type.

use std::fmt;

pub mod plugins;

pub use plugins::worker_selection::{
    WorkerCandidate, WorkerCandidates, WorkerInputView, WorkerInputs, WorkerPicker, WorkerScorer,
    WorkerSelectionContext, WorkerSelectionPolicyError,
};

/// Protocol types shared with the rest of Dynamo.
pub mod protocols {
    /// A worker and one of its data-parallel ranks.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub struct WorkerWithDpRank {
        /// The worker's id.
        pub worker_id: u64,
        /// The data-parallel rank.
        pub dp_rank: u32,
    }

    impl WorkerWithDpRank {
        /// Pairs a worker with a rank.
        pub fn new(worker_id: u64, dp_rank: u32) -> Self {
            Self { worker_id, dp_rank }
        }
    }
}

/// The router's configuration (upstream's has many fields; a policy only
/// clones it into `WorkerSelectionPolicy::new`).
#[derive(Clone, Debug, Default)]
pub struct KvRouterConfig {}

/// The role of the worker pool a policy serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkerType {
    /// Workers that prefill and decode.
    Aggregated,
    /// Prefill workers of a disaggregated deployment.
    Prefill,
    /// Decode workers of a disaggregated deployment.
    Decode,
    /// Encode workers.
    Encode,
}

impl WorkerType {
    /// The role's static label, as policies pass it to `WorkerSelectionPolicy::new`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aggregated => "aggregated",
            Self::Prefill => "prefill",
            Self::Decode => "decode",
            Self::Encode => "encode",
        }
    }
}

impl fmt::Display for WorkerType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The model and routing-group partition a factory builds a policy for.
#[derive(Clone, Copy, Debug, Default)]
pub struct RoutingPartitionRef<'a> {
    /// The partition's model name.
    pub model: &'a str,
}

pub mod host;
