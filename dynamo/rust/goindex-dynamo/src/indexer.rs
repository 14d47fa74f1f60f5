//! [`Indexer`]: one library handle, with Dynamo's indexer calls.

use std::os::raw::c_int;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(doc)]
use crate::error::ErrorKind;
use crate::error::{check, Error, Result};
use crate::event::{
    DpRank, ExternalSequenceBlockHash, KvCacheEventData, LocalBlockHash, OverlapScores, RouterEvent, WorkerId,
    WorkerWithDpRank,
};
use crate::score::{ScoreRequest, ScoreResult};
use crate::sys;

/// FIRST_PROBE_ENTRIES is the first probe buffer of a handle, in entries
/// (16 bytes each); it grows to the most members a probe has matched.
const FIRST_PROBE_ENTRIES: usize = 16;

/// Indexer is one open index of libgoindex.so, shaped like Dynamo's KV
/// indexer: apply events, find matches, drop workers. Dropping it closes the
/// handle.
///
/// # Threading
///
/// `Indexer` is `Send + Sync`, and every call takes `&self`: share it with
/// `Arc<Indexer>`. This follows the header's threading rules. Probes
/// (`find_matches*`, `hash_tokens`), `score` and `stats` may run on any
/// number of threads at once, while events are applied. Event calls
/// (`apply_event`, `apply_stored_tokens`, `remove_worker*`) may come from
/// several threads: the library serializes them per handle. The one call
/// that must not race with the others, `goindex_close`, runs only in `Drop`
/// and [`Indexer::close`], which own the indexer, so no other call on it can
/// be in flight. The handle is a plain integer (never a pointer), and the
/// only other state is two atomic sizing hints.
///
/// # Errors
///
/// A failed call changes nothing, except for the two kinds whose docs say
/// what changed: [`ErrorKind::BlockNotFound`] (the known hashes were
/// removed) and [`ErrorKind::CapacityExhausted`] from ckf filter admission
/// (the blocks are tracked, some not yet in the filter). After
/// [`ErrorKind::Internal`], drop the indexer.
#[derive(Debug)]
pub struct Indexer {
    handle: u64,
    /// block_size_floor is a lower bound of the handle's block size, learned
    /// from each hash_tokens answer: n tokens giving w blocks means
    /// block size > n / (w + 1). Sizing the hash buffer at n / floor entries
    /// is therefore always enough, and tight once one long prompt was seen.
    block_size_floor: AtomicUsize,
    /// probe_entries is the most entries one probe has needed.
    probe_entries: AtomicUsize,
}

/// Salt is what Dynamo folds into the local hashes of a request besides the
/// tokens: the LoRA adapter name and the cache namespace (the request's
/// `cache_salt`). `None` and `Some("")` both mean none (§1.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Salt<'a> {
    /// lora_name is the LoRA adapter, at most [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES).
    pub lora_name: Option<&'a str>,
    /// cache_namespace is the cache namespace, at most [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES).
    pub cache_namespace: Option<&'a str>,
}

/// Mode is the kind of index a handle runs (config key "mode").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// Exact is the radix tree with Dynamo's semantics.
    Exact,
    /// Ckf is one cuckoo-filter lane per member, probed together.
    Ckf,
    /// Global has DC lanes fed by relay frames or a shared replica.
    Global,
    /// Other is a mode number this crate does not know.
    Other(u32),
}

/// Stats are a handle's counters (goindex_counters): its mode and counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stats {
    /// mode is the handle's index kind.
    pub mode: Mode,
    /// counts are the handle's counters.
    pub counts: Counts,
}

/// Counts are goindex_counters' counters after its mode, field for field
/// (the raw struct embeds this one).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counts {
    /// blocks are the blocks tracked (exact ownership entries).
    pub blocks: u64,
    /// members are the (worker, dp rank) pairs known.
    pub members: u64,
    /// lanes_ready are the ckf and global lanes with an installed table.
    pub lanes_ready: u64,
    /// memory_bytes is the index memory, approximate.
    pub memory_bytes: u64,
    /// capacity_omissions are the ckf blocks tracked but not in the filter.
    pub capacity_omissions: u64,
    /// events_applied counts the accepted event calls.
    pub events_applied: u64,
    /// events_rejected counts the event calls that returned an error.
    pub events_rejected: u64,
    /// probes counts the probe and score calls served.
    pub probes: u64,
    /// frames_applied counts the relay frames installed (global mode).
    pub frames_applied: u64,
    /// frames_rejected counts the relay frames refused (global mode).
    pub frames_rejected: u64,
    /// replica_generation is the attached replica's generation, 0 if none.
    pub replica_generation: u64,
}

