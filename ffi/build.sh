#!/usr/bin/env bash
# ffi/build.sh <builddir>: build the C shared library into <builddir>:
#   libgoindex.so     soname libgoindex.so.1, only goindex_* exported
#                     (exports.map), no debug info
#   libgoindex.so.1   symlink, so programs linked with -lgoindex load it
#   libgoindex.h      the header cgo generates (hosts use include/goindex.h)
# and fail when include/goindex.h disagrees with the generated header.
# Environment: CC (default gcc); GOEXPERIMENT=cgocheck2 builds the checked
# variant that tests/c/run.sh also runs.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: ffi/build.sh <builddir>" >&2; exit 2; }
cd "$(dirname "$0")/.."
root=$PWD
mkdir -p "$1"
out=$(cd "$1" && pwd)

# The export list lives in exports.map; -s -w drops the symbol table and
# DWARF (the dynamic symbols the ABI needs stay).
go build -buildmode=c-shared -trimpath \
	-ldflags "-s -w -extldflags '-Wl,-soname,libgoindex.so.1 -Wl,--version-script=$root/ffi/exports.map'" \
	-o "$out/libgoindex.so" ./ffi
ln -sfn libgoindex.so "$out/libgoindex.so.1"

# cgo compiled its own export file against goindex.h already (the preamble
# includes it); this also checks the generated header as a host sees it.
"${CC:-gcc}" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I "$root/include" -I "$out" "$root/ffi/check/headers.c" ||
	{ echo "ffi/build.sh: include/goindex.h disagrees with the generated $out/libgoindex.h" >&2; exit 1; }
