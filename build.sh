#!/usr/bin/env bash
# goindex's one entry point.
#   ./build.sh [build]   build everything into build/ (a standalone nats-server too)
#   ./build.sh test      run every test the project has (fails loudly)
#   ./build.sh demo      run the main job on a shipped trace slice
# `test` runs every fuzz target's seed corpus (its f.Add inputs and
# testdata/fuzz) as part of `go test`, so it is deterministic; it does not
# fuzz for a time (Go's fuzz coordinator can fail a good tree with "context
# deadline exceeded").
# Environment:
#   GOINDEX_FUZZTIME  also fuzz each target this long in `test` (e.g. 30s;
#                     default: unset, no time-boxed fuzzing)
#   GOINDEX_SKIP_RACE set to 1 to skip the -race pass (local iteration only)
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
BUILD=$ROOT/build
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

step() { printf '\n== %s ==\n' "$*"; }
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

need_go() {
	command -v go >/dev/null 2>&1 || die "go is missing: install Go 1.26+ (https://go.dev/dl) and put it on PATH"
	local v
	v=$(go env GOVERSION | sed 's/^go//')
	case "$v" in 1.2[6-9]*|1.[3-9]*) ;; *) die "Go $v is too old: goindex needs Go 1.26+" ;; esac
}

have() { command -v "$1" >/dev/null 2>&1; }

# DEBS lists the Debian packages the test suites drive as real counterparts:
# Debian's python3 (/usr/bin/python3, not a pyenv shim) with python3-zmq and
# python3-msgpack (engine and Dynamo publishers), python3-redis (dynkv
# clients), redis-server (the server and the Sentinel dynkv's replies are
# checked against) and etcd-server (Dynamo's discovery), python3-xxhash (the CBI1
# fixtures' checksum, bridge/kvrelay/cbi1), protobuf-compiler (protoc,
# for bridge/kvrelay/generate.sh and tests/kvrelay's generated messages),
# python3-grpcio and python3-protobuf (tests/kvrelay's Pool Relay
# consumer). Suites that need them call
# /usr/bin/python3, /usr/bin/etcd and /usr/bin/redis-server by path.
# BUILD_DEBS are what building needs: libzmq's headers, since goindex
# reads ZeroMQ through libzmq (cgo, bridge/zmqfeed); the binary then needs
# libzmq5 at run time.
BUILD_DEBS="libzmq3-dev"
DEBS="$BUILD_DEBS python3 python3-zmq python3-msgpack python3-redis redis-server etcd-server python3-xxhash protobuf-compiler python3-grpcio python3-protobuf"

# debs installs whichever of the packages named is missing (as root, or
# through sudo).
debs() {
	local p missing=()
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	have apt-get || die "missing Debian packages ${missing[*]} and no apt-get to install them"
	local sudo=
	if [ "$(id -u)" != 0 ]; then
		have sudo || die "missing Debian packages ${missing[*]}: run as root or install them (apt-get install ${missing[*]})"
		sudo=sudo
	fi
	step "install Debian packages: ${missing[*]}"
	$sudo apt-get update -qq || die "apt-get update failed"
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
		die "apt-get install ${missing[*]} failed"
}

deps() {
	need_go
	step "go modules"
	go mod download
}

build() {
	debs $BUILD_DEBS
	deps
	mkdir -p "$BUILD"
	step "build goindex"
	go build -o "$BUILD/goindex" ./bridge/cmd/goindex
	# A standalone nats-server (the version go.mod pins) for tests/e2e,
	# which runs one as its own process next to the embedded servers.
	step "install nats-server"
	GOBIN="$BUILD" go install github.com/nats-io/nats-server/v2
	if [ -f ffi/build.sh ]; then
		# Without a C compiler Go turns cgo off and -buildmode=c-shared fails
		# with "cgo is not enabled", which does not name what is missing.
		local cc=${CC:-gcc}
		have "${cc%% *}" || die "${cc%% *} is missing: libgoindex.so needs a C compiler for cgo; install gcc (apt-get install gcc) or set CC"
		step "build libgoindex.so"
		bash ffi/build.sh "$BUILD"
	fi
	echo "built into $BUILD"
}

# fuzz_all fuzzes every Fuzz target of the module for GOINDEX_FUZZTIME each
# (the extended run; `go test` already runs each target's seed corpus).
fuzz_all() {
	local t=$GOINDEX_FUZZTIME pkg name out
	out=$(mktemp)
	while IFS= read -r dir; do
		pkg=./$dir
		for name in $(grep -hoE '^func Fuzz[A-Za-z0-9_]+' "$dir"/*_test.go | sed 's/^func //' | sort -u); do
			echo "fuzz $pkg $name ($t)"
			go test -run='^$' -fuzz="^${name}\$" -fuzztime="$t" "$pkg" >"$out" 2>&1 || {
				cat "$out"; rm -f "$out"; die "fuzz target $name in $pkg failed"; }
		done
	done < <(grep -lE '^func Fuzz' --include='*_test.go' -r . | xargs -r -n1 dirname | sed 's|^\./||' | sort -u)
	rm -f "$out"
}

test_all() {
	debs $DEBS
	build
	step "gofmt"
	local unformatted
	unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './build/*'))
	[ -z "$unformatted" ] || die "gofmt would change: $unformatted"
	step "go vet"
	go vet ./...
	# Runs each fuzz target's seed corpus too (deterministic).
	step "go test"
	GOINDEX_BUILD="$BUILD" go test -count=1 ./...
	step "go test -tags zmqpoll (the ZMQ feed's portable wait, used off Linux)"
	go test -count=1 -tags zmqpoll ./bridge/zmqfeed/
	if [ "${GOINDEX_SKIP_RACE:-0}" != 1 ]; then
		step "go test -race (short)"
		GOINDEX_BUILD="$BUILD" go test -race -short -count=1 ./...
	fi
	if [ -n "${GOINDEX_FUZZTIME:-}" ]; then
		step "fuzz targets ($GOINDEX_FUZZTIME each)"
		fuzz_all
	fi
	for host in tests/*/run.sh; do
		[ -f "$host" ] || continue
		step "host suite ${host%/run.sh}"
		GOINDEX_BUILD="$BUILD" bash "$host"
	done
	step "all tests passed"
}

# demo runs `goindex demo` (tests/demo.sh): the whole path on this machine,
# report in build/demo-report. GOINDEX_<FLAG> variables reach its flags
# (GOINDEX_REQUESTS=100 ./build.sh demo).
demo() {
	build
	step "goindex demo"
	bash "$ROOT/tests/demo.sh" "$BUILD"
}

case "${1:-build}" in
	build) build ;;
	test) test_all ;;
	demo) demo ;;
	-h|--help|help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' ;;
	*) die "unknown command '$1' (want build, test or demo)" ;;
esac