/// abi_version returns the ABI generation of the loaded library
/// (goindex_abi_version); it equals [`ABI_VERSION`](crate::ABI_VERSION)
/// whenever the loader accepted `libgoindex.so.1`.
pub fn abi_version() -> u32 {
    // SAFETY: no arguments; never fails.
    unsafe { sys::goindex_abi_version() }
}

impl Indexer {
    /// open creates an index from a JSON config (`include/goindex.h` lists
    /// the keys: "mode", "block_size", "clear_scope", "lanes", …); `"{}"` or
    /// `""` gives every default (exact mode, 16-token blocks). Unknown keys
    /// are refused so typos surface.
    ///
    /// Errors: [`ErrorKind::BadConfig`], [`ErrorKind::TooBig`] (over
    /// [`MAX_CONFIG_BYTES`](crate::MAX_CONFIG_BYTES)),
    /// [`ErrorKind::Unavailable`] (a feature an older library lacks).
    pub fn open(config_json: &str) -> Result<Indexer> {
        let mut handle = 0u64;
        // SAFETY: the config is read during the call only; handle is a
        // valid out-pointer.
        let rc = unsafe { sys::goindex_open(config_json.as_ptr().cast(), config_json.len(), &mut handle) };
        check("goindex_open", 0, rc)?;
        Ok(Indexer {
            handle,
            block_size_floor: AtomicUsize::new(1),
            probe_entries: AtomicUsize::new(FIRST_PROBE_ENTRIES),
        })
    }

    /// handle returns the library handle, for logs and for handing the
    /// index to C code (which must not close it).
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// close closes the handle now and reports the outcome, which `Drop`
    /// cannot.
    pub fn close(self) -> Result<()> {
        let handle = self.handle;
        std::mem::forget(self);
        // SAFETY: self is consumed, so no other call on handle is in flight.
        check("goindex_close", handle, unsafe { sys::goindex_close(handle) })
    }

    /// apply_event applies one KV event of a rank when it targets the
    /// primary index ([`RouterEvent::targets_primary`]): a store
    /// (goindex_insert), a removal (goindex_remove) or a clear
    /// (goindex_clear). An event for another index (a lower storage tier, a
    /// cache owner's blocks or a cache owner's clear) is skipped: `Ok`, and
    /// the library is not called, so [`Counts::events_applied`] does not
    /// count it. Events can be forwarded as Dynamo publishes them.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (an event Dynamo's router
    /// refuses: an unknown storage tier, an unsupported residency domain, a
    /// cache owner's store or removal on the device tier; nothing changed,
    /// the library was not called); [`ErrorKind::ParentBlockNotFound`] and
    /// [`ErrorKind::InvalidBlockSequence`] (nothing changed);
    /// [`ErrorKind::BlockNotFound`] (exact mode: some removed hashes were
    /// unknown, the known ones were removed); [`ErrorKind::CapacityExhausted`]
    /// (ckf mode: tracked, not all in the filter; or, nothing changed, no
    /// free lane for a new member or no free tree node); [`ErrorKind::TooBig`] (over
    /// [`MAX_BLOCKS`](crate::MAX_BLOCKS) blocks). A duplicate store is not
    /// an error.
    pub fn apply_event(&self, event: &RouterEvent) -> Result<()> {
        match event.targets_primary() {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(why) => {
                return Err(Error::unsupported_event(format!(
                    "apply_event: {why} (member {}/{}, event {}, storage_tier {}, residency_domain {}): \
                     Dynamo's router refuses the event; nothing changed",
                    event.worker_id,
                    event.event.dp_rank,
                    event.event.event_id,
                    event.storage_tier.as_str(),
                    event.residency_domain.map_or("absent", |d| d.as_str()),
                )))
            }
        }
        let (worker, rank, id) = (event.worker_id, event.event.dp_rank, event.event.event_id);
        match &event.event.data {
            KvCacheEventData::Stored(store) => {
                let (external, local): (Vec<u64>, Vec<u64>) =
                    store.blocks.iter().map(|b| (b.block_hash.0, b.tokens_hash.0)).unzip();
                // SAFETY: every array holds its stated length and is read
                // during the call only.
                let rc = unsafe {
                    sys::goindex_insert(
                        self.handle,
                        worker,
                        rank,
                        id,
                        parent_ptr(&store.parent_hash),
                        external.as_ptr(),
                        local.as_ptr(),
                        external.len(),
                    )
                };
                check("goindex_insert", self.handle, rc)
            }
            KvCacheEventData::Removed(remove) => {
                let hashes = &remove.block_hashes;
                // SAFETY: ExternalSequenceBlockHash is repr(transparent)
                // over u64; the array is read during the call only.
                let rc =
                    unsafe { sys::goindex_remove(self.handle, worker, rank, id, hashes.as_ptr().cast(), hashes.len()) };
                check("goindex_remove", self.handle, rc)
            }
            KvCacheEventData::Cleared => {
                // SAFETY: scalar arguments only.
                check("goindex_clear", self.handle, unsafe { sys::goindex_clear(self.handle, worker, rank, id) })
            }
        }
    }

