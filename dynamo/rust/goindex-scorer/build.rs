//! Adds the directory of libgoindex.so to the linker's search path.
//!
//! `GOINDEX_LIB_DIR` names the directory holding `libgoindex.so` (as
//! `ffi/build.sh <dir>` writes it). Without it the linker's default paths
//! are searched. At run time the loader finds `libgoindex.so.1` through
//! ldconfig, LD_LIBRARY_PATH or an rpath.

fn main() {
    println!("cargo:rerun-if-env-changed=GOINDEX_LIB_DIR");
    if let Some(dir) = std::env::var_os("GOINDEX_LIB_DIR") {
        let dir = std::path::PathBuf::from(dir);
        assert!(
            dir.join("libgoindex.so").is_file(),
            "GOINDEX_LIB_DIR={} holds no libgoindex.so: build it with ffi/build.sh {}",
            dir.display(),
            dir.display()
        );
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
}
