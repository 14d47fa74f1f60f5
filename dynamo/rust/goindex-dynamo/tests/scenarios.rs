//! The `dynamo-compat` §3.5 scenarios through the public API (exact mode),
//! the shrunk-5 and six-event regressions, the spec's hash vectors through
//! the library, stats and score. Rows that need a dump of the index are out
//! of the ABI's reach.

mod common;

use common::*;
use goindex_dynamo::*;

const EXACT: &str = r#"{"mode": "exact"}"#;

#[test]
fn store_then_match_full_and_partial_queries() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    assert_eq!(scores(&ix, &[1, 2, 3]), [((0, 0), 3)], "query [1,2,3]");
    assert_eq!(scores(&ix, &[1, 2, 999]), [((0, 0), 2)], "query [1,2,999]");
}

#[test]
fn duplicate_store_is_idempotent() {
    let ix = open(EXACT);
    let ev = stored(w(0), &[], &[1, 2, 3]);
    apply(&ix, &ev);
    apply(&ix, &ev);
    assert_eq!(scores(&ix, &[1, 2, 3]), [((0, 0), 3)], "query [1,2,3] after a duplicate");
    let st = ix.stats().expect("stats");
    assert_eq!(
        (st.counts.blocks, st.counts.events_applied, st.counts.events_rejected),
        (3, 2, 0),
        "stats after a duplicate: {st:?}"
    );
}

#[test]
fn chained_store_extends_and_tail_removal_shrinks() {
    let ix = open(EXACT);
    let seq = [1, 2, 3, 4, 5];
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    apply(&ix, &stored(w(0), &[1, 2, 3], &[4, 5]));
    assert_eq!(scores(&ix, &seq), [((0, 0), 5)], "query [1..5]");
    assert_eq!(scores(&ix, &[1, 2, 3]), [((0, 0), 3)], "query [1,2,3]");

    let tail = removed(w(0), &seq, &[3, 4]);
    apply(&ix, &tail);
    assert_eq!(scores(&ix, &seq), [((0, 0), 3)], "query [1..5] after removing [4,5]");
    assert_eq!(ix.stats().expect("stats").counts.blocks, 3, "tree size after removing [4,5]");
    // Replaying the removal changes nothing (the hashes are gone).
    let err = ix.apply_event(&tail).expect_err("replayed removal");
    assert_eq!(err.kind(), ErrorKind::BlockNotFound, "replayed removal: {err}");
    assert_eq!(scores(&ix, &seq), [((0, 0), 3)], "query [1..5] after the replay");

    apply(&ix, &removed(w(0), &seq, &[0, 1, 2]));
    assert_eq!(scores(&ix, &seq), [], "query [1..5] after removing everything");
    assert_eq!(ix.stats().expect("stats").counts.blocks, 0, "tree size after removing everything");
}

#[test]
fn mid_chain_removal_orphans_descendants_until_restored() {
    let ix = open(EXACT);
    let seq = [1, 2, 3, 4, 5];
    apply(&ix, &stored(w(0), &[], &seq));
    apply(&ix, &removed(w(0), &seq, &[2]));
    assert_eq!(scores(&ix, &seq), [((0, 0), 2)], "query [1..5] after removing block 3");
    assert_eq!(scores(&ix, &[1, 2]), [((0, 0), 2)], "query [1,2]");
    apply(&ix, &stored(w(0), &[1, 2], &[3]));
    assert_eq!(scores(&ix, &seq), [((0, 0), 3)], "re-storing block 3 does not revive 4 and 5");
    apply(&ix, &stored(w(0), &[1, 2, 3], &[4, 5]));
    assert_eq!(scores(&ix, &seq), [((0, 0), 5)], "re-storing 4 and 5");
}

