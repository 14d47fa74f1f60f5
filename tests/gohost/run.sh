#!/usr/bin/env bash
# tests/gohost/run.sh: the Go host suite of libgoindex.so. A nested module
# (purego, testify), so `go test ./...` of goindex never loads the library;
# its test re-runs itself as the short-lived child that does.
set -euo pipefail
: "${GOINDEX_BUILD:?GOINDEX_BUILD must name the directory holding libgoindex.so (./build.sh test sets it)}"
cd "$(dirname "$0")"
go vet ./...
go test -count=1 ./...
