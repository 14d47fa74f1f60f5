//! Helpers shared by the integration tests: block chains in the
//! `dynamo-compat` §3.5 convention, seeded random numbers, and the
//! raw-handle helpers that reach under an [`Indexer`].
//!
//! Each test binary uses a subset of these.
#![allow(dead_code)]

use std::collections::HashMap;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicU64, Ordering};

use goindex_dynamo::*;

/// CHAIN_ROOT starts the external-hash fold (spec §3.7's hash_parts seed),
/// the same as tests/c/chain.h, so every host suite stores the same events.
pub const CHAIN_ROOT: u64 = 0xD1B54A32D192ED03;

/// mix64 is the SplitMix64 finalizer of spec §3.7.
pub fn mix64(mut z: u64) -> u64 {
    z ^= z >> 30;
    z = z.wrapping_mul(0xBF58476D1CE4E5B9);
    z ^= z >> 27;
    z = z.wrapping_mul(0x94D049BB133111EB);
    z ^ (z >> 31)
}

/// chain returns the external hash of every prefix of locals. External
/// hashes are opaque to the index (§2.1), so any injective function of the
/// prefix does; this fold stands in for the engine's rolling hash.
pub fn chain(locals: &[u64]) -> Vec<u64> {
    let mut prev = CHAIN_ROOT;
    locals
        .iter()
        .map(|&l| {
            prev = mix64(prev ^ mix64(l));
            prev
        })
        .collect()
}

/// next_event_id numbers events from 1, process-wide.
pub fn next_event_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// stored is the store event `prefix → suffix` of member m: blocks are the
/// suffix's local values with the chain continued from the prefix, the
/// parent the prefix's last external hash (none for an empty prefix).
pub fn stored(m: WorkerWithDpRank, prefix: &[u64], suffix: &[u64]) -> RouterEvent {
    let whole: Vec<u64> = prefix.iter().chain(suffix).copied().collect();
    let ext = chain(&whole);
    let blocks = suffix
        .iter()
        .zip(&ext[prefix.len()..])
        .map(|(&l, &e)| KvCacheStoredBlockData {
            block_hash: ExternalSequenceBlockHash(e),
            tokens_hash: LocalBlockHash(l),
        })
        .collect();
    let parent_hash = prefix.len().checked_sub(1).map(|i| ExternalSequenceBlockHash(ext[i]));
    event(m, KvCacheEventData::Stored(KvCacheStoreData { parent_hash, blocks }))
}

/// removed is the removal by member m of the chain hashes of seq at the
/// given positions.
pub fn removed(m: WorkerWithDpRank, seq: &[u64], positions: &[usize]) -> RouterEvent {
    let ext = chain(seq);
    removed_ext(m, &positions.iter().map(|&p| ext[p]).collect::<Vec<_>>())
}

/// removed_ext is the removal by member m of raw external hashes.
pub fn removed_ext(m: WorkerWithDpRank, hashes: &[u64]) -> RouterEvent {
    let block_hashes = hashes.iter().map(|&h| ExternalSequenceBlockHash(h)).collect();
    event(m, KvCacheEventData::Removed(KvCacheRemoveData { block_hashes }))
}

/// cleared is member m's cleared event.
pub fn cleared(m: WorkerWithDpRank) -> RouterEvent {
    event(m, KvCacheEventData::Cleared)
}

fn event(m: WorkerWithDpRank, data: KvCacheEventData) -> RouterEvent {
    RouterEvent::new(m.worker_id, KvCacheEvent { event_id: next_event_id(), data, dp_rank: m.dp_rank })
}

/// w is rank 0 of worker id.
pub fn w(id: u64) -> WorkerWithDpRank {
    WorkerWithDpRank::from_worker_id(id)
}

/// locals returns values as local block hashes.
pub fn locals(values: &[u64]) -> Vec<LocalBlockHash> {
    values.iter().map(|&v| LocalBlockHash(v)).collect()
}

/// open opens an index or fails the test with the library's detail.
pub fn open(config: &str) -> Indexer {
    Indexer::open(config).unwrap_or_else(|e| panic!("Indexer::open({config}): {e}"))
}

/// apply applies an event that must succeed.
pub fn apply(ix: &Indexer, ev: &RouterEvent) {
    ix.apply_event(ev).unwrap_or_else(|e| panic!("apply_event({ev:?}): {e}"));
}

/// scores returns the match of values as a sorted list of
/// ((worker, rank), score).
pub fn scores(ix: &Indexer, values: &[u64]) -> Vec<((u64, u32), u32)> {
    let got = ix.find_matches(&locals(values)).unwrap_or_else(|e| panic!("find_matches({values:?}): {e}"));
    sorted(&got.scores)
}

/// sorted lists a score map in (worker, rank) order.
pub fn sorted(scores: &HashMap<WorkerWithDpRank, u32>) -> Vec<((u64, u32), u32)> {
    let mut v: Vec<_> = scores.iter().map(|(m, &s)| ((m.worker_id, m.dp_rank), s)).collect();
    v.sort_unstable();
    v
}

/// Rng is SplitMix64: small, seedable, reproducible.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(mix64(seed ^ 0xD1FF))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        mix64(self.0)
    }

    /// below returns a value in [0, n), n > 0.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// percent is true with probability p / 100.
    pub fn percent(&mut self, p: usize) -> bool {
        self.below(100) < p
    }
}

/// env_u64 reads a numeric environment knob, or def when unset.
pub fn env_u64(name: &str, def: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")),
        Err(_) => def,
    }
}

/// seeds returns the seeds to run: GOINDEX_SEED alone when set, else
/// GOINDEX_SEEDS (default def_count) seeds from 1.
pub fn seeds(def_count: u64) -> Vec<u64> {
    match std::env::var("GOINDEX_SEED") {
        Ok(_) => vec![env_u64("GOINDEX_SEED", 0)],
        Err(_) => (1..=env_u64("GOINDEX_SEEDS", def_count)).collect(),
    }
}

// The raw calls the helpers below need; the crate's #[link] brings the
// library into every test binary.
extern "C" {
    fn goindex_close(handle: u64) -> c_int;
    fn goindex_last_error(handle: u64, buf: *mut c_char, capacity: usize, needed: *mut usize) -> c_int;
}

/// GOINDEX_EHANDLE of the header.
const EHANDLE: c_int = -2;

/// close_underneath closes ix's handle behind its back, as C code handed
/// the handle might; ix then sees a closed handle.
pub fn close_underneath(ix: &Indexer) {
    // SAFETY: a single-threaded test: no other call on the handle runs.
    let rc = unsafe { goindex_close(ix.handle()) };
    assert_eq!(rc, 0, "goindex_close({}) = {rc}", ix.handle());
}

/// is_open reports whether the library still knows handle.
pub fn is_open(handle: u64) -> bool {
    // SAFETY: capacity 0 with NULL buffer and needed is allowed.
    let rc = unsafe { goindex_last_error(handle, std::ptr::null_mut(), 0, std::ptr::null_mut()) };
    assert!(rc == 0 || rc == EHANDLE, "goindex_last_error({handle}) = {rc}");
    rc == 0
}
