/* global_test.c: global mode of libgoindex.so from C (run by tests/c/run.sh).
 *
 *   global_test frames SCRIPT
 *       runs the frames scenario tests/c/fixture wrote (relay frames of
 *       simulated DCs: snapshots in chunks, deltas, a duplicate, a gap that
 *       faults one lane while the others serve, the snapshot that recovers
 *       it, foreign and malformed frames, drain markers, a relay restart,
 *       load reports, RTTs and a score), every probe against the DCs' exact
 *       depths, plus the bad-argument paths of the global calls;
 *   global_test replica PATH SCRIPT FIXTURE
 *       attaches the replica file at PATH (variant 1 of the replica
 *       scenario, written by FIXTURE), runs variant 1's lines, then runs
 *       "FIXTURE replica PATH 2" while four pthreads probe, so the layout
 *       generation changes under them: every answer must belong to one
 *       generation; then variant 2's lines, and bad replica files; then the
 *       file is truncated in place under the probing threads (their
 *       answers go empty, the process lives) and written again; last,
 *       handles attached to it are closed while four threads probe, score
 *       and read stats through them (each call answers OK, then EHANDLE
 *       for good);
 *   global_test attach PATH SCRIPT
 *       attaches the replica file at PATH, written by a live `goindex
 *       consume` (tests/e2e), and runs SCRIPT's lines: its "atleast" probes
 *       hold each DC's exact depths, which no lane may report below.
 * Both end by checking that no handle is left open. Script lines are
 * documented in tests/c/fixture/script.go. Exit status 0 when every check
 * passed. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "goindex.h"
#include "check.h"
#include "handles.h"

static char step_buf[256];

/* ---- probes as strings: "dc/lane=blocks dc/lane=blocks" ---- */

static int probe_str(uint64_t h, const uint64_t *q, size_t n, char *buf, size_t cap) {
	goindex_overlap out[64];
	size_t written = 0, off = 0;
	int rc = goindex_probe(h, q, n, out, 64, &written);
	buf[0] = 0;
	for (size_t i = 0; rc == GOINDEX_OK && i < written && off < cap; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%llu/%u=%u", i ? " " : "", (unsigned long long)out[i].id, out[i].rank, out[i].blocks);
	return rc;
}

/* ---- the script runner (tests/c/fixture/script.go) ---- */

/* A parsed script line: its words, in place in the line's buffer. */
typedef struct {
	int no;
	char *w[4096 + 64];
	size_t n;
} line_t;

static uint64_t u64_at(const line_t *l, size_t i) {
	if (i >= l->n) {
		fail_at(__LINE__, "script line %d: missing field %zu", l->no, i);
		exit(1);
	}
	errno = 0;
	char *end;
	unsigned long long v = strtoull(l->w[i], &end, 10);
	if (errno || *end) {
		fail_at(__LINE__, "script line %d: field %zu \"%s\" is not a number", l->no, i, l->w[i]);
		exit(1);
	}
	return v;
}

/* hashes reads "n h1 .. hn" from word i into q and returns the next word. */
static size_t hashes(const line_t *l, size_t i, uint64_t *q, size_t *n) {
	*n = u64_at(l, i);
	if (*n > 256) {
		fail_at(__LINE__, "script line %d: %zu hashes, at most 256", l->no, *n);
		exit(1);
	}
	for (size_t j = 0; j < *n; j++) q[j] = u64_at(l, i + 1 + j);
	return i + 1 + *n;
}

static size_t unhex(const char *s, uint8_t *out, size_t cap) {
	size_t n = strlen(s) / 2;
	if (n > cap) return (size_t)-1;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1) return (size_t)-1;
		out[i] = (uint8_t)v;
	}
	return n;
}

static uint8_t frame_buf[8 << 20];

/* "atleast" probes run, and entries found beyond the exact depths given
 * (fingerprint collisions: lanes deeper than listed, or not listed). */
static long atleast_probes, atleast_over;

/* at_least checks one "atleast" line from word i: every listed (dc, lane)
 * is reported at least that deep, and no entry deeper than the query. */
