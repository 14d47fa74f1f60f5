/* abi_test.c: the C host suite of libgoindex.so (run by tests/c/run.sh).
 *
 * Sections, each a named step printed on failure:
 *   - scenarios: every dynamo-compat §3.5 row the ABI can express, the
 *     shrunk-5 and six-event regressions, and the spec's hash vectors;
 *   - bad arguments: every failure path of every call, with the detail of
 *     goindex_last_error and its truncation;
 *   - stress: probes, batches, scores and stats on several pthreads while
 *     one thread applies events; no result may exceed what was stored;
 *   - the end: every handle the suite opened is closed (stats → EHANDLE).
 * Exit status 0 when every check passed. The first line names the library
 * file actually loaded, so run.sh can tell the cgocheck2 build was tested. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "goindex.h"
#include "check.h"
#include "handles.h"

/* A(...) expands to an array literal and its length. */
#define A(...) (const uint64_t[]){__VA_ARGS__}, (sizeof((const uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t))
#define NONE NULL, 0

static void close_h(uint64_t h) { CHECK_RC(goindex_close(h), GOINDEX_OK); }

/* ---- events in the §3.5 helper convention ---- */

/* store applies a stored event of (w, r): blocks below the chain of prefix
 * (the root when np is 0), local hashes = the values themselves. */
static int store(uint64_t h, uint64_t w, uint32_t r, const uint64_t *prefix, size_t np, const uint64_t *blocks, size_t nb) {
	uint64_t all[256], ext[256];
	memcpy(all, prefix, np * sizeof *all);
	memcpy(all + np, blocks, nb * sizeof *all);
	chain(all, np + nb, ext);
	return goindex_insert(h, w, r, 0, np ? &ext[np - 1] : NULL, ext + np, blocks, nb);
}

/* rm removes, from (w, r), the blocks of the chain of vals at positions. */
static int rm(uint64_t h, uint64_t w, uint32_t r, const uint64_t *vals, size_t n, const uint64_t *positions, size_t npos) {
	uint64_t ext[256], gone[256];
	chain(vals, n, ext);
	for (size_t i = 0; i < npos; i++) gone[i] = ext[positions[i]];
	return goindex_remove(h, w, r, 0, gone, npos);
}

/* iota fills buf with from, from+1, …, to and returns the count. */
static size_t iota(uint64_t *buf, uint64_t from, uint64_t to) {
	size_t n = 0;
	for (uint64_t v = from; v <= to; v++) buf[n++] = v;
	return n;
}

/* format writes probe results as "w/r=d w/r=d". */
static void format(char *buf, size_t cap, const goindex_overlap *o, size_t n) {
	size_t off = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && off < cap; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%llu/%u=%u", i ? " " : "", (unsigned long long)o[i].id, o[i].rank, o[i].blocks);
}

/* expect_at probes query and compares the formatted result with want. */
static void expect_at(int line, uint64_t h, const uint64_t *q, size_t n, const char *want) {
	goindex_overlap out[64];
	size_t written = 0;
	char got[512];
	int rc = goindex_probe(h, q, n, out, 64, &written);
	if (rc != GOINDEX_OK) {
		fail_at(line, "goindex_probe(%zu hashes) = %d (%s)", n, rc, goindex_strerror(rc));
		return;
	}
	format(got, sizeof got, out, written);
	if (strcmp(got, want) != 0) fail_at(line, "goindex_probe(%zu hashes from %llu) = \"%s\", want \"%s\"", n, (unsigned long long)(n ? q[0] : 0), got, want);
}
#define EXPECT(h, ...) expect_at(__LINE__, h, __VA_ARGS__)

/* ---- scenarios ---- */

static void scenario_basics(void) {
	STEP("scenario: store, query, miss, duplicate");
	uint64_t h = open_cfg("{}");
	EXPECT(h, A(1, 2, 3), "");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "0/0=3");
	EXPECT(h, A(1, 2, 999), "0/0=2");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "0/0=3");
	goindex_counters c = stats_of(h);
	CHECK(c.mode == 1 && c.blocks == 3 && c.members == 1, "stats after a duplicate store: mode %u blocks %llu members %llu, want 1 3 1", c.mode, (unsigned long long)c.blocks, (unsigned long long)c.members);
	CHECK(c.events_applied == 2 && c.events_rejected == 0, "stats: events applied %llu rejected %llu, want 2 0", (unsigned long long)c.events_applied, (unsigned long long)c.events_rejected);
	CHECK(c.probes == 4, "stats: probes %llu, want 4", (unsigned long long)c.probes);

	STEP("scenario: continue below a parent, remove tail and all");
	CHECK_RC(store(h, 0, 0, A(1, 2, 3), A(4, 5)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3, 4, 5), "0/0=5");
	EXPECT(h, A(1, 2, 3), "0/0=3");
	CHECK_RC(rm(h, 0, 0, A(1, 2, 3, 4, 5), A(3, 4)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3, 4, 5), "0/0=3");
	c = stats_of(h);
	CHECK(c.blocks == 3, "stats after removing [4,5]: blocks %llu, want 3", (unsigned long long)c.blocks);
	CHECK_RC(rm(h, 0, 0, A(1, 2, 3), A(0, 1, 2)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "");
	c = stats_of(h);
	CHECK(c.blocks == 0, "stats after removing everything: blocks %llu, want 0", (unsigned long long)c.blocks);
	close_h(h);
}

static void scenario_mid_chain(void) {
	STEP("scenario: mid-chain removal leaves descendants unreachable");
	uint64_t h = open_cfg("{}");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3, 4, 5)), GOINDEX_OK);
	CHECK_RC(rm(h, 0, 0, A(1, 2, 3, 4, 5), A(2)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3, 4, 5), "0/0=2");
	EXPECT(h, A(1, 2), "0/0=2");
	CHECK_RC(store(h, 0, 0, A(1, 2), A(3)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3, 4, 5), "0/0=3");
	CHECK_RC(store(h, 0, 0, A(1, 2, 3), A(4, 5)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3, 4, 5), "0/0=5");
	close_h(h);
}

static void scenario_workers(void) {
	STEP("scenario: two workers diverge; a store below an unheld parent is rejected");
	uint64_t h = open_cfg("{}");
	CHECK_RC(store(h, 1, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 2, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 1, 0, A(1, 2, 3), A(4, 5, 6)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3, 4, 5, 6), "1/0=6 2/0=3");
	CHECK_RC(store(h, 2, 0, A(1, 2, 3), A(7, 8)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3, 7, 8), "1/0=3 2/0=5");
	EXPECT(h, A(1, 2, 3, 4, 5, 6), "1/0=6 2/0=3");
	goindex_counters before = stats_of(h);
	CHECK_RC(store(h, 2, 0, A(1, 2, 3, 4, 5, 6), A(9, 10)), GOINDEX_EPARENT);
	EXPECT_ERROR(h, "goindex_insert: ");
	EXPECT(h, A(1, 2, 3, 4, 5, 6, 9, 10), "1/0=6 2/0=3");
	goindex_counters after = stats_of(h);
	CHECK(after.blocks == before.blocks, "a rejected store changed blocks from %llu to %llu", (unsigned long long)before.blocks, (unsigned long long)after.blocks);
	CHECK(after.events_rejected == before.events_rejected + 1, "events_rejected %llu, want %llu", (unsigned long long)after.events_rejected, (unsigned long long)before.events_rejected + 1);
	close_h(h);

	STEP("scenario: a worker catches up in two chained stores");
	h = open_cfg("{}");
	CHECK_RC(store(h, 1, 0, NONE, A(1, 2, 3, 4, 5, 6)), GOINDEX_OK);
	CHECK_RC(store(h, 2, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 2, 0, A(1, 2, 3), A(4, 5, 6)), GOINDEX_OK);
	CHECK_RC(store(h, 2, 0, A(1, 2, 3, 4, 5, 6), A(7, 8, 9)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3, 4, 5, 6, 7, 8, 9), "1/0=6 2/0=9");
	close_h(h);

	STEP("scenario: siblings under a shared root block");
	h = open_cfg("{}");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2)), GOINDEX_OK);
	CHECK_RC(store(h, 1, 0, NONE, A(1, 3)), GOINDEX_OK);
	EXPECT(h, A(1), "0/0=1 1/0=1");
	EXPECT(h, A(1, 2), "0/0=2 1/0=1");
	close_h(h);

	STEP("scenario: remove_worker, remove all, cleared");
	h = open_cfg("{}");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 1, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(goindex_remove_worker(h, 0), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "1/0=3");
	CHECK_RC(rm(h, 1, 0, A(1, 2, 3), A(0, 1, 2)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 1, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(goindex_clear(h, 0, 0, 7), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "1/0=3");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "0/0=3 1/0=3");
	close_h(h);
}

