#!/usr/bin/env bash
# The demo: `goindex demo` runs the whole goindex path on this machine on a
# shipped Mooncake trace slice (testdata/mooncake/conversation_head400.jsonl,
# 400 real production requests): NATS with one leaf server per DC behind
# links delayed by the grid's RTTs, a relay per DC, the consumer and the
# router as child processes, stub DC frontends whose mock engines publish
# Dynamo KV events, the replica checked against the engines, libgoindex.so
# probing and scoring in a separate python3 host, and `goindex sim` on the
# 13-DC grid: the policy table, and a report with charts in
# $BUILD/demo-report. About half a minute on 2 cores.
# Called by ./build.sh demo with the build dir; extra arguments go to
# `goindex demo` (see `goindex demo --help`; GOINDEX_<FLAG> variables work too).
set -euo pipefail
BUILD=${1:?build dir}
shift
cd "$(dirname "$0")/.."
GOINDEX=$BUILD/goindex
[ -x "$GOINDEX" ] || { echo "tests/demo.sh: $GOINDEX is missing: run ./build.sh first" >&2; exit 1; }

lib=()
if [ -f "$BUILD/libgoindex.so" ]; then
	lib=(--library "$BUILD/libgoindex.so")
else
	echo "tests/demo.sh: no $BUILD/libgoindex.so; the library stage will be skipped" >&2
fi
exec "$GOINDEX" demo --trace testdata/mooncake/conversation_head400.jsonl --grid testdata/wan/grid13_rtt_ms.csv \
	"${lib[@]}" --report "$BUILD/demo-report" "$@"