static void at_least(uint64_t h, const line_t *l, size_t i, const uint64_t *q, size_t nq) {
	goindex_overlap out[64];
	size_t written = 0;
	int rc = goindex_probe(h, q, nq, out, 64, &written);
	atleast_probes++;
	CHECK(rc == GOINDEX_OK, "goindex_probe(%zu hashes) = %d (%s): %s", nq, rc, goindex_strerror(rc), last_error(h));
	if (rc != GOINDEX_OK) return;
	size_t k = u64_at(l, i);
	int matched[64] = {0};
	for (size_t e = 0; e < k; e++) {
		uint64_t dc = u64_at(l, i + 1 + 3 * e), lane = u64_at(l, i + 2 + 3 * e), blocks = u64_at(l, i + 3 + 3 * e);
		size_t j = 0;
		while (j < written && !(out[j].id == dc && out[j].rank == lane)) j++;
		uint64_t got = j < written ? out[j].blocks : 0;
		if (j < written) matched[j] = 1;
		CHECK(got >= blocks, "goindex_probe(%zu hashes) DC %llu lane %llu = %llu blocks, below its exact depth %llu", nq,
		      (unsigned long long)dc, (unsigned long long)lane, (unsigned long long)got, (unsigned long long)blocks);
		if (got > blocks) atleast_over++;
	}
	for (size_t j = 0; j < written; j++) {
		CHECK(out[j].blocks <= nq, "goindex_probe(%zu hashes) DC %llu lane %u = %u blocks, deeper than the query", nq,
		      (unsigned long long)out[j].id, out[j].rank, out[j].blocks);
		if (!matched[j]) atleast_over++;
	}
}

/* want_probe formats the expected "k × dc lane blocks" from word i. */
static void want_probe(const line_t *l, size_t i, char *buf, size_t cap) {
	size_t k = u64_at(l, i), off = 0;
	buf[0] = 0;
	for (size_t e = 0; e < k && off < cap; e++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%llu/%llu=%llu", e ? " " : "", (unsigned long long)u64_at(l, i + 1 + 3 * e),
		                        (unsigned long long)u64_at(l, i + 2 + 3 * e), (unsigned long long)u64_at(l, i + 3 + 3 * e));
}

