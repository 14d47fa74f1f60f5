#!/usr/bin/env bash
# tests/python/run.sh: the ctypes host suite of libgoindex.so (stdlib only).
# Needs GOINDEX_BUILD (./build.sh test sets it); GOINDEX_SEED, GOINDEX_SEEDS
# and GOINDEX_STEPS steer the differential part (see test_abi.py).
set -euo pipefail
: "${GOINDEX_BUILD:?GOINDEX_BUILD must name the directory holding libgoindex.so (./build.sh test sets it)}"
command -v python3 >/dev/null || { echo "tests/python: python3 is missing" >&2; exit 1; }
exec python3 "$(dirname "$0")/test_abi.py"