static void scenario_ranks(void) {
	STEP("scenario: dp ranks are separate members, sorted by (id, rank)");
	uint64_t h = open_cfg("{}");
	for (uint32_t r = 3; r-- > 0;) CHECK_RC(store(h, 0, r, NONE, A(1, 2, 3)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "0/0=3 0/1=3 0/2=3");
	close_h(h);

	STEP("scenario: remove_rank drops one rank");
	h = open_cfg("{}");
	CHECK_RC(store(h, 7, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 7, 1, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(goindex_remove_rank(h, 7, 0), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "7/1=3");
	CHECK_RC(goindex_remove_rank(h, 7, 5), GOINDEX_OK);
	CHECK_RC(goindex_remove_rank(h, 8, 0), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "7/1=3");
	close_h(h);

	STEP("scenario: cleared drops one rank (clear_scope rank)");
	h = open_cfg("{\"clear_scope\": \"rank\"}");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 0, 1, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(goindex_clear(h, 0, 0, 1), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "0/1=3");
	close_h(h);

	STEP("scenario: cleared drops every rank of the worker (clear_scope worker)");
	h = open_cfg("{\"clear_scope\": \"worker\"}");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 0, 1, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 1, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(goindex_clear(h, 0, 0, 1), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "1/0=3");
	close_h(h);
}

static void scenario_no_effect(void) {
	STEP("scenario: unknown worker, unknown blocks, empty query, miss");
	uint64_t h = open_cfg("{}");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(goindex_remove_worker(h, 999), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "0/0=3");
	CHECK_RC(goindex_remove(h, 0, 0, 0, (const uint64_t[]){999, 998}, 2), GOINDEX_ENOTFOUND);
	EXPECT(h, A(1, 2, 3), "0/0=3");
	EXPECT(h, NONE, "");
	EXPECT(h, A(999, 998), "");

	STEP("scenario: a partly unknown removal removes the known blocks");
	uint64_t ext[3];
	chain((const uint64_t[]){1, 2, 3}, 3, ext);
	CHECK_RC(goindex_remove(h, 0, 0, 0, (const uint64_t[]){ext[2], 999}, 2), GOINDEX_ENOTFOUND);
	EXPECT_ERROR(h, "goindex_remove: ");
	EXPECT(h, A(1, 2, 3), "0/0=2");

	STEP("scenario: a store whose parent is among its blocks is rejected");
	CHECK_RC(goindex_insert(h, 0, 0, 0, &ext[1], (const uint64_t[]){ext[1]}, (const uint64_t[]){2}, 1), GOINDEX_ESEQUENCE);
	EXPECT(h, A(1, 2, 3), "0/0=2");
	close_h(h);

	STEP("scenario: two disjoint chains on one worker");
	h = open_cfg("{}");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 0, 0, NONE, A(100, 101, 102)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "0/0=3");
	EXPECT(h, A(100, 101, 102), "0/0=3");
	EXPECT(h, A(1, 100), "0/0=1");
	close_h(h);
}

static void scenario_long(void) {
	uint64_t q[256], pos[64];
	size_t n, np = 0;
	char want[32];

	STEP("scenario: [1..100] minus chain positions 79..99");
	uint64_t h = open_cfg("{}");
	n = iota(q, 1, 100);
	CHECK_RC(store(h, 0, 0, NONE, q, n), GOINDEX_OK);
	for (uint64_t p = 79; p <= 99; p++) pos[np++] = p;
	CHECK_RC(rm(h, 0, 0, q, n, pos, np), GOINDEX_OK);
	EXPECT(h, q, n, "0/0=79");
	close_h(h);

	STEP("scenario: [1..128] queried with one position replaced");
	h = open_cfg("{}");
	n = iota(q, 1, 128);
	CHECK_RC(store(h, 0, 0, NONE, q, n), GOINDEX_OK);
	const size_t ps[] = {31, 32, 33, 63, 64, 65, 95, 96, 97};
	for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
		uint64_t save = q[ps[i]];
		q[ps[i]] = 1000000;
		snprintf(want, sizeof want, "0/0=%zu", ps[i]);
		EXPECT(h, q, n, want);
		q[ps[i]] = save;
	}
	close_h(h);

	STEP("scenario: 20 chained 10-block events");
	h = open_cfg("{}");
	n = iota(q, 1, 200);
	for (size_t e = 0; e < 20; e++) CHECK_RC(store(h, 0, 0, q, 10 * e, q + 10 * e, 10), GOINDEX_OK);
	EXPECT(h, q, 200, "0/0=200");
	EXPECT(h, q, 75, "0/0=75");
	close_h(h);

	STEP("scenario: shared prefix 1..30, then 31..60 and 131..160");
	h = open_cfg("{}");
	n = iota(q, 1, 30);
	CHECK_RC(store(h, 0, 0, NONE, q, n), GOINDEX_OK);
	CHECK_RC(store(h, 1, 0, NONE, q, n), GOINDEX_OK);
	uint64_t tail0[30], tail1[30];
	iota(tail0, 31, 60);
	iota(tail1, 131, 160);
	CHECK_RC(store(h, 0, 0, q, 30, tail0, 30), GOINDEX_OK);
	CHECK_RC(store(h, 1, 0, q, 30, tail1, 30), GOINDEX_OK);
	EXPECT(h, q, 30, "0/0=30 1/0=30");
	n = iota(q, 1, 60);
	EXPECT(h, q, n, "0/0=60 1/0=30");
	close_h(h);
}

static void scenario_regressions(void) {
	STEP("regression: shrunk-5");
	uint64_t h = open_cfg("{}");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 0, 0, A(1), A(4)), GOINDEX_OK);
	CHECK_RC(rm(h, 0, 0, A(1), A(0)), GOINDEX_OK);
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2)), GOINDEX_OK);
	CHECK_RC(rm(h, 0, 0, A(1, 2, 3), A(2, 1)), GOINDEX_OK);
	EXPECT(h, A(1, 2), "0/0=1");
	close_h(h);

	STEP("regression: six-event");
	h = open_cfg("{}");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 30)), GOINDEX_OK);
	CHECK_RC(store(h, 0, 0, A(1), A(2, 20, 21)), GOINDEX_OK);
	CHECK_RC(rm(h, 0, 0, A(1), A(0)), GOINDEX_OK);
	CHECK_RC(store(h, 0, 0, NONE, A(1)), GOINDEX_OK);
	CHECK_RC(store(h, 0, 0, A(1), A(2, 20)), GOINDEX_OK);
	uint64_t e4[4], e3[3];
	chain((const uint64_t[]){1, 2, 20, 21}, 4, e4);
	chain((const uint64_t[]){1, 2, 20}, 3, e3);
	goindex_remove(h, 0, 0, 0, &e4[3], 1);
	goindex_remove(h, 0, 0, 0, &e3[2], 1);
	goindex_overlap out[4];
	size_t written = 0;
	CHECK_RC(goindex_probe(h, (const uint64_t[]){1, 2, 20}, 3, out, 4, &written), GOINDEX_OK);
	CHECK(written <= 1 && (written == 0 || out[0].blocks <= 2), "six-event: query [1,2,20] scored %u, want <= 2", written ? out[0].blocks : 0);
	close_h(h);
}

