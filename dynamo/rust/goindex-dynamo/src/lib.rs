//! goindex-dynamo: goindex's KV-cache index in the shape of NVIDIA Dynamo's
//! KV indexer, for a Dynamo router build. It wraps the C ABI of
//! `libgoindex.so` (`include/goindex.h`, the contract) in safe Rust and
//! depends on nothing but std.
//!
//! # Concepts
//!
//! Workers publish KV events per *rank* ([`WorkerWithDpRank`]): a store
//! adds a chain of blocks below a parent, a removal drops blocks, a clear
//! drops them all. Every block has two identities: the engine's opaque
//! [`ExternalSequenceBlockHash`] (a per-rank lookup key, never recomputed)
//! and the [`LocalBlockHash`] of its tokens, by which the shared tree is
//! navigated. A query is a prompt's local hashes from the root; a rank's
//! score is the number of leading query blocks it holds through a chain
//! still reachable from the root (a mid-chain removal cuts the rank's
//! descendants of that block, and re-storing only the removed block does
//! not revive them). `dynamo-compat` §3 is the full model.
//!
//! The index is Dynamo's *primary* index: the device-tier blocks each
//! worker owns. A [`RouterEvent`] carries Dynamo's `storage_tier`
//! ([`StorageTier`], device when the wire has none) and `residency_domain`
//! ([`ResidencyDomain`], `None` when omitted), and
//! [`RouterEvent::targets_primary`] applies Dynamo's rule, the same as the
//! Go side's `dynamo.RouterEvent.TargetsPrimary`: stores and removals count
//! when worker-owned and on the device tier; a clear counts unless it names
//! the cache-owner domain; an unknown tier or an unsupported domain is
//! refused. [`Indexer::apply_event`] skips the events for other indexes and
//! refuses the unsupported ones, so Dynamo's events can be forwarded as
//! published. [`RouterEvent::new`] makes a legacy event (device tier, no
//! domain), which always counts.
//!
//! ```
//! use goindex_dynamo::*;
//!
//! let ix = Indexer::open(r#"{"mode": "exact", "block_size": 16}"#)?;
//! let block = KvCacheStoredBlockData {
//!     block_hash: ExternalSequenceBlockHash(0xfeed),
//!     tokens_hash: LocalBlockHash(42),
//! };
//! let store = KvCacheStoreData { parent_hash: None, blocks: vec![block] };
//! let event = KvCacheEvent { event_id: 1, data: KvCacheEventData::Stored(store), dp_rank: 0 };
//! ix.apply_event(&RouterEvent::new(7, event))?;
//! let scores = ix.find_matches(&[LocalBlockHash(42), LocalBlockHash(43)])?;
//! assert_eq!(scores.scores[&WorkerWithDpRank::new(7, 0)], 1);
//! # Ok::<(), goindex_dynamo::Error>(())
//! ```
//!
//! # Dynamo's calls
//!
//! | Dynamo (`KvIndexerInterface`, `RadixTree`) | here | C call |
//! | --- | --- | --- |
//! | `apply_event(RouterEvent)` | [`Indexer::apply_event`] | `goindex_insert` / `_remove` / `_clear` |
//! | engine events with token ids | [`Indexer::apply_stored_tokens`] | `goindex_insert_tokens` |
//! | `find_matches(Vec<LocalBlockHash>)` | [`Indexer::find_matches`] | `goindex_probe` |
//! | `find_matches_for_request(tokens, lora_name)` | [`Indexer::find_matches_for_request`] | `goindex_hash_tokens` + `goindex_probe` |
//! | `compute_block_hash_for_seq` | [`Indexer::hash_tokens`] | `goindex_hash_tokens` |
//! | `remove_worker(id)` | [`Indexer::remove_worker`] | `goindex_remove_worker` |
//! | `remove_worker_dp_rank(id, rank)` | [`Indexer::remove_worker_dp_rank`] | `goindex_remove_rank` |
//! | worker selection | [`Indexer::score`] | `goindex_score` |
//! | — | [`Indexer::stats`] | `goindex_stats` |
//!
//! The calls are synchronous and short (no I/O, no waiting except an event
//! call behind another event call on the same handle), so async router code
//! calls them directly. Not provided: Dynamo's `frequencies` and
//! `tree_sizes` (the ABI's probe returns depths only), `dump_events` (the
//! ABI has no dump), and the global-mode calls `goindex_apply_frame`,
//! `goindex_attach_replica` and `goindex_set_rtt` (a Dynamo indexer is fed
//! KV events; global mode is `goindex route`'s and other hosts' business).
//!
//! # Linking
//!
//! The crate links `-lgoindex` (`#[link(name = "goindex")]`; Cargo
//! `links = "goindex"`). A Dynamo router build:
//!
//! 1. builds the library: `ffi/build.sh /opt/goindex/lib` writes
//!    `libgoindex.so` (soname `libgoindex.so.1`) and the symlink;
//! 2. depends on this crate
//!    (`goindex-dynamo = { path = "<goindex>/dynamo/rust/goindex-dynamo" }`)
//!    and builds with `GOINDEX_LIB_DIR=/opt/goindex/lib` (build.rs adds it
//!    to the link search path; without it the linker's default paths are
//!    searched);
//! 3. lets the loader find `libgoindex.so.1` at run time: install it in a
//!    system library directory (ldconfig), set `LD_LIBRARY_PATH`, or give
//!    the router binary an rpath (`RUSTFLAGS="-C link-arg=-Wl,-rpath,/opt/goindex/lib"`).
//!
//! The soname carries [`ABI_VERSION`], so the loader refuses a library of
//! another ABI generation. The library holds a Go runtime: load only one
//! Go-built library per process and do not fork after it is loaded. If the
//! same router also loads goindex as Dynamo's worker-selector plugin
//! (`DYN_ROUTER_WORKER_SELECTOR_PLUGIN`, `dynamo-compat` §5a), point that
//! variable at the very file the router links, so that one copy is loaded.
//!
//! # Threading
//!
//! [`Indexer`] is `Send + Sync` and every call takes `&self`; see its
//! Threading section for why that follows from the header's rules.
//!
//! # Errors
//!
//! Every failure is an [`Error`]: its [`ErrorKind`] is the call's
//! `GOINDEX_E*` status code (one variant per code), and its detail is the
//! library's `goindex_last_error` text. A failed call changes nothing except
//! where the kind's doc says what changed ([`ErrorKind::BlockNotFound`],
//! [`ErrorKind::CapacityExhausted`]). Output buffers are the crate's job:
//! every call that returns an array sizes its buffer and retries with the
//! size the library asks for, so callers never see
//! [`ErrorKind::BufferTooSmall`].
//!
//! # Files
//!
//! - `build.rs`: the library's directory from `GOINDEX_LIB_DIR`.
//! - `src/lib.rs`: these docs and the public names.
//! - `src/sys.rs`: the raw C declarations and structs, checked against the
//!   header text.
//! - `src/error.rs`: [`ErrorKind`], [`Error`], the code table, detail reads.
//! - `src/event.rs`: Dynamo's identities, events and [`OverlapScores`].
//! - `src/indexer.rs`: [`Indexer`], [`Salt`], [`Stats`], [`Counts`], [`Mode`].
//! - `src/score.rs`: [`ScoreRequest`], [`Candidate`], [`Load`],
//!   [`Policy`], [`ScoreResult`].
//! - `tests/common/mod.rs`: the tests' block chains, seeded random numbers
//!   and raw-handle helper.
//! - `tests/scenarios.rs`: the `dynamo-compat` §3.5 scenarios, the shrunk-5
//!   and six-event regressions, hash vectors, stats and score.
//! - `tests/errors.rs`: every error path safe Rust can reach.
//! - `tests/primary.rs`: which events reach the index, against the table
//!   the Go side shares (dynamo/testdata/targets_primary.txt).
//! - `tests/concurrency.rs`: probes on several threads while one applies
//!   events.
//! - `tests/differential.rs`: random event streams against a model of the
//!   exact semantics.
//! - `tests/lifecycle.rs`: handles opened and dropped on threads, through
//!   panics and failed opens; at the end no handle is left open.
//!
//! # What the tests prove
//!
//! The constants and struct sizes agree with `include/goindex.h`; every
//! status code maps to its kind and back. Through the public API: every
//! §3.5 row the ABI can express gives Dynamo's scores (rows needing a dump
//! are out of reach), the library's hashes match the spec's vectors, and
//! every error path is reported with its kind and detail, including a
//! handle closed underneath. [`RouterEvent::targets_primary`] gives the
//! shared table's answer (the one the Go side is tested against) for every
//! tier × residency domain × kind, and [`Indexer::apply_event`] applies
//! exactly those events, skips or refuses the others and changes nothing
//! for them, in exact and ckf mode. Probes on four threads while one thread
//! applies events always return a score between what was surely stored and
//! what may have been. Over seeded random streams (`GOINDEX_SEED`,
//! `GOINDEX_SEEDS`, `GOINDEX_STEPS`) exact mode scores exactly the model's
//! reachable prefix of every rank and ckf mode never less. Every handle the
//! lifecycle run opens is closed when its last owner goes, panics included.
#![deny(missing_docs)]

