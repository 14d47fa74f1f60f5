/* bench.c: the cost of crossing the C ABI (run by tests/c/run.sh only when
 * GOINDEX_BENCH_ABI=1; see BENCHMARKS.md).
 *
 * The workload is the one BenchmarkProbe in ffi/bench_test.go builds, so the
 * two line up: 16 members, 1024 documents of 64 blocks sharing a 16-block
 * system prefix; member m holds every document d with d % 16 == m in full
 * and the first 32 blocks of every document with (d + 1) % 16 == m. A probe
 * of one whole document therefore answers 16 members: 64, 32 and 14 × 16
 * blocks (320 blocks in all), which every timed call checks.
 *
 * With the benchmark build of the library (-tags goindex_bench, which adds
 * goindex_bench_inprocess), it also times the in-process Go probe (Match
 * plus the sort: BenchmarkProbe's impl=radix) inside the library, 64
 * probes per crossing, in the same rounds, process and tree as the ABI
 * calls, and prints the ratios against it.
 *
 * Output: one line per case, named as the Go benchmarks' sub-benchmarks so
 * they line up: "<name>/impl=abi <n> <ns> ns/op" (ns/probe for batches),
 * the fastest of five rounds. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chain.h"
#include "goindex.h"

/* Only in the benchmark build of the library (ffi/benchexport.go). */
extern size_t goindex_bench_inprocess(uint64_t handle, const uint64_t *queries, size_t n, size_t depth) __attribute__((weak));

enum { members = 16, docs = 1024, depth = 64, shared = 16, partial = 32, batch = 64 };

/* Every probe's total depth: one full holder, one partial, 14 sharers. */
static const unsigned want_blocks = depth + partial + (members - 2) * shared;

static uint64_t local_hash(int d, int i) {
	return i < shared ? mix64(0x5157ull << 32 | (uint64_t)i) : mix64((uint64_t)(d + 1) << 32 | (uint64_t)i);
}

static uint64_t queries[docs][depth];

static double now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what, int rc) {
	fprintf(stderr, "bench: %s = %d (%s)\n", what, rc, goindex_strerror(rc));
	exit(1);
}

/* check sums one probe's depths and dies unless it is the workload's. */
static void check(const goindex_overlap *o, size_t n) {
	unsigned sum = 0;
	for (size_t i = 0; i < n; i++) sum += o[i].blocks;
	if (n != members || sum != want_blocks) {
		fprintf(stderr, "bench: a probe answered %zu members and %u blocks, want %d and %u\n", n, sum, members, want_blocks);
		exit(1);
	}
}

int main(int argc, char **argv) {
	long iters = argc > 1 ? atol(argv[1]) : 200000;
	uint64_t h;
	int rc = goindex_open("{}", 2, &h);
	if (rc) die("goindex_open", rc);
	for (int d = 0; d < docs; d++) {
		uint64_t ext[depth];
		for (int i = 0; i < depth; i++) queries[d][i] = local_hash(d, i);
		chain(queries[d], depth, ext);
		if ((rc = goindex_insert(h, (uint64_t)(d % members), 0, 0, NULL, ext, queries[d], depth))) die("goindex_insert", rc);
		if ((rc = goindex_insert(h, (uint64_t)((d + 1) % members), 0, 0, NULL, ext, queries[d], partial))) die("goindex_insert", rc);
	}

	goindex_overlap out[members * batch];
	size_t written, counts[batch], lens[batch];
	volatile uint32_t sink = 0;
	for (int i = 0; i < batch; i++) lens[i] = depth;

	/* Each case runs `rounds` timed rounds after one warm-up round and
	 * reports the fastest: the machine is shared, and the minimum is the
	 * figure least disturbed by other load. The cases take turns within a
	 * round, so a burst of load hits all of them alike. */
	enum { rounds = 5 };
	double best_trivial = 1e300, best_probe = 1e300, best_batch = 1e300, best_go = 1e300, t0, ns;
	long calls = iters / batch;
	for (int round = 0; round <= rounds; round++) {
		if (goindex_bench_inprocess) {
			t0 = now_ns();
			for (long i = 0; i < calls; i++)
				if (goindex_bench_inprocess(h, &queries[(i * batch) % docs][0], batch, depth) != (size_t)batch * members)
					die("goindex_bench_inprocess (entries found)", -1);
			ns = (now_ns() - t0) / (double)(calls * batch);
			if (round && ns < best_go) best_go = ns;
		}

		t0 = now_ns();
		for (long i = 0; i < iters * 10; i++) sink += goindex_abi_version();
		ns = (now_ns() - t0) / (double)(iters * 10);
		if (round && ns < best_trivial) best_trivial = ns;

		t0 = now_ns();
		for (long i = 0; i < iters; i++) {
			if ((rc = goindex_probe(h, queries[i % docs], depth, out, members, &written))) die("goindex_probe", rc);
			check(out, written);
		}
		ns = (now_ns() - t0) / (double)iters;
		if (round && ns < best_probe) best_probe = ns;

		/* Batches of 64 consecutive documents, one slice of the query table. */
		t0 = now_ns();
		for (long i = 0; i < calls; i++) {
			const uint64_t *q = &queries[(i * batch) % docs][0];
			if ((rc = goindex_probe_batch(h, q, lens, batch, out, members * batch, counts, &written))) die("goindex_probe_batch", rc);
			for (int j = 0, off = 0; j < batch; off += (int)counts[j], j++) check(out + off, counts[j]);
		}
		ns = (now_ns() - t0) / (double)(calls * batch);
		if (round && ns < best_batch) best_batch = ns;
	}
	printf("BenchmarkTrivialCall/impl=abi %ld %.1f ns/op\n", iters * 10, best_trivial);
	printf("BenchmarkProbe/impl=abi/blocks=%d %ld %.1f ns/op\n", depth, iters, best_probe);
	printf("BenchmarkProbeBatch/impl=abi/blocks=%d/batch=%d %ld %.1f ns/probe\n", depth, batch, calls * batch, best_batch);

	if (goindex_bench_inprocess) {
		printf("BenchmarkProbe/impl=radix-in-library/blocks=%d %ld %.1f ns/op\n", depth, calls * batch, best_go);
		printf("ratio abi/radix-in-library: probe %.3f, probe_batch %.3f\n", best_probe / best_go, best_batch / best_go);
	}
	if ((rc = goindex_close(h))) die("goindex_close", rc);
	return sink == 0;
}
