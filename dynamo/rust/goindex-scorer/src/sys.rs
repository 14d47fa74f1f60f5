//! The two pieces of libgoindex.so's C ABI this crate calls, declared from
//! `include/goindex.h`: the worker-selector plugin's descriptor (for its
//! create and destroy) and `goindex_worker_costs`. The unit tests hold the
//! struct sizes to the header's.

use std::ffi::c_void;
use std::os::raw::c_int;

/// GOINDEX_OK.
pub const OK: c_int = 0;
/// GOINDEX_CAND_LOAD.
pub const CAND_LOAD: u32 = 1;
/// GOINDEX_CAND_CAPACITY.
pub const CAND_CAPACITY: u32 = 2;
/// DYNAMO_WS_OK.
pub const WS_OK: i32 = 0;
/// DYNAMO_ROUTER_ROLE: 0 unknown (the cost model is the same for every role).
pub const ROLE_UNKNOWN: u32 = 0;

/// dynamo_ws_byte_slice. 16 bytes.
#[repr(C)]
pub struct Slice {
    pub ptr: *const u8,
    pub len: usize,
}

/// dynamo_ws_error_buffer. 24 bytes.
#[repr(C)]
pub struct ErrorBuffer {
    pub ptr: *mut u8,
    pub capacity: usize,
    pub written: usize,
}

/// dynamo_ws_descriptor_v1. 40 bytes; `select` is not called here.
#[repr(C)]
pub struct Descriptor {
    pub abi_version: u32,
    pub struct_size: u32,
    pub create: Option<unsafe extern "C" fn(Slice, u32, *mut *mut c_void, *mut ErrorBuffer) -> i32>,
    pub select: Option<unsafe extern "C" fn(*mut c_void, *const c_void, *mut usize, *mut ErrorBuffer) -> i32>,
    pub destroy: Option<unsafe extern "C" fn(*mut c_void)>,
    pub required_inputs: Option<unsafe extern "C" fn(*mut c_void, *mut u64, *mut ErrorBuffer) -> i32>,
}

/// goindex_worker. 40 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Worker {
    pub cached_tokens: u64,
    pub active_prefill_tokens: u64,
    pub active_decode_blocks: u64,
    pub capacity_blocks: u64,
    pub flags: u32,
    pub reserved: u32,
}

#[link(name = "goindex")]
extern "C" {
    pub fn dynamo_worker_selector_plugin_v1() -> *const Descriptor;
    pub fn goindex_worker_costs(
        state: *mut c_void,
        block_size: u32,
        isl_tokens: u64,
        workers: *const Worker,
        n: usize,
        costs: *mut f64,
        degraded: *mut u32,
        note: *mut ErrorBuffer,
    ) -> c_int;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_the_header() {
        assert_eq!(std::mem::size_of::<Slice>(), 16);
        assert_eq!(std::mem::size_of::<ErrorBuffer>(), 24);
        assert_eq!(std::mem::size_of::<Descriptor>(), 40);
        assert_eq!(std::mem::size_of::<Worker>(), 40);
        assert_eq!(std::mem::offset_of!(Worker, flags), 32);
    }
}
