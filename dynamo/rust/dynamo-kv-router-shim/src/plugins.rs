//! `dynamo_kv_router::plugins`: startup registration of linked policies
//! (upstream `plugins/registry.rs`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

pub mod worker_selection;

use worker_selection::WorkerSelectionPolicyFactory;

/// Parses one policy instance's YAML parameters and creates its factory.
pub type WorkerSelectionPolicyProvider = Arc<
    dyn Fn(&WorkerSelectionPolicyParameters) -> Result<WorkerSelectionPolicyFactory, WorkerSelectionPolicyProviderError>
        + Send
        + Sync,
>;

/// The shim's stand-in for serde's `DeserializeOwned`: a type a parameter
/// mapping deserializes into.
pub trait DeserializeOwned: Sized {
    /// Builds the value from the instance's parameter mapping.
    fn from_mapping(mapping: &BTreeMap<String, String>) -> Result<Self, String>;
}

impl DeserializeOwned for HashMap<String, String> {
    fn from_mapping(mapping: &BTreeMap<String, String>) -> Result<Self, String> {
        Ok(mapping.clone().into_iter().collect())
    }
}

/// The YAML parameters of one policy instance (upstream wraps a
/// `serde_yaml::Value`; the shim a flat mapping of strings).
#[derive(Clone, Debug, Default)]
pub struct WorkerSelectionPolicyParameters(BTreeMap<String, String>);

impl WorkerSelectionPolicyParameters {
    /// Shim only: parameters with these keys and string values.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self(pairs.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
    }

    /// Deserializes the mapping into a policy-owned type.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, WorkerSelectionPolicyProviderError> {
        T::from_mapping(&self.0).map_err(WorkerSelectionPolicyProviderError::new)
    }
}

/// A policy's refusal of its parameters at startup.
#[derive(Debug)]
pub struct WorkerSelectionPolicyProviderError {
    message: String,
}

impl WorkerSelectionPolicyProviderError {
    /// An error for startup diagnostics.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }
}

impl fmt::Display for WorkerSelectionPolicyProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for WorkerSelectionPolicyProviderError {}

/// A registration or resolution failure (the variants a policy crate meets).
#[derive(Debug)]
pub enum WorkerSelectionPolicyRegistryError {
    /// An empty type name.
    EmptyName,
    /// The reserved name "default".
    ReservedDefault,
    /// A type registered twice.
    Duplicate {
        /// The type name.
        name: String,
    },
    /// No provider for a configured type.
    UnknownType {
        /// The type name.
        name: String,
    },
    /// The provider refused the instance's parameters.
    Provider {
        /// The type name.
        policy_type: String,
        /// The provider's reason.
        source: WorkerSelectionPolicyProviderError,
    },
}

impl fmt::Display for WorkerSelectionPolicyRegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyName => f.write_str("worker-selection policy type must not be empty"),
            Self::ReservedDefault => f.write_str("worker-selection policy type 'default' is reserved"),
            Self::Duplicate { name } => write!(f, "worker-selection policy type {name:?} is already registered"),
            Self::UnknownType { name } => write!(f, "unknown worker-selection policy type {name:?}"),
            Self::Provider { policy_type, source } => {
                write!(f, "invalid parameters for worker-selection policy type {policy_type:?}: {source}")
            }
        }
    }
}

impl std::error::Error for WorkerSelectionPolicyRegistryError {}

/// The startup registry of the router plugins linked into an image.
#[derive(Clone, Default)]
pub struct RouterPluginRegistry {
    providers: HashMap<String, WorkerSelectionPolicyProvider>,
}

impl RouterPluginRegistry {
    /// Registers a worker-selection provider under a type name.
    pub fn register_worker_selection(
        &mut self,
        name: impl Into<String>,
        provider: WorkerSelectionPolicyProvider,
    ) -> Result<(), WorkerSelectionPolicyRegistryError> {
        let name = name.into();
        if name.is_empty() {
            return Err(WorkerSelectionPolicyRegistryError::EmptyName);
        }
        if name == "default" {
            return Err(WorkerSelectionPolicyRegistryError::ReservedDefault);
        }
        if self.providers.contains_key(&name) {
            return Err(WorkerSelectionPolicyRegistryError::Duplicate { name });
        }
        self.providers.insert(name, provider);
        Ok(())
    }

    /// Shim only: resolves one configured instance of `policy_type` with
    /// `parameters`, as the host does at startup.
    pub fn resolve_instance(
        &self,
        policy_type: &str,
        parameters: &WorkerSelectionPolicyParameters,
    ) -> Result<WorkerSelectionPolicyFactory, WorkerSelectionPolicyRegistryError> {
        let provider = self
            .providers
            .get(policy_type)
            .ok_or_else(|| WorkerSelectionPolicyRegistryError::UnknownType { name: policy_type.to_owned() })?;
        provider(parameters).map_err(|source| WorkerSelectionPolicyRegistryError::Provider {
            policy_type: policy_type.to_owned(),
            source,
        })
    }
}
