#!/usr/bin/env bash
# The demo: replay shipped Mooncake trace slices (real production request
# traces, 400 requests each) through the exact radix index and show what it
# found. Called by ./build.sh demo with the build dir; runs in a few seconds.
set -euo pipefail
BUILD=${1:?build dir}
cd "$(dirname "$0")/.."
GOINDEX=$BUILD/goindex
SLICES=testdata/mooncake

step() { printf '\n== %s ==\n' "$*"; }

step "1. Hashing: a Mooncake hash id becomes 512 tokens, hashed as Dynamo does (id 0: spec V26, 16456450638077811066)"
"$GOINDEX" hash --block-size 512 --tokens "$(printf '0,%.0s' $(seq 511))0"

step "2. Synthetic workload slice over 8 workers with 16,384-block caches"
echo "Each request goes to a random worker whose mock engine caches its blocks and"
echo "publishes Stored/Removed events; the index then answers every prompt with the"
echo "depth each worker holds. 'matched queries' above 'requests' means a worker holds"
echo "prefixes of prompts that were sent elsewhere: what a prefix-aware router exploits."
"$GOINDEX" bench radix --trace "$SLICES/synthetic_head400.jsonl" --workers 8 --examples 4

step "3. Conversation workload slice over 4 workers, 128-token blocks, 2,048-block caches"
echo "Small caches force LRU evictions (Removed events, leaf first); the index still"
echo "agrees with every engine's cache on every query."
"$GOINDEX" bench radix --trace "$SLICES/conversation_head400.jsonl" --workers 4 --block-size 128 --capacity-blocks 2048 --examples 4

step "4. The same replay as one JSON object (goindex bench radix --json), first 400 bytes"
json=$("$GOINDEX" bench radix --trace "$SLICES/synthetic_head400.jsonl" --workers 8 --json)
echo "${json:0:400} …"