#[test]
fn branches_of_two_workers_and_a_rejected_store() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(1), &[], &[1, 2, 3]));
    apply(&ix, &stored(w(2), &[], &[1, 2, 3]));
    apply(&ix, &stored(w(1), &[1, 2, 3], &[4, 5, 6]));
    let six = [1, 2, 3, 4, 5, 6];
    assert_eq!(scores(&ix, &six), [((1, 0), 6), ((2, 0), 3)], "query [1..6]");
    apply(&ix, &stored(w(2), &[1, 2, 3], &[7, 8]));
    assert_eq!(scores(&ix, &[1, 2, 3, 7, 8]), [((1, 0), 3), ((2, 0), 5)], "query [1,2,3,7,8]");
    assert_eq!(scores(&ix, &six), [((1, 0), 6), ((2, 0), 3)], "query [1..6] unchanged");
    // Worker 2 does not hold 4..6, so its store below 6 is rejected whole.
    let err = ix.apply_event(&stored(w(2), &six, &[9, 10])).expect_err("store below a parent w2 lacks");
    assert_eq!(err.kind(), ErrorKind::ParentBlockNotFound, "{err}");
    assert_eq!(scores(&ix, &[1, 2, 3, 4, 5, 6, 9, 10]), [((1, 0), 6), ((2, 0), 3)], "query [1..6,9,10]");
}

#[test]
fn second_worker_catches_up_in_chained_stores() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(1), &[], &[1, 2, 3, 4, 5, 6]));
    apply(&ix, &stored(w(2), &[], &[1, 2, 3]));
    apply(&ix, &stored(w(2), &[1, 2, 3], &[4, 5, 6]));
    apply(&ix, &stored(w(2), &[1, 2, 3, 4, 5, 6], &[7, 8, 9]));
    assert_eq!(scores(&ix, &[1, 2, 3, 4, 5, 6, 7, 8, 9]), [((1, 0), 6), ((2, 0), 9)], "query [1..9]");
}

#[test]
fn diverging_second_blocks() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(0), &[], &[1, 2]));
    apply(&ix, &stored(w(1), &[], &[1, 3]));
    assert_eq!(scores(&ix, &[1]), [((0, 0), 1), ((1, 0), 1)], "query [1]");
    assert_eq!(scores(&ix, &[1, 2]), [((0, 0), 2), ((1, 0), 1)], "query [1,2]");
}

#[test]
fn remove_worker_drops_only_that_worker() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    apply(&ix, &stored(w(1), &[], &[1, 2, 3]));
    ix.remove_worker(0).expect("remove_worker(0)");
    assert_eq!(scores(&ix, &[1, 2, 3]), [((1, 0), 3)], "query [1,2,3] after remove_worker(0)");
}

#[test]
fn removing_every_block_empties_the_scores() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    apply(&ix, &removed(w(0), &[1, 2, 3], &[0, 1, 2]));
    assert_eq!(scores(&ix, &[1, 2, 3]), [], "query [1,2,3]");
}

#[test]
fn cleared_drops_the_worker_and_it_can_store_again() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    apply(&ix, &stored(w(1), &[], &[1, 2, 3]));
    apply(&ix, &cleared(w(0)));
    assert_eq!(scores(&ix, &[1, 2, 3]), [((1, 0), 3)], "query after clearing worker 0");
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    assert_eq!(scores(&ix, &[1, 2, 3]), [((0, 0), 3), ((1, 0), 3)], "query after worker 0 stores again");
}

#[test]
fn dp_ranks_score_separately() {
    let ix = open(EXACT);
    for r in 0..3 {
        apply(&ix, &stored(WorkerWithDpRank::new(0, r), &[], &[1, 2, 3]));
    }
    assert_eq!(scores(&ix, &[1, 2, 3]), [((0, 0), 3), ((0, 1), 3), ((0, 2), 3)], "three ranks of worker 0");
}

#[test]
fn remove_worker_dp_rank_drops_one_rank() {
    let ix = open(EXACT);
    apply(&ix, &stored(WorkerWithDpRank::new(7, 0), &[], &[1, 2, 3]));
    apply(&ix, &stored(WorkerWithDpRank::new(7, 1), &[], &[1, 2, 3]));
    ix.remove_worker_dp_rank(7, 0).expect("remove_worker_dp_rank(7, 0)");
    assert_eq!(scores(&ix, &[1, 2, 3]), [((7, 1), 3)], "after remove_worker_dp_rank(7, 0)");
}

