//! The Dynamo module through the shim's host (dynamo-kv-router-shim, the
//! upstream trait signatures): registration, parameter checks, the choice
//! goindex's cost model makes, and failing open.
#![cfg(feature = "dynamo")]

mod common;

use common::row;
use dynamo_kv_router::host;
use dynamo_kv_router::plugins::{RouterPluginRegistry, WorkerSelectionPolicyParameters};
use dynamo_kv_router::{KvRouterConfig, RoutingPartitionRef, WorkerType};
use goindex_scorer::dynamo::{register, POLICY_TYPE};

fn registry() -> RouterPluginRegistry {
    let mut r = RouterPluginRegistry::default();
    register(&mut r).expect("register");
    r
}

fn policy_for(
    config: &str,
    worker_type: WorkerType,
) -> dynamo_kv_router::plugins::worker_selection::WorkerSelectionPolicy {
    let factory = registry()
        .resolve_instance(POLICY_TYPE, &WorkerSelectionPolicyParameters::from_pairs([("config", config)]))
        .expect("resolve");
    factory(&KvRouterConfig::default(), worker_type, RoutingPartitionRef::default())
}

#[test]
fn registers_once_under_its_type() {
    let mut r = registry();
    assert!(register(&mut r).is_err(), "a second registration of {POLICY_TYPE} was accepted");
    let err = r
        .resolve_instance(POLICY_TYPE, &WorkerSelectionPolicyParameters::from_pairs([("confg", "{}")]))
        .err()
        .expect("an unknown parameter was accepted");
    assert!(err.to_string().contains("unknown parameter"), "{err}");
    let err = r
        .resolve_instance(POLICY_TYPE, &WorkerSelectionPolicyParameters::from_pairs([("config", r#"{"polcy": 1}"#)]))
        .err()
        .expect("a bad config was accepted at startup");
    assert!(err.to_string().contains("unknown field"), "{err}");
    assert!(
        r.resolve_instance(POLICY_TYPE, &WorkerSelectionPolicyParameters::default()).is_ok(),
        "no parameters: defaults"
    );
}

#[test]
fn picks_as_goindex_cost_model_does() {
    for worker_type in [WorkerType::Aggregated, WorkerType::Prefill, WorkerType::Decode] {
        let mut p = policy_for(r#"{"prefill_tokens_per_ms": 10}"#, worker_type);
        assert_eq!(host::worker_type(&p), worker_type.as_str());
        // 1600 tokens at 10/ms: 160 ms cold; 1280 cached: 32 ms; 640 cached: 96 ms.
        let rows = [row(11, 0, 0), row(22, 1280, 0), row(33, 640, 0)];
        let s = host::select(&mut p, 1600, 16, &rows).expect("select");
        assert_eq!(s.worker.worker_id, 22, "totals {:?}", s.totals);
        assert_eq!(s.totals, vec![160.0, 32.0, 96.0]);
        // 2000 queued tokens on worker 22 cost 200 ms: worker 33 now.
        let rows = [row(11, 0, 0), row(22, 1280, 2000), row(33, 640, 0)];
        assert_eq!(host::select(&mut p, 1600, 16, &rows).expect("select").worker.worker_id, 33);
        // Row order does not decide: reversed rows, same worker; a tie goes to the lower id.
        let rows = [row(33, 640, 0), row(22, 1280, 2000), row(11, 0, 0)];
        assert_eq!(host::select(&mut p, 1600, 16, &rows).expect("select").worker.worker_id, 33);
        let rows = [row(9, 0, 0), row(4, 0, 0)];
        assert_eq!(host::select(&mut p, 1600, 16, &rows).expect("select").worker.worker_id, 4);
    }
}

#[test]
fn fails_open() {
    // A missing replica: the config's rates, a choice all the same.
    let mut p = policy_for(r#"{"replica": "/nonexistent-goindex-test/r", "dc": 1}"#, WorkerType::Aggregated);
    let rows = [row(1, 0, 0), row(2, 1280, 0)];
    assert_eq!(host::select(&mut p, 1600, 16, &rows).expect("select with a missing replica").worker.worker_id, 2);
    // A worker without a load observation ranks last instead of failing the selection.
    let mut p = policy_for("{}", WorkerType::Aggregated);
    let mut cold = row(7, 1600, 0);
    cold.load_available = false;
    let s = host::select(&mut p, 1600, 16, &[cold, row(8, 0, 5000)]).expect("select with a worker lacking load");
    assert_eq!(s.worker.worker_id, 8, "totals {:?}", s.totals);
    assert!(s.totals.iter().all(|t| t.is_finite()));
}
