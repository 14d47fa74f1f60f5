#!/usr/bin/env bash
# tests/python/run.sh: the ctypes host suite of libgoindex.so (stdlib only).
# Needs GOINDEX_BUILD (./build.sh test sets it); GOINDEX_SEED, GOINDEX_SEEDS
# and GOINDEX_STEPS steer the differential part (see test_abi.py). Builds
# tests/c/fixture's command for the global-mode part (needs go).
set -euo pipefail
: "${GOINDEX_BUILD:?GOINDEX_BUILD must name the directory holding libgoindex.so (./build.sh test sets it)}"
command -v python3 >/dev/null || { echo "tests/python: python3 is missing" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
# The global-mode scripts come from tests/c/fixture (frames, replica files).
mkdir -p "$GOINDEX_BUILD/tests-python"
(cd "$here/../.." && go build -o "$GOINDEX_BUILD/tests-python/fixture" ./tests/c/fixture/cmd/fixture)
GOINDEX_FIXTURE=$GOINDEX_BUILD/tests-python/fixture exec python3 "$here/test_abi.py"