#[test]
fn cleared_scope_is_the_rank_or_the_worker() {
    for (config, want) in [(r#"{"clear_scope": "rank"}"#, vec![((0, 1), 3)]), (r#"{"clear_scope": "worker"}"#, vec![])]
    {
        let ix = open(config);
        apply(&ix, &stored(WorkerWithDpRank::new(0, 0), &[], &[1, 2, 3]));
        apply(&ix, &stored(WorkerWithDpRank::new(0, 1), &[], &[1, 2, 3]));
        apply(&ix, &cleared(WorkerWithDpRank::new(0, 0)));
        assert_eq!(scores(&ix, &[1, 2, 3]), want, "{config}: after clearing rank (0, 0)");
    }
}

#[test]
fn unknown_workers_blocks_and_empty_queries_change_nothing() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    ix.remove_worker(999).expect("remove_worker(999)");
    ix.remove_worker_dp_rank(999, 3).expect("remove_worker_dp_rank(999, 3)");
    let err = ix.apply_event(&removed_ext(w(0), &[999, 998])).expect_err("removing unknown blocks");
    assert_eq!(err.kind(), ErrorKind::BlockNotFound, "{err}");
    assert_eq!(scores(&ix, &[1, 2, 3]), [((0, 0), 3)], "query [1,2,3] after the no-ops");
    assert_eq!(scores(&ix, &[]), [], "empty query");
    assert_eq!(scores(&ix, &[999, 998]), [], "query [999,998]");
}

#[test]
fn disjoint_chains_of_one_worker() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    apply(&ix, &stored(w(0), &[], &[100, 101, 102]));
    assert_eq!(scores(&ix, &[1, 2, 3]), [((0, 0), 3)], "query [1,2,3]");
    assert_eq!(scores(&ix, &[100, 101, 102]), [((0, 0), 3)], "query [100,101,102]");
    assert_eq!(scores(&ix, &[1, 100]), [((0, 0), 1)], "query [1,100]");
}

#[test]
fn long_sequences() {
    let ix = open(EXACT);
    let hundred: Vec<u64> = (1..=100).collect();
    apply(&ix, &stored(w(0), &[], &hundred));
    apply(&ix, &removed(w(0), &hundred, &(79..100).collect::<Vec<_>>()));
    assert_eq!(scores(&ix, &hundred), [((0, 0), 79)], "[1..100] without positions 79..99");

    let ix = open(EXACT);
    let seq: Vec<u64> = (1..=128).collect();
    apply(&ix, &stored(w(0), &[], &seq));
    for p in [31, 32, 33, 63, 64, 65, 95, 96, 97] {
        let mut q = seq.clone();
        q[p] = 1_000_000;
        assert_eq!(scores(&ix, &q), [((0, 0), p as u32)], "[1..128] with position {p} replaced");
    }

    let ix = open(EXACT);
    let seq: Vec<u64> = (1..=200).collect();
    for k in 0..20 {
        apply(&ix, &stored(w(0), &seq[..k * 10], &seq[k * 10..(k + 1) * 10]));
    }
    assert_eq!(scores(&ix, &seq), [((0, 0), 200)], "[1..200] from 20 chained events");
    assert_eq!(scores(&ix, &seq[..75]), [((0, 0), 75)], "[1..75]");
}

#[test]
fn shared_prefix_then_diverging_continuations() {
    let ix = open(EXACT);
    let prefix: Vec<u64> = (1..=30).collect();
    let w0: Vec<u64> = (31..=60).collect();
    let w1: Vec<u64> = (131..=160).collect();
    apply(&ix, &stored(w(0), &[], &prefix));
    apply(&ix, &stored(w(1), &[], &prefix));
    apply(&ix, &stored(w(0), &prefix, &w0));
    apply(&ix, &stored(w(1), &prefix, &w1));
    assert_eq!(scores(&ix, &prefix), [((0, 0), 30), ((1, 0), 30)], "query [1..30]");
    let sixty: Vec<u64> = (1..=60).collect();
    assert_eq!(scores(&ix, &sixty), [((0, 0), 60), ((1, 0), 30)], "query [1..60]");
}

/// ext_hashes returns chain(values) as external hashes.
fn ext_hashes(values: &[u64]) -> Vec<ExternalSequenceBlockHash> {
    chain(values).into_iter().map(ExternalSequenceBlockHash).collect()
}

