/* bench.c: the cost of crossing the C ABI (run by tests/c/run.sh only when
 * GOINDEX_BENCH_ABI=1; see BENCHMARKS.md).
 *
 * The workload is the one BenchmarkProbe in ffi/bench_test.go builds, so the
 * two line up: 16 members, 1024 documents of 64 blocks sharing a 16-block
 * system prefix; member m holds every document d with d % 16 == m in full
 * and the first 32 blocks of every document with (d + 1) % 16 == m. A probe
 * of one whole document therefore answers 16 members: 64, 32 and 14 × 16
 * blocks (320 blocks in all), which every timed probe checks.
 *
 * With the benchmark build of the library (-tags goindex_bench, which adds
 * goindex_bench_inprocess), it also times, on the same tree in the same
 * process, the in-process Go probe (Match plus the sort: BenchmarkProbe's
 * impl=radix, with the same check of each answer) 64 probes per crossing,
 * and the same probe behind one bare crossing each (impl=crossing+radix: no
 * argument checks, counter or C-format output; the floor of any single-probe
 * export), and prints the ratios against the in-process probe.
 *
 * Method: the cases take turns in short segments (segment probes each, a
 * few milliseconds), so a burst of load on this shared machine hits all of
 * them alike, and each case reports its fastest segment, the figure least
 * disturbed by other load. Output: one line per case, named as the Go
 * benchmarks' sub-benchmarks so they line up: "<name> <n> <ns> ns/op"
 * (ns/probe for batches), then the ratios.
 *
 *   bench [ITERS]                        the exact-mode workload above
 *   bench global REPLICA QUERIES [ITERS] global mode, the cross-DC router's
 *                                        production path (bench_global)
 *
 * Global mode: a global handle attaches REPLICA, the 13-lane replica file
 * `fixture bench` writes (tests/c/fixture/bench.go: one lane per DC of the
 * reference deployment, each filled by a real CKF producer, 64K to 1M
 * blocks per lane, documents sharing tenant prompts across lanes), and
 * probes the 64-block queries of QUERIES, each checked against the answer
 * the fixture recorded for it (entries and total depth). The same cases
 * take turns: goindex_probe, goindex_probe_batch (64 queries), the
 * in-process Go probe (goindex_bench_inprocess_global: the replica search
 * goindex_probe runs plus the sort, with the same check, 64 probes per
 * crossing), that probe behind one bare crossing each, and the trivial
 * call. */
#define _POSIX_C_SOURCE 199309L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chain.h"
#include "goindex.h"

/* Only in the benchmark build of the library (ffi/benchexport.go). */
extern size_t goindex_bench_inprocess(uint64_t handle, const uint64_t *queries, size_t n, size_t depth,
                                      size_t want_entries, size_t want_blocks) __attribute__((weak));
extern size_t goindex_bench_inprocess_global(uint64_t handle, const uint64_t *queries, size_t n, size_t depth,
                                             const size_t *want_entries, const size_t *want_blocks) __attribute__((weak));

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

/* The cases every mode times, in turns (Method, above). */
enum { c_go, c_crossing, c_probe, c_batch, c_trivial, cases };

/* segment is the probes a case runs per turn (batches: segment / batch
 * calls of batch probes), a few milliseconds. */
enum { segment = 2048 };

static size_t lens[batch]; /* every query of a batch is depth blocks long */
static volatile uint32_t sink;

/* time_cases gives every case a turn of one segment, round after round,
 * until each has run iters probes after the first round (a warm-up, not
 * counted), and returns that count. run(c) runs one segment of case c, all
 * but c_trivial (the same in every mode: 10 calls per probe); the in-process
 * cases c_go and c_crossing run only with inprocess (the benchmark build of
 * the library). best[c] gets case c's fastest segment, in ns per probe (per
 * call for c_trivial). */
static long time_cases(long iters, int inprocess, void (*run)(int c), double best[cases]) {
	for (int c = 0; c < cases; c++) best[c] = 1e300;
	for (int i = 0; i < batch; i++) lens[i] = depth;
	long segments = iters / segment > 0 ? iters / segment : 1;
	for (long seg = 0; seg <= segments; seg++) {
		for (int c = 0; c < cases; c++) {
			if ((c == c_go || c == c_crossing) && !inprocess) continue;
			double t0 = now_ns();
			if (c == c_trivial)
				for (long i = 0; i < segment * 10; i++) sink += goindex_abi_version();
			else
				run(c);
			double ns = (now_ns() - t0) / (double)(c == c_trivial ? segment * 10 : segment);
			if (seg && ns < best[c]) best[c] = ns;
		}
	}
	return segments * segment;
}

static uint64_t exact_h;