static void run_line(uint64_t h, line_t *l) {
	const char *op = l->w[0];
	snprintf(step_buf, sizeof step_buf, "script line %d: %s %s", l->no, op, l->n > 1 ? l->w[1] : "");
	step = step_buf;
	uint64_t q[256];
	size_t nq;
	char got[2048], want[2048];
	if (!strcmp(op, "apply")) {
		int wantrc = (int)strtol(l->w[2], NULL, 10);
		size_t n = unhex(l->w[3], frame_buf, sizeof frame_buf);
		CHECK(n != (size_t)-1, "frame is not hex");
		int rc = goindex_apply_frame(h, frame_buf, n);
		CHECK(rc == wantrc, "goindex_apply_frame(%zu bytes) = %d (%s), want %d (%s): %s", n, rc, goindex_strerror(rc), wantrc,
		      goindex_strerror(wantrc), last_error(h));
	} else if (!strcmp(op, "rtt")) {
		CHECK_RC(goindex_set_rtt(h, u64_at(l, 1), strtod(l->w[2], NULL)), GOINDEX_OK);
	} else if (!strcmp(op, "probe")) {
		size_t i = hashes(l, 2, q, &nq);
		want_probe(l, i, want, sizeof want);
		int rc = probe_str(h, q, nq, got, sizeof got);
		CHECK(rc == GOINDEX_OK && !strcmp(got, want), "goindex_probe(%zu hashes) = %d, \"%s\"; want \"%s\"", nq, rc, got, want);
	} else if (!strcmp(op, "atleast")) {
		size_t i = hashes(l, 2, q, &nq);
		at_least(h, l, i, q, nq);
	} else if (!strcmp(op, "score")) {
		uint32_t policy = (uint32_t)u64_at(l, 2);
		size_t i = hashes(l, 3, q, &nq);
		int wantrc = (int)strtol(l->w[i], NULL, 10);
		goindex_score_request req = {.struct_size = sizeof req, .policy = policy, .local_hashes = q, .n_hashes = nq, .random_seed = 1};
		goindex_score_result res = {.struct_size = sizeof res};
		int rc = goindex_score(h, &req, &res);
		CHECK(rc == wantrc, "goindex_score = %d (%s), want %d: %s", rc, goindex_strerror(rc), wantrc, last_error(h));
		uint64_t degraded = u64_at(l, i + 4);
		if (rc == GOINDEX_OK && wantrc == GOINDEX_OK) {
			uint64_t lane = u64_at(l, i + 1), dc = u64_at(l, i + 2), eligible = u64_at(l, i + 3);
			CHECK((uint64_t)res.chosen == lane && res.id == dc && res.rank == lane && res.eligible == eligible,
			      "goindex_score chose lane %d (DC %llu, rank %u) of %u eligible, want lane %llu (DC %llu) of %llu", res.chosen,
			      (unsigned long long)res.id, res.rank, res.eligible, (unsigned long long)lane, (unsigned long long)dc, (unsigned long long)eligible);
			CHECK(res.degraded == degraded && (res.flags == GOINDEX_SCORE_DEGRADED) == (degraded != 0),
			      "goindex_score degraded %u (flags %u), want %llu", res.degraded, res.flags, (unsigned long long)degraded);
			CHECK(degraded || (fabs(res.cost - (res.rtt_ms + res.queue_ms + res.prefill_ms)) < 1e-9 && res.rtt_ms > 0),
			      "ttft cost %g is not rtt %g + queue %g + prefill %g with a measured RTT", res.cost, res.rtt_ms, res.queue_ms, res.prefill_ms);
		}
		if (degraded) {
			/* A host built against the 72-byte result keeps the old contract. */
			res.struct_size = offsetof(goindex_score_result, flags);
			CHECK_RC(goindex_score(h, &req, &res), GOINDEX_ENOCANDIDATE);
		}
	} else if (!strcmp(op, "stats")) {
		goindex_counters c = stats_of(h);
		uint64_t got_v[5] = {c.lanes_ready, c.frames_applied, c.frames_rejected, c.frames_ignored, c.replica_generation};
		const char *names[5] = {"lanes_ready", "frames_applied", "frames_rejected", "frames_ignored", "replica_generation"};
		for (int i = 0; i < 5; i++)
			CHECK(got_v[i] == u64_at(l, 1 + (size_t)i), "goindex_stats %s = %llu, want %llu", names[i], (unsigned long long)got_v[i],
			      (unsigned long long)u64_at(l, 1 + (size_t)i));
		CHECK(c.mode == 3, "goindex_stats mode = %u, want 3 (global)", c.mode);
	} else {
		fail_at(__LINE__, "unknown op \"%s\"", op);
	}
}

/* The script, split into lines kept in memory. */
static char *script_text;
static char **lines;
static size_t n_lines;

