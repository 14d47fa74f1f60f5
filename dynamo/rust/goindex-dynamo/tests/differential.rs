//! Random event streams against a small model of the exact semantics
//! (`dynamo-compat` §3.6): per rank, `held` (external hash → parent) and
//! `reachable` (the prefix-closed set a query may match through). After
//! every step the exact index must score exactly each rank's reachable
//! prefix of every query, and the ckf index never less.
//!
//! Knobs: GOINDEX_SEED (one seed), GOINDEX_SEEDS (seeds 1..=N, default 8),
//! GOINDEX_STEPS (steps per seed, default 300). A failure names its seed.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};

use common::*;
use goindex_dynamo::*;

/// Rank is one member's state in the model.
#[derive(Default)]
struct Rank {
    held: HashMap<u64, Option<u64>>,
    reachable: HashSet<u64>,
}

impl Rank {
    /// prefix is the number of leading hashes of ext in set.
    fn prefix(ext: &[u64], has: impl Fn(&u64) -> bool) -> usize {
        ext.iter().take_while(|e| has(e)).count()
    }
}

/// Verdict is what the library may do with a store.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Verdict {
    /// Apply: the parent is the root or reachable; the store must succeed.
    Apply,
    /// MayReject: the parent is held but unreachable (§3.2 "MayReject").
    MayReject,
    /// MustReject: the rank does not hold the parent.
    MustReject,
}

/// Model is §3.6's reference, ported.
struct Model {
    ranks: BTreeMap<WorkerWithDpRank, Rank>,
    clear_worker: bool,
}

impl Model {
    fn new(clear_worker: bool) -> Model {
        Model { ranks: BTreeMap::new(), clear_worker }
    }

    fn verdict(&self, m: WorkerWithDpRank, parent: Option<u64>) -> Verdict {
        let Some(p) = parent else { return Verdict::Apply };
        match self.ranks.get(&m) {
            Some(r) if r.reachable.contains(&p) => Verdict::Apply,
            Some(r) if r.held.contains_key(&p) => Verdict::MayReject,
            _ => Verdict::MustReject,
        }
    }

    /// store adds the chain ext below parent: every block is held, and
    /// reachable when its parent is the root or reachable.
    fn store(&mut self, m: WorkerWithDpRank, parent: Option<u64>, ext: &[u64]) {
        let r = self.ranks.entry(m).or_default();
        let mut prev = parent;
        for &e in ext {
            let reachable = prev.is_none_or(|p| r.reachable.contains(&p));
            r.held.insert(e, prev);
            if reachable {
                r.reachable.insert(e);
            }
            prev = Some(e);
        }
    }

    /// remove drops the hashes; when a reachable one goes, reachable keeps
    /// only blocks whose whole chain to the root is still reachable.
    fn remove(&mut self, m: WorkerWithDpRank, ext: &[u64]) {
        let r = self.ranks.entry(m).or_default();
        let mut cut = false;
        for e in ext {
            if r.held.remove(e).is_some() && r.reachable.remove(e) {
                cut = true;
            }
        }
        if !cut {
            return;
        }
        let rooted = |mut e: u64| loop {
            match r.held.get(&e) {
                Some(None) => return true,
                Some(Some(p)) if r.reachable.contains(p) => e = *p,
                _ => return false,
            }
        };
        let keep: HashSet<u64> = r.reachable.iter().copied().filter(|&e| rooted(e)).collect();
        r.reachable = keep;
    }

    fn clear(&mut self, m: WorkerWithDpRank) {
        if self.clear_worker {
            self.remove_worker(m.worker_id);
        } else {
            self.ranks.remove(&m);
        }
    }

    fn remove_worker(&mut self, worker: u64) {
        self.ranks.retain(|m, _| m.worker_id != worker);
    }

    fn held(&self, m: WorkerWithDpRank) -> Vec<u64> {
        let mut v: Vec<u64> = self.ranks.get(&m).map(|r| r.held.keys().copied().collect()).unwrap_or_default();
        v.sort_unstable();
        v
    }

