//! Adds the directory of libgoindex.so to the linker's search path.
//!
//! `GOINDEX_LIB_DIR` names the directory holding `libgoindex.so` (as built by
//! `ffi/build.sh <dir>`). Without it the linker searches its default paths
//! (for an installed library, e.g. /usr/local/lib). The library itself is
//! named by `#[link(name = "goindex")]` in src/sys.rs. The dynamic loader
//! finds `libgoindex.so.1` at run time through LD_LIBRARY_PATH, the
//! executable's rpath or ldconfig; this script sets none of them.

fn main() {
    println!("cargo:rerun-if-env-changed=GOINDEX_LIB_DIR");
    if let Some(dir) = std::env::var_os("GOINDEX_LIB_DIR") {
        let dir = std::path::PathBuf::from(dir);
        if !dir.join("libgoindex.so").is_file() {
            panic!(
                "GOINDEX_LIB_DIR={} holds no libgoindex.so: build it with ffi/build.sh {}",
                dir.display(),
                dir.display()
            );
        }
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
}
