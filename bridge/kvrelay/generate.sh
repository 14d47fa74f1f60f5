#!/usr/bin/env bash
# bridge/kvrelay/generate.sh: regenerate kvrelaypb/*.pb.go from
# kvrelaypb/relay.proto with protoc (Debian's protobuf-compiler, in
# build.sh's DEBS) and the Go plugins at the versions go.mod pins
# (google.golang.org/protobuf and google.golang.org/grpc, the latter's
# protoc-gen-go-grpc at its own tagged version below), built into a
# temporary directory. The generated code is committed; run this after
# editing relay.proto and commit both.
set -euo pipefail
cd "$(dirname "$0")"
command -v protoc >/dev/null || { echo "generate.sh: protoc is missing: apt-get install protobuf-compiler" >&2; exit 1; }
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
protobuf=$(cd ../.. && go list -m -f '{{.Version}}' google.golang.org/protobuf)
GOBIN=$bin go install "google.golang.org/protobuf/cmd/protoc-gen-go@$protobuf"
GOBIN=$bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
PATH=$bin:$PATH protoc -I kvrelaypb --go_out=kvrelaypb --go_opt=paths=source_relative \
	--go-grpc_out=kvrelaypb --go-grpc_opt=paths=source_relative relay.proto
echo "generated kvrelaypb with protoc $(protoc --version | cut -d' ' -f2), protoc-gen-go $protobuf, protoc-gen-go-grpc v1.5.1"