    /// reach returns every rank's reachable prefix of ext, zeros omitted.
    fn reach(&self, ext: &[u64]) -> Vec<((u64, u32), u32)> {
        self.ranks
            .iter()
            .map(|(m, r)| ((m.worker_id, m.dp_rank), Rank::prefix(ext, |e| r.reachable.contains(e)) as u32))
            .filter(|&(_, s)| s > 0)
            .collect()
    }

    fn blocks(&self) -> u64 {
        self.ranks.values().map(|r| r.held.len() as u64).sum()
    }
}

/// Op is one step of a stream.
#[derive(Clone, Debug)]
enum Op {
    /// Store blocks seq[start..end] of member m, below seq[start-1].
    Store {
        m: WorkerWithDpRank,
        seq: usize,
        start: usize,
        end: usize,
    },
    /// Remove external hashes of member m.
    Remove {
        m: WorkerWithDpRank,
        ext: Vec<u64>,
    },
    Clear {
        m: WorkerWithDpRank,
    },
    RemoveRank {
        m: WorkerWithDpRank,
    },
    RemoveWorker {
        worker: u64,
    },
}

/// Target is one index under test with its own model (indexes may differ
/// on stores they are allowed to reject).
struct Target {
    name: &'static str,
    ix: Indexer,
    model: Model,
    /// exact: scores must equal the reachable prefix and unknown removals
    /// fail; else scores are never below it and unknown removals may pass.
    exact: bool,
}

/// pool builds sequences of local values that share prefixes: each extends
/// a random prefix of an earlier one, over a small alphabet.
fn pool(rng: &mut Rng) -> Vec<Vec<u64>> {
    let mut seqs: Vec<Vec<u64>> = Vec::new();
    for i in 0..10 {
        let mut s = if i == 0 {
            Vec::new()
        } else {
            let base = &seqs[rng.below(seqs.len())];
            base[..rng.below(base.len() + 1)].to_vec()
        };
        for _ in 0..1 + rng.below(8) {
            s.push(1 + rng.below(30) as u64);
        }
        seqs.push(s);
    }
    seqs
}

/// next_op draws a step from the exact model's state.
fn next_op(rng: &mut Rng, model: &Model, seqs: &[Vec<u64>], members: &[WorkerWithDpRank]) -> Op {
    let m = members[rng.below(members.len())];
    let roll = rng.below(100);
    if roll < 45 {
        let seq = rng.below(seqs.len());
        let ext = chain(&seqs[seq]);
        let r = model.ranks.get(&m);
        let reach = r.map_or(0, |r| Rank::prefix(&ext, |e| r.reachable.contains(e)));
        let held = r.map_or(0, |r| Rank::prefix(&ext, |e| r.held.contains_key(e)));
        let len = ext.len();
        let (start, end) = match rng.below(100) {
            // Continue the reachable prefix.
            0..75 => {
                let start = rng.below(reach.min(len - 1) + 1);
                (start, start + 1 + rng.below(len - start))
            }
            // Anywhere: the parent may be orphaned or not held.
            75..90 => {
                let start = rng.below(len);
                (start, start + 1 + rng.below(len - start))
            }
            // A duplicate of held blocks (or the first block when none).
            _ => {
                let end = held.max(1);
                (rng.below(end), end)
            }
        };
        return Op::Store { m, seq, start, end };
    }
    if roll < 75 {
        let mut held = model.held(m);
        let mut ext = Vec::new();
        for _ in 0..1 + rng.below(4) {
            if held.is_empty() {
                break;
            }
            ext.push(held.swap_remove(rng.below(held.len())));
        }
        if ext.is_empty() || rng.percent(15) {
            ext.insert(rng.below(ext.len() + 1), rng.next_u64());
        }
        return Op::Remove { m, ext };
    }
    match roll {
        75..83 => Op::Clear { m },
        83..88 => Op::RemoveRank { m },
        _ => Op::RemoveWorker { worker: m.worker_id },
    }
}