static void read_script(const char *path) {
	FILE *f = fopen(path, "rb");
	if (!f) {
		fail_at(__LINE__, "cannot open the script %s: %s", path, strerror(errno));
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	script_text = malloc((size_t)size + 1);
	if (!script_text || fread(script_text, 1, (size_t)size, f) != (size_t)size) exit(1);
	script_text[size] = 0;
	fclose(f);
	lines = calloc((size_t)size + 1, sizeof *lines);
	for (char *p = script_text; p && *p;) {
		lines[n_lines++] = p;
		p = strchr(p, '\n');
		if (p) *p++ = 0;
	}
}

static void split(char *text, int no, line_t *l) {
	l->no = no;
	l->n = 0;
	for (char *tok = strtok(text, " "); tok && l->n < sizeof l->w / sizeof l->w[0]; tok = strtok(NULL, " ")) l->w[l->n++] = tok;
}

/* config returns the script's config line (the rest of the line). */
static const char *config(void) {
	for (size_t i = 0; i < n_lines; i++)
		if (!strncmp(lines[i], "config ", 7)) return lines[i] + 7;
	fail_at(__LINE__, "the script has no config line");
	exit(1);
}

/* run_variant runs the lines of variant v (0: a script without variants). */
static void run_variant(uint64_t h, int v) {
	int current = 0;
	static line_t l;
	for (size_t i = 0; i < n_lines; i++) {
		if (!lines[i][0] || !strncmp(lines[i], "config ", 7)) continue;
		if (!strncmp(lines[i], "variant ", 8)) {
			current = atoi(lines[i] + 8);
			continue;
		}
		if (current != v) continue;
		char *copy = strdup(lines[i]);
		split(copy, (int)i + 1, &l);
		run_line(h, &l);
		free(copy);
	}
}

/* ---- frames ---- */

static void bad_global_calls(uint64_t fed, uint64_t bare) {
	STEP("bad arguments: apply_frame, set_rtt, attach_replica on global handles");
	const uint8_t junk[] = "definitely not a frame";
	CHECK_RC(goindex_apply_frame(fed, NULL, 5), GOINDEX_EINVAL);
	CHECK_RC(goindex_apply_frame(fed, junk, (size_t)GOINDEX_MAX_FRAME_BYTES + 1), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_apply_frame(fed, junk, sizeof junk), GOINDEX_EFRAME);
	EXPECT_ERROR(fed, "goindex_apply_frame: ");
	CHECK_RC(goindex_apply_frame(fed, NULL, 0), GOINDEX_EFRAME); /* an empty frame is malformed, not a crash */
	CHECK_RC(goindex_apply_frame(bare, junk, sizeof junk), GOINDEX_EMODE);
	EXPECT_ERROR(bare, "\"dcs\"");
	CHECK_RC(goindex_set_rtt(fed, 30, -1), GOINDEX_EINVAL);
	CHECK_RC(goindex_set_rtt(fed, 30, NAN), GOINDEX_EINVAL);
	CHECK_RC(goindex_set_rtt(fed, 30, INFINITY), GOINDEX_EINVAL);
	CHECK_RC(goindex_set_rtt(fed, 99, 1), GOINDEX_EINVAL);
	EXPECT_ERROR(fed, "DC 99 has no lane");
	CHECK_RC(goindex_set_rtt(bare, 30, 1), GOINDEX_EMODE);
	CHECK_RC(goindex_attach_replica(fed, NULL, 3), GOINDEX_EINVAL);
	CHECK_RC(goindex_attach_replica(fed, "", 0), GOINDEX_EINVAL);
	CHECK_RC(goindex_attach_replica(fed, "/a\0b", 4), GOINDEX_EINVAL);
	CHECK_RC(goindex_attach_replica(fed, "/x", (size_t)GOINDEX_MAX_NAME_BYTES + 1), GOINDEX_ETOOBIG);
	CHECK_RC(goindex_attach_replica(fed, "/nonexistent/goindex.replica", 28), GOINDEX_EREPLICA);
	EXPECT_ERROR(fed, "no such file");
	uint64_t one = 1;
	CHECK_RC(goindex_insert(fed, 0, 0, 0, NULL, &one, &one, 1), GOINDEX_EMODE);
	CHECK_RC(goindex_remove(fed, 0, 0, 0, &one, 1), GOINDEX_EMODE);
	CHECK_RC(goindex_clear(fed, 0, 0, 0), GOINDEX_EMODE);
	CHECK_RC(goindex_remove_worker(fed, 0), GOINDEX_EMODE);
	CHECK_RC(goindex_remove_rank(fed, 0, 0), GOINDEX_EMODE);
	goindex_overlap out[1];
	size_t written = 7;
	CHECK_RC(goindex_probe(bare, &one, 1, out, 1, &written), GOINDEX_OK);
	CHECK(written == 0, "probe of a global handle without lanes wrote %zu entries", written);
	goindex_score_request req = {.struct_size = sizeof req, .local_hashes = &one, .n_hashes = 1};
	goindex_score_result res = {.struct_size = sizeof res};
	CHECK_RC(goindex_score(bare, &req, &res), GOINDEX_ENOCANDIDATE);
}

static void frames(const char *script) {
	read_script(script);
	uint64_t h = open_cfg(config());
	run_variant(h, 0);
	/* A lane fault affects only its lane: the script checks every probe;
	 * here the final counters add up. */
	STEP("frames: the counters after the script");
	goindex_counters c = stats_of(h);
	CHECK(c.members == 3 && c.lanes_ready == 3 && c.memory_bytes > 0, "stats: members %llu, lanes_ready %llu, memory %llu; want 3, 3, > 0",
	      (unsigned long long)c.members, (unsigned long long)c.lanes_ready, (unsigned long long)c.memory_bytes);
	uint64_t bare = open_cfg("{\"mode\": \"global\"}");
	bad_global_calls(h, bare);
	CHECK_RC(goindex_close(bare), GOINDEX_OK);
	CHECK_RC(goindex_close(h), GOINDEX_OK);
}

/* ---- replica ---- */

/* The "hot" probe (document A) of each variant, as probe_str formats it. */
static char hot[3][512];
static uint64_t hot_q[256];
static size_t hot_n;

static void find_hot(void) {
	int v = 0;
	static line_t l;
	for (size_t i = 0; i < n_lines; i++) {
		if (!strncmp(lines[i], "variant ", 8)) v = atoi(lines[i] + 8);
		if (strncmp(lines[i], "probe hot ", 10) || v < 1 || v > 2) continue;
		char *copy = strdup(lines[i]);
		split(copy, (int)i + 1, &l);
		size_t next = hashes(&l, 2, hot_q, &hot_n);
		want_probe(&l, next, hot[v], sizeof hot[v]);
		free(copy);
	}
	CHECK(hot[1][0] && hot[2][0], "the script has no hot probe for variants 1 and 2");
}

/* variant_of returns the variant whose hot answer holds every entry of got
 * (a generation caught while its lanes are being installed may miss some,
 * never mix two), 0 for an empty answer, -1 for a mix. */
static int variant_of(const char *got) {
	if (!got[0]) return 0;
	for (int v = 1; v <= 2; v++) {
		char buf[512];
		snprintf(buf, sizeof buf, "%s", got);
		int all = 1;
		char *save;
		for (char *e = strtok_r(buf, " ", &save); e && all; e = strtok_r(NULL, " ", &save)) {
			char pat[64];
			snprintf(pat, sizeof pat, "%s", e);
			const char *p = strstr(hot[v], pat);
			size_t n = strlen(pat);
			all = p && (p == hot[v] || p[-1] == ' ') && (p[n] == 0 || p[n] == ' ');
		}
		if (all) return v;
	}
	return -1;
}

static uint64_t replica_h;
static atomic_int probing_done;
static atomic_long seen[3];

static void *prober(void *arg) {
	(void)arg;
	char got[512];
	for (long n = 0; !atomic_load(&probing_done) || n < 50; n++) {
		if (probe_str(replica_h, hot_q, hot_n, got, sizeof got) != GOINDEX_OK) return (void *)1;
		int v = variant_of(got);
		if (v < 0) {
			fprintf(stderr, "prober: \"%s\" is no generation's answer\n", got);
			return (void *)2;
		}
		atomic_fetch_add(&seen[v], 1);
	}
	return NULL;
}

/* close_target is the handle the close-race probers hit; each returns the
 * number of answers that were neither OK nor EHANDLE, or OK after an
 * EHANDLE (a closed handle must stay closed). */
static _Atomic uint64_t close_target;
static atomic_long close_answers;

static void *close_prober(void *arg) {
	long id = (long)arg, bad = 0;
	int closed = 0;
	uint64_t h = atomic_load(&close_target);
	goindex_overlap out[64];
	size_t written;
	for (long n = 0; !closed || n < 20; n++) {
		int rc;
		if ((n + id) % 3 == 2) {
			goindex_counters c = {.struct_size = sizeof c};
			rc = goindex_stats(h, &c);
		} else if ((n + id) % 3 == 1) {
			goindex_score_request req = {.struct_size = sizeof req, .policy = GOINDEX_POLICY_PREFIX_THEN_LOAD, .local_hashes = hot_q,
			                             .n_hashes = hot_n, .random_seed = 1};
			goindex_score_result res = {.struct_size = sizeof res};
			rc = goindex_score(h, &req, &res);
			if (rc == GOINDEX_ENOCANDIDATE) rc = GOINDEX_OK; /* no signals in the fixture: an answer all the same */
		} else {
			rc = goindex_probe(h, hot_q, hot_n, out, 64, &written);
		}
		if (rc == GOINDEX_EHANDLE) {
			closed = 1;
		} else if (rc != GOINDEX_OK || closed) {
			fprintf(stderr, "close_prober %ld: call %ld = %d (%s)%s\n", id, n, rc, goindex_strerror(rc), closed ? " after EHANDLE" : "");
			bad++;
		}
		atomic_fetch_add(&close_answers, 1);
		if (bad) break;
	}
	return (void *)bad;
}

static void replica(const char *path, const char *script, const char *fixture) {
	read_script(script);
	find_hot();
	STEP("replica: attach variant 1");
	replica_h = open_cfg(config());
	CHECK_RC(goindex_attach_replica(replica_h, path, strlen(path)), GOINDEX_OK);
	goindex_counters c = stats_of(replica_h);
	CHECK(c.replica_generation == 1 && c.members == 3 && c.memory_bytes > 0, "stats after attach: generation %llu, members %llu, memory %llu",
	      (unsigned long long)c.replica_generation, (unsigned long long)c.members, (unsigned long long)c.memory_bytes);
	CHECK_RC(goindex_apply_frame(replica_h, (const uint8_t *)"x", 1), GOINDEX_EMODE);
	EXPECT_ERROR(replica_h, "replica is attached");
	CHECK_RC(goindex_set_rtt(replica_h, 11, 1), GOINDEX_EMODE);
	run_variant(replica_h, 1);

	STEP("replica: the consumer writes generation 2 while four threads probe");
	pthread_t th[4];
	for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, prober, NULL);
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "'%s' replica '%s' 2", fixture, path);
	int rc = system(cmd);
	CHECK(rc == 0, "%s exited with %d", cmd, rc);
	/* Probes now find the new generation (replica_check_ms 0); let the
	 * threads run on it for a while before stopping them. */
	char got[512];
	for (int i = 0; i < 100000 && (probe_str(replica_h, hot_q, hot_n, got, sizeof got), strcmp(got, hot[2])); i++) {
	}
	CHECK(!strcmp(got, hot[2]), "after the consumer's rewrite, probe = \"%s\", want variant 2's \"%s\"", got, hot[2]);
	for (int i = 0; i < 10000 && atomic_load(&seen[2]) < 200; i++) nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	atomic_store(&probing_done, 1);
	for (int i = 0; i < 4; i++) {
		void *bad = NULL;
		pthread_join(th[i], &bad);
		CHECK(bad == NULL, "prober %d failed (%ld)", i, (long)bad);
	}
	printf("replica: answers seen: generation 1: %ld, generation 2: %ld, empty: %ld\n", atomic_load(&seen[1]), atomic_load(&seen[2]),
	       atomic_load(&seen[0]));
	run_variant(replica_h, 2);

	STEP("replica: bad files keep the mapped generation serving");
	char bad_path[4096];
	snprintf(bad_path, sizeof bad_path, "%s.foreign", path);
	FILE *f = fopen(bad_path, "wb");
	for (int i = 0; f && i < 1000; i++) fputs("not a replica ", f);
	if (f) fclose(f);
	CHECK_RC(goindex_attach_replica(replica_h, bad_path, strlen(bad_path)), GOINDEX_EREPLICA);
	EXPECT_ERROR(replica_h, "not a replica file");
	snprintf(bad_path, sizeof bad_path, "%s.missing", path);
	CHECK_RC(goindex_attach_replica(replica_h, bad_path, strlen(bad_path)), GOINDEX_EREPLICA);
	probe_str(replica_h, hot_q, hot_n, got, sizeof got);
	CHECK(!strcmp(got, hot[2]), "after failed attaches, probe = \"%s\", want \"%s\"", got, hot[2]);
	CHECK(stats_of(replica_h).replica_generation == 2, "generation after failed attaches is not 2");
	CHECK_RC(goindex_attach_replica(replica_h, path, strlen(path)), GOINDEX_OK); /* again: same file, same answers */
	probe_str(replica_h, hot_q, hot_n, got, sizeof got);
	CHECK(!strcmp(got, hot[2]), "after attaching again, probe = \"%s\", want \"%s\"", got, hot[2]);

	STEP("replica: the file truncated in place under four probing threads, then written again");
	atomic_store(&probing_done, 0);
	for (int v = 0; v < 3; v++) atomic_store(&seen[v], 0);
	for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, prober, NULL);
	for (int i = 0; i < 10000 && atomic_load(&seen[2]) < 50; i++) nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	CHECK(truncate(path, 4096) == 0, "truncate(%s, 4096): %s", path, strerror(errno));
	/* The lanes' pages are gone: probes find them faulted and answer empty
	 * (the library reports the replica damaged) instead of dying of SIGBUS. */
	for (int i = 0; i < 10000 && atomic_load(&seen[0]) < 50; i++) nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	CHECK(atomic_load(&seen[0]) >= 50, "after truncating, %ld empty answers, want 50", atomic_load(&seen[0]));
	rc = system(cmd);
	CHECK(rc == 0, "%s exited with %d", cmd, rc);
	for (int i = 0; i < 100000 && (probe_str(replica_h, hot_q, hot_n, got, sizeof got), strcmp(got, hot[2])); i++) {
	}
	CHECK(!strcmp(got, hot[2]), "after the file was written again, probe = \"%s\", want \"%s\"", got, hot[2]);
	atomic_store(&probing_done, 1);
	for (int i = 0; i < 4; i++) {
		void *bad = NULL;
		pthread_join(th[i], &bad);
		CHECK(bad == NULL, "prober %d failed after the truncation (%ld)", i, (long)bad);
	}
	CHECK(stats_of(replica_h).replica_generation == 3, "generation after the rewrite is %llu, want 3",
	      (unsigned long long)stats_of(replica_h).replica_generation);
	printf("replica: truncated under probes: empty answers %ld; generation 2 before, 3 after\n", atomic_load(&seen[0]));
	CHECK_RC(goindex_close(replica_h), GOINDEX_OK);

	STEP("replica: handles closed while four threads probe, score and read stats through them");
	for (int round = 0; round < 20; round++) {
		uint64_t h = open_cfg(config());
		CHECK_RC(goindex_attach_replica(h, path, strlen(path)), GOINDEX_OK);
		atomic_store(&close_target, h);
		atomic_store(&close_answers, 0);
		for (long i = 0; i < 4; i++) pthread_create(&th[i], NULL, close_prober, (void *)i);
		/* Close once the threads are under way (each round a little later). */
		for (int i = 0; i < 10000 && atomic_load(&close_answers) < 4 + 8 * round; i++) nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
		CHECK_RC(goindex_close(h), GOINDEX_OK);
		for (int i = 0; i < 4; i++) {
			void *bad = NULL;
			pthread_join(th[i], &bad);
			CHECK(bad == NULL, "round %d: close_prober %d saw %ld answers other than OK, then EHANDLE", round, i, (long)bad);
		}
		CHECK_RC(goindex_close(h), GOINDEX_EHANDLE);
	}
}