mod error;
mod event;
mod indexer;
mod score;
mod sys;

pub use error::{Error, ErrorKind, Result};
pub use event::{
    DpRank, ExternalSequenceBlockHash, KvCacheEvent, KvCacheEventData, KvCacheRemoveData, KvCacheStoreData,
    KvCacheStoredBlockData, LocalBlockHash, OverlapScores, ResidencyDomain, RouterEvent, StorageTier, UnsupportedEvent,
    WorkerId, WorkerWithDpRank,
};
pub use indexer::{abi_version, Counts, Indexer, Mode, Salt, Stats};
pub use score::{Candidate, Load, Policy, ScoreRequest, ScoreResult};
pub use sys::{ABI_VERSION, MAX_BLOCKS, MAX_CONFIG_BYTES, MAX_NAME_BYTES, MAX_TOKENS};

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every file of the crate is named in the Files section above, and
    /// every file named there exists.
    #[test]
    fn the_file_map_matches_the_crate() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let docs = std::fs::read_to_string(root.join("src/lib.rs")).expect("read src/lib.rs");
        let section =
            docs.split("//! # Files").nth(1).and_then(|s| s.split("//! # What").next()).expect("a Files section");
        let named: Vec<&str> = section.split('`').skip(1).step_by(2).filter(|s| s.contains('.')).collect();
        let mut files = vec!["build.rs".to_string()];
        for dir in ["src", "tests", "tests/common"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("read {dir}: {e}")) {
                let path = entry.expect("directory entry").path();
                if path.is_file() {
                    files.push(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        for f in &files {
            assert!(named.contains(&f.as_str()), "{f} is not in the Files section of src/lib.rs");
        }
        for n in &named {
            assert!(files.iter().any(|f| f == n), "the Files section names {n}, which does not exist");
        }
    }
}
