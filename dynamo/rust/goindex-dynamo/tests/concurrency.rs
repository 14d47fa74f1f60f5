//! Probes from several threads while one thread applies events, and event
//! calls from several threads at once, on one shared [`Indexer`].
//!
//! The writer grows every member's chain one block at a time, then shrinks
//! it again. Around each event it moves two bounds per member: `hi` (what
//! the index may hold) before the call and `lo` (what it surely holds)
//! after a growing store; the reverse order for a shrinking removal. So at
//! any instant lo ≤ depth ≤ hi, and both bounds move one way within a phase:
//! a reader that reads the bounds before and after its probe must get a
//! score between the smaller lo and the larger hi.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use common::*;
use goindex_dynamo::*;

/// MEMBERS share one chain of BLOCKS blocks; READERS probe meanwhile.
const WORKERS: u64 = 10;
const RANKS: u32 = 2;
const MEMBERS: usize = (WORKERS as usize) * (RANKS as usize);
const BLOCKS: usize = 48;
const READERS: usize = 4;
const BLOCK_SIZE: usize = 16;

fn member(i: usize) -> WorkerWithDpRank {
    WorkerWithDpRank::new(i as u64 / RANKS as u64, i as u32 % RANKS)
}

/// Bounds are each member's lo and hi depth.
struct Bounds {
    lo: Vec<AtomicU32>,
    hi: Vec<AtomicU32>,
}

impl Bounds {
    fn snapshot(&self) -> (Vec<u32>, Vec<u32>) {
        let read = |v: &[AtomicU32]| v.iter().map(|a| a.load(Ordering::SeqCst)).collect();
        (read(&self.lo), read(&self.hi))
    }
}

/// Shared is what the writer and readers see.
struct Shared {
    ix: Indexer,
    tokens: Vec<u32>,
    locals: Vec<LocalBlockHash>,
    bounds: Bounds,
    done: AtomicBool,
    probes: AtomicU64,
}

/// check_scores holds one probe's scores against the bounds read before
/// (b) and after (a) it.
fn check_scores(got: &OverlapScores, b: &(Vec<u32>, Vec<u32>), a: &(Vec<u32>, Vec<u32>), what: &str) {
    for (&m, &s) in &got.scores {
        assert!(
            (m.worker_id as usize) < WORKERS as usize && m.dp_rank < RANKS,
            "{what}: unknown member {m:?} scored {s}"
        );
    }
    for i in 0..MEMBERS {
        let s = got.scores.get(&member(i)).copied().unwrap_or(0);
        let (lo, hi) = (b.0[i].min(a.0[i]), b.1[i].max(a.1[i]));
        assert!(lo <= s && s <= hi, "{what}: member {:?} scored {s}, want within [{lo}, {hi}]", member(i));
    }
}

/// reader probes until the writer is done (and at least 20 times),
/// alternating hashes and tokens, and watches stats only grow.
fn reader(sh: &Shared, id: usize) {
    let mut last_applied = 0;
    let mut n = 0;
    while !sh.done.load(Ordering::SeqCst) || n < 20 {
        let before = sh.bounds.snapshot();
        let got = if (n + id).is_multiple_of(2) {
            sh.ix.find_matches(&sh.locals).expect("find_matches")
        } else {
            sh.ix.find_matches_for_request(&sh.tokens, None).expect("find_matches_for_request")
        };
        let after = sh.bounds.snapshot();
        check_scores(&got, &before, &after, &format!("reader {id} probe {n}"));
        let st = sh.ix.stats().expect("stats");
        assert!(
            st.counts.events_applied >= last_applied,
            "reader {id}: events_applied went from {last_applied} to {}",
            st.counts.events_applied
        );
        assert_eq!(st.counts.events_rejected, 0, "reader {id}: rejected events: {st:?}");
        last_applied = st.counts.events_applied;
        n += 1;
    }
    sh.probes.fetch_add(n as u64, Ordering::Relaxed);
}