/* ---- a live consumer's replica ---- */

static void attach(const char *path, const char *script) {
	read_script(script);
	STEP("attach: the consumer's replica file");
	uint64_t h = open_cfg(config());
	int rc = goindex_attach_replica(h, path, strlen(path));
	CHECK(rc == GOINDEX_OK, "goindex_attach_replica(%s) = %d (%s): %s", path, rc, goindex_strerror(rc), last_error(h));
	if (rc != GOINDEX_OK) exit(1);
	run_variant(h, 0);
	CHECK(atleast_probes > 0, "the script has no atleast probe");
	printf("attach: %ld probes, none below an exact depth in any lane; %ld entries above it (fingerprint collisions)\n", atleast_probes,
	       atleast_over);
	CHECK_RC(goindex_close(h), GOINDEX_OK);
}

int main(int argc, char **argv) {
	if (argc == 3 && !strcmp(argv[1], "frames")) {
		frames(argv[2]);
	} else if (argc == 5 && !strcmp(argv[1], "replica")) {
		replica(argv[2], argv[3], argv[4]);
	} else if (argc == 4 && !strcmp(argv[1], "attach")) {
		attach(argv[2], argv[3]);
	} else {
		fprintf(stderr, "usage: global_test frames SCRIPT | global_test replica PATH SCRIPT FIXTURE | global_test attach PATH SCRIPT\n");
		return 2;
	}
	no_handle_left(1);
	if (failures) {
		fprintf(stderr, "tests/c: global_test %s: %d checks failed\n", argv[1], failures);
		return 1;
	}
	printf("tests/c: global_test %s: all checks passed (%zu handles opened and closed)\n", argv[1], n_opened);
	return 0;
}