    /// apply_stored_tokens applies a stored event whose tokens hashes the
    /// library computes from the blocks' token ids the Dynamo way
    /// (goindex_insert_tokens): block i is `tokens[i*bs .. (i+1)*bs]`, salted
    /// by `salt`; tokens past the last block are ignored. It takes no tier
    /// or residency domain: pass only stores for the primary index (an
    /// engine's `medium` GPU or DEVICE, which Dynamo maps to the device
    /// tier; see [`RouterEvent::targets_primary`]).
    ///
    /// Errors: as [`Indexer::apply_event`], and
    /// [`ErrorKind::InvalidArgument`] when `tokens` is shorter than
    /// `block_hashes.len()` × block size, [`ErrorKind::TooBig`] for names
    /// over [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES) or tokens over
    /// [`MAX_TOKENS`](crate::MAX_TOKENS).
    pub fn apply_stored_tokens(
        &self,
        member: WorkerWithDpRank,
        event_id: u64,
        parent_hash: Option<ExternalSequenceBlockHash>,
        block_hashes: &[ExternalSequenceBlockHash],
        tokens: &[u32],
        salt: Salt<'_>,
    ) -> Result<()> {
        let (lora, lora_len) = sys::name(salt.lora_name);
        let (ns, ns_len) = sys::name(salt.cache_namespace);
        // SAFETY: every array and name holds its stated length and is read
        // during the call only; block hashes are repr(transparent) u64s.
        let rc = unsafe {
            sys::goindex_insert_tokens(
                self.handle,
                member.worker_id,
                member.dp_rank,
                event_id,
                parent_ptr(&parent_hash),
                block_hashes.as_ptr().cast(),
                block_hashes.len(),
                tokens.as_ptr(),
                tokens.len(),
                lora,
                lora_len,
                ns,
                ns_len,
            )
        };
        check("goindex_insert_tokens", self.handle, rc)
    }

    /// remove_worker drops every rank of a worker; an unknown worker is a
    /// no-op.
    pub fn remove_worker(&self, worker_id: WorkerId) -> Result<()> {
        // SAFETY: scalar arguments only.
        check("goindex_remove_worker", self.handle, unsafe { sys::goindex_remove_worker(self.handle, worker_id) })
    }

    /// remove_worker_dp_rank drops one rank of a worker; an unknown rank is
    /// a no-op.
    pub fn remove_worker_dp_rank(&self, worker_id: WorkerId, dp_rank: DpRank) -> Result<()> {
        // SAFETY: scalar arguments only.
        let rc = unsafe { sys::goindex_remove_rank(self.handle, worker_id, dp_rank) };
        check("goindex_remove_rank", self.handle, rc)
    }