#[test]
fn request_tokens_match_blocks_stored_from_tokens() {
    let ix = open(r#"{"block_size": 32}"#);
    let tokens: Vec<u32> = (1..=96).collect();
    let before = ix.find_matches_for_request(&tokens, None).expect("find_matches_for_request before the store");
    assert!(before.scores.is_empty(), "before the store: {:?}", before.scores);
    let ext = ext_hashes(&[1, 2, 3]);
    ix.apply_stored_tokens(w(5), next_event_id(), None, &ext, &tokens, Salt::default()).expect("apply_stored_tokens");
    let got = ix.find_matches_for_request(&tokens, None).expect("find_matches_for_request");
    assert_eq!(sorted(&got.scores), [((5, 0), 3)], "tokens 1..96, block size 32");
    // The same blocks through hash_tokens and apply_event score the same.
    let hashes = ix.hash_tokens(&tokens, Salt::default()).expect("hash_tokens");
    let blocks =
        ext.iter().zip(&hashes).map(|(&e, &l)| KvCacheStoredBlockData { block_hash: e, tokens_hash: l }).collect();
    let store = KvCacheStoreData { parent_hash: None, blocks };
    let ev = KvCacheEvent { event_id: next_event_id(), data: KvCacheEventData::Stored(store), dp_rank: 0 };
    apply(&ix, &RouterEvent::new(6, ev));
    let got = ix.find_matches_for_request(&tokens, None).expect("find_matches_for_request");
    assert_eq!(sorted(&got.scores), [((5, 0), 3), ((6, 0), 3)], "tokens 1..96 stored two ways");
}

#[test]
fn lora_and_namespace_salts_separate_workers() {
    let ix = open(r#"{"block_size": 32}"#);
    let tokens: Vec<u32> = (1..=96).collect();
    let ext = ext_hashes(&[1, 2, 3]);
    let salts = [
        Salt::default(),
        Salt { lora_name: Some("my-adapter"), cache_namespace: None },
        Salt { lora_name: None, cache_namespace: Some("tenant-a") },
        Salt { lora_name: None, cache_namespace: Some("tenant-b") },
    ];
    for (i, &salt) in salts.iter().enumerate() {
        ix.apply_stored_tokens(w(i as u64), next_event_id(), None, &ext, &tokens, salt)
            .unwrap_or_else(|e| panic!("apply_stored_tokens({salt:?}): {e}"));
    }
    for (i, &salt) in salts.iter().enumerate() {
        let got = ix.find_matches(&ix.hash_tokens(&tokens, salt).expect("hash_tokens")).expect("find_matches");
        assert_eq!(sorted(&got.scores), [((i as u64, 0), 3)], "query salted {salt:?}");
    }
    let lora = ix.find_matches_for_request(&tokens, Some("my-adapter")).expect("find_matches_for_request");
    assert_eq!(sorted(&lora.scores), [((1, 0), 3)], "find_matches_for_request(lora my-adapter)");
    let empty = ix.find_matches_for_request(&tokens, Some("")).expect("find_matches_for_request");
    assert_eq!(sorted(&empty.scores), [((0, 0), 3)], "an empty LoRA name is no LoRA");
}

#[test]
fn regression_shrunk_5() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    apply(&ix, &stored(w(0), &[1], &[4]));
    apply(&ix, &removed(w(0), &[1], &[0]));
    apply(&ix, &stored(w(0), &[], &[1, 2]));
    apply(&ix, &removed(w(0), &[1, 2, 3], &[2, 1]));
    assert_eq!(scores(&ix, &[1, 2]), [((0, 0), 1)], "shrunk-5: query [1,2]");
}

#[test]
fn regression_six_event() {
    let ix = open(EXACT);
    apply(&ix, &stored(w(0), &[], &[1, 30]));
    apply(&ix, &stored(w(0), &[1], &[2, 20, 21]));
    apply(&ix, &removed(w(0), &[1], &[0]));
    apply(&ix, &stored(w(0), &[], &[1]));
    apply(&ix, &stored(w(0), &[1], &[2, 20]));
    let ext = chain(&[1, 2, 20, 21]);
    apply(&ix, &removed_ext(w(0), &[ext[3], ext[2]]));
    // The model's reachable prefix: 1 and 1→2 were re-stored, 20 is gone.
    assert_eq!(scores(&ix, &[1, 2, 20]), [((0, 0), 2)], "six-event: query [1,2,20]");
}

/// Vector is one row of the spec's §1.5 table: tokens first..=last in
/// blocks of bs, salted, and the local hashes they must give.
struct Vector {
    name: &'static str,
    bs: usize,
    first: u32,
    last: u32,
    salt: Salt<'static>,
    want: &'static [u64],
}

#[test]
fn hash_tokens_gives_the_spec_vectors() {
    let none = Salt::default();
    let lora = |name| Salt { lora_name: Some(name), cache_namespace: None };
    let both = Salt { lora_name: Some("adapter-a"), cache_namespace: Some("tenant-a") };
    let v = |name, bs, first, last, salt, want| Vector { name, bs, first, last, salt, want };
    let vectors = [
        v("V3", 4, 0, 3, none, &[9143094415614847814][..]),
        v("V4", 4, 0, 7, none, &[9143094415614847814, 12124091508212882195]),
        v("V6", 4, 0, 9, none, &[9143094415614847814, 12124091508212882195]),
        v("V7", 4, 0, 2, none, &[]),
        v(
            "V8",
            4,
            1,
            20,
            none,
            &[14643705804678351452, 16777012769546811212, 483935686894639516, 135165725823939817, 1363306219480167028],
        ),
        v("V10", 16, 0, 31, none, &[15310707395893867146, 15292316782987903195]),
        v("V11", 32, 0, 31, none, &[5756925433886871916]),
        v("V12", 48, 0, 47, none, &[17528049439166767664]),
        v("V13", 64, 0, 127, none, &[3480597578098033343, 3318286205056455972]),
        v("V15", 4, 0, 3, lora("adapter-a"), &[6665157333201000639]),
        v("V17", 4, 0, 3, Salt { lora_name: None, cache_namespace: Some("tenant-a") }, &[17009624042690211646]),
        v("V18", 4, 0, 3, lora("tenant-a"), &[582854293518545300]),
        v("V19", 4, 0, 3, both, &[8269515957840517240]),
    ];
    for Vector { name, bs, first, last, salt, want } in vectors {
        let ix = open(&format!(r#"{{"block_size": {bs}}}"#));
        let tokens: Vec<u32> = (first..=last).collect();
        let got = ix.hash_tokens(&tokens, salt).unwrap_or_else(|e| panic!("{name}: hash_tokens: {e}"));
        assert_eq!(got, locals(want), "{name}: hash_tokens(bs {bs}, tokens {first}..={last}, {salt:?})");
    }
}

#[test]
fn hash_tokens_sizes_its_buffer_for_any_prompt() {
    let ix = open(EXACT);
    // Long, empty, short and exact-multiple prompts, in an order that makes
    // the learned block-size bound matter; every block must hash as it does
    // alone (local hashes are position-independent).
    for n in [1000usize, 0, 10, 32, 15, 17, 4000, 16] {
        let tokens: Vec<u32> = (0..n as u32).map(|t| t.wrapping_mul(2654435761)).collect();
        let got = ix.hash_tokens(&tokens, Salt::default()).unwrap_or_else(|e| panic!("hash_tokens({n} tokens): {e}"));
        assert_eq!(got.len(), n / 16, "hash_tokens({n} tokens) gave {} blocks", got.len());
        for (i, h) in got.iter().enumerate() {
            let one = ix.hash_tokens(&tokens[i * 16..(i + 1) * 16], Salt::default()).expect("hash_tokens(one block)");
            assert_eq!(one, [*h], "block {i} of {n} tokens hashed alone");
        }
    }
}

#[test]
fn stats_count_events_members_blocks_and_probes() {
    let ix = open(EXACT);
    let st = ix.stats().expect("stats");
    assert_eq!(
        (st.mode, st.counts.blocks, st.counts.members, st.counts.events_applied, st.counts.probes),
        (Mode::Exact, 0, 0, 0, 0),
        "fresh: {st:?}"
    );
    apply(&ix, &stored(w(0), &[], &[1, 2, 3]));
    apply(&ix, &stored(WorkerWithDpRank::new(0, 1), &[], &[1, 2]));
    ix.apply_event(&removed_ext(w(0), &[42])).expect_err("unknown removal");
    scores(&ix, &[1, 2, 3]);
    let st = ix.stats().expect("stats");
    assert_eq!(
        (st.counts.blocks, st.counts.members, st.counts.events_applied, st.counts.events_rejected, st.counts.probes),
        (5, 2, 2, 1, 1),
        "after 2 stores, 1 rejected removal, 1 probe: {st:?}"
    );
    let ckf = open(r#"{"mode": "ckf", "lanes": 4, "expected_blocks_per_lane": 1024}"#);
    apply(&ckf, &stored(w(0), &[], &[1, 2, 3]));
    let st = ckf.stats().expect("stats");
    assert_eq!(
        (st.mode, st.counts.blocks, st.counts.members, st.counts.lanes_ready),
        (Mode::Ckf, 3, 1, 1),
        "ckf: one member, one ready lane: {st:?}"
    );
}

/// cand is a candidate with a load and an RTT.
fn cand(worker: u64, prefill: u64, rtt_ms: f64) -> Candidate {
    Candidate {
        worker: w(worker),
        load: Some(Load { active_prefill_tokens: prefill, active_decode_blocks: 0 }),
        capacity_blocks: None,
        rtt_ms: Some(rtt_ms),
    }
}

#[test]
fn score_weighs_cache_against_rtt_and_load() {
    // Default throughput: 20 prefill tokens per ms; block size 16.
    let ix = open(EXACT);
    apply(&ix, &stored(w(1), &[], &[1, 2, 3, 4]));
    let q = locals(&[1, 2, 3, 4]);
    let mut cands = vec![cand(1, 0, 10.0), cand(2, 0, 10.0)];
    let req = ScoreRequest { local_hashes: &q, isl_tokens: 160, random_seed: 1, ..Default::default() };
    let got = ix.score(&ScoreRequest { candidates: Some(&cands), ..req }).expect("score");
    // Worker 1 has 64 cached tokens: 96 left at 20/ms = 4.8 ms; worker 2
    // prefills all 160: 8 ms.
    assert_eq!((got.chosen, got.worker, got.cached_blocks, got.cached_tokens), (0, w(1), 4, 64), "ttft: {got:?}");
    assert_eq!((got.rtt_ms, got.queue_ms, got.prefill_ms, got.cost), (10.0, 0.0, 4.8, 14.8), "ttft parts: {got:?}");
    assert_eq!(got.eligible, 2, "ttft eligible: {got:?}");

    // A closer worker 2 wins despite no cache: 1 + 8 < 14.8.
    cands[1].rtt_ms = Some(1.0);
    let got = ix.score(&ScoreRequest { candidates: Some(&cands), ..req }).expect("score");
    assert_eq!((got.chosen, got.worker, got.cost), (1, w(2), 9.0), "ttft with a close worker 2: {got:?}");

    // Without an RTT a candidate is not eligible for ttft, but is for
    // load-only, which picks the least loaded.
    cands.push(Candidate { rtt_ms: None, ..cand(3, 0, 0.0) });
    cands[0].load = Some(Load { active_prefill_tokens: 320, active_decode_blocks: 0 });
    cands[1].load = Some(Load { active_prefill_tokens: 160, active_decode_blocks: 2 });
    let got = ix.score(&ScoreRequest { candidates: Some(&cands), ..req }).expect("score");
    assert_eq!((got.eligible, got.worker), (2, w(2)), "ttft skips worker 3: {got:?}");
    let got = ix.score(&ScoreRequest { policy: Policy::LoadOnly, candidates: Some(&cands), ..req }).expect("score");
    assert_eq!((got.eligible, got.worker, got.cost), (3, w(3), 0.0), "load-only: {got:?}");
    let got =
        ix.score(&ScoreRequest { policy: Policy::PrefixThenLoad, candidates: Some(&cands), ..req }).expect("score");
    assert_eq!((got.worker, got.cached_blocks), (w(1), 4), "prefix-then-load: {got:?}");
}
