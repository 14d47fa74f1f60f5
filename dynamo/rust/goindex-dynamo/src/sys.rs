//! The raw C ABI of libgoindex.so, declared from `include/goindex.h`.
//!
//! Nothing here is public: the safe types of the crate are the only way in.
//! Each struct mirrors the header's struct field for field (`size_t` is
//! `usize` on every target Rust and Go share); the unit tests below hold the
//! sizes and every `#define` against the header text.

use std::os::raw::{c_char, c_int};

use crate::indexer::Counts;

/// ABI_VERSION is the header's GOINDEX_ABI_VERSION, the ABI generation this
/// crate speaks. The library's soname (`libgoindex.so.1`) carries the same
/// number, so the dynamic loader refuses a library of another generation.
pub const ABI_VERSION: u32 = 1;

pub const OK: c_int = 0;
pub const EINVAL: c_int = -1;
pub const EHANDLE: c_int = -2;
pub const ECONFIG: c_int = -3;
pub const ETOOBIG: c_int = -4;
pub const EBUFFER: c_int = -5;
pub const EPARENT: c_int = -6;
pub const ESEQUENCE: c_int = -7;
pub const ENOTFOUND: c_int = -8;
pub const ECAPACITY: c_int = -9;
pub const EMODE: c_int = -10;
pub const EFRAME: c_int = -11;
pub const EREPLICA: c_int = -12;
pub const ENOCANDIDATE: c_int = -13;
pub const EINTERNAL: c_int = -14;
pub const EUNAVAILABLE: c_int = -15;

/// MAX_CONFIG_BYTES is GOINDEX_MAX_CONFIG_BYTES: the longest config JSON
/// [`Indexer::open`](crate::Indexer::open) accepts.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;
/// MAX_BLOCKS is GOINDEX_MAX_BLOCKS: the most blocks of one event and the
/// most hashes of one query.
pub const MAX_BLOCKS: usize = 1 << 20;
/// MAX_TOKENS is GOINDEX_MAX_TOKENS: the most tokens of one call.
pub const MAX_TOKENS: usize = 1 << 26;
/// MAX_NAME_BYTES is GOINDEX_MAX_NAME_BYTES: the longest LoRA name or cache
/// namespace.
pub const MAX_NAME_BYTES: usize = 4096;

pub const CAND_LOAD: u32 = 1;
pub const CAND_CAPACITY: u32 = 2;
pub const CAND_RTT: u32 = 4;

pub const MODE_EXACT: u32 = 1;
pub const MODE_CKF: u32 = 2;
pub const MODE_GLOBAL: u32 = 3;

/// goindex_overlap: one probe entry. 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Overlap {
    pub id: u64,
    pub rank: u32,
    pub blocks: u32,
}

/// goindex_candidate: one routing candidate with its signals. 48 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    pub id: u64,
    pub rank: u32,
    pub flags: u32,
    pub active_prefill_tokens: u64,
    pub active_decode_blocks: u64,
    pub capacity_blocks: u64,
    pub rtt_ms: f64,
}

/// goindex_score_request. 64 bytes on LP64.
#[repr(C)]
pub struct ScoreRequest {
    pub struct_size: u32,
    pub policy: u32,
    pub local_hashes: *const u64,
    pub n_hashes: usize,
    pub isl_tokens: u64,
    pub candidates: *const Candidate,
    pub n_candidates: usize,
    pub temperature: f64,
    pub random_seed: u64,
}

/// goindex_score_result. 72 bytes.
#[repr(C)]
#[derive(Default)]
pub struct ScoreResult {
    pub struct_size: u32,
    pub chosen: i32,
    pub id: u64,
    pub rank: u32,
    pub eligible: u32,
    pub cached_blocks: u64,
    pub cached_tokens: u64,
    pub cost: f64,
    pub rtt_ms: f64,
    pub queue_ms: f64,
    pub prefill_ms: f64,
}

