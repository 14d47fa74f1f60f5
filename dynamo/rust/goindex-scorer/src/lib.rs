//! goindex-scorer: goindex's time-to-first-token cost model as a scorer and
//! picker for NVIDIA Dynamo's compile-time worker-selection extension point
//! (`WorkerScorer` / `WorkerPicker`, Dynamo v1.5 and later; policies linked
//! into a custom frontend or EPP and chosen by router-policy YAML).
//!
//! The core (this module, std only) wraps `libgoindex.so`: a [`Scorer`] is
//! one plugin state of the library, made from the same JSON config as
//! goindex's C worker-selector plugin, and [`Scorer::costs`] asks the
//! library for every worker's cost in one call (`goindex_worker_costs`):
//! queue wait + prefill of the uncached prompt + the wait for decodes to
//! free KV room, in ms. With `"replica"` and `"dc"` in the config, the
//! throughput rates are this DC's measured ones from goindex's shared
//! replica (its relay's load report); a replica that is missing or stale
//! falls back to the config's rates and is reported as [`Health::Degraded`],
//! never as an error. The [`dynamo`] module (feature `dynamo`) implements
//! Dynamo's traits over it.
//!
//! The library is loaded when the first [`Scorer`] is made, not linked:
//! `$GOINDEX_LIBRARY` names its path, else `libgoindex.so.1` is found as
//! the dynamic loader finds any library (the host's RUNPATH,
//! `LD_LIBRARY_PATH`, ldconfig). A host that links this crate therefore
//! starts without it; [`Scorer::new`] then says why it could not load it,
//! and [`fallback_costs`] (Dynamo's own default cost) stands in.
//!
//! ```
//! use goindex_scorer::{Load, Scorer, Worker};
//!
//! let mut scorer = Scorer::new(r#"{"prefill_tokens_per_ms": 10}"#)?;
//! let workers = [
//!     Worker { cached_tokens: 0, load: Some(Load::default()), capacity_blocks: None },
//!     Worker { cached_tokens: 1280, load: Some(Load::default()), capacity_blocks: None },
//! ];
//! let mut costs = [0.0; 2];
//! scorer.costs(16, 1600, &workers, &mut costs)?;
//! assert_eq!(costs, [160.0, 32.0]); // ms: 1600 and 320 uncached tokens at 10 tokens/ms
//! # Ok::<(), goindex_scorer::Error>(())
//! ```
//!
//! # Adding it to a custom Dynamo frontend
//!
//! Dynamo loads no policy at run time: a policy crate is linked into the
//! frontend (or EPP) through a catalog crate, and router-policy YAML picks
//! it. With a Dynamo checkout in `$DYNAMO_DIR` (the revision your frontend
//! runs) and goindex in `$GOINDEX_DIR`:
//!
//! 1. Build the library: `$GOINDEX_DIR/ffi/build.sh /opt/goindex/lib`.
//! 2. Copy this crate into the checkout, so that it builds against
//!    Dynamo's own `dynamo-kv-router` (its `workspace = true` dependency
//!    resolves in the workspace that builds it):
//!    `cp -r $GOINDEX_DIR/dynamo/rust/goindex-scorer $DYNAMO_DIR/lib/router-plugins/goindex`
//!    and add `"lib/router-plugins/goindex"` to `members` of
//!    `$DYNAMO_DIR/Cargo.toml`.
//! 3. Register it from your catalog crate: depend on
//!    `goindex-scorer = { path = "../goindex", features = ["dynamo"] }` and
//!    call `goindex_scorer::dynamo::register(registry)?` in the catalog's
//!    `register`. Without a catalog of your own, write one with that single
//!    call (Dynamo's `examples/router/custom-policy-example/catalog` is the
//!    pattern).
//! 4. Link the catalog into the Python frontend under the alias Dynamo's
//!    binding expects, and build it:
//!    `cargo add --manifest-path $DYNAMO_DIR/lib/bindings/python/Cargo.toml --optional --rename dynamo-worker-selection-policy-catalog --path <your catalog> <its package name>`,
//!    then in `lib/bindings/python`:
//!    `RUSTFLAGS="-C link-arg=-Wl,-rpath,/opt/goindex/lib" maturin develop --uv --features custom-policy`
//!    (the rpath is where `libgoindex.so.1` is looked for at run time;
//!    `GOINDEX_LIBRARY=/opt/goindex/lib/libgoindex.so.1` names it instead).
//! 5. Select it with the YAML beside this file (`worker-selection.yaml`):
//!    `python3 -m dynamo.frontend --router-mode kv --router-policy-config worker-selection.yaml`.
//!    `DYN_ROUTER_WORKER_SELECTION_POLICY=goindex` (or
//!    `--router-prefill-policy` / `--router-decode-policy`) overrides the
//!    YAML's role selections; `default` brings Dynamo's own policy back.
//!
//! The library holds a Go runtime: load one Go-built library per process
//! and do not fork after loading it. Run `goindex consume` on the host when
//! the config names a replica.