/// apply runs op on target and checks the library's answer against the
/// model's verdict; the model takes the op only if the library did.
fn apply_op(t: &mut Target, op: &Op, seqs: &[Vec<u64>], ctx: &str) {
    match *op {
        Op::Store { m, seq, start, end } => {
            let s = &seqs[seq];
            // Multi-block stores are split in two chained events 30% of the
            // time (a deterministic choice from the op itself).
            let cut = if end - start > 1 && (start + end + seq) % 10 < 3 { start + (end - start) / 2 } else { end };
            for (a, b) in [(start, cut), (cut, end)] {
                if a == b {
                    continue;
                }
                let ext = chain(&s[..b]);
                let parent = a.checked_sub(1).map(|i| ext[i]);
                let verdict = t.model.verdict(m, parent);
                let got = t.ix.apply_event(&stored(m, &s[..a], &s[a..b]));
                match (verdict, &got) {
                    (Verdict::Apply | Verdict::MayReject, Ok(())) => t.model.store(m, parent, &ext[a..b]),
                    (Verdict::MayReject | Verdict::MustReject, Err(e))
                        if e.kind() == ErrorKind::ParentBlockNotFound => {}
                    _ => panic!(
                        "{ctx}: {}: store {m:?} {:?}→{:?}: got {got:?}, model says {verdict:?}",
                        t.name,
                        &s[..a],
                        &s[a..b]
                    ),
                }
            }
        }
        Op::Remove { m, ref ext } => {
            let held = t.model.ranks.get(&m);
            let unknown = ext.iter().any(|e| !held.is_some_and(|r| r.held.contains_key(e)));
            let got = t.ix.apply_event(&removed_ext(m, ext));
            // ckf mode counts unknown removals instead of failing on them.
            let ok = match &got {
                Ok(()) => !unknown || !t.exact,
                Err(e) => unknown && e.kind() == ErrorKind::BlockNotFound,
            };
            assert!(ok, "{ctx}: {}: remove {m:?} {ext:?}: got {got:?}, unknown hashes: {unknown}", t.name);
            t.model.remove(m, ext);
        }
        Op::Clear { m } => {
            t.ix.apply_event(&cleared(m)).unwrap_or_else(|e| panic!("{ctx}: {}: clear {m:?}: {e}", t.name));
            t.model.clear(m);
        }
        Op::RemoveRank { m } => {
            t.ix.remove_worker_dp_rank(m.worker_id, m.dp_rank)
                .unwrap_or_else(|e| panic!("{ctx}: {}: remove rank: {e}", t.name));
            t.model.ranks.remove(&m);
        }
        Op::RemoveWorker { worker } => {
            t.ix.remove_worker(worker).unwrap_or_else(|e| panic!("{ctx}: {}: remove worker: {e}", t.name));
            t.model.remove_worker(worker);
        }
    }
}

/// check runs one query on target against its model.
fn check(t: &Target, q: &[u64], ctx: &str) {
    let ext = chain(q);
    let want = t.model.reach(&ext);
    let got = scores(&t.ix, q);
    if t.exact {
        assert_eq!(got, want, "{ctx}: {}: find_matches({q:?}), want the model's reachable prefixes", t.name);
        return;
    }
    let got: HashMap<_, _> = got.into_iter().collect();
    for (m, reach) in want {
        let s = got.get(&m).copied().unwrap_or(0);
        assert!(
            s >= reach,
            "{ctx}: {}: find_matches({q:?}) scored {m:?} {s}, below its reachable prefix {reach}",
            t.name
        );
    }
}