/* exact_segment runs one segment of case c of the exact-mode workload. */
static void exact_segment(int c) {
	goindex_overlap out[members * batch];
	size_t written, counts[batch];
	int rc;
	switch (c) {
	case c_go: /* 64 consecutive documents per crossing */
		for (long i = 0; i < segment / batch; i++)
			if (goindex_bench_inprocess(exact_h, &queries[(i * batch) % docs][0], batch, depth, members, want_blocks) != batch)
				die("goindex_bench_inprocess (probes passed)", -1);
		break;
	case c_crossing:
		for (long i = 0; i < segment; i++)
			if (goindex_bench_inprocess(exact_h, queries[i % docs], 1, depth, members, want_blocks) != 1)
				die("goindex_bench_inprocess (probes passed)", -1);
		break;
	case c_probe:
		for (long i = 0; i < segment; i++) {
			if ((rc = goindex_probe(exact_h, queries[i % docs], depth, out, members, &written))) die("goindex_probe", rc);
			check(out, written);
		}
		break;
	case c_batch: /* batches of 64 consecutive documents, one slice of the query table */
		for (long i = 0; i < segment / batch; i++) {
			if ((rc = goindex_probe_batch(exact_h, &queries[(i * batch) % docs][0], lens, batch, out, members * batch, counts, &written)))
				die("goindex_probe_batch", rc);
			for (int j = 0, off = 0; j < batch; off += (int)counts[j], j++) check(out + off, counts[j]);
		}
		break;
	}
}

static int bench_global(int argc, char **argv);

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "global") == 0) return bench_global(argc - 2, argv + 2);
	long iters = argc > 1 ? atol(argv[1]) : 204800;
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

	/* Each probe of a segment probes one document, so every segment probes
	 * every document twice. */
	exact_h = h;
	double best[cases];
	long n = time_cases(iters, goindex_bench_inprocess != NULL, exact_segment, best);
	printf("BenchmarkTrivialCall/impl=abi %ld %.1f ns/op\n", n * 10, best[c_trivial]);
	printf("BenchmarkProbe/impl=abi/blocks=%d %ld %.1f ns/op\n", depth, n, best[c_probe]);
	printf("BenchmarkProbeBatch/impl=abi/blocks=%d/batch=%d %ld %.1f ns/probe\n", depth, batch, n, best[c_batch]);
	if (goindex_bench_inprocess) {
		printf("BenchmarkProbe/impl=radix-in-library/blocks=%d %ld %.1f ns/op\n", depth, n, best[c_go]);
		printf("BenchmarkProbe/impl=crossing+radix/blocks=%d %ld %.1f ns/op\n", depth, n, best[c_crossing]);
		printf("ratio abi/radix-in-library: probe %.3f, probe_batch %.3f, crossing+radix %.3f\n",
		       best[c_probe] / best[c_go], best[c_batch] / best[c_go], best[c_crossing] / best[c_go]);
	}
	if ((rc = goindex_close(h))) die("goindex_close", rc);
	return sink == 0;
}

/* ---- global mode ---- */

/* The queries of QUERIES (tests/c/fixture/bench.go, WriteBenchQueries):
 * gq[q * depth + i], and the answer the fixture recorded for query q. */
static uint64_t *gq;
static size_t *g_entries, *g_blocks, g_n, g_lanes;

static void read_queries(const char *path) {
	FILE *f = fopen(path, "r");
	size_t d;
	if (!f || fscanf(f, "queries %zu %zu %zu", &g_n, &d, &g_lanes) != 3) {
		fprintf(stderr, "bench: %s: not a queries file\n", path);
		exit(1);
	}
	if (d != depth || g_n == 0 || g_n % batch || g_lanes == 0 || g_lanes > 64) {
		fprintf(stderr, "bench: %s: %zu queries of %zu blocks over %zu lanes; want a multiple of %d queries of %d blocks\n", path, g_n, d, g_lanes, batch, depth);
		exit(1);
	}
	gq = malloc(g_n * depth * sizeof *gq);
	g_entries = malloc(g_n * sizeof *g_entries);
	g_blocks = malloc(g_n * sizeof *g_blocks);
	if (!gq || !g_entries || !g_blocks) die("malloc", -1);
	for (size_t q = 0; q < g_n; q++) {
		int ok = fscanf(f, "%zu %zu", &g_entries[q], &g_blocks[q]) == 2 && g_entries[q] <= g_lanes;
		for (size_t i = 0; ok && i < depth; i++) ok = fscanf(f, "%" SCNu64, &gq[q * depth + i]) == 1;
		if (!ok) {
			fprintf(stderr, "bench: %s: query %zu is malformed\n", path, q);
			exit(1);
		}
	}
	fclose(f);
}

/* check_global sums query q's answer and dies unless it is the fixture's. */
static void check_global(const goindex_overlap *o, size_t n, size_t q) {
	size_t sum = 0;
	for (size_t i = 0; i < n; i++) sum += o[i].blocks;
	if (n != g_entries[q] || sum != g_blocks[q]) {
		fprintf(stderr, "bench: global query %zu answered %zu lanes and %zu blocks, want %zu and %zu\n", q, n, sum, g_entries[q], g_blocks[q]);
		exit(1);
	}
}

static uint64_t g_h;
static goindex_overlap *g_out;
static size_t g_cap;

