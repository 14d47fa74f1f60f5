//! Which events reach the index: [`RouterEvent::targets_primary`] and
//! [`Indexer::apply_event`] against `dynamo/testdata/targets_primary.txt`,
//! the table the Go side's `dynamo.RouterEvent.TargetsPrimary` is tested
//! against too (dynamo/event_test.go), so both sides keep Dynamo's one rule.

mod common;

use std::collections::HashMap;

use common::*;
use goindex_dynamo::*;

/// TIERS, DOMAINS and KINDS are the table's column values.
const TIERS: [(&str, StorageTier); 5] = [
    ("device", StorageTier::Device),
    ("host_pinned", StorageTier::HostPinned),
    ("disk", StorageTier::Disk),
    ("external", StorageTier::External),
    ("unknown", StorageTier::Unknown),
];
const DOMAINS: [(&str, Option<ResidencyDomain>); 4] = [
    ("absent", None),
    ("worker", Some(ResidencyDomain::Worker)),
    ("cache_owner", Some(ResidencyDomain::CacheOwner)),
    ("unsupported", Some(ResidencyDomain::Unsupported)),
];
const KINDS: [&str; 3] = ["stored", "removed", "cleared"];

/// Want is a row's outcome: `Ok(true)` apply, `Ok(false)` skip, `Err` the
/// refusal.
type Want = std::result::Result<bool, UnsupportedEvent>;

/// Row is one line of the table.
struct Row {
    line: usize,
    tier: StorageTier,
    domain: Option<ResidencyDomain>,
    kind: &'static str,
    want: Want,
}

/// table reads the shared table and checks that it names every tier ×
/// domain × kind exactly once.
fn table() -> Vec<Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/targets_primary.txt");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let mut rows = Vec::new();
    let mut seen = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 4 {
            bad::<()>(i, line);
        }
        let tier = TIERS.iter().find(|t| t.0 == f[0]).unwrap_or_else(|| bad(i, line)).1;
        let domain = DOMAINS.iter().find(|d| d.0 == f[1]).unwrap_or_else(|| bad(i, line)).1;
        let kind = *KINDS.iter().find(|&&k| k == f[2]).unwrap_or_else(|| bad(i, line));
        let want = match f[3] {
            "apply" => Ok(true),
            "skip" => Ok(false),
            "unknown_storage_tier" => Err(UnsupportedEvent::UnknownStorageTier),
            "unsupported_residency" => Err(UnsupportedEvent::UnsupportedResidency),
            _ => bad(i, line),
        };
        if let Some(prev) = seen.insert((f[0], f[1], kind), i + 1) {
            panic!("targets_primary.txt:{}: repeats line {prev}", i + 1);
        }
        rows.push(Row { line: i + 1, tier, domain, kind, want });
    }
    let all = TIERS.len() * DOMAINS.len() * KINDS.len();
    assert_eq!(rows.len(), all, "targets_primary.txt has {} combinations, want all {all}", rows.len());
    rows
}

/// bad fails the test on line i (0-based) of the table.
fn bad<T>(i: usize, line: &str) -> T {
    panic!("targets_primary.txt:{}: bad row {line:?}", i + 1)
}

/// BASE is the chain every row's member holds before its event.
const BASE: [u64; 3] = [1, 2, 3];

/// row_event is the row's event for member m: a store extending BASE by
/// one block, the removal of BASE's last block, or a clear.
fn row_event(row: &Row, m: WorkerWithDpRank) -> RouterEvent {
    let ev = match row.kind {
        "stored" => stored(m, &BASE, &[4]),
        "removed" => removed(m, &BASE, &[2]),
        _ => cleared(m),
    };
    RouterEvent { storage_tier: row.tier, residency_domain: row.domain, ..ev }
}

#[test]
fn targets_primary_matches_the_shared_table() {
    for row in table() {
        let ev = row_event(&row, w(1));
        assert_eq!(
            ev.targets_primary(),
            row.want,
            "targets_primary.txt:{}: {:?} {:?} {}",
            row.line,
            row.tier,
            row.domain,
            row.kind
        );
    }
}