use std::ffi::c_void;
use std::fmt;

#[cfg(feature = "dynamo")]
pub mod dynamo;
mod sys;

/// Load is a worker's current work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    /// Tokens queued for or running prefill.
    pub active_prefill_tokens: u64,
    /// KV blocks held by running decodes.
    pub active_decode_blocks: u64,
}

/// Worker is one candidate inside the DC. A signal that is `None` is left
/// out of the cost, never read as zero: a worker without load costs NaN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Worker {
    /// Prompt tokens the worker already holds.
    pub cached_tokens: u64,
    /// The worker's load, when the router observed one.
    pub load: Option<Load>,
    /// The worker's KV capacity in blocks, when known.
    pub capacity_blocks: Option<u64>,
}

/// Health says whether a call used the DC's measured rates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// The replica's rates (or no replica configured).
    Fresh,
    /// The replica was missing or stale: the config's rates were used. The
    /// string is the library's reason.
    Degraded(String),
}

/// Error is a refusal by the library: its status code and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The status (a DYNAMO_WS_* code from create, a GOINDEX_E* code from costs).
    pub code: i32,
    /// The library's message.
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "goindex-scorer: status {}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

/// NOTE_BYTES is the room given to the library's messages (Dynamo's hosts
/// give 1,024 bytes too).
const NOTE_BYTES: usize = 1024;

/// Scorer is one plugin state of libgoindex.so: a policy, its rates and,
/// when configured, its view of the shared replica. The library serializes
/// calls on one state; a Scorer is `Send` and used through `&mut self`.
pub struct Scorer {
    state: *mut c_void,
    destroy: unsafe extern "C" fn(*mut c_void),
    costs: sys::CostsFn,
    raw: Vec<sys::Worker>,
}

// SAFETY: the state is a number the library hands out (never a pointer into
// memory this crate owns); the library accepts calls on it from any thread.
unsafe impl Send for Scorer {}

impl Scorer {
    /// new creates a state from the JSON config of goindex's worker-selector
    /// plugin (`include/goindex.h`: "policy", "prefill_tokens_per_ms",
    /// "queue_tokens_per_ms", "decode_blocks_per_ms", "credit", "replica",
    /// "dc", "max_staleness_ms"; unknown keys are refused). A library that
    /// cannot be loaded is an error with code [`NOT_LOADED`].
    pub fn new(config_json: &str) -> Result<Scorer, Error> {
        let lib = sys::library().map_err(|message| Error { code: NOT_LOADED, message })?;
        // SAFETY: the library returns a pointer to its static descriptor.
        let descriptor = unsafe { (lib.plugin)().as_ref() }
            .ok_or_else(|| Error { code: -1, message: "libgoindex.so returned no plugin descriptor".into() })?;
        let (Some(create), Some(destroy)) = (descriptor.create, descriptor.destroy) else {
            return Err(Error {
                code: -1,
                message: "libgoindex.so's plugin descriptor lacks create or destroy".into(),
            });
        };
        let mut note = [0u8; NOTE_BYTES];
        let mut eb = sys::ErrorBuffer { ptr: note.as_mut_ptr(), capacity: note.len(), written: 0 };
        let mut state = std::ptr::null_mut();
        let config = sys::Slice { ptr: config_json.as_ptr(), len: config_json.len() };
        // SAFETY: every pointer is valid for the call; the library copies the config.
        let rc = unsafe { create(config, sys::ROLE_UNKNOWN, &mut state, &mut eb) };
        if rc != sys::WS_OK || state.is_null() {
            return Err(Error { code: rc, message: message(&note, &eb) });
        }
        Ok(Scorer { state, destroy, costs: lib.costs, raw: Vec::new() })
    }

