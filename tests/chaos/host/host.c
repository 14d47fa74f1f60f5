/* host.c: the C host of libgoindex.so that the chaos suite (bridge/chaos)
 * keeps running while it injects faults: a router process as Dynamo's would
 * be, mapping the consumer's replica file and probing it from several
 * threads for as long as it lives. It must never exit on its own; the
 * driver counts any exit it did not cause as a failure.
 *
 *   chaos_host REPLICA
 *
 * Global handle, replica attached (retried every 20 ms until the file is
 * there). PROBERS threads then probe without pause, each with 16 random
 * local hashes (random buckets all over the mapping) or one of the paths of
 * the last check file, and score every 64th probe with the handle's own
 * lanes (a score without fresh signals answers degraded, counted apart).
 * Any call that fails is counted; GOINDEX_EREPLICA or GOINDEX_EINTERNAL
 * makes the thread attach the replica again. Commands on stdin, one per line,
 * each answered by one line on stdout:
 *
 *   status       "status probes=N scores=N degraded=N errors=N attaches=N
 *                 generation=G lanes_ready=R last_error=CODE"
 *   check PATH   runs PATH's probes once, each line "DC MIN N h1 .. hN": the
 *                probe of the N local hashes must report lane DC at depth
 *                MIN or more (no false negative); answers "check probes=N
 *                below=B errors=E" and, for the first probe below, its line
 *                number and depths; the paths join the probers' mix
 *   quit, EOF    closes the handle and exits 0
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "goindex.h"

#define PROBERS 2
#define MAX_PATH_HASHES 256
#define MAX_PATHS 4096

static const char *replica;
static uint64_t handle;
static atomic_ulong probes, scores, degraded, errors, attaches;
static atomic_int last_error;

/* The paths of the last check file, which the probers also probe; a
 * check replaces the set under paths_mu, and a prober copies the path it
 * probes under it. */
typedef struct {
	uint64_t hashes[MAX_PATHS][MAX_PATH_HASHES];
	size_t len[MAX_PATHS];
	size_t n;
} path_set;
static pthread_mutex_t paths_mu = PTHREAD_MUTEX_INITIALIZER;
static path_set *paths;

static void sleep_ms(long ms) {
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
	}
}

/* attach maps the replica, retrying until the file is there. */
static void attach(void) {
	for (;;) {
		int rc = goindex_attach_replica(handle, replica, strlen(replica));
		if (rc == GOINDEX_OK) {
			atomic_fetch_add(&attaches, 1);
			return;
		}
		atomic_store(&last_error, rc);
		sleep_ms(20);
	}
}

/* failed counts a failed call and re-attaches when the mapping is the
 * problem. */
static void failed(int rc) {
	atomic_fetch_add(&errors, 1);
	atomic_store(&last_error, rc);
	if (rc == GOINDEX_EREPLICA || rc == GOINDEX_EINTERNAL) attach();
}

static uint64_t next_random(uint64_t *s) {
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *prober(void *arg) {
	uint64_t rng = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)arg;
	uint64_t q[MAX_PATH_HASHES];
	goindex_overlap out[64];
	for (unsigned long i = 0;; i++) {
		size_t n = 16, written = 0;
		pthread_mutex_lock(&paths_mu);
		if (paths && paths->n > 0 && (i & 1)) {
			size_t p = next_random(&rng) % paths->n;
			n = paths->len[p];
			memcpy(q, paths->hashes[p], n * sizeof q[0]);
		} else {
			for (size_t j = 0; j < n; j++) q[j] = next_random(&rng);
		}
		pthread_mutex_unlock(&paths_mu);
		int rc = goindex_probe(handle, q, n, out, 64, &written);
		if (rc != GOINDEX_OK) {
			failed(rc);
			continue;
		}
		atomic_fetch_add(&probes, 1);
		if (i % 64 == 0) {
			goindex_score_request req = {0};
			goindex_score_result res = {0};
			req.struct_size = sizeof req;
			res.struct_size = sizeof res;
			req.policy = GOINDEX_POLICY_DEFAULT;
			req.local_hashes = q;
			req.n_hashes = n;
			req.isl_tokens = (uint64_t)n * 16;
			rc = goindex_score(handle, &req, &res);
			if (rc == GOINDEX_OK) {
				atomic_fetch_add(&scores, 1);
				if (res.flags & GOINDEX_SCORE_DEGRADED) atomic_fetch_add(&degraded, 1);
			} else {
				failed(rc);
			}
		}
	}
	return NULL;
}