/* Spec dynamo-compat §1.5 vectors through goindex_hash_tokens. */
static void scenario_hashing(void) {
	STEP("hash vectors: V3/V4/V6/V7, LoRA V15, namespace V17, both V19");
	uint64_t h = open_cfg("{\"block_size\": 4}");
	uint32_t toks[10];
	for (uint32_t i = 0; i < 10; i++) toks[i] = i;
	uint64_t out[4];
	size_t written = 9;
	CHECK_RC(goindex_hash_tokens(h, toks, 8, NONE, NONE, out, 4, &written), GOINDEX_OK);
	CHECK(written == 2 && out[0] == 9143094415614847814ull && out[1] == 12124091508212882195ull, "hash_tokens(0..7, bs 4) = %zu: %llu %llu, want V4", written, (unsigned long long)out[0], (unsigned long long)out[1]);
	CHECK_RC(goindex_hash_tokens(h, toks, 10, NONE, NONE, out, 4, &written), GOINDEX_OK);
	CHECK(written == 2 && out[1] == 12124091508212882195ull, "hash_tokens(0..9) = %zu blocks, want V6's two", written);
	CHECK_RC(goindex_hash_tokens(h, toks, 3, NONE, NONE, NULL, 0, &written), GOINDEX_OK);
	CHECK(written == 0, "hash_tokens(0..2) = %zu blocks, want 0 (V7)", written);
	CHECK_RC(goindex_hash_tokens(h, toks, 4, "adapter-a", 9, NONE, out, 4, &written), GOINDEX_OK);
	CHECK(written == 1 && out[0] == 6665157333201000639ull, "hash_tokens(0..3, lora adapter-a) = %llu, want V15", (unsigned long long)out[0]);
	CHECK_RC(goindex_hash_tokens(h, toks, 4, NONE, "tenant-a", 8, out, 4, &written), GOINDEX_OK);
	CHECK(written == 1 && out[0] == 17009624042690211646ull, "hash_tokens(0..3, ns tenant-a) = %llu, want V17", (unsigned long long)out[0]);
	CHECK_RC(goindex_hash_tokens(h, toks, 4, "adapter-a", 9, "tenant-a", 8, out, 4, &written), GOINDEX_OK);
	CHECK(written == 1 && out[0] == 8269515957840517240ull, "hash_tokens(0..3, both) = %llu, want V19", (unsigned long long)out[0]);
	close_h(h);
}

/* stored_tokens stores tokens 1..96 as blocks of 32 with router hashes. */
static void scenario_tokens(void) {
	STEP("scenario: tokens 1..96, bs 32, stored with router hashes");
	uint64_t h = open_cfg("{\"block_size\": 32}");
	uint32_t toks[96];
	for (uint32_t i = 0; i < 96; i++) toks[i] = i + 1;
	uint64_t locals[3], ext[3];
	size_t written = 0;
	CHECK_RC(goindex_hash_tokens(h, toks, 96, NONE, NONE, locals, 3, &written), GOINDEX_OK);
	chain(locals, 3, ext);
	EXPECT(h, locals, 3, "");
	CHECK_RC(goindex_insert_tokens(h, 4, 0, 1, NULL, ext, 3, toks, 96, NONE, NONE), GOINDEX_OK);
	EXPECT(h, locals, 3, "4/0=3");

	STEP("scenario: LoRA and namespace salts keep workers apart");
	const char *loras[] = {"", "my-adapter", "", ""};
	const char *nss[] = {"", "", "tenant-a", "tenant-b"};
	uint64_t q[4][3];
	for (int w = 0; w < 4; w++) {
		CHECK_RC(goindex_hash_tokens(h, toks, 96, loras[w], strlen(loras[w]), nss[w], strlen(nss[w]), q[w], 3, &written), GOINDEX_OK);
		chain(q[w], 3, ext);
		if (w > 0) CHECK_RC(goindex_insert_tokens(h, (uint64_t)w + 10, 0, 1, NULL, ext, 3, toks, 96, loras[w], strlen(loras[w]), nss[w], strlen(nss[w])), GOINDEX_OK);
	}
	EXPECT(h, q[0], 3, "4/0=3");
	EXPECT(h, q[1], 3, "11/0=3");
	EXPECT(h, q[2], 3, "12/0=3");
	EXPECT(h, q[3], 3, "13/0=3");
	close_h(h);
}

/* scenario_score checks each policy's choice on two loaded candidates. */
static void scenario_score(void) {
	STEP("score: each policy picks as its rule says");
	uint64_t h = open_cfg("{\"block_size\": 16, \"policy\": \"prefix-then-load\"}");
	CHECK_RC(store(h, 1, 0, NONE, A(1, 2, 3, 4)), GOINDEX_OK);
	CHECK_RC(store(h, 2, 0, NONE, A(1)), GOINDEX_OK);
	goindex_candidate cands[2] = {
	    {.id = 1, .rank = 0, .flags = GOINDEX_CAND_LOAD | GOINDEX_CAND_RTT, .active_prefill_tokens = 1600, .active_decode_blocks = 10, .rtt_ms = 50},
	    {.id = 2, .rank = 0, .flags = GOINDEX_CAND_LOAD | GOINDEX_CAND_RTT, .active_prefill_tokens = 0, .active_decode_blocks = 0, .rtt_ms = 1},
	};
	goindex_score_request req = {.struct_size = sizeof req, .local_hashes = (const uint64_t[]){1, 2, 3, 4}, .n_hashes = 4, .candidates = cands, .n_candidates = 2, .random_seed = 1};
	goindex_score_result res;
	const struct {
		uint32_t policy;
		uint64_t want_id;
		uint64_t want_cached;
	} cases[] = {
	    {GOINDEX_POLICY_DEFAULT, 1, 4}, /* the handle's policy: prefix-then-load */
	    {GOINDEX_POLICY_PREFIX_THEN_LOAD, 1, 4},
	    {GOINDEX_POLICY_LOAD_ONLY, 2, 1},
	    {GOINDEX_POLICY_TTFT, 2, 1}, /* 1 ms RTT and no queue beat 50 ms + 80 ms queue */
	    {GOINDEX_POLICY_CREDIT, 2, 1},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		req.policy = cases[i].policy;
		memset(&res, 0xff, sizeof res);
		res.struct_size = sizeof res;
		CHECK_RC(goindex_score(h, &req, &res), GOINDEX_OK);
		CHECK(res.struct_size == sizeof res, "score left struct_size %u, want %zu", res.struct_size, sizeof res);
		CHECK(res.id == cases[i].want_id && res.chosen == (int32_t)cases[i].want_id - 1 && res.cached_blocks == cases[i].want_cached && res.eligible == 2,
		      "score(policy %u) chose id %llu (index %d, cached %llu, eligible %u), want id %llu cached %llu eligible 2", cases[i].policy,
		      (unsigned long long)res.id, res.chosen, (unsigned long long)res.cached_blocks, res.eligible, (unsigned long long)cases[i].want_id,
		      (unsigned long long)cases[i].want_cached);
		CHECK(res.cached_tokens == res.cached_blocks * 16, "score(policy %u): cached_tokens %llu, want %llu", cases[i].policy, (unsigned long long)res.cached_tokens, (unsigned long long)res.cached_blocks * 16);
	}
	req.policy = GOINDEX_POLICY_TTFT;
	res.struct_size = sizeof res;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_OK);
	CHECK(fabs(res.cost - (res.rtt_ms + res.queue_ms + res.prefill_ms)) < 1e-9 && res.rtt_ms == 1 && res.queue_ms == 0,
	      "ttft parts: cost %g = rtt %g + queue %g + prefill %g?", res.cost, res.rtt_ms, res.queue_ms, res.prefill_ms);
	CHECK(fabs(res.prefill_ms - 48.0 / 20.0) < 1e-9, "ttft prefill_ms %g, want 3 uncached blocks * 16 tokens / 20 tokens/ms", res.prefill_ms);

	STEP("score: candidates without the signals a policy needs are not eligible");
	cands[0].flags = GOINDEX_CAND_LOAD;
	req.policy = GOINDEX_POLICY_TTFT;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_OK);
	CHECK(res.id == 2 && res.eligible == 1, "ttft with one RTT-less candidate chose %llu with eligible %u, want 2 and 1", (unsigned long long)res.id, res.eligible);
	cands[1].flags = 0;
	/* Fail open: no candidate is eligible, so the first is taken, degraded;
	 * a host with the 72-byte result of earlier headers keeps the error. */
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_OK);
	CHECK(res.flags == GOINDEX_SCORE_DEGRADED && res.degraded == GOINDEX_DEGRADED_SIGNALS_STALE && res.chosen == 0 && res.eligible == 0,
	      "score with no eligible candidate: flags %u degraded %u chosen %d eligible %u, want degraded signals-stale, the first, 0",
	      res.flags, res.degraded, res.chosen, res.eligible);
	res.struct_size = offsetof(goindex_score_result, flags);
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_ENOCANDIDATE);
	res.struct_size = sizeof res;
	req.candidates = NULL;
	req.n_candidates = 0;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_ENOCANDIDATE); /* members carry no load signals */
	close_h(h);
}

