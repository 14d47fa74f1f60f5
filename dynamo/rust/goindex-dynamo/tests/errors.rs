//! Every error path safe Rust can reach, each with its kind, its detail,
//! and what the failed call left behind; handles closed underneath; Drop
//! and close; output buffers the crate must grow itself.
//!
//! GOINDEX_EMODE, GOINDEX_EFRAME, GOINDEX_EREPLICA and GOINDEX_EINTERNAL
//! are out of reach: they need the global-mode calls (apply_frame,
//! attach_replica, which this crate does not wrap; tests/c and
//! tests/python cover them) or a library fault. Their mapping is checked by
//! src/error.rs's unit tests.

mod common;

use common::*;
use goindex_dynamo::*;

/// expect_err checks that r failed with kind and a detail naming call.
fn expect_err<T: std::fmt::Debug>(r: Result<T>, kind: ErrorKind, call: &str, what: &str) -> Error {
    let err = r.expect_err(what);
    assert_eq!(err.kind(), kind, "{what}: kind of {err}");
    assert_eq!(err.code(), kind.code(), "{what}: code of {err}");
    assert!(err.detail().starts_with(&format!("{call}: ")), "{what}: detail {:?} does not name {call}", err.detail());
    assert_eq!(err.to_string(), err.detail(), "{what}: Display");
    err
}