/// Every row's event, applied to a member holding BASE: applied events
/// change its score (a store to 4 blocks, a removal to 2, a clear to
/// none), skipped ones return Ok and change nothing, refused ones return
/// InvalidArgument and change nothing; the library counts only applied
/// events (it never sees the others).
#[test]
fn apply_event_follows_the_shared_table() {
    for mode in ["exact", "ckf"] {
        let ix = open(&format!(r#"{{"mode": "{mode}", "block_size": 16}}"#));
        for (i, row) in table().into_iter().enumerate() {
            let m = w(100 + i as u64);
            apply(&ix, &stored(m, &[], &BASE));
            let before = ix.stats().expect("stats").counts;
            let ev = row_event(&row, m);
            let got = ix.apply_event(&ev);
            let after = ix.stats().expect("stats").counts;
            let what = format!("{mode} targets_primary.txt:{}: {:?} {:?} {}", row.line, row.tier, row.domain, row.kind);
            let score = ix.find_matches(&locals(&[1, 2, 3, 4])).expect("find_matches").scores.get(&m).copied();
            let want_score = match (row.want, row.kind) {
                (Ok(true), "stored") => Some(4),
                (Ok(true), "removed") => Some(2),
                (Ok(true), _) => None,
                _ => Some(3),
            };
            match row.want {
                Ok(_) => assert!(got.is_ok(), "{what}: apply_event = {got:?}, want Ok"),
                Err(why) => {
                    let err = got.expect_err(&what);
                    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{what}: kind of {err}");
                    assert!(
                        err.detail().contains(&why.to_string()),
                        "{what}: detail {:?} names no {why}",
                        err.detail()
                    );
                }
            }
            assert_eq!(score, want_score, "{what}: score after the event");
            let applied = u64::from(row.want == Ok(true));
            assert_eq!(after.events_applied - before.events_applied, applied, "{what}: events_applied");
            assert_eq!(after.events_rejected, before.events_rejected, "{what}: events_rejected");
        }
    }
}

/// The audit's case: a worker's device blocks survive a cache owner's clear
/// and lower-tier stores of the same worker, and go with its own clear.
#[test]
fn a_cache_owner_clear_keeps_the_worker_device_blocks() {
    let ix = open(r#"{"mode": "exact", "block_size": 16}"#);
    let m = w(7);
    apply(&ix, &stored(m, &[], &BASE));
    let lower = RouterEvent { storage_tier: StorageTier::HostPinned, ..stored(m, &[], &[9, 8]) };
    apply(&ix, &lower);
    assert_eq!(scores(&ix, &[9, 8]), vec![], "a host_pinned store reached the index");
    let owner = RouterEvent { residency_domain: Some(ResidencyDomain::CacheOwner), ..cleared(m) };
    apply(&ix, &owner);
    assert_eq!(scores(&ix, &BASE), vec![((7, 0), 3)], "after a cache owner's clear");
    let own = RouterEvent { residency_domain: Some(ResidencyDomain::Worker), ..cleared(m) };
    apply(&ix, &own);
    assert_eq!(scores(&ix, &BASE), vec![], "after the worker's own clear");
}

#[test]
fn new_events_are_legacy_device_events() {
    let ev = stored(w(1), &[], &BASE);
    assert_eq!((ev.storage_tier, ev.residency_domain), (StorageTier::Device, None));
    assert_eq!(StorageTier::default(), StorageTier::Device);
    assert_eq!(ev.targets_primary(), Ok(true));
}

#[test]
fn wire_names_round_trip() {
    for (name, tier) in TIERS {
        assert_eq!(tier.as_str(), name, "{tier:?}.as_str()");
    }
    for (_, tier) in &TIERS[..4] {
        assert_eq!(StorageTier::from_wire(tier.as_str()), *tier, "from_wire({:?})", tier.as_str());
    }
    for name in ["", "Device", "gpu", "unknown"] {
        assert_eq!(StorageTier::from_wire(name), StorageTier::Unknown, "StorageTier::from_wire({name:?})");
    }
    for d in [ResidencyDomain::Worker, ResidencyDomain::CacheOwner] {
        assert_eq!(ResidencyDomain::from_wire(d.as_str()), d, "from_wire({:?})", d.as_str());
    }
    for name in ["", "Worker", "owner", "unsupported"] {
        assert_eq!(
            ResidencyDomain::from_wire(name),
            ResidencyDomain::Unsupported,
            "ResidencyDomain::from_wire({name:?})"
        );
    }
}