/* scenario_ckf runs mode "ckf": one cuckoo-filter lane per member. With a
 * handful of blocks in lanes sized for 1024, a fingerprint collision is
 * vanishingly rare and the data fixed, so depths equal the exact ones. */
static void scenario_ckf(void) {
	STEP("ckf: chains, parents, ranks, clear, remove_worker");
	uint64_t h = open_cfg("{\"mode\": \"ckf\", \"lanes\": 4, \"expected_blocks_per_lane\": 1024}");
	CHECK_RC(store(h, 1, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 2, 0, NONE, A(1, 2, 3)), GOINDEX_OK);
	CHECK_RC(store(h, 1, 0, A(1, 2, 3), A(4, 5, 6)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3, 4, 5, 6), "1/0=6 2/0=3");
	EXPECT(h, A(1, 2, 999), "1/0=2 2/0=2");
	CHECK_RC(store(h, 2, 0, A(1, 2, 3, 4, 5, 6), A(9, 10)), GOINDEX_EPARENT);
	CHECK_RC(store(h, 2, 1, NONE, A(1, 2)), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "1/0=3 2/0=3 2/1=2");
	goindex_counters c = stats_of(h);
	CHECK(c.mode == 2 && c.members == 3 && c.blocks == 11 && c.memory_bytes > 0 && c.capacity_omissions == 0,
	      "ckf stats: mode %u members %llu blocks %llu memory %llu omissions %llu; want 2 3 11 >0 0", c.mode, (unsigned long long)c.members,
	      (unsigned long long)c.blocks, (unsigned long long)c.memory_bytes, (unsigned long long)c.capacity_omissions);
	CHECK_RC(goindex_clear(h, 1, 0, 0), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "2/0=3 2/1=2");
	CHECK_RC(goindex_remove_worker(h, 2), GOINDEX_OK);
	EXPECT(h, A(1, 2, 3), "");

	STEP("ckf: every lane taken");
	for (uint64_t w = 10; w < 14; w++) CHECK_RC(store(h, w, 0, NONE, A(1)), GOINDEX_OK);
	CHECK_RC(store(h, 14, 0, NONE, A(1)), GOINDEX_ECAPACITY);
	EXPECT_ERROR(h, "no free lane");
	CHECK_RC(goindex_remove_rank(h, 10, 0), GOINDEX_OK);
	CHECK_RC(store(h, 14, 0, NONE, A(1)), GOINDEX_OK);
	EXPECT(h, A(1), "11/0=1 12/0=1 13/0=1 14/0=1");
	close_h(h);

	STEP("ckf: a full filter tracks blocks it cannot admit");
	h = open_cfg("{\"mode\": \"ckf\", \"lanes\": 1, \"expected_blocks_per_lane\": 1}");
	uint64_t q[64];
	size_t n = iota(q, 1, 64);
	CHECK_RC(store(h, 0, 0, NONE, q, n), GOINDEX_ECAPACITY);
	EXPECT_ERROR(h, "capacity exhausted");
	c = stats_of(h);
	CHECK(c.blocks == 64 && c.capacity_omissions > 0 && c.events_rejected == 1, "full ckf stats: blocks %llu omissions %llu rejected %llu; want 64 >0 1",
	      (unsigned long long)c.blocks, (unsigned long long)c.capacity_omissions, (unsigned long long)c.events_rejected);
	close_h(h);
}

/* ---- bad arguments ---- */

