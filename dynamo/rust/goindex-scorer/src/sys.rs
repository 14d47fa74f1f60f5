//! The two pieces of libgoindex.so's C ABI this crate calls, declared from
//! `include/goindex.h`: the worker-selector plugin's descriptor (for its
//! create and destroy) and `goindex_worker_costs`. The library is loaded at
//! run time ([`library`]), not linked: a host linking this crate starts,
//! and routes on its fallback, when the library is absent or broken. The
//! unit tests hold the struct sizes to the header's.

use std::ffi::{c_char, c_void, CStr, CString};
use std::os::raw::c_int;
use std::sync::OnceLock;

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

/// goindex_worker_costs's signature.
pub type CostsFn = unsafe extern "C" fn(
    state: *mut c_void,
    block_size: u32,
    isl_tokens: u64,
    workers: *const Worker,
    n: usize,
    costs: *mut f64,
    degraded: *mut u32,
    note: *mut ErrorBuffer,
) -> c_int;

/// dynamo_worker_selector_plugin_v1's signature.
type PluginFn = unsafe extern "C" fn() -> *const Descriptor;

/// LIBRARY_ENV names a path to load the library from instead of
/// [`LIBRARY_NAME`].
pub const LIBRARY_ENV: &str = "GOINDEX_LIBRARY";

/// LIBRARY_NAME is the library's soname, found as the dynamic loader finds
/// any (the caller's RUNPATH, LD_LIBRARY_PATH, ldconfig).
pub const LIBRARY_NAME: &str = "libgoindex.so.1";

/// Library is the loaded library's two entry points.
pub struct Library {
    pub plugin: PluginFn,
    pub costs: CostsFn,
}

const RTLD_NOW: c_int = 2;

#[link(name = "dl")]
extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
}

/// library loads the library once per process ($GOINDEX_LIBRARY, else
/// [`LIBRARY_NAME`]) and returns its entry points, or why it could not:
/// every later call gets the same answer. It is never unloaded (it holds a
/// Go runtime).
pub fn library() -> Result<&'static Library, String> {
    static LOADED: OnceLock<Result<Library, String>> = OnceLock::new();
    LOADED.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Library, String> {
    let name = std::env::var(LIBRARY_ENV).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| LIBRARY_NAME.to_owned());
    let cname = CString::new(name.clone()).map_err(|_| format!("{LIBRARY_ENV}={name:?} holds a NUL byte"))?;
    // SAFETY: cname is a valid C string; dlerror's message is copied at once.
    unsafe {
        let handle = dlopen(cname.as_ptr(), RTLD_NOW);
        if handle.is_null() {
            return Err(format!("cannot load {name}: {}", last_error()));
        }
        let symbol = |sym: &CStr| {
            let f = dlsym(handle, sym.as_ptr());
            if f.is_null() {
                Err(format!("{name} lacks {}: {}", sym.to_string_lossy(), last_error()))
            } else {
                Ok(f)
            }
        };
        let plugin = symbol(c"dynamo_worker_selector_plugin_v1")?;
        let costs = symbol(c"goindex_worker_costs")?;
        // SAFETY: the symbols are the header's functions of these types.
        Ok(Library {
            plugin: std::mem::transmute::<*mut c_void, PluginFn>(plugin),
            costs: std::mem::transmute::<*mut c_void, CostsFn>(costs),
        })
    }
}

/// last_error is dlerror's message.
unsafe fn last_error() -> String {
    let e = dlerror();
    if e.is_null() {
        "unknown error".to_owned()
    } else {
        CStr::from_ptr(e).to_string_lossy().into_owned()
    }
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
