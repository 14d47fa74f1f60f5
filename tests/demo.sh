#!/usr/bin/env bash
# The demo: the main job on a shipped trace slice. Called by ./build.sh demo with the build dir.
set -euo pipefail
BUILD=${1:?build dir}
cd "$(dirname "$0")/.."
echo "== goindex hash: Dynamo-compatible block hashes of tokens 0..9 (block size 4) =="
"$BUILD/goindex" hash --block-size 4 --tokens 0,1,2,3,4,5,6,7,8,9