static void bad_open(void) {
	STEP("bad arguments: goindex_open");
	uint64_t h = 0;
	char big[8] = {0};
	CHECK_RC(goindex_open("{}", 2, NULL), GOINDEX_EINVAL);
	EXPECT_ERROR(0, "handle_out is NULL");
	CHECK_RC(goindex_open(NULL, 5, &h), GOINDEX_EINVAL);
	EXPECT_ERROR(0, "config_json is NULL");
	CHECK_RC(goindex_open(big, (size_t)GOINDEX_MAX_CONFIG_BYTES + 1, &h), GOINDEX_ETOOBIG);
	EXPECT_ERROR(0, "config_json length");
	const struct {
		const char *json;
		const char *fragment;
	} bad[] = {
	    {"{", "bad config"},
	    {"[]", "bad config"},
	    {"{} {}", "after the config object"},
	    {"{\"mdoe\": \"exact\"}", "mdoe"},
	    {"{\"mode\": \"fuzzy\"}", "mode \"fuzzy\""},
	    {"{\"mode\": 1}", "mode"},
	    {"{\"lanes\": 0}", "lanes 0"},
	    {"{\"lanes\": 65}", "lanes 65"},
	    {"{\"lanes\": 1.5}", "lanes"},
	    {"{\"expected_blocks_per_lane\": 0}", "expected_blocks_per_lane"},
	    {"{\"expected_blocks_per_lane\": -1}", "expected_blocks_per_lane"},
	    {"{\"expected_blocks_per_lane\": 1000000000000}", "expected_blocks_per_lane"},
	    {"{\"block_size\": 0}", "block_size 0"},
	    {"{\"block_size\": 65537}", "block_size 65537"},
	    {"{\"clear_scope\": \"pool\"}", "clear_scope"},
	    {"{\"seed\": -1}", "seed"},
	    {"{\"seed\": 18446744073709551616}", "seed"},
	    {"{\"max_kicks\": 0}", "max_kicks 0"},
	    {"{\"max_kicks\": 4097}", "max_kicks 4097"},
	    {"{\"policy\": \"round-robin\"}", "policy"},
	    {"{\"prefill_tokens_per_ms\": 0}", "prefill_tokens_per_ms"},
	    {"{\"decode_blocks_per_ms\": -2}", "decode_blocks_per_ms"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		h = 42;
		int rc = goindex_open(bad[i].json, strlen(bad[i].json), &h);
		CHECK(rc == GOINDEX_ECONFIG && h == 42, "goindex_open(%s) = %d, handle %llu; want ECONFIG, handle untouched", bad[i].json, rc, (unsigned long long)h);
		EXPECT_ERROR(0, bad[i].fragment);
	}
	const char *dup_dcs = "{\"mode\": \"global\", \"dcs\": [3, 1, 3]}";
	CHECK_RC(goindex_open(dup_dcs, strlen(dup_dcs), &h), GOINDEX_ECONFIG);
	EXPECT_ERROR(0, "dcs lists DC 3 twice");
	const char *bad_buckets = "{\"mode\": \"global\", \"buckets\": 1000}";
	CHECK_RC(goindex_open(bad_buckets, strlen(bad_buckets), &h), GOINDEX_ECONFIG);
	EXPECT_ERROR(0, "buckets");

	STEP("goindex_open: defaults, every key, and ids that are never reused");
	CHECK_RC(goindex_open(NULL, 0, &h), GOINDEX_OK);
	uint64_t first = h;
	opened[n_opened++] = h;
	close_h(h);
	const char *full = "{\"mode\": \"exact\", \"lanes\": 8, \"expected_blocks_per_lane\": 4096, \"block_size\": 64, \"clear_scope\": \"worker\","
	                   " \"seed\": 18446744073709551615, \"max_kicks\": 4096, \"policy\": \"credit\", \"prefill_tokens_per_ms\": 5.5, \"decode_blocks_per_ms\": 1}";
	h = open_cfg(full);
	CHECK(h > first, "goindex_open after a close returned %llu, want above %llu", (unsigned long long)h, (unsigned long long)first);
	close_h(h);
}

static void bad_handles(void) {
	STEP("bad arguments: unknown, zero and closed handles");
	uint64_t h = open_cfg("{}");
	close_h(h);
	CHECK_RC(goindex_close(h), GOINDEX_EHANDLE);
	const uint64_t bad[] = {0, h, 0xFFFFFFFFFFFFFFFFull};
	goindex_overlap o[1];
	goindex_counters c = {.struct_size = sizeof c};
	goindex_score_request req = {.struct_size = sizeof req};
	goindex_score_result res = {.struct_size = sizeof res};
	uint64_t out[1], one = 1;
	size_t written, lens[1] = {1}, counts[1];
	uint32_t toks[16] = {0};
	char buf[8];
	for (size_t i = 0; i < 3; i++) {
		uint64_t b = bad[i];
		CHECK_RC(goindex_insert(b, 0, 0, 0, NULL, &one, &one, 1), GOINDEX_EHANDLE);
		CHECK_RC(goindex_insert_tokens(b, 0, 0, 0, NULL, &one, 1, toks, 16, NONE, NONE), GOINDEX_EHANDLE);
		CHECK_RC(goindex_remove(b, 0, 0, 0, &one, 1), GOINDEX_EHANDLE);
		CHECK_RC(goindex_clear(b, 0, 0, 0), GOINDEX_EHANDLE);
		CHECK_RC(goindex_remove_worker(b, 0), GOINDEX_EHANDLE);
		CHECK_RC(goindex_remove_rank(b, 0, 0), GOINDEX_EHANDLE);
		CHECK_RC(goindex_hash_tokens(b, toks, 16, NONE, NONE, out, 1, &written), GOINDEX_EHANDLE);
		CHECK_RC(goindex_probe(b, &one, 1, o, 1, &written), GOINDEX_EHANDLE);
		CHECK_RC(goindex_probe_batch(b, &one, lens, 1, o, 1, counts, &written), GOINDEX_EHANDLE);
		CHECK_RC(goindex_score(b, &req, &res), GOINDEX_EHANDLE);
		CHECK_RC(goindex_apply_frame(b, (const uint8_t *)"x", 1), GOINDEX_EHANDLE);
		CHECK_RC(goindex_attach_replica(b, "/x", 2), GOINDEX_EHANDLE);
		CHECK_RC(goindex_stats(b, &c), GOINDEX_EHANDLE);
		if (b != 0) CHECK_RC(goindex_last_error(b, buf, sizeof buf, NULL), GOINDEX_EHANDLE);
		CHECK_RC(goindex_close(b), GOINDEX_EHANDLE);
	}
}

static void bad_events(void) {
	STEP("bad arguments: insert, insert_tokens, remove");
	uint64_t h = open_cfg("{\"block_size\": 4}");
	uint64_t one[1] = {1};
	uint32_t toks[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	CHECK_RC(goindex_insert(h, 0, 0, 0, NULL, NULL, one, 1), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "goindex_insert: ffi: invalid argument: external_hashes is NULL with length 1");
	CHECK_RC(goindex_insert(h, 0, 0, 0, NULL, one, NULL, 1), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "local_hashes is NULL");
	CHECK_RC(goindex_insert(h, 0, 0, 0, NULL, one, one, (size_t)GOINDEX_MAX_BLOCKS + 1), GOINDEX_ETOOBIG);
	EXPECT_ERROR(h, "external_hashes length 1048577 over 1048576");
	CHECK_RC(goindex_insert(h, 0, 0, 0, NULL, one, one, SIZE_MAX), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_insert(h, 0, 0, 0, NULL, NULL, NULL, 0), GOINDEX_OK); /* an empty store is allowed */

	CHECK_RC(goindex_insert_tokens(h, 0, 0, 0, NULL, NULL, 1, toks, 4, NONE, NONE), GOINDEX_EINVAL);
	CHECK_RC(goindex_insert_tokens(h, 0, 0, 0, NULL, one, 1, NULL, 4, NONE, NONE), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "tokens is NULL");
	CHECK_RC(goindex_insert_tokens(h, 0, 0, 0, NULL, one, 1, toks, 3, NONE, NONE), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "need 4 tokens, got 3");
	CHECK_RC(goindex_insert_tokens(h, 0, 0, 0, NULL, one, 1, toks, (size_t)GOINDEX_MAX_TOKENS + 1, NONE, NONE), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_insert_tokens(h, 0, 0, 0, NULL, one, 1, toks, 4, NULL, 3, NONE), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "lora_name is NULL");
	CHECK_RC(goindex_insert_tokens(h, 0, 0, 0, NULL, one, 1, toks, 4, "x", (size_t)GOINDEX_MAX_NAME_BYTES + 1, NONE), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_insert_tokens(h, 0, 0, 0, NULL, one, 1, toks, 4, NONE, NULL, 3), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "cache_namespace is NULL");
	CHECK_RC(goindex_insert_tokens(h, 0, 0, 0, NULL, one, 1, toks, 4, NONE, "x", (size_t)GOINDEX_MAX_NAME_BYTES + 1), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_insert_tokens(h, 0, 0, 0, NULL, one, (size_t)GOINDEX_MAX_BLOCKS + 1, toks, 4, NONE, NONE), GOINDEX_ETOOBIG);
	const uint64_t unheld = 5;
	CHECK_RC(goindex_insert_tokens(h, 0, 0, 0, &unheld, one, 1, toks, 8, NONE, NONE), GOINDEX_EPARENT);

	CHECK_RC(goindex_remove(h, 0, 0, 0, NULL, 1), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "goindex_remove: ffi: invalid argument: external_hashes is NULL");
	CHECK_RC(goindex_remove(h, 0, 0, 0, one, (size_t)GOINDEX_MAX_BLOCKS + 1), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_remove(h, 0, 0, 0, NULL, 0), GOINDEX_OK);

	goindex_counters c = stats_of(h);
	CHECK(c.blocks == 0 && c.events_applied == 2 && c.events_rejected == 1, "after bad events: blocks %llu applied %llu rejected %llu, want 0 2 1 (argument errors are not events)",
	      (unsigned long long)c.blocks, (unsigned long long)c.events_applied, (unsigned long long)c.events_rejected);
	close_h(h);
}

static void bad_outputs(void) {
	STEP("bad arguments: hash_tokens");
	uint64_t h = open_cfg("{\"block_size\": 2}");
	uint32_t toks[6] = {1, 2, 3, 4, 5, 6};
	uint64_t out[3] = {0, 0, 0xAAAA};
	size_t written = 0;
	CHECK_RC(goindex_hash_tokens(h, NULL, 6, NONE, NONE, out, 3, &written), GOINDEX_EINVAL);
	CHECK_RC(goindex_hash_tokens(h, toks, (size_t)GOINDEX_MAX_TOKENS + 1, NONE, NONE, out, 3, &written), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_hash_tokens(h, toks, 6, NULL, 1, NONE, out, 3, &written), GOINDEX_EINVAL);
	CHECK_RC(goindex_hash_tokens(h, toks, 6, NONE, "x", (size_t)GOINDEX_MAX_NAME_BYTES + 1, out, 3, &written), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_hash_tokens(h, toks, 6, NONE, NONE, NULL, 3, &written), GOINDEX_EINVAL);
	CHECK_RC(goindex_hash_tokens(h, toks, 6, NONE, NONE, out, 3, NULL), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "written is NULL");
	CHECK_RC(goindex_hash_tokens(h, toks, 6, NONE, NONE, out, 2, &written), GOINDEX_EBUFFER);
	CHECK(written == 3 && out[2] == 0xAAAA, "hash_tokens into 2 slots: written %zu (want 3 needed), out[2] %llx (want untouched)", written, (unsigned long long)out[2]);
	EXPECT_ERROR(h, "needs 3 entries, capacity 2");
	CHECK_RC(goindex_hash_tokens(h, toks, 6, NONE, NONE, NULL, 0, &written), GOINDEX_EBUFFER);
	CHECK(written == 3, "hash_tokens size query: written %zu, want 3", written);

	STEP("bad arguments: probe");
	CHECK_RC(store(h, 0, 0, NONE, A(1, 2)), GOINDEX_OK);
	CHECK_RC(store(h, 1, 0, NONE, A(1)), GOINDEX_OK);
	goindex_overlap o[2];
	memset(o, 0xAB, sizeof o);
	CHECK_RC(goindex_probe(h, NULL, 1, o, 2, &written), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "goindex_probe: ffi: invalid argument: local_hashes is NULL with length 1");
	CHECK_RC(goindex_probe(h, (const uint64_t[]){1}, (size_t)GOINDEX_MAX_BLOCKS + 1, o, 2, &written), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_probe(h, (const uint64_t[]){1}, 1, NULL, 2, &written), GOINDEX_EINVAL);
	CHECK_RC(goindex_probe(h, (const uint64_t[]){1}, 1, o, 2, NULL), GOINDEX_EINVAL);
	CHECK_RC(goindex_probe(h, (const uint64_t[]){1, 2}, 2, o, 1, &written), GOINDEX_EBUFFER);
	CHECK(written == 2 && o[1].id == 0xABABABABABABABABull, "probe into 1 slot: written %zu (want 2), o[1] touched: %llx", written, (unsigned long long)o[1].id);
	CHECK_RC(goindex_probe(h, (const uint64_t[]){1, 2}, 2, NULL, 0, &written), GOINDEX_EBUFFER);
	CHECK(written == 2, "probe size query: written %zu, want 2", written);
	CHECK_RC(goindex_probe(h, (const uint64_t[]){7}, 1, NULL, 0, &written), GOINDEX_OK);
	CHECK(written == 0, "probe miss with no buffer: written %zu, want 0", written);

	STEP("bad arguments: probe_batch");
	const uint64_t qs[] = {1, 2, 1, 9};
	size_t lens[3] = {2, 1, 1}, counts[3] = {9, 9, 9};
	goindex_overlap ob[8];
	CHECK_RC(goindex_probe_batch(h, qs, lens, 3, ob, 8, counts, &written), GOINDEX_OK);
	char got[128];
	format(got, sizeof got, ob, written);
	CHECK(written == 4 && counts[0] == 2 && counts[1] == 2 && counts[2] == 0 && strcmp(got, "0/0=2 1/0=1 0/0=1 1/0=1") == 0,
	      "probe_batch = %zu entries \"%s\", counts %zu %zu %zu; want 4 \"0/0=2 1/0=1 0/0=1 1/0=1\", 2 2 0", written, got, counts[0], counts[1], counts[2]);
	CHECK_RC(goindex_probe_batch(h, qs, lens, 3, ob, 3, counts, &written), GOINDEX_EBUFFER);
	CHECK(written == 4, "probe_batch into 3 slots: written %zu, want 4", written);
	CHECK_RC(goindex_probe_batch(h, NULL, lens, 3, ob, 8, counts, &written), GOINDEX_EINVAL);
	CHECK_RC(goindex_probe_batch(h, qs, NULL, 3, ob, 8, counts, &written), GOINDEX_EINVAL);
	CHECK_RC(goindex_probe_batch(h, qs, lens, 3, ob, 8, NULL, &written), GOINDEX_EINVAL);
	CHECK_RC(goindex_probe_batch(h, qs, lens, 3, NULL, 8, counts, &written), GOINDEX_EINVAL);
	CHECK_RC(goindex_probe_batch(h, qs, lens, 3, ob, 8, counts, NULL), GOINDEX_EINVAL);
	CHECK_RC(goindex_probe_batch(h, qs, lens, (size_t)GOINDEX_MAX_BATCH + 1, ob, 8, counts, &written), GOINDEX_ETOOBIG);
	size_t huge[17];
	for (size_t i = 0; i < 17; i++) huge[i] = GOINDEX_MAX_BLOCKS;
	CHECK_RC(goindex_probe_batch(h, qs, huge, 17, ob, 8, counts, &written), GOINDEX_ETOOBIG);
	EXPECT_ERROR(h, "over 16777216");
	huge[0] = (size_t)GOINDEX_MAX_BLOCKS + 1;
	CHECK_RC(goindex_probe_batch(h, qs, huge, 1, ob, 8, counts, &written), GOINDEX_ETOOBIG);
	EXPECT_ERROR(h, "lengths[0]");
	CHECK_RC(goindex_probe_batch(h, NULL, NULL, 0, NULL, 0, NULL, &written), GOINDEX_OK);
	CHECK(written == 0, "empty probe_batch: written %zu, want 0", written);
	close_h(h);
}

static void bad_score(void) {
	STEP("bad arguments: score");
	uint64_t h = open_cfg("{}");
	goindex_candidate cand = {.id = 1, .flags = GOINDEX_CAND_LOAD};
	goindex_score_request req = {.struct_size = sizeof req, .local_hashes = (const uint64_t[]){1}, .n_hashes = 1, .candidates = &cand, .n_candidates = 1, .policy = GOINDEX_POLICY_LOAD_ONLY};
	goindex_score_result res = {.struct_size = sizeof res};
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_OK);
	CHECK_RC(goindex_score(h, NULL, &res), GOINDEX_EINVAL);
	CHECK_RC(goindex_score(h, &req, NULL), GOINDEX_EINVAL);
	res.struct_size = offsetof(goindex_score_result, flags) - 1; /* below even the 72-byte result of earlier headers */
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "result struct_size");
	res.struct_size = sizeof res;
	req.struct_size = 8;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "request struct_size 8");
	req.struct_size = sizeof req;
	req.policy = 5;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "policy 5");
	req.policy = GOINDEX_POLICY_LOAD_ONLY;
	req.temperature = -1;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_EINVAL);
	req.temperature = NAN;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "temperature");
	req.temperature = 0.5;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_OK);
	req.temperature = 0;
	cand.flags = 8;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "candidates[0]: ffi: invalid argument: unknown flags 0x8");
	cand.flags = GOINDEX_CAND_LOAD | GOINDEX_CAND_RTT;
	cand.rtt_ms = INFINITY;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_EINVAL);
	cand.rtt_ms = -1;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "rtt_ms");
	cand.rtt_ms = 3;
	req.n_hashes = (size_t)GOINDEX_MAX_BLOCKS + 1;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_ETOOBIG);
	req.n_hashes = 1;
	req.local_hashes = NULL;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_EINVAL);
	req.local_hashes = (const uint64_t[]){1};
	req.n_candidates = (size_t)GOINDEX_MAX_CANDIDATES + 1;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_ETOOBIG);
	req.candidates = NULL;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_EINVAL);
	req.candidates = &cand;
	req.n_candidates = 1;
	req.isl_tokens = (uint64_t)GOINDEX_MAX_TOKENS + 1;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_ETOOBIG);
	req.isl_tokens = 0;
	req.n_candidates = 0;
	CHECK_RC(goindex_score(h, &req, &res), GOINDEX_ENOCANDIDATE);
	EXPECT_ERROR(h, "no eligible candidate");
	close_h(h);
}