/// run_phase runs the writer `write` on this thread while READERS threads
/// probe, then checks every member scores `end`.
fn run_phase(sh: &Arc<Shared>, end: u32, write: impl FnOnce(&Shared)) {
    sh.done.store(false, Ordering::SeqCst);
    let start = Arc::new(Barrier::new(READERS + 1));
    let readers: Vec<_> = (0..READERS)
        .map(|id| {
            let (sh, start) = (Arc::clone(sh), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                reader(&sh, id);
            })
        })
        .collect();
    start.wait();
    write(sh);
    sh.done.store(true, Ordering::SeqCst);
    for r in readers {
        r.join().expect("a reader panicked");
    }
    let got = sh.ix.find_matches(&sh.locals).expect("find_matches");
    let want: Vec<_> =
        (0..MEMBERS).filter(|_| end > 0).map(|i| ((member(i).worker_id, member(i).dp_rank), end)).collect();
    assert_eq!(sorted(&got.scores), want, "after the phase every member scores {end}");
}

#[test]
fn probes_stay_within_what_was_stored_while_events_apply() {
    let ix = open(&format!(r#"{{"block_size": {BLOCK_SIZE}}}"#));
    let tokens: Vec<u32> = (0..(BLOCKS * BLOCK_SIZE) as u32).map(|t| t.wrapping_mul(40503) % 50000).collect();
    let locals = ix.hash_tokens(&tokens, Salt::default()).expect("hash_tokens");
    assert_eq!(locals.len(), BLOCKS, "hash_tokens block count");
    let values: Vec<u64> = locals.iter().map(|l| l.0).collect();
    let zero = || (0..MEMBERS).map(|_| AtomicU32::new(0)).collect();
    let sh = Arc::new(Shared {
        ix,
        tokens,
        locals,
        bounds: Bounds { lo: zero(), hi: zero() },
        done: AtomicBool::new(false),
        probes: AtomicU64::new(0),
    });

    // Grow: block k of every member in turn, a single-block store below k-1.
    run_phase(&sh, BLOCKS as u32, |sh| {
        for k in 0..BLOCKS {
            for i in 0..MEMBERS {
                sh.bounds.hi[i].store(k as u32 + 1, Ordering::SeqCst);
                apply(&sh.ix, &stored(member(i), &values[..k], &values[k..k + 1]));
                sh.bounds.lo[i].store(k as u32 + 1, Ordering::SeqCst);
            }
        }
    });
    // Shrink: remove every member's tail block, one at a time.
    run_phase(&sh, 0, |sh| {
        for k in (0..BLOCKS).rev() {
            for i in 0..MEMBERS {
                sh.bounds.lo[i].store(k as u32, Ordering::SeqCst);
                apply(&sh.ix, &removed(member(i), &values, &[k]));
                sh.bounds.hi[i].store(k as u32, Ordering::SeqCst);
            }
        }
    });
    let st = sh.ix.stats().expect("stats");
    assert_eq!(st.counts.events_applied, 2 * (MEMBERS * BLOCKS) as u64, "events applied: {st:?}");
    assert!(sh.probes.load(Ordering::Relaxed) >= 2 * 20 * READERS as u64, "too few probes ran");
}

#[test]
fn event_calls_from_several_threads_are_serialized() {
    let ix = Arc::new(open("{}"));
    let seq: Vec<u64> = (1..=64).collect();
    let writers: Vec<_> = (0..4u64)
        .map(|t| {
            let (ix, seq) = (Arc::clone(&ix), seq.clone());
            thread::spawn(move || {
                // Each thread owns its workers: stores in 8-block steps, then
                // drops one worker again.
                for worker in [t * 2, t * 2 + 1] {
                    for k in (0..seq.len()).step_by(8) {
                        apply(&ix, &stored(w(worker), &seq[..k], &seq[k..k + 8]));
                    }
                }
                ix.remove_worker(t * 2 + 1).expect("remove_worker");
            })
        })
        .collect();
    for t in writers {
        t.join().expect("a writer panicked");
    }
    let want: Vec<_> = (0..4u64).map(|t| ((t * 2, 0), 64)).collect();
    assert_eq!(scores(&ix, &seq), want, "each thread's kept worker holds the whole chain");
    let st = ix.stats().expect("stats");
    assert_eq!(
        (st.counts.blocks, st.counts.members, st.counts.events_applied),
        (4 * 64, 4, 4 * (2 * 8 + 1)),
        "stats: {st:?}"
    );
}