    /// costs writes every worker's cost into `costs[i]` (ms under ttft,
    /// blocks under the other policies; NaN for a worker without load) for a
    /// prompt of `isl_tokens` tokens in blocks of `block_size`.
    pub fn costs(
        &mut self,
        block_size: u32,
        isl_tokens: u64,
        workers: &[Worker],
        costs: &mut [f64],
    ) -> Result<Health, Error> {
        if costs.len() != workers.len() {
            return Err(Error { code: -1, message: format!("{} costs for {} workers", costs.len(), workers.len()) });
        }
        self.raw.clear();
        self.raw.extend(workers.iter().map(|w| {
            let load = w.load.unwrap_or_default();
            let mut flags = if w.load.is_some() { sys::CAND_LOAD } else { 0 };
            if w.capacity_blocks.is_some() {
                flags |= sys::CAND_CAPACITY;
            }
            sys::Worker {
                cached_tokens: w.cached_tokens,
                active_prefill_tokens: load.active_prefill_tokens,
                active_decode_blocks: load.active_decode_blocks,
                capacity_blocks: w.capacity_blocks.unwrap_or(0),
                flags,
                reserved: 0,
            }
        }));
        let mut note = [0u8; NOTE_BYTES];
        let mut eb = sys::ErrorBuffer { ptr: note.as_mut_ptr(), capacity: note.len(), written: 0 };
        let mut degraded = 0u32;
        // SAFETY: the arrays hold n entries each; the library reads and
        // writes them during the call only.
        let rc = unsafe {
            (self.costs)(
                self.state,
                block_size,
                isl_tokens,
                self.raw.as_ptr(),
                self.raw.len(),
                costs.as_mut_ptr(),
                &mut degraded,
                &mut eb,
            )
        };
        if rc != sys::OK {
            return Err(Error { code: rc, message: format!("goindex_worker_costs failed (block_size {block_size})") });
        }
        Ok(if degraded != 0 { Health::Degraded(message(&note, &eb)) } else { Health::Fresh })
    }
}

impl Drop for Scorer {
    fn drop(&mut self) {
        // SAFETY: the state came from this descriptor's create and is destroyed once.
        unsafe { (self.destroy)(self.state) }
    }
}

/// NOT_LOADED is the [`Error::code`] of a library that could not be loaded.
pub const NOT_LOADED: i32 = -2;

/// fallback_costs writes Dynamo's own default cost for each worker, what
/// its KV router ranks workers by without a custom policy (overlap weight
/// 1): the blocks it would prefill — its queued prefill tokens plus the
/// prompt's uncached tokens — plus the blocks its decodes hold; NaN for a
/// worker without load. It needs no library: hosts use it when goindex's
/// cost cannot be had, so routing stays load- and cache-aware.
pub fn fallback_costs(block_size: u32, isl_tokens: u64, workers: &[Worker], costs: &mut [f64]) {
    let block = f64::from(block_size.max(1));
    for (w, cost) in workers.iter().zip(costs.iter_mut()) {
        *cost = match w.load {
            Some(load) => {
                let uncached = isl_tokens.saturating_sub(w.cached_tokens);
                (load.active_prefill_tokens.saturating_add(uncached)) as f64 / block + load.active_decode_blocks as f64
            }
            None => f64::NAN,
        };
    }
}

/// message reads what the library wrote into an error buffer.
fn message(buf: &[u8], eb: &sys::ErrorBuffer) -> String {
    String::from_utf8_lossy(&buf[..eb.written.min(buf.len())]).into_owned()
}
