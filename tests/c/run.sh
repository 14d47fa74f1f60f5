#!/usr/bin/env bash
# tests/c/run.sh: the C host suite of libgoindex.so.
#   1. the library's shape: exactly the header's calls exported (goindex_*
#      and Dynamo's dynamo_worker_selector_plugin_v1),
#      soname libgoindex.so.1, no symbol table or debug info;
#   2. abi_test.c (gcc -Wall -Wextra -Werror) against the library; then
#      global_test.c (global mode: the frames script and the replica file
#      tests/c/fixture writes, a generation change under probing threads)
#      and the plugin hosts (Dynamo's worker-selector plugin, loaded with
#      dlopen as each proposed loader does, one binary per layout:
#      plugin_row from plugin_row.c, plugin_columns72, plugin_columns96 and
#      plugin_worker_columns from plugin_columns.c, each with the driver
#      plugin_host.c) and signals_test.c (the host's signal handlers kept
#      across dlopen, its own faults still reaching it);
#   3. the same binaries against a GOEXPERIMENT=cgocheck2 build of the
#      library (built here into $GOINDEX_BUILD/cgocheck2);
#   4. only with GOINDEX_BENCH_ABI=1: bench.c next to the Go benchmarks of
#      ffi/bench_test.go, alternating for GOINDEX_BENCH_ROUNDS rounds, for
#      BENCHMARKS.md: exact mode, then global mode over the 13-lane replica
#      file "fixture bench" writes.
# Needs GOINDEX_BUILD (./build.sh test sets it). GOINDEX_SEED steers the
# stress writer of abi_test.c.
set -euo pipefail
: "${GOINDEX_BUILD:?GOINDEX_BUILD must name the directory holding libgoindex.so (./build.sh test sets it)}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$GOINDEX_BUILD" && pwd)
lib=$build/libgoindex.so
work=$build/tests-c
mkdir -p "$work"
step=setup
fail() { printf 'tests/c: FAIL [%s] %s\n' "$step" "$*" >&2; exit 1; }
[ -f "$lib" ] || fail "$lib is missing: run ./build.sh first"

step="exported symbols are the header's calls"
want=$(grep -oE '^[A-Za-z_][A-Za-z0-9_ ]*\*? +\**(goindex|dynamo_worker_selector_plugin)_[a-z0-9_]+\(' "$root/include/goindex.h" |
	grep -oE '(goindex|dynamo_worker_selector_plugin)_[a-z0-9_]+\($' | tr -d '(' | sort -u)
got=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
[ -n "$want" ] || fail "found no prototypes in include/goindex.h"
[ "$want" = "$got" ] || fail "nm -D exports differ from include/goindex.h:
$(diff <(echo "$want") <(echo "$got") || true)"

step="soname and stripping"
readelf -d "$lib" | grep -q 'Library soname: \[libgoindex.so.1\]' || fail "soname is not libgoindex.so.1: $(readelf -d "$lib" | grep -i soname)"
sections=$(readelf -S -W "$lib")
! grep -qE '\.debug_|\.symtab' <<<"$sections" || fail "the library keeps debug info or a symbol table"

step="compile abi_test.c, global_test.c, the plugin hosts, signals_test.c and bench.c"
cflags=(-std=c11 -O2 -Wall -Wextra -Werror -pthread -I "$root/include" -I "$here")
gcc "${cflags[@]}" "$here/abi_test.c" -L "$build" -lgoindex -lm -o "$work/abi_test"
gcc "${cflags[@]}" "$here/global_test.c" -L "$build" -lgoindex -lm -o "$work/global_test"
# The plugin hosts include no goindex.h: each has its layout's own types.
hostflags=(-std=c11 -O2 -Wall -Wextra -Werror -pthread -I "$here")
plugin_hosts=(plugin_row plugin_columns72 plugin_columns96 plugin_worker_columns)
gcc "${hostflags[@]}" "$here/plugin_host.c" "$here/plugin_row.c" -ldl -o "$work/plugin_row"
gcc "${hostflags[@]}" -DLAYOUT_COLUMNS72 "$here/plugin_host.c" "$here/plugin_columns.c" -ldl -o "$work/plugin_columns72"
gcc "${hostflags[@]}" -DLAYOUT_COLUMNS96 "$here/plugin_host.c" "$here/plugin_columns.c" -ldl -o "$work/plugin_columns96"
gcc "${hostflags[@]}" -DLAYOUT_WORKER_COLUMNS "$here/plugin_host.c" "$here/plugin_columns.c" -ldl -o "$work/plugin_worker_columns"
gcc "${cflags[@]}" "$here/bench.c" -L "$build" -lgoindex -o "$work/bench"
gcc "${hostflags[@]}" -I "$root/include" "$here/signals_test.c" -ldl -o "$work/signals_test"