static void bad_misc(void) {
	STEP("bad arguments: apply_frame, attach_replica, set_rtt on an exact handle");
	uint64_t h = open_cfg("{}");
	const uint8_t frame[4] = {1, 2, 3, 4};
	CHECK_RC(goindex_apply_frame(h, NULL, 4), GOINDEX_EINVAL);
	CHECK_RC(goindex_apply_frame(h, frame, (size_t)GOINDEX_MAX_FRAME_BYTES + 1), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_apply_frame(h, frame, 4), GOINDEX_EMODE);
	EXPECT_ERROR(h, "goindex_apply_frame: hostindex: not available in this mode: the index is in exact mode");
	CHECK_RC(goindex_attach_replica(h, NULL, 4), GOINDEX_EINVAL);
	CHECK_RC(goindex_attach_replica(h, "/dev/shm/x", (size_t)GOINDEX_MAX_NAME_BYTES + 1), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_attach_replica(h, "/dev/shm/x", 10), GOINDEX_EMODE);
	EXPECT_ERROR(h, "goindex_attach_replica: hostindex: not available in this mode");
	CHECK_RC(goindex_set_rtt(h, 1, NAN), GOINDEX_EINVAL);
	CHECK_RC(goindex_set_rtt(h, 1, 1.0), GOINDEX_EMODE);

	STEP("bad arguments: stats and struct_size");
	CHECK_RC(goindex_stats(h, NULL), GOINDEX_EINVAL);
	unsigned char raw[sizeof(goindex_counters) + 8];
	memset(raw, 0xCD, sizeof raw);
	goindex_counters *c = (goindex_counters *)(void *)raw;
	c->struct_size = 7;
	CHECK_RC(goindex_stats(h, c), GOINDEX_EINVAL);
	EXPECT_ERROR(h, "struct_size 7");
	c->struct_size = 8;
	CHECK_RC(goindex_stats(h, c), GOINDEX_OK);
	CHECK(c->struct_size == 8 && c->mode == 1 && raw[8] == 0xCD, "stats with struct_size 8: struct_size %u mode %u byte 8 %#x; want 8, 1, untouched 0xcd", c->struct_size, c->mode, raw[8]);
	c->struct_size = sizeof raw;
	CHECK_RC(goindex_stats(h, c), GOINDEX_OK);
	CHECK(raw[sizeof(goindex_counters)] == 0xCD && c->replica_generation == 0, "stats with a larger struct_size wrote past sizeof(goindex_counters)");

	STEP("goindex_strerror: static names");
	const char *seen[17];
	for (int code = 0; code >= -15; code--) {
		const char *s = goindex_strerror(code);
		seen[-code] = s;
		CHECK(s && *s && strcmp(s, "unknown error") != 0, "goindex_strerror(%d) = \"%s\", want a name", code, s ? s : "(null)");
		CHECK(goindex_strerror(code) == s, "goindex_strerror(%d) returned a different pointer the second time", code);
		for (int j = 0; j < -code; j++) CHECK(strcmp(seen[j], s) != 0, "goindex_strerror(%d) = goindex_strerror(%d) = \"%s\"", code, -j, s);
	}
	CHECK(strcmp(goindex_strerror(-16), "unknown error") == 0 && strcmp(goindex_strerror(1), "unknown error") == 0, "goindex_strerror of unknown codes must be \"unknown error\"");
	CHECK(strcmp(goindex_strerror(GOINDEX_EBUFFER), "output buffer too small") == 0, "goindex_strerror(EBUFFER) = \"%s\"", goindex_strerror(GOINDEX_EBUFFER));

	STEP("goindex_last_error: truncation, NUL, needed");
	uint64_t fresh = open_cfg("{}");
	char buf[64];
	size_t needed = 99;
	memset(buf, 'x', sizeof buf);
	CHECK_RC(goindex_last_error(fresh, buf, sizeof buf, &needed), GOINDEX_OK);
	CHECK(buf[0] == 0 && needed == 1, "last_error of a fresh handle = \"%s\" (needed %zu), want \"\" (1)", buf, needed);
	close_h(fresh);
	CHECK_RC(goindex_stats(h, NULL), GOINDEX_EINVAL);
	const char *full = "goindex_stats: ffi: invalid argument: stats is NULL";
	CHECK_RC(goindex_last_error(h, NULL, 0, &needed), GOINDEX_OK);
	CHECK(needed == strlen(full) + 1, "last_error needed = %zu, want %zu", needed, strlen(full) + 1);
	CHECK_RC(goindex_last_error(h, NULL, 3, &needed), GOINDEX_EINVAL);
	memset(buf, 'x', sizeof buf);
	CHECK_RC(goindex_last_error(h, buf, 6, &needed), GOINDEX_OK);
	CHECK(memcmp(buf, "goind\0x", 7) == 0 && needed == strlen(full) + 1, "last_error into 6 bytes = \"%.6s\" then %#x, want \"goind\", NUL, untouched", buf, buf[6]);
	memset(buf, 'x', sizeof buf);
	CHECK_RC(goindex_last_error(h, buf, 1, NULL), GOINDEX_OK);
	CHECK(buf[0] == 0 && buf[1] == 'x', "last_error into 1 byte must write just the NUL");
	CHECK_RC(goindex_last_error(h, buf, sizeof buf, NULL), GOINDEX_OK);
	CHECK(strcmp(buf, full) == 0, "last_error = \"%s\", want \"%s\"", buf, full);
	CHECK_RC(goindex_probe(h, NULL, 0, NULL, 0, &needed), GOINDEX_OK);
	CHECK_RC(goindex_last_error(h, buf, sizeof buf, NULL), GOINDEX_OK);
	CHECK(strcmp(buf, full) == 0, "a successful call changed last_error to \"%s\"", buf);
	close_h(h);
}