/* global_segment runs one segment of case c of the global-mode workload. */
static void global_segment(int c) {
	size_t written, counts[batch];
	int rc;
	switch (c) {
	case c_go: /* 64 consecutive queries per crossing */
		for (long i = 0; i < segment / batch; i++) {
			size_t q = (size_t)(i * batch) % g_n;
			if (goindex_bench_inprocess_global(g_h, &gq[q * depth], batch, depth, &g_entries[q], &g_blocks[q]) != batch)
				die("goindex_bench_inprocess_global (probes passed)", -1);
		}
		break;
	case c_crossing:
		for (long i = 0; i < segment; i++) {
			size_t q = (size_t)i % g_n;
			if (goindex_bench_inprocess_global(g_h, &gq[q * depth], 1, depth, &g_entries[q], &g_blocks[q]) != 1)
				die("goindex_bench_inprocess_global (probes passed)", -1);
		}
		break;
	case c_probe:
		for (long i = 0; i < segment; i++) {
			size_t q = (size_t)i % g_n;
			if ((rc = goindex_probe(g_h, &gq[q * depth], depth, g_out, g_lanes, &written))) die("goindex_probe", rc);
			check_global(g_out, written, q);
		}
		break;
	case c_batch: /* batches of 64 consecutive queries, one slice of the query table */
		for (long i = 0; i < segment / batch; i++) {
			size_t q = (size_t)(i * batch) % g_n;
			if ((rc = goindex_probe_batch(g_h, &gq[q * depth], lens, batch, g_out, g_cap, counts, &written)))
				die("goindex_probe_batch", rc);
			for (size_t j = 0, off = 0; j < batch; off += counts[j], j++) check_global(g_out + off, counts[j], q + j);
		}
		break;
	}
}

/* bench_global runs the global-mode cases; argv: REPLICA QUERIES [ITERS]. */
static int bench_global(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: bench global REPLICA QUERIES [ITERS]\n");
		return 2;
	}
	long iters = argc > 2 ? atol(argv[2]) : 102400;
	read_queries(argv[1]);
	uint64_t h;
	const char *cfg = "{\"mode\": \"global\"}"; /* the default replica_check_ms (100) */
	int rc = goindex_open(cfg, strlen(cfg), &h);
	if (rc) die("goindex_open", rc);
	if ((rc = goindex_attach_replica(h, argv[0], strlen(argv[0])))) die("goindex_attach_replica", rc);
	goindex_counters st;
	memset(&st, 0, sizeof st);
	st.struct_size = sizeof st;
	if ((rc = goindex_stats(h, &st))) die("goindex_stats", rc);
	if (st.lanes_ready != g_lanes) {
		fprintf(stderr, "bench: %s has %llu lanes ready, want %zu\n", argv[0], (unsigned long long)st.lanes_ready, g_lanes);
		return 1;
	}

	g_h = h;
	g_cap = g_lanes * batch;
	g_out = malloc(g_cap * sizeof *g_out);
	size_t written;
	if (!g_out) die("malloc", -1);
	/* Every query once, checked, before timing: maps the file's pages. */
	for (size_t q = 0; q < g_n; q++) {
		if ((rc = goindex_probe(h, &gq[q * depth], depth, g_out, g_lanes, &written))) die("goindex_probe", rc);
		check_global(g_out, written, q);
	}

	double best[cases];
	long n = time_cases(iters, goindex_bench_inprocess_global != NULL, global_segment, best);
	printf("BenchmarkTrivialCall/impl=abi/mode=global %ld %.1f ns/op\n", n * 10, best[c_trivial]);
	printf("BenchmarkProbe/impl=abi/mode=global/lanes=%zu/blocks=%d %ld %.1f ns/op\n", g_lanes, depth, n, best[c_probe]);
	printf("BenchmarkProbeBatch/impl=abi/mode=global/lanes=%zu/blocks=%d/batch=%d %ld %.1f ns/probe\n", g_lanes, depth, batch, n, best[c_batch]);
	if (goindex_bench_inprocess_global) {
		printf("BenchmarkProbe/impl=replica-in-library/mode=global/lanes=%zu/blocks=%d %ld %.1f ns/op\n", g_lanes, depth, n, best[c_go]);
		printf("BenchmarkProbe/impl=crossing+replica/mode=global/lanes=%zu/blocks=%d %ld %.1f ns/op\n", g_lanes, depth, n, best[c_crossing]);
		printf("ratio global (%zu lanes) abi/replica-in-library: probe %.3f, probe_batch %.3f, crossing+replica %.3f; bare crossing %.1f%% of the probe\n",
		       g_lanes, best[c_probe] / best[c_go], best[c_batch] / best[c_go], best[c_crossing] / best[c_go], 100 * best[c_trivial] / best[c_go]);
	}
	if ((rc = goindex_close(h))) die("goindex_close", rc);
	free(g_out);
	free(gq);
	free(g_entries);
	free(g_blocks);
	return sink == 0;
}