    /// find_matches scores a request's local block hashes (from the root)
    /// against every rank: the number of leading blocks each holds through
    /// a reachable chain (goindex_probe). Exact mode gives Dynamo's scores;
    /// ckf mode never scores below them and overcounts only through
    /// fingerprint collisions.
    ///
    /// Errors: [`ErrorKind::TooBig`] (over
    /// [`MAX_BLOCKS`](crate::MAX_BLOCKS) hashes).
    pub fn find_matches(&self, sequence: &[LocalBlockHash]) -> Result<OverlapScores> {
        let capacity = self.probe_entries.load(Ordering::Relaxed);
        let entries = self.fill("goindex_probe", capacity, |out, cap, written| {
            // SAFETY: LocalBlockHash is repr(transparent) over u64; the
            // hashes are read during the call only; out has cap entries.
            unsafe { sys::goindex_probe(self.handle, sequence.as_ptr().cast(), sequence.len(), out, cap, written) }
        })?;
        self.probe_entries.fetch_max(entries.len(), Ordering::Relaxed);
        let scores = entries.iter().map(|e| (WorkerWithDpRank::new(e.id, e.rank), e.blocks)).collect();
        Ok(OverlapScores { scores })
    }

    /// find_matches_for_request hashes a request's tokens with the handle's
    /// block size and an optional LoRA name, then finds matches: Dynamo's
    /// `find_matches_for_request(tokens, lora_name)`. Requests with a cache
    /// namespace call [`Indexer::hash_tokens`] and
    /// [`Indexer::find_matches`].
    pub fn find_matches_for_request(&self, tokens: &[u32], lora_name: Option<&str>) -> Result<OverlapScores> {
        let hashes = self.hash_tokens(tokens, Salt { lora_name, cache_namespace: None })?;
        self.find_matches(&hashes)
    }