static void status(void) {
	goindex_counters c = {0};
	c.struct_size = sizeof c;
	int rc = goindex_stats(handle, &c);
	if (rc != GOINDEX_OK) failed(rc);
	printf("status probes=%lu scores=%lu degraded=%lu errors=%lu attaches=%lu generation=%" PRIu64 " lanes_ready=%" PRIu64
	       " last_error=%d\n",
	       atomic_load(&probes), atomic_load(&scores), atomic_load(&degraded), atomic_load(&errors), atomic_load(&attaches),
	       c.replica_generation, c.lanes_ready, atomic_load(&last_error));
}

/* check runs the probes of the file at path and makes its paths the
 * probers' mix. */
static void check(const char *path) {
	FILE *f = fopen(path, "r");
	if (!f) {
		printf("check error=\"open %s: %s\"\n", path, strerror(errno));
		return;
	}
	path_set *loaded = calloc(1, sizeof *loaded);
	if (!loaded) {
		printf("check error=\"out of memory\"\n");
		fclose(f);
		return;
	}
	size_t n_probes = 0, below = 0, errs = 0, line_no = 0;
	char first[160] = "";
	for (;;) {
		uint64_t dc, min, n;
		if (fscanf(f, "%" SCNu64 " %" SCNu64 " %" SCNu64, &dc, &min, &n) != 3) break;
		line_no++;
		if (n == 0 || n > MAX_PATH_HASHES) {
			printf("check error=\"line %zu: %" PRIu64 " hashes, want 1..%d\"\n", line_no, n, MAX_PATH_HASHES);
			free(loaded);
			fclose(f);
			return;
		}
		uint64_t q[MAX_PATH_HASHES];
		for (uint64_t j = 0; j < n; j++) {
			if (fscanf(f, "%" SCNu64, &q[j]) != 1) {
				printf("check error=\"line %zu: hash %" PRIu64 " missing\"\n", line_no, j);
				free(loaded);
				fclose(f);
				return;
			}
		}
		goindex_overlap out[64];
		size_t written = 0;
		int rc = goindex_probe(handle, q, n, out, 64, &written);
		n_probes++;
		if (rc != GOINDEX_OK) {
			errs++;
			failed(rc);
			continue;
		}
		uint32_t got = 0;
		for (size_t j = 0; j < written; j++)
			if (out[j].id == dc) got = out[j].blocks;
		if (got < min) {
			if (below++ == 0)
				snprintf(first, sizeof first, " first_line=%zu first_dc=%" PRIu64 " first_depth=%u first_want=%" PRIu64, line_no, dc, got, min);
		}
		if (loaded->n < MAX_PATHS) {
			memcpy(loaded->hashes[loaded->n], q, n * sizeof q[0]);
			loaded->len[loaded->n++] = n;
		}
	}
	fclose(f);
	pthread_mutex_lock(&paths_mu);
	path_set *old = paths;
	paths = loaded;
	pthread_mutex_unlock(&paths_mu);
	free(old);
	printf("check probes=%zu below=%zu errors=%zu%s\n", n_probes, below, errs, first);
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: chaos_host REPLICA\n");
		return 2;
	}
	replica = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	static const char cfg[] = "{\"mode\": \"global\", \"replica_check_ms\": 20}";
	int rc = goindex_open(cfg, strlen(cfg), &handle);
	if (rc != GOINDEX_OK) {
		fprintf(stderr, "chaos_host: goindex_open = %d (%s)\n", rc, goindex_strerror(rc));
		return 1;
	}
	attach();
	printf("ready\n");
	pthread_t th[PROBERS];
	for (uintptr_t i = 0; i < PROBERS; i++) {
		if (pthread_create(&th[i], NULL, prober, (void *)(i + 1)) != 0) {
			fprintf(stderr, "chaos_host: pthread_create failed\n");
			return 1;
		}
	}
	char line[4096];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, "status"))
			status();
		else if (!strncmp(line, "check ", 6))
			check(line + 6);
		else if (!strcmp(line, "quit"))
			break;
		else
			printf("error unknown command \"%s\"\n", line);
	}
	/* The probers run until exit; closing the handle under them would race
	 * (goindex_close must not race other calls), so exit directly. */
	return 0;
}
