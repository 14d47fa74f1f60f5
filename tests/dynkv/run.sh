#!/usr/bin/env bash
# tests/dynkv/run.sh: the dynkv module's test scenarios against
# `goindex dynkv`, driven by Debian's python3-redis (test_dynkv.py).
# Needs GOINDEX_BUILD (./build.sh test sets it); GOINDEX_SEED steers the
# fuzzing part. Builds goindex into $GOINDEX_BUILD/tests-dynkv.
set -euo pipefail
: "${GOINDEX_BUILD:?GOINDEX_BUILD must name the build directory (./build.sh test sets it)}"
py=/usr/bin/python3
"$py" -c 'import redis' 2>/dev/null || { echo "tests/dynkv: Debian's python3-redis is missing (apt-get install python3-redis)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$GOINDEX_BUILD/tests-dynkv"
(cd "$here/../.." && go build -o "$GOINDEX_BUILD/tests-dynkv/goindex" ./bridge/cmd/goindex)
GOINDEX_DYNKV_BIN=$GOINDEX_BUILD/tests-dynkv/goindex exec "$py" "$here/test_dynkv.py"