/// goindex_counters. 96 bytes: the header's first two words, then the
/// counts the crate hands out as [`Counts`].
#[repr(C)]
#[derive(Default)]
pub struct Counters {
    pub struct_size: u32,
    pub mode: u32,
    pub counts: Counts,
}

// The header's `goindex_in_*` typedefs are const element types: *const here.
#[link(name = "goindex")]
extern "C" {
    pub fn goindex_abi_version() -> u32;
    pub fn goindex_open(config_json: *const c_char, config_len: usize, handle_out: *mut u64) -> c_int;
    pub fn goindex_close(handle: u64) -> c_int;
    pub fn goindex_insert(
        handle: u64,
        worker_id: u64,
        dp_rank: u32,
        event_id: u64,
        parent_hash: *const u64,
        external_hashes: *const u64,
        local_hashes: *const u64,
        n_blocks: usize,
    ) -> c_int;
    pub fn goindex_insert_tokens(
        handle: u64,
        worker_id: u64,
        dp_rank: u32,
        event_id: u64,
        parent_hash: *const u64,
        external_hashes: *const u64,
        n_blocks: usize,
        tokens: *const u32,
        n_tokens: usize,
        lora_name: *const c_char,
        lora_len: usize,
        cache_namespace: *const c_char,
        namespace_len: usize,
    ) -> c_int;
    pub fn goindex_remove(
        handle: u64,
        worker_id: u64,
        dp_rank: u32,
        event_id: u64,
        external_hashes: *const u64,
        n: usize,
    ) -> c_int;
    pub fn goindex_clear(handle: u64, worker_id: u64, dp_rank: u32, event_id: u64) -> c_int;
    pub fn goindex_remove_worker(handle: u64, worker_id: u64) -> c_int;
    pub fn goindex_remove_rank(handle: u64, worker_id: u64, dp_rank: u32) -> c_int;
    pub fn goindex_hash_tokens(
        handle: u64,
        tokens: *const u32,
        n_tokens: usize,
        lora_name: *const c_char,
        lora_len: usize,
        cache_namespace: *const c_char,
        namespace_len: usize,
        out: *mut u64,
        capacity: usize,
        written: *mut usize,
    ) -> c_int;
    pub fn goindex_probe(
        handle: u64,
        local_hashes: *const u64,
        n: usize,
        out: *mut Overlap,
        capacity: usize,
        written: *mut usize,
    ) -> c_int;
    pub fn goindex_score(handle: u64, request: *const ScoreRequest, result: *mut ScoreResult) -> c_int;
    pub fn goindex_stats(handle: u64, stats: *mut Counters) -> c_int;
    pub fn goindex_strerror(code: c_int) -> *const c_char;
    pub fn goindex_last_error(handle: u64, buf: *mut c_char, capacity: usize, needed: *mut usize) -> c_int;
}