    /// hash_tokens returns the local block hashes of token ids, one per
    /// full block of the handle's block size (a trailing partial block is
    /// ignored), XXH3-64 seeded 1337 plus the salt (goindex_hash_tokens).
    ///
    /// Errors: [`ErrorKind::TooBig`] (tokens over
    /// [`MAX_TOKENS`](crate::MAX_TOKENS), names over
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES)).
    pub fn hash_tokens(&self, tokens: &[u32], salt: Salt<'_>) -> Result<Vec<LocalBlockHash>> {
        let (lora, lora_len) = sys::name(salt.lora_name);
        let (ns, ns_len) = sys::name(salt.cache_namespace);
        let capacity = tokens.len() / self.block_size_floor.load(Ordering::Relaxed);
        let hashes = self.fill("goindex_hash_tokens", capacity, |out: *mut LocalBlockHash, cap, written| {
            // SAFETY: tokens and names hold their stated lengths and are
            // read during the call only; out has cap entries of a
            // repr(transparent) u64.
            unsafe {
                sys::goindex_hash_tokens(
                    self.handle,
                    tokens.as_ptr(),
                    tokens.len(),
                    lora,
                    lora_len,
                    ns,
                    ns_len,
                    out.cast(),
                    cap,
                    written,
                )
            }
        })?;
        self.block_size_floor.fetch_max(tokens.len() / (hashes.len() + 1) + 1, Ordering::Relaxed);
        Ok(hashes)
    }

    /// fill runs an output call `f(buf, capacity, &mut written)` with a
    /// buffer of `capacity` entries and returns the entries written. On
    /// GOINDEX_EBUFFER it grows the buffer to the entries the library asked
    /// for plus a quarter (members may be added between two probes) and
    /// calls again; a need that only grows by more than a quarter on every
    /// retry cannot last, so the loop ends.
    fn fill<T>(
        &self,
        call: &str,
        capacity: usize,
        mut f: impl FnMut(*mut T, usize, &mut usize) -> c_int,
    ) -> Result<Vec<T>> {
        let mut buf: Vec<T> = Vec::with_capacity(capacity);
        loop {
            let cap = buf.capacity();
            let mut written = 0usize;
            let rc = f(buf.as_mut_ptr(), cap, &mut written);
            if rc == sys::OK {
                assert!(written <= cap, "{call} wrote {written} entries into a buffer of {cap}");
                // SAFETY: the library initialized the first written entries
                // (plain integers, any bits valid).
                unsafe { buf.set_len(written) };
                return Ok(buf);
            }
            if rc != sys::EBUFFER || written <= cap {
                // Any other failure, or a need the buffer already met (a
                // library bug that retrying would not fix).
                return Err(Error::from_call(call, self.handle, rc));
            }
            buf.reserve_exact(written + written / 4);
        }
    }

    /// score probes the request's prefix for every candidate and picks the
    /// one with the lowest cost under the request's policy (goindex_score).
    ///
    /// Errors: [`ErrorKind::NoCandidate`] (none had every signal the policy
    /// needs); [`ErrorKind::InvalidArgument`] (a NaN or negative
    /// temperature or RTT); [`ErrorKind::TooBig`].
    pub fn score(&self, request: &ScoreRequest<'_>) -> Result<ScoreResult> {
        let candidates: Option<Vec<sys::Candidate>> = request.candidates.map(|cs| cs.iter().map(|c| c.raw()).collect());
        let (cand_ptr, n_candidates) = candidates.as_ref().map_or((ptr::null(), 0), |cs| (cs.as_ptr(), cs.len()));
        let raw = sys::ScoreRequest {
            struct_size: std::mem::size_of::<sys::ScoreRequest>() as u32,
            policy: request.policy as u32,
            local_hashes: request.local_hashes.as_ptr().cast(),
            n_hashes: request.local_hashes.len(),
            isl_tokens: request.isl_tokens,
            candidates: cand_ptr,
            n_candidates,
            temperature: request.temperature,
            random_seed: request.random_seed,
        };
        let mut out =
            sys::ScoreResult { struct_size: std::mem::size_of::<sys::ScoreResult>() as u32, ..Default::default() };
        // SAFETY: raw and the arrays it points to live across the call and
        // are read only; out is a valid, sized result.
        check("goindex_score", self.handle, unsafe { sys::goindex_score(self.handle, &raw, &mut out) })?;
        Ok(ScoreResult {
            chosen: usize::try_from(out.chosen).expect("goindex_score chose a negative index"),
            worker: WorkerWithDpRank::new(out.id, out.rank),
            eligible: out.eligible,
            cached_blocks: out.cached_blocks,
            cached_tokens: out.cached_tokens,
            cost: out.cost,
            rtt_ms: out.rtt_ms,
            queue_ms: out.queue_ms,
            prefill_ms: out.prefill_ms,
        })
    }

    /// stats returns the handle's counters (goindex_stats).
    pub fn stats(&self) -> Result<Stats> {
        let mut c = sys::Counters { struct_size: std::mem::size_of::<sys::Counters>() as u32, ..Default::default() };
        // SAFETY: c is a valid counters struct of struct_size bytes.
        check("goindex_stats", self.handle, unsafe { sys::goindex_stats(self.handle, &mut c) })?;
        let mode = match c.mode {
            sys::MODE_EXACT => Mode::Exact,
            sys::MODE_CKF => Mode::Ckf,
            sys::MODE_GLOBAL => Mode::Global,
            other => Mode::Other(other),
        };
        Ok(Stats { mode, counts: c.counts })
    }
}

/// parent_ptr returns a stored event's parent as the ABI's optional
/// pointer: NULL for a chain from the root. It points into `parent`, which
/// outlives the call it is passed to.
fn parent_ptr(parent: &Option<ExternalSequenceBlockHash>) -> *const u64 {
    parent.as_ref().map_or(ptr::null(), |h| &h.0)
}

impl Drop for Indexer {
    /// drop closes the handle. A handle already closed underneath (by C
    /// code given [`Indexer::handle`]) returns GOINDEX_EHANDLE, which is
    /// ignored: there is nothing left to release.
    fn drop(&mut self) {
        // SAFETY: &mut self: no other call on the handle is in flight.
        unsafe { sys::goindex_close(self.handle) };
    }
}

// Indexer must stay Send + Sync (see its Threading section): this fails to
// compile if a field ever breaks that.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Indexer>();
};
