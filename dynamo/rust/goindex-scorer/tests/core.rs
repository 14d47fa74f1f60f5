//! The core against the real libgoindex.so: costs as goindex's cost model
//! gives them, NaN without load, a missing replica degrading instead of
//! failing, bad configs and arguments refused, states on many threads.

use goindex_scorer::{Health, Load, Scorer, Worker};

fn loaded(cached_tokens: u64, active_prefill_tokens: u64) -> Worker {
    Worker { cached_tokens, load: Some(Load { active_prefill_tokens, active_decode_blocks: 0 }), capacity_blocks: None }
}

#[test]
fn costs_follow_the_ttft_model() {
    let mut s = Scorer::new(r#"{"prefill_tokens_per_ms": 10}"#).expect("Scorer::new");
    // 1600 prompt tokens at 10 tokens/ms: 160 ms uncached; 1280 cached
    // behind 2000 queued tokens: 200 + 32 ms; 640 cached with 4000 decode
    // blocks over a capacity of 100: 96 ms + 3960 blocks at 1 block/ms.
    let workers = [
        loaded(0, 0),
        loaded(1280, 2000),
        Worker {
            cached_tokens: 640,
            load: Some(Load { active_prefill_tokens: 0, active_decode_blocks: 4000 }),
            capacity_blocks: Some(100),
        },
        Worker { cached_tokens: 640, load: None, capacity_blocks: None },
    ];
    let mut costs = [0.0; 4];
    assert_eq!(s.costs(16, 1600, &workers, &mut costs), Ok(Health::Fresh));
    assert_eq!(&costs[..3], &[160.0, 232.0, 96.0 + 3960.0], "costs {costs:?}");
    assert!(costs[3].is_nan(), "a worker without load costs {}, want NaN", costs[3]);
    assert_eq!(s.costs(16, 1600, &[], &mut []), Ok(Health::Fresh));
}

#[test]
fn a_missing_replica_degrades_to_the_config_rates() {
    let mut s =
        Scorer::new(r#"{"replica": "/nonexistent-goindex-test/goindex-1.replica", "dc": 3}"#).expect("Scorer::new");
    let mut costs = [0.0];
    match s.costs(16, 1600, &[loaded(0, 0)], &mut costs) {
        Ok(Health::Degraded(why)) => assert!(why.contains("no such file"), "reason {why:?}"),
        other => panic!("costs with a missing replica = {other:?}, want Degraded"),
    }
    assert_eq!(costs, [80.0], "the default 20 tokens/ms");
}

#[test]
fn bad_configs_and_arguments_are_refused() {
    for bad in
        [r#"{"polcy": "ttft"}"#, "not json", r#"{"replica": "relative", "dc": 1}"#, r#"{"policy": "round-robin"}"#]
    {
        let err = Scorer::new(bad).err().unwrap_or_else(|| panic!("Scorer::new({bad}) succeeded"));
        assert_eq!(err.code, 1, "Scorer::new({bad}) = {err}, want INVALID_INPUT (1)");
        assert!(!err.message.is_empty());
    }
    let mut s = Scorer::new("").expect("Scorer::new(empty)");
    let mut costs = [0.0; 1];
    assert!(s.costs(0, 10, &[loaded(0, 0)], &mut costs).is_err(), "block size 0 accepted");
    assert!(s.costs(16, 10, &[loaded(0, 0)], &mut []).is_err(), "a short cost buffer accepted");
}

#[test]
fn states_score_on_many_threads() {
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut s = Scorer::new(r#"{"prefill_tokens_per_ms": 16}"#).expect("Scorer::new");
                let mut costs = [0.0; 2];
                for i in 0..2000u64 {
                    s.costs(16, 1024, &[loaded(0, t), loaded(512, i % 7)], &mut costs).expect("costs");
                    assert!(costs[1] < costs[0], "the cached worker costs {} vs {}", costs[1], costs[0]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
}

#[test]
fn the_worked_yaml_config_is_accepted() {
    let yaml = include_str!("../worker-selection.yaml");
    let line = yaml.lines().find(|l| l.trim_start().starts_with("config:")).expect("a config line");
    let json = line.trim_start().trim_start_matches("config:").trim().trim_matches('\'');
    Scorer::new(json).unwrap_or_else(|e| panic!("worker-selection.yaml's config {json}: {e}"));
    assert!(yaml.contains("type: goindex"), "the YAML selects another type");
}