step="build the fixture and write the frames script"
(cd "$root" && go build -o "$work/fixture" ./tests/c/fixture/cmd/fixture)
"$work/fixture" frames "$work/frames.script"

# run_suite DIR runs the suites against DIR's library and checks abi_test
# loaded that one.
run_suite() {
	local out
	out=$(LD_LIBRARY_PATH="$1" "$work/abi_test") || { printf '%s\n' "$out"; fail "abi_test failed against $1"; }
	printf '%s\n' "$out"
	grep -qxF "library: $1/libgoindex.so.1" <<<"$out" || fail "abi_test did not load $1/libgoindex.so.1"
	LD_LIBRARY_PATH="$1" "$work/global_test" frames "$work/frames.script" || fail "global_test frames failed against $1"
	rm -f "$work/replica" "$work/replica".*
	"$work/fixture" replica "$work/replica" 1 "$work/replica.script"
	LD_LIBRARY_PATH="$1" "$work/global_test" replica "$work/replica" "$work/replica.script" "$work/fixture" ||
		fail "global_test replica failed against $1"
	local h
	for h in "${plugin_hosts[@]}"; do
		"$work/$h" "$1/libgoindex.so" || fail "$h failed against $1"
	done
	"$work/signals_test" "$1/libgoindex.so" || fail "signals_test failed against $1"
}

step="abi_test against the library"
run_suite "$build"

step="abi_test against the cgocheck2 library"
GOEXPERIMENT=cgocheck2 bash "$root/ffi/build.sh" "$build/cgocheck2"
run_suite "$build/cgocheck2"

if [ "${GOINDEX_BENCH_ABI:-0}" = 1 ]; then
	step="boundary benchmark"
	# GOINDEX_BENCH_ROUNDS (default 5) rounds, each the Go cases of
	# ffi/bench_test.go (one prebuilt test binary) then bench.c, so that the
	# in-process and the through-the-ABI figures share the machine's load;
	# the summary is each case's fastest round (ns/probe for batches).
	# bench.c runs against the benchmark build of the library, whose one
	# extra export (goindex_bench_inprocess) times the in-process Go probe in
	# bench.c's own process on the same tree; the real library's export list
	# stays exact. Each round ends with bench.c's global mode (13 DC lanes
	# of the replica file the fixture writes once, 64K to 1M blocks each;
	# goindex_bench_inprocess_global is its in-process side).
	(cd "$root" && go test -c -o "$work/ffi.test" ./ffi)
	GOFLAGS="${GOFLAGS:-} -tags=goindex_bench" bash "$root/ffi/build.sh" "$build/bench"
	rm -f "$work/bench-global.replica" "$work/bench-global.replica".*
	"$work/fixture" bench "$work/bench-global.replica" "$work/bench-global.queries"
	for _ in $(seq "${GOINDEX_BENCH_ROUNDS:-5}"); do
		"$work/ffi.test" -test.run '^$' -test.bench 'Benchmark(Probe|TrivialCall)$' -test.benchtime=100000x -test.benchmem
		"$work/ffi.test" -test.run '^$' -test.bench 'BenchmarkProbeBatch$' -test.benchtime=2000x -test.benchmem
		"$work/ffi.test" -test.run '^$' -test.bench 'BenchmarkProbeMiss$' -test.benchtime=2000000x
		LD_LIBRARY_PATH="$build/bench" "$work/bench" 204800
		LD_LIBRARY_PATH="$build/bench" "$work/bench" global "$work/bench-global.replica" "$work/bench-global.queries" 102400
	done | tee "$work/bench.out" | grep -E '^(Benchmark|ratio)'
	echo "fastest round of each case:"
	awk '/^Benchmark/ { name = $1; sub(/-[0-9]+$/, "", name); v = $3; for (i = 4; i <= NF; i++) if ($i == "ns/probe") v = $(i - 1)
		if (!(name in best) || v + 0 < best[name] + 0) best[name] = v } END { for (n in best) printf "  %-50s %s ns\n", n, best[n] }' "$work/bench.out" | sort
	echo "same-process ratios, one line per bench.c run:"
	grep '^ratio' "$work/bench.out" | sed 's/^/  /'
fi
echo "tests/c: passed"