/// Returns a string as the ABI's optional (pointer, length) name: an absent
/// name is (NULL, 0), which the library treats like an empty one.
pub fn name(s: Option<&str>) -> (*const c_char, usize) {
    match s {
        Some(s) => (s.as_ptr().cast(), s.len()),
        None => (std::ptr::null(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::mem::size_of;

    /// Reads every `#define GOINDEX_NAME value` of include/goindex.h whose
    /// value is an integer, a `(1u << n)` or a `(nu << m)` (the plugin's
    /// DYNAMO_WS_* defines are Dynamo's, not this crate's).
    fn header_defines() -> HashMap<String, i64> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../include/goindex.h");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        let mut out = HashMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("#define ") else { continue };
            let mut parts = rest.splitn(2, char::is_whitespace);
            let (Some(name), Some(value)) = (parts.next(), parts.next()) else { continue };
            if !name.starts_with("GOINDEX_") {
                continue;
            }
            let value = value.split("/*").next().unwrap().trim();
            let parsed = if let Some(shift) = value.strip_prefix('(').and_then(|v| v.strip_suffix(')')) {
                let (base, by) = shift.split_once("<<").unwrap_or_else(|| panic!("{name}: {value}"));
                let base: i64 = base.trim().trim_end_matches('u').parse().unwrap();
                base << by.trim().parse::<u32>().unwrap()
            } else if let Some(bits) = value.strip_suffix('u') {
                bits.parse().unwrap()
            } else if let Ok(v) = value.parse() {
                v
            } else {
                continue;
            };
            out.insert(name.to_string(), parsed);
        }
        out
    }

    #[test]
    fn constants_match_the_header() {
        let defines = header_defines();
        let ours: &[(&str, i64)] = &[
            ("GOINDEX_ABI_VERSION", ABI_VERSION.into()),
            ("GOINDEX_OK", OK.into()),
            ("GOINDEX_EINVAL", EINVAL.into()),
            ("GOINDEX_EHANDLE", EHANDLE.into()),
            ("GOINDEX_ECONFIG", ECONFIG.into()),
            ("GOINDEX_ETOOBIG", ETOOBIG.into()),
            ("GOINDEX_EBUFFER", EBUFFER.into()),
            ("GOINDEX_EPARENT", EPARENT.into()),
            ("GOINDEX_ESEQUENCE", ESEQUENCE.into()),
            ("GOINDEX_ENOTFOUND", ENOTFOUND.into()),
            ("GOINDEX_ECAPACITY", ECAPACITY.into()),
            ("GOINDEX_EMODE", EMODE.into()),
            ("GOINDEX_EFRAME", EFRAME.into()),
            ("GOINDEX_EREPLICA", EREPLICA.into()),
            ("GOINDEX_ENOCANDIDATE", ENOCANDIDATE.into()),
            ("GOINDEX_EINTERNAL", EINTERNAL.into()),
            ("GOINDEX_EUNAVAILABLE", EUNAVAILABLE.into()),
            ("GOINDEX_MAX_CONFIG_BYTES", MAX_CONFIG_BYTES as i64),
            ("GOINDEX_MAX_BLOCKS", MAX_BLOCKS as i64),
            ("GOINDEX_MAX_TOKENS", MAX_TOKENS as i64),
            ("GOINDEX_MAX_NAME_BYTES", MAX_NAME_BYTES as i64),
            ("GOINDEX_CAND_LOAD", CAND_LOAD.into()),
            ("GOINDEX_CAND_CAPACITY", CAND_CAPACITY.into()),
            ("GOINDEX_CAND_RTT", CAND_RTT.into()),
        ];
        for &(name, value) in ours {
            assert_eq!(
                defines.get(name),
                Some(&value),
                "{name}: header has {:?}, sys.rs has {value}",
                defines.get(name)
            );
        }
        // Every status code of the header is declared here.
        let codes = defines.keys().filter(|k| k.starts_with("GOINDEX_E") || *k == "GOINDEX_OK").count();
        let declared = ours.iter().filter(|(k, _)| k.starts_with("GOINDEX_E") || *k == "GOINDEX_OK").count();
        assert_eq!(codes, declared, "the header has {codes} status codes, sys.rs declares {declared}");
    }

    #[test]
    fn struct_sizes_match_the_header() {
        // The sizes the header's comments give.
        assert_eq!(size_of::<Overlap>(), 16, "goindex_overlap");
        assert_eq!(size_of::<Candidate>(), 48, "goindex_candidate");
        assert_eq!(size_of::<ScoreRequest>(), 64, "goindex_score_request");
        assert_eq!(size_of::<ScoreResult>(), 72, "goindex_score_result");
        assert_eq!(size_of::<Counters>(), 96, "goindex_counters");
    }

    #[test]
    fn abi_version_of_the_loaded_library() {
        // SAFETY: goindex_abi_version takes no arguments and never fails.
        let v = unsafe { goindex_abi_version() };
        assert_eq!(v, ABI_VERSION, "goindex_abi_version() = {v}, want {ABI_VERSION}");
    }
}
