#!/usr/bin/env bash
# tests/rust/run.sh: the Rust host suite of libgoindex.so, through the
# crates of dynamo/rust (std only, offline): goindex-dynamo, goindex-scorer
# with its Dynamo module (feature "dynamo") built against
# dynamo-kv-router-shim, the local stand-in for Dynamo's trait signatures.
#   1. cargo fmt --check and cargo clippy -D warnings (when installed; a
#      missing one is reported, not skipped silently);
#   2. cargo doc with warnings as errors (broken doc links, missing docs);
#   3. cargo test --all-features: goindex-dynamo's unit tests (header
#      constants and struct sizes, the code table), §3.5 scenarios, every
#      error path, threads, the differential against the reference model,
#      the doc example, and tests/lifecycle.rs, which ends by checking that
#      no handle is left open; goindex-scorer's costs, fail-open cases and
#      its Dynamo scorer/picker run by the shim's host, and a host whose
#      library is missing (tests/without_library.rs);
#   4. the test binaries loaded $GOINDEX_BUILD's library, not another one.
# Everything builds into $GOINDEX_BUILD/rust-target, so the tree stays clean.
# Needs GOINDEX_BUILD (./build.sh test sets it). GOINDEX_SEED, GOINDEX_SEEDS
# and GOINDEX_STEPS steer the differential (see tests/differential.rs).
set -euo pipefail
: "${GOINDEX_BUILD:?GOINDEX_BUILD must name the directory holding libgoindex.so (./build.sh test sets it)}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
step=setup
fail() { printf 'tests/rust: FAIL [%s] %s\n' "$step" "$*" >&2; exit 1; }
command -v cargo >/dev/null 2>&1 || fail "cargo is missing: install Rust (https://rustup.rs); CI has cargo"
build=$(cd "$GOINDEX_BUILD" && pwd)
[ -f "$build/libgoindex.so" ] || fail "$build/libgoindex.so is missing: run ./build.sh first"

manifest=$root/dynamo/rust/Cargo.toml
export CARGO_TARGET_DIR=$build/rust-target
export GOINDEX_LIB_DIR=$build
export LD_LIBRARY_PATH=$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cargo=(cargo --offline --color never)

step="cargo fmt --check"
if cargo fmt --version >/dev/null 2>&1; then
	cargo fmt --manifest-path "$manifest" --all --check || fail "cargo fmt would reformat (run: cargo fmt --manifest-path dynamo/rust/Cargo.toml --all)"
else
	echo "tests/rust: note: rustfmt is not installed; formatting not checked"
fi

step="cargo clippy"
if cargo clippy --version >/dev/null 2>&1; then
	"${cargo[@]}" clippy --manifest-path "$manifest" --all-targets --all-features -- -D warnings || fail "clippy reported warnings"
else
	echo "tests/rust: note: clippy is not installed; lints not checked"
fi

step="cargo doc"
RUSTDOCFLAGS="-D warnings" "${cargo[@]}" doc --manifest-path "$manifest" --all-features --no-deps || fail "rustdoc reported warnings"

step="cargo test"
"${cargo[@]}" test --manifest-path "$manifest" --all-features ||
	fail "cargo test failed (rerun: GOINDEX_LIB_DIR=$build LD_LIBRARY_PATH=$build cargo test --manifest-path dynamo/rust/Cargo.toml --all-features)"

step="the tests loaded $build's library"
# A test binary's DT_NEEDED entry resolves through LD_LIBRARY_PATH; ldd
# shows the file the loader picks.
bin=$(find "$CARGO_TARGET_DIR/debug/deps" -maxdepth 1 -type f -executable -name 'scenarios-*' -printf '%T@ %p\n' | sort -n | tail -n1 | cut -d' ' -f2-)
[ -n "$bin" ] || fail "no scenarios test binary under $CARGO_TARGET_DIR/debug/deps"
loaded=$(ldd "$bin" | awk '$1 == "libgoindex.so.1" {print $3}')
[ "$loaded" = "$build/libgoindex.so.1" ] || fail "$bin loads '${loaded:-nothing}', want $build/libgoindex.so.1"

echo "tests/rust: passed"