/* ---- stress ---- */

enum { stress_members = 4, stress_depth = 48, stress_readers = 4 };

static _Atomic uint32_t max_stored[stress_members]; /* deepest chain ever stored per worker */
static atomic_int writer_done;
static uint64_t stress_handle;

static void stress_query(uint64_t *q) {
	for (int i = 0; i < stress_depth; i++) q[i] = (uint64_t)i + 1;
}

/* check_overlaps checks one result set: sorted, known members, bounded. */
static int check_overlaps(const goindex_overlap *o, size_t n, const char *what) {
	for (size_t i = 0; i < n; i++) {
		if (o[i].id >= stress_members || o[i].rank != 0 || o[i].blocks == 0) {
			fprintf(stderr, "FAIL [stress] %s entry %zu = %llu/%u=%u: unknown member or zero depth\n", what, i, (unsigned long long)o[i].id, o[i].rank, o[i].blocks);
			return 1;
		}
		uint32_t bound = atomic_load(&max_stored[o[i].id]);
		if (o[i].blocks > bound) {
			fprintf(stderr, "FAIL [stress] %s: worker %llu depth %u, but at most %u blocks were ever stored\n", what, (unsigned long long)o[i].id, o[i].blocks, bound);
			return 1;
		}
		if (i > 0 && o[i - 1].id >= o[i].id) {
			fprintf(stderr, "FAIL [stress] %s: entries %zu and %zu out of (id, rank) order\n", what, i - 1, i);
			return 1;
		}
	}
	return 0;
}

