//! A host without libgoindex.so (this test binary points $GOINDEX_LIBRARY
//! at a file that does not exist): the crate used to link the library, so
//! a frontend built with it could not even start; now the scorer says why
//! it cannot load it, the policy still resolves, and selections rank
//! workers by Dynamo's own default cost.

#[cfg(feature = "dynamo")]
mod common;

use std::sync::Once;

use goindex_scorer::{fallback_costs, Load, Scorer, Worker, NOT_LOADED};

const MISSING: &str = "/nonexistent-goindex-test/libgoindex.so.1";

fn without_library() {
    static SET: Once = Once::new();
    SET.call_once(|| std::env::set_var("GOINDEX_LIBRARY", MISSING));
}

#[test]
fn scorer_says_why_the_library_is_missing() {
    without_library();
    for _ in 0..2 {
        let err = Scorer::new("{}").err().expect("a Scorer without its library");
        assert_eq!(err.code, NOT_LOADED, "{err}");
        assert!(err.message.contains(MISSING), "{err}");
    }
}

#[test]
fn fallback_costs_are_dynamos_default_cost() {
    let w = |cached_tokens, active_prefill_tokens, active_decode_blocks| Worker {
        cached_tokens,
        load: Some(Load { active_prefill_tokens, active_decode_blocks }),
        capacity_blocks: None,
    };
    let workers = [w(0, 0, 0), w(1280, 2000, 0), w(640, 0, 7), w(3200, 0, 0), Worker::default()];
    let mut costs = [0.0; 5];
    fallback_costs(16, 1600, &workers, &mut costs);
    // Blocks to prefill (queued + uncached prompt tokens, in 16-token
    // blocks) plus decode blocks; a cache longer than the prompt saves all
    // of it; no load: NaN.
    assert_eq!(&costs[..4], &[100.0, 145.0, 67.0, 0.0], "costs {costs:?}");
    assert!(costs[4].is_nan());
}

#[cfg(feature = "dynamo")]
#[test]
fn policy_routes_on_dynamos_default_cost() {
    use common::row;
    use dynamo_kv_router::host;
    use dynamo_kv_router::plugins::{RouterPluginRegistry, WorkerSelectionPolicyParameters};
    use dynamo_kv_router::{KvRouterConfig, RoutingPartitionRef, WorkerType};
    use goindex_scorer::dynamo::{register, POLICY_TYPE};

    without_library();
    let mut r = RouterPluginRegistry::default();
    register(&mut r).expect("register");
    let factory = r
        .resolve_instance(POLICY_TYPE, &WorkerSelectionPolicyParameters::from_pairs([("config", "{}")]))
        .expect("the policy resolves without its library");
    let mut p = factory(&KvRouterConfig::default(), WorkerType::Aggregated, RoutingPartitionRef::default());
    let s = host::select(&mut p, 1600, 16, &[row(11, 0, 0), row(22, 1280, 0), row(33, 640, 0)]).expect("select");
    assert_eq!(s.worker.worker_id, 22, "totals {:?}", s.totals);
    assert_eq!(s.totals, vec![100.0, 20.0, 60.0]);
    // Load counts: 2000 queued tokens make worker 22 cost 145 blocks.
    let s = host::select(&mut p, 1600, 16, &[row(11, 0, 0), row(22, 1280, 2000), row(33, 640, 0)]).expect("select");
    assert_eq!(s.worker.worker_id, 33, "totals {:?}", s.totals);
}

#[cfg(feature = "dynamo")]
#[test]
fn scorer_health_says_why_it_has_no_state() {
    use common::row;
    use dynamo_kv_router::host;
    use goindex_scorer::dynamo::GoindexScorer;
    use goindex_scorer::Health;

    without_library();
    let mut s = GoindexScorer::new(Scorer::new("{}"));
    let costs = host::score(&mut s, 1600, 16, &[row(11, 0, 0), row(22, 1280, 0)]).expect("score");
    assert_eq!(costs, vec![100.0, 20.0]);
    match s.health() {
        Health::Degraded(why) => {
            assert!(why.contains(MISSING) && why.contains("default cost"), "health {why:?}")
        }
        other => panic!("health without the library = {other:?}, want Degraded naming {MISSING}"),
    }
}
