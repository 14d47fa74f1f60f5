#!/usr/bin/env bash
# tests/kvrelay/run.sh: goindex relay's Pool Relay server (--kvrelay-listen)
# against a Python consumer of the contract written apart from the Go code
# (test_kvrelay.py): Debian's python3-grpcio for the calls, messages protoc
# generates from relay.proto at test time (python3-protobuf runs them),
# python3-xxhash for the CBI1 checksums, and a vLLM-shaped ZeroMQ
# publisher (python3-zmq, python3-msgpack) feeding the relay. Needs
# GOINDEX_BUILD (./build.sh test sets it); GOINDEX_SEED steers the events.
# Builds goindex into $GOINDEX_BUILD/tests-kvrelay.
set -euo pipefail
: "${GOINDEX_BUILD:?GOINDEX_BUILD must name the build directory (./build.sh test sets it)}"
py=/usr/bin/python3
for m in grpc google.protobuf xxhash zmq msgpack; do
	"$py" -c "import $m" 2>/dev/null || { echo "tests/kvrelay: Debian's python3 module $m is missing (./build.sh test installs DEBS)" >&2; exit 1; }
done
command -v protoc >/dev/null || { echo "tests/kvrelay: protoc is missing (apt-get install protobuf-compiler)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$GOINDEX_BUILD/tests-kvrelay"
(cd "$here/../.." && go build -o "$GOINDEX_BUILD/tests-kvrelay/goindex" ./bridge/cmd/goindex)
GOINDEX_KVRELAY_BIN=$GOINDEX_BUILD/tests-kvrelay/goindex exec "$py" "$here/test_kvrelay.py"