static void *stress_reader(void *arg) {
	long id = (long)arg;
	uint64_t q[2 * stress_depth];
	stress_query(q);
	stress_query(q + stress_depth);
	goindex_overlap out[2 * stress_members];
	size_t written, counts[2], lens[2] = {stress_depth, stress_depth / 2};
	long iters = 0, bad = 0;
	while (!atomic_load(&writer_done) || iters < 100) {
		int rc;
		switch (iters++ % 4) {
		case 0:
			rc = goindex_probe(stress_handle, q, stress_depth, out, stress_members, &written);
			bad += rc != GOINDEX_OK || check_overlaps(out, written, "probe");
			break;
		case 1:
			rc = goindex_probe_batch(stress_handle, q, lens, 2, out, 2 * stress_members, counts, &written);
			bad += rc != GOINDEX_OK || counts[0] + counts[1] != written || check_overlaps(out, counts[0], "batch[0]") || check_overlaps(out + counts[0], counts[1], "batch[1]");
			break;
		case 2: {
			goindex_candidate cands[stress_members];
			for (int m = 0; m < stress_members; m++) cands[m] = (goindex_candidate){.id = (uint64_t)m, .flags = GOINDEX_CAND_LOAD};
			goindex_score_request req = {.struct_size = sizeof req, .policy = GOINDEX_POLICY_PREFIX_THEN_LOAD, .local_hashes = q, .n_hashes = stress_depth, .candidates = cands, .n_candidates = stress_members, .random_seed = (uint64_t)id + 1};
			goindex_score_result res = {.struct_size = sizeof res};
			rc = goindex_score(stress_handle, &req, &res);
			bad += rc != GOINDEX_OK || res.id >= stress_members || res.cached_blocks > atomic_load(&max_stored[res.id]);
			break;
		}
		default: {
			goindex_counters c = {.struct_size = sizeof c};
			rc = goindex_stats(stress_handle, &c);
			bad += rc != GOINDEX_OK || c.members > stress_members;
		}
		}
		if (bad) break;
	}
	return (void *)bad;
}

static void stress(void) {
	STEP("stress: probes on 4 threads while one thread applies events");
	stress_handle = open_cfg("{}");
	pthread_t readers[stress_readers];
	for (long i = 0; i < stress_readers; i++) CHECK(pthread_create(&readers[i], NULL, stress_reader, (void *)i) == 0, "pthread_create");
	uint64_t q[stress_depth], ext[stress_depth];
	stress_query(q);
	chain(q, stress_depth, ext);
	uint64_t rng = 12345;
	if (getenv("GOINDEX_SEED")) rng = strtoull(getenv("GOINDEX_SEED"), NULL, 10);
	uint32_t held[stress_members] = {0};
	const int rounds = 3000;
	for (int i = 0; i < rounds; i++) {
		rng = mix64(rng + 0x9E3779B97F4A7C15ull);
		uint64_t w = rng % stress_members;
		uint32_t k = (uint32_t)(rng >> 8) % stress_depth + 1;
		int rc = GOINDEX_OK;
		switch ((rng >> 32) % 5) {
		case 0:
		case 1: /* extend the held prefix to k blocks */
			if (k > held[w]) {
				uint32_t bound = atomic_load(&max_stored[w]);
				if (k > bound) atomic_store(&max_stored[w], k);
				rc = goindex_insert(stress_handle, w, 0, (uint64_t)i, held[w] ? &ext[held[w] - 1] : NULL, ext + held[w], q + held[w], k - held[w]);
				held[w] = k;
			}
			break;
		case 2: /* cut the chain at k: the rest becomes unreachable */
			if (k <= held[w]) {
				rc = goindex_remove(stress_handle, w, 0, (uint64_t)i, &ext[k - 1], 1);
				held[w] = k - 1;
			}
			break;
		case 3:
			rc = goindex_clear(stress_handle, w, 0, (uint64_t)i);
			held[w] = 0;
			break;
		default:
			rc = goindex_remove_worker(stress_handle, w);
			held[w] = 0;
		}
		CHECK(rc == GOINDEX_OK, "stress event %d on worker %llu = %d (%s), seed GOINDEX_SEED=%llu", i, (unsigned long long)w, rc, goindex_strerror(rc), (unsigned long long)rng);
	}
	atomic_store(&writer_done, 1);
	for (int i = 0; i < stress_readers; i++) {
		void *bad = NULL;
		pthread_join(readers[i], &bad);
		CHECK(bad == NULL, "stress reader %d saw %ld inconsistent results", i, (long)bad);
	}

	STEP("stress: the final state is exactly the writer's");
	char want[128] = "", got[128];
	size_t off = 0;
	for (int w = 0; w < stress_members; w++)
		if (held[w]) off += (size_t)snprintf(want + off, sizeof want - off, "%s%d/0=%u", off ? " " : "", w, held[w]);
	goindex_overlap out[stress_members];
	size_t written = 0;
	CHECK_RC(goindex_probe(stress_handle, q, stress_depth, out, stress_members, &written), GOINDEX_OK);
	format(got, sizeof got, out, written);
	CHECK(strcmp(got, want) == 0, "after the stress, probe = \"%s\", want \"%s\"", got, want);
	close_h(stress_handle);
}

int main(void) {
	Dl_info info;
	if (dladdr((void *)goindex_abi_version, &info) && info.dli_fname) printf("library: %s\n", info.dli_fname);
	STEP("goindex_abi_version");
	CHECK(goindex_abi_version() == GOINDEX_ABI_VERSION, "goindex_abi_version() = %u, want %d", goindex_abi_version(), GOINDEX_ABI_VERSION);

	scenario_basics();
	scenario_mid_chain();
	scenario_workers();
	scenario_ranks();
	scenario_no_effect();
	scenario_long();
	scenario_regressions();
	scenario_hashing();
	scenario_tokens();
	scenario_score();
	scenario_ckf();
	bad_open();
	bad_handles();
	bad_events();
	bad_outputs();
	bad_score();
	bad_misc();
	stress();
	no_handle_left(21);

	if (failures) {
		fprintf(stderr, "tests/c: %d checks failed\n", failures);
		return 1;
	}
	printf("tests/c: all checks passed (%zu handles opened and closed)\n", n_opened);
	return 0;
}