fn run_seed(seed: u64, steps: u64) {
    let mut rng = Rng::new(seed);
    let workers = 2 + seed % 3;
    let ranks = 1 + (seed / 3) % 2;
    let members: Vec<_> =
        (0..workers).flat_map(|w| (0..ranks as u32).map(move |r| WorkerWithDpRank::new(w, r))).collect();
    let clear_worker = seed.is_multiple_of(2);
    let scope = if clear_worker { "worker" } else { "rank" };
    let seqs = pool(&mut rng);
    let mut targets = [
        Target {
            name: "exact",
            ix: open(&format!(r#"{{"mode": "exact", "clear_scope": "{scope}"}}"#)),
            model: Model::new(clear_worker),
            exact: true,
        },
        Target {
            name: "ckf",
            ix: open(&format!(
                r#"{{"mode": "ckf", "lanes": 8, "expected_blocks_per_lane": 4096, "clear_scope": "{scope}"}}"#
            )),
            model: Model::new(clear_worker),
            exact: false,
        },
    ];
    for step in 0..steps {
        let op = next_op(&mut rng, &targets[0].model, &seqs, &members);
        let ctx = format!("seed {seed} step {step} {op:?} (rerun: GOINDEX_SEED={seed} GOINDEX_STEPS={steps})");
        let mut queries: Vec<Vec<u64>> = seqs.clone();
        for _ in 0..3 {
            let s = &seqs[rng.below(seqs.len())];
            queries.push(s[..1 + rng.below(s.len())].to_vec());
        }
        let mut stray = seqs[rng.below(seqs.len())].clone();
        stray.push(1000 + rng.below(10) as u64);
        queries.push(stray);
        for t in &mut targets {
            apply_op(t, &op, &seqs, &ctx);
            for q in &queries {
                check(t, q, &ctx);
            }
        }
    }
    let t = &targets[0];
    let st = t.ix.stats().expect("stats");
    assert_eq!(
        st.counts.blocks,
        t.model.blocks(),
        "seed {seed}: exact stats.blocks vs the model's held blocks: {st:?}"
    );
}

#[test]
fn random_streams_match_the_reference_model() {
    let steps = env_u64("GOINDEX_STEPS", 300);
    for seed in seeds(8) {
        run_seed(seed, steps);
    }
}

#[test]
fn model_self_checks() {
    // §3.6's self-checks, hash = chain id.
    let m = w(0);
    let lens = |model: &Model, ext: &[u64]| {
        let r = &model.ranks[&m];
        (Rank::prefix(ext, |e| r.held.contains_key(e)), Rank::prefix(ext, |e| r.reachable.contains(e)))
    };
    let mut model = Model::new(false);
    model.store(m, None, &[1, 2, 3, 4]);
    model.remove(m, &[2]);
    assert_eq!(lens(&model, &[1, 2, 3, 4]), (1, 1), "store [1..4], remove 2");
    assert_eq!(model.verdict(m, Some(1)), Verdict::Apply, "store 1→[2] verdict");
    model.store(m, Some(1), &[2]);
    assert_eq!(lens(&model, &[1, 2, 3, 4]), (4, 2), "store 1→[2]");
    assert_eq!(model.verdict(m, Some(4)), Verdict::MayReject, "store 4→[5] verdict");
    model.store(m, Some(4), &[5]);
    assert_eq!(lens(&model, &[1, 2, 3, 4, 5]), (5, 2), "store 4→[5]");
    model.store(m, Some(2), &[3, 4]);
    assert_eq!(lens(&model, &[1, 2, 3, 4, 5]), (5, 4), "store 2→[3,4]");
    assert_eq!(model.verdict(m, Some(99)), Verdict::MustReject, "a parent never held");

    let mut model = Model::new(false);
    model.store(m, None, &[1, 2, 3]);
    model.store(m, Some(2), &[13]);
    model.remove(m, &[3]);
    assert_eq!(lens(&model, &[1, 2, 13]), (3, 3), "remove 3 keeps 1→2→13");
    model.remove(m, &[1]);
    assert_eq!(lens(&model, &[1, 2, 13]), (0, 0), "remove 1");
    assert!(model.ranks[&m].held.contains_key(&13) && !model.ranks[&m].reachable.contains(&13), "13 held, unreachable");
}