// One test for every failed open: their detail lives in the process-wide
// slot of handle 0, which parallel tests would overwrite.
#[test]
fn open_refuses_bad_configs_with_their_detail() {
    let cases: &[(&str, ErrorKind, &str)] = &[
        ("{", ErrorKind::BadConfig, "unexpected EOF"),
        (r#"{"mdoe": "exact"}"#, ErrorKind::BadConfig, "mdoe"),
        (r#"{"mode": "radix"}"#, ErrorKind::BadConfig, "radix"),
        (r#"{"block_size": 0}"#, ErrorKind::BadConfig, "block_size"),
        (r#"{"clear_scope": "dc"}"#, ErrorKind::BadConfig, "clear_scope"),
        (r#"{"mode": "ckf", "lanes": 65}"#, ErrorKind::BadConfig, "lanes"),
        (r#"{} {}"#, ErrorKind::BadConfig, "after the config"),
        (r#"{"mode": "global", "dcs": [1, 1]}"#, ErrorKind::BadConfig, "dcs lists DC 1 twice"),
    ];
    for &(config, kind, fragment) in cases {
        let err = expect_err(Indexer::open(config), kind, "goindex_open", config);
        assert!(err.detail().contains(fragment), "open({config}): detail {:?} lacks {fragment:?}", err.detail());
    }
    // A detail longer than the crate's first buffer (256 bytes) is read
    // again whole.
    let key = "k".repeat(600);
    let config = format!(r#"{{"{key}": 1}}"#);
    let err = expect_err(Indexer::open(&config), ErrorKind::BadConfig, "goindex_open", "a 600-byte unknown key");
    assert!(err.detail().contains(&key), "the detail was truncated: {} bytes", err.detail().len());

    let big = format!("{{{}}}", " ".repeat(MAX_CONFIG_BYTES));
    expect_err(Indexer::open(&big), ErrorKind::TooBig, "goindex_open", "a config over MAX_CONFIG_BYTES");
    // Empty and "{}" are every default.
    for config in ["", "{}"] {
        let st = open(config).stats().expect("stats");
        assert_eq!(st.mode, Mode::Exact, "open({config:?}): {st:?}");
    }
}

#[test]
fn store_below_an_unknown_parent_changes_nothing() {
    let ix = open("{}");
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    let err = expect_err(
        ix.apply_event(&stored(w(0), &[1, 2, 9], &[4])),
        ErrorKind::ParentBlockNotFound,
        "goindex_insert",
        "store below [1,2,9]",
    );
    assert!(err.detail().contains("parent"), "detail {:?}", err.detail());
    // Another rank's parent does not count either.
    expect_err(
        ix.apply_event(&stored(w(1), &[1, 2, 3], &[4])),
        ErrorKind::ParentBlockNotFound,
        "goindex_insert",
        "w1 store below w0's block",
    );
    let st = ix.stats().expect("stats");
    assert_eq!(
        (st.counts.blocks, st.counts.events_applied, st.counts.events_rejected),
        (3, 1, 2),
        "after 2 rejected stores: {st:?}"
    );
    assert_eq!(scores(&ix, &[1, 2, 3, 4]), [((0, 0), 3)], "query after the rejected stores");
}

#[test]
fn invalid_block_sequences_change_nothing() {
    let ix = open("{}");
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    let ext = chain(&[1, 2, 3]);
    // The parent among the event's own blocks.
    let block = |e: u64, l: u64| KvCacheStoredBlockData {
        block_hash: ExternalSequenceBlockHash(e),
        tokens_hash: LocalBlockHash(l),
    };
    let store = KvCacheStoreData {
        parent_hash: Some(ExternalSequenceBlockHash(ext[2])),
        blocks: vec![block(77, 4), block(ext[2], 5)],
    };
    let ev = RouterEvent::new(
        0,
        KvCacheEvent { event_id: next_event_id(), data: KvCacheEventData::Stored(store), dp_rank: 0 },
    );
    expect_err(ix.apply_event(&ev), ErrorKind::InvalidBlockSequence, "goindex_insert", "parent among the blocks");
    // A held external hash moved to a second position (root, local 9).
    let store = KvCacheStoreData { parent_hash: None, blocks: vec![block(ext[1], 9)] };
    let ev = RouterEvent::new(
        0,
        KvCacheEvent { event_id: next_event_id(), data: KvCacheEventData::Stored(store), dp_rank: 0 },
    );
    expect_err(ix.apply_event(&ev), ErrorKind::InvalidBlockSequence, "goindex_insert", "a remapped block");
    assert_eq!(scores(&ix, &[1, 2, 3]), [((0, 0), 3)], "query [1,2,3] after the rejections");
    assert_eq!(scores(&ix, &[9]), [], "query [9] after the rejections");
    assert_eq!(ix.stats().expect("stats").counts.blocks, 3, "blocks after the rejections");
}

#[test]
fn removal_with_unknown_hashes_removes_the_known_ones() {
    let ix = open("{}");
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    let ext = chain(&[1, 2, 3]);
    let err = expect_err(
        ix.apply_event(&removed_ext(w(0), &[999, ext[2], 998])),
        ErrorKind::BlockNotFound,
        "goindex_remove",
        "removing [999, block 3, 998]",
    );
    assert!(err.detail().contains("not found"), "detail {:?}", err.detail());
    assert_eq!(scores(&ix, &[1, 2, 3]), [((0, 0), 2)], "block 3 was removed anyway");
    assert_eq!(ix.stats().expect("stats").counts.blocks, 2, "blocks after the partial removal");
}

#[test]
fn ckf_capacity_exhaustion_keeps_the_blocks_tracked() {
    // 1 expected block per lane: 2 buckets of 4 slots.
    let ix = open(r#"{"mode": "ckf", "lanes": 1, "expected_blocks_per_lane": 1}"#);
    let seq: Vec<u64> = (1..=100).collect();
    expect_err(
        ix.apply_event(&stored(w(0), &[], &seq)),
        ErrorKind::CapacityExhausted,
        "goindex_insert",
        "100 blocks in 8 slots",
    );
    let st = ix.stats().expect("stats");
    assert_eq!(st.counts.blocks, 100, "the blocks stay tracked exactly: {st:?}");
    assert!(st.counts.capacity_omissions > 0, "no capacity omissions counted: {st:?}");
    // The only lane is taken: a second member cannot be admitted.
    expect_err(
        ix.apply_event(&stored(w(1), &[], &[1])),
        ErrorKind::CapacityExhausted,
        "goindex_insert",
        "a second member, one lane",
    );
    let st = ix.stats().expect("stats");
    assert_eq!((st.counts.blocks, st.counts.members), (100, 1), "the refused member changed nothing: {st:?}");
}

#[test]
fn lengths_over_the_limits_are_refused() {
    let ix = open("{}");
    let hashes = vec![LocalBlockHash(1); MAX_BLOCKS + 1];
    expect_err(ix.find_matches(&hashes), ErrorKind::TooBig, "goindex_probe", "a query of MAX_BLOCKS + 1 hashes");
    let block = KvCacheStoredBlockData::default();
    let store = KvCacheStoreData { parent_hash: None, blocks: vec![block; MAX_BLOCKS + 1] };
    let ev = RouterEvent::new(0, KvCacheEvent { event_id: 1, data: KvCacheEventData::Stored(store), dp_rank: 0 });
    expect_err(ix.apply_event(&ev), ErrorKind::TooBig, "goindex_insert", "a store of MAX_BLOCKS + 1 blocks");
    let long = "n".repeat(MAX_NAME_BYTES + 1);
    let tokens = [0u32; 32];
    expect_err(
        ix.hash_tokens(&tokens, Salt { lora_name: Some(&long), cache_namespace: None }),
        ErrorKind::TooBig,
        "goindex_hash_tokens",
        "a LoRA name over MAX_NAME_BYTES",
    );
    expect_err(
        ix.find_matches_for_request(&tokens, Some(&long)),
        ErrorKind::TooBig,
        "goindex_hash_tokens",
        "find_matches_for_request",
    );
    expect_err(
        ix.apply_stored_tokens(
            w(0),
            1,
            None,
            &[ExternalSequenceBlockHash(1)],
            &tokens,
            Salt { lora_name: None, cache_namespace: Some(&long) },
        ),
        ErrorKind::TooBig,
        "goindex_insert_tokens",
        "a namespace over MAX_NAME_BYTES",
    );
    // A name of exactly MAX_NAME_BYTES is fine.
    let limit = "n".repeat(MAX_NAME_BYTES);
    ix.hash_tokens(&tokens, Salt { lora_name: Some(&limit), cache_namespace: None }).expect("a name of MAX_NAME_BYTES");
    assert_eq!(ix.stats().expect("stats").counts.blocks, 0, "nothing was stored");
}

#[test]
fn invalid_arguments_are_refused() {
    let ix = open("{}");
    let ext = [ExternalSequenceBlockHash(1), ExternalSequenceBlockHash(2)];
    let err = expect_err(
        ix.apply_stored_tokens(w(0), 1, None, &ext, &[7; 31], Salt::default()),
        ErrorKind::InvalidArgument,
        "goindex_insert_tokens",
        "2 blocks of 16 tokens from 31 tokens",
    );
    assert!(err.detail().contains("31"), "detail {:?}", err.detail());
    let q = locals(&[1]);
    let c = [Candidate { worker: w(0), load: Some(Load::default()), capacity_blocks: None, rtt_ms: Some(1.0) }];
    let req = ScoreRequest { local_hashes: &q, candidates: Some(&c), ..Default::default() };
    for t in [f64::NAN, -1.0, f64::INFINITY] {
        expect_err(
            ix.score(&ScoreRequest { temperature: t, ..req }),
            ErrorKind::InvalidArgument,
            "goindex_score",
            "temperature",
        );
    }
    let bad = [Candidate { rtt_ms: Some(-1.0), ..c[0] }];
    expect_err(
        ix.score(&ScoreRequest { candidates: Some(&bad), ..req }),
        ErrorKind::InvalidArgument,
        "goindex_score",
        "a negative RTT",
    );
    ix.score(&req).expect("the same request with valid arguments");
}

#[test]
fn score_without_eligible_candidates() {
    let ix = open("{}");
    apply(&ix, &stored(w(0), &[], &[1]));
    let q = locals(&[1]);
    let req = ScoreRequest { local_hashes: &q, ..Default::default() };
    // No list: the handle's members, which carry no load.
    expect_err(ix.score(&req), ErrorKind::NoCandidate, "goindex_score", "every member");
    let empty: [Candidate; 0] = [];
    expect_err(
        ix.score(&ScoreRequest { candidates: Some(&empty), ..req }),
        ErrorKind::NoCandidate,
        "goindex_score",
        "no candidates",
    );
    let bare = [Candidate { worker: w(0), ..Default::default() }];
    for policy in [Policy::Default, Policy::Ttft, Policy::PrefixThenLoad, Policy::LoadOnly, Policy::Credit] {
        let r = ScoreRequest { policy, candidates: Some(&bare), ..req };
        expect_err(ix.score(&r), ErrorKind::NoCandidate, "goindex_score", &format!("{policy:?} over a bare candidate"));
    }
}

#[test]
fn every_call_on_a_handle_closed_underneath_reports_it() {
    let ix = open("{}");
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    close_underneath(&ix);
    let h = ErrorKind::UnknownHandle;
    expect_err(ix.apply_event(&stored(w(0), &[], &[1])), h, "goindex_insert", "store");
    expect_err(ix.apply_event(&removed(w(0), &[1], &[0])), h, "goindex_remove", "remove");
    expect_err(ix.apply_event(&cleared(w(0))), h, "goindex_clear", "clear");
    expect_err(
        ix.apply_stored_tokens(w(0), 1, None, &[], &[], Salt::default()),
        h,
        "goindex_insert_tokens",
        "store tokens",
    );
    expect_err(ix.remove_worker(0), h, "goindex_remove_worker", "remove_worker");
    expect_err(ix.remove_worker_dp_rank(0, 0), h, "goindex_remove_rank", "remove_worker_dp_rank");
    expect_err(ix.find_matches(&locals(&[1])), h, "goindex_probe", "find_matches");
    expect_err(ix.hash_tokens(&[1; 16], Salt::default()), h, "goindex_hash_tokens", "hash_tokens");
    expect_err(ix.find_matches_for_request(&[1; 16], None), h, "goindex_hash_tokens", "find_matches_for_request");
    let q = locals(&[1]);
    expect_err(ix.score(&ScoreRequest { local_hashes: &q, ..Default::default() }), h, "goindex_score", "score");
    let err = expect_err(ix.stats(), h, "goindex_stats", "stats");
    assert!(err.detail().contains(&ix.handle().to_string()), "detail {:?} lacks the handle", err.detail());
    expect_err(ix.close(), h, "goindex_close", "close");
}

#[test]
fn drop_and_close_release_the_handle() {
    let ix = open("{}");
    let handle = ix.handle();
    assert!(is_open(handle), "handle {handle} right after open");
    drop(ix);
    assert!(!is_open(handle), "handle {handle} is still open after drop");

    let ix = open("{}");
    let handle = ix.handle();
    ix.close().expect("close");
    assert!(!is_open(handle), "handle {handle} is still open after close");
    // Handles are never reused.
    let ix = open("{}");
    assert!(ix.handle() > handle, "handle {} after {handle}", ix.handle());
}

#[test]
fn probe_results_larger_than_the_first_buffer_are_returned_whole() {
    let ix = open("{}");
    // 100 members, far over the crate's first probe buffer of 16 entries.
    let mut want = Vec::new();
    for worker in 0..50u64 {
        for rank in 0..2u32 {
            let depth = 1 + (worker as usize + rank as usize) % 3;
            apply(&ix, &stored(WorkerWithDpRank::new(worker, rank), &[], &[1, 2, 3][..depth]));
            want.push(((worker, rank), depth as u32));
        }
    }
    for round in 0..3 {
        assert_eq!(scores(&ix, &[1, 2, 3]), want, "round {round}: 100 members");
    }
    // A second indexer starts from the small buffer again and grows alone.
    let other = open("{}");
    apply(&other, &stored(w(9), &[], &[1]));
    assert_eq!(scores(&other, &[1, 2, 3]), [((9, 0), 1)], "an unrelated indexer");
}
