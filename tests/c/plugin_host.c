/* plugin_host.c: the driver of the plugin hosts (run by tests/c/run.sh as
 * plugin_<layout> /absolute/path/libgoindex.so, one binary per layout; see
 * plugin_host.h). It loads the library the way every proposed Dynamo
 * loader does (dlopen with RTLD_NOW | RTLD_LOCAL, then the layout's own
 * descriptor checks) and runs, through the layout's types:
 *   - create / the 4th callback / destroy, bad configs and roles;
 *   - select: the ttft choice over cached tokens, queued prefill and full
 *     KV capacity, as dynamo/selector's cost model gives it;
 *   - USE_DEFAULT with a message for zero candidates, a signal not
 *     provided, every input the plugin cannot use (the layout's mutations),
 *     NULL arguments, unknown and destroyed states, and a configured
 *     replica that does not exist: select never answers a status that
 *     would fail the request (1, 2 or 3);
 *   - two states selecting on two threads at once.
 * Every selection ends against a guard page, so a read past the layout's
 * last struct (the 72-byte table, the last row) faults. Exit status 0 when
 * every check passed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "plugin_host.h"

/* guarded returns size bytes (a multiple of 8) that end at a PROT_NONE page. */
static void *guarded(size_t size) {
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t span = (size + page - 1) / page * page;
	uint8_t *m = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || mprotect(m + span, page, PROT_NONE) != 0) {
		perror("plugin_host: guard page");
		exit(1);
	}
	return m + span - size;
}

typedef struct {
	uint8_t buf[256];
	uint8_t canary[16];
	host_errbuf eb;
} errbuf;

static host_errbuf *fresh(errbuf *e, size_t capacity) {
	memset(e->buf, 0, sizeof e->buf);
	memset(e->canary, 0xA5, sizeof e->canary);
	e->eb.ptr = e->buf;
	e->eb.capacity = capacity;
	e->eb.written = 0;
	return &e->eb;
}

/* msg_at returns the error buffer's text and checks it stayed in bounds. */
static const char *msg_at(int line, errbuf *e) {
	static char out[300];
	if (e->eb.written > e->eb.capacity) fail_at(line, "error buffer: written %zu > capacity %zu", e->eb.written, e->eb.capacity);
	for (size_t i = e->eb.capacity; i < sizeof e->buf; i++)
		if (e->buf[i]) fail_at(line, "error buffer: byte %zu past capacity %zu written", i, e->eb.capacity);
	for (size_t i = 0; i < sizeof e->canary; i++)
		if (e->canary[i] != 0xA5) fail_at(line, "error buffer: canary byte %zu overwritten", i);
	size_t n = e->eb.written < sizeof e->buf ? e->eb.written : sizeof e->buf;
	memcpy(out, e->buf, n);
	out[n] = 0;
	return out;
}
#define MSG(e) msg_at(__LINE__, e)

static host_slice slice(const char *s) { return (host_slice){(const uint8_t *)s, s ? strlen(s) : 0}; }

static void *create_at(int line, const char *config, uint32_t role, int want, const char *want_msg) {
	errbuf e;
	void *state = (void *)1;
	int32_t rc = host_create(slice(config), role, &state, fresh(&e, sizeof e.buf));
	const char *m = MSG(&e);
	if (rc != want) fail_at(line, "create(%s, role %u) = %d, want %d: %s", config ? config : "NULL", role, rc, want, m);
	if ((rc == ST_OK) != (state != NULL)) fail_at(line, "create(%s) = %d with state %p: a state exactly on OK", config ? config : "NULL", rc, state);
	if (want_msg && !strstr(m, want_msg)) fail_at(line, "create(%s) = %d: \"%s\", want it to mention \"%s\"", config, rc, m, want_msg);
	return state;
}
#define CREATE(config, role, want, m) create_at(__LINE__, config, role, want, m)

/* provided is what the layout's loader materializes for state: the bits
 * its 4th callback names, with the identity; the row layout has them all. */
static uint64_t provided(void *state) {
	uint64_t need = 0;
	if (!host_known_inputs) return IN_IDENTITY | IN_CACHED | IN_LOAD | IN_CAPACITY;
	if (host_required(state, &need, NULL) != ST_OK) STEP("provided: the 4th callback failed");
	return need ? need | IN_IDENTITY : 0;
}

/* choose_at selects and checks the status, the index (only on OK, else
 * untouched) and, on USE_DEFAULT, that a message holding want_msg came. */
static void choose_at(int line, void *state, const void *in, int want, size_t want_index, const char *want_msg) {
	errbuf e;
	size_t index = 777;
	int32_t rc = host_select(state, in, &index, fresh(&e, 200));
	const char *m = MSG(&e);
	if (rc == ST_INVALID || rc == ST_ERROR || rc == ST_PANICKED) fail_at(line, "select = %d, a status that fails the request: %s", rc, m);
	if (rc != want) fail_at(line, "select = %d, want %d: %s", rc, want, m);
	else if (rc == ST_OK && index != want_index) fail_at(line, "select chose %zu, want %zu", index, want_index);
	else if (rc != ST_OK && index != 777) fail_at(line, "select = %d wrote index %zu", rc, index);
	else if (rc == ST_USE_DEFAULT && (e.eb.written == 0 || (want_msg && !strstr(m, want_msg))))
		fail_at(line, "select = USE_DEFAULT with \"%s\", want a message mentioning \"%s\"", m, want_msg ? want_msg : "anything");
}
#define CHOOSE(state, in, want, index, m) choose_at(__LINE__, state, in, want, index, m)

static void lifecycle(void) {
	STEP("create, the 4th callback, destroy");
	errbuf e;
	void *st = CREATE(NULL, ROLE_DECODE, ST_OK, NULL);
	uint64_t need = 0;
	if (host_known_inputs) {
		CHECK(host_required(st, &need, fresh(&e, 64)) == ST_OK, "required inputs failed: %s", MSG(&e));
		CHECK(need == (IN_IDENTITY | IN_CACHED | IN_LOAD | IN_CAPACITY), "ttft requires %#llx, want identity|cached|load|capacity (0x1b)",
		      (unsigned long long)need);
		CHECK((need & ~host_known_inputs) == 0, "required %#llx has bits this layout's loader refuses (it knows %#llx)",
		      (unsigned long long)need, (unsigned long long)host_known_inputs);
	}
	host_destroy(st);
	st = CREATE("{\"policy\": \"load-only\"}", ROLE_PREFILL, ST_OK, NULL);
	if (host_known_inputs) {
		CHECK(host_required(st, &need, NULL) == ST_OK && need == (IN_IDENTITY | IN_LOAD), "load-only requires %#llx, want 0x9",
		      (unsigned long long)need);
		CHECK(host_required(st, NULL, fresh(&e, 64)) == ST_INVALID, "required inputs (NULL out) is not INVALID_INPUT");
	}
	host_destroy(st);
	if (host_known_inputs)
		CHECK(host_required(st, &need, fresh(&e, 200)) == ST_INVALID && strstr(MSG(&e), "not a live plugin state"),
		      "required inputs on a destroyed state: %s", MSG(&e));
	host_destroy(st);   /* twice: ignored */
	host_destroy(NULL); /* never created: ignored */
	host_destroy(CREATE("  ", ROLE_UNKNOWN, ST_OK, NULL)); /* blank: defaults */

	STEP("create: bad configs and roles");
	CREATE("{\"polcy\": \"ttft\"}", ROLE_DECODE, ST_INVALID, "unknown field");
	CREATE("{\"policy\": \"round-robin\"}", ROLE_DECODE, ST_INVALID, "makes no sense");
	CREATE("{\"prefill_tokens_per_ms\": -3}", ROLE_DECODE, ST_INVALID, NULL);
	CREATE("not json", ROLE_UNKNOWN, ST_INVALID, NULL);
	CREATE("{}", 3, ST_INVALID, "router_role 3");
	CREATE("{\"replica\": \"goindex.replica\", \"dc\": 1}", ROLE_DECODE, ST_INVALID, "absolute");
	CREATE("{\"replica\": \"/dev/shm/goindex-1.replica\"}", ROLE_DECODE, ST_INVALID, "needs dc");
	void *state = (void *)1;
	CHECK(host_create((host_slice){NULL, 4}, ROLE_DECODE, &state, NULL) == ST_INVALID && state == NULL,
	      "create(NULL config with length 4) is not INVALID_INPUT with a NULL state");
	CHECK(host_create(slice(NULL), ROLE_DECODE, NULL, fresh(&e, 8)) == ST_INVALID, "create(state_out NULL) is not INVALID_INPUT");
	MSG(&e);
}

static void choices(void *storage) {
	STEP("select: ttft");
	/* prefill 10 tokens/ms, a 1600-token prompt: uncached prefill is
	 * 160 ms for no cache, 32 ms with 1280 cached tokens, 96 with 640. */
	void *st = CREATE("{\"prefill_tokens_per_ms\": 10}", ROLE_DECODE, ST_OK, NULL);
	uint64_t have = provided(st);
	host_cand c[3] = {{.id = 11, .capacity = UINT64_MAX}, {.id = 22, .cached = 1280, .capacity = 4096}, {.id = 33, .cached = 640, .capacity = 4096}};
	CHOOSE(st, host_build(storage, c, 3, 1600, have), ST_OK, 1, NULL);
	/* 2000 queued prefill tokens on worker 22: 200 + 32 ms, worse than 96. */
	c[1].prefill = 2000;
	CHOOSE(st, host_build(storage, c, 3, 1600, have), ST_OK, 2, NULL);
	/* Worker 33 busy: 4000 decode blocks plus the request's 60 uncached
	 * blocks fit its 4096, so it stays best at 96 ms; with a capacity of
	 * 100 the 3960 blocks over it drain at 1 block/ms, so worker 11's 160
	 * ms wins (its capacity is unavailable: no admission wait). */
	c[2].decode = 4000;
	CHOOSE(st, host_build(storage, c, 3, 1600, have), ST_OK, 2, NULL);
	c[2].capacity = 100;
	CHOOSE(st, host_build(storage, c, 3, 1600, have), ST_OK, 0, NULL);
	/* Candidate order is unstable in Dynamo: the choice follows the worker. */
	host_cand r[3] = {c[2], c[0], c[1]};
	CHOOSE(st, host_build(storage, r, 3, 1600, have), ST_OK, 1, NULL);
	CHOOSE(st, host_build(storage, c, 1, 1600, have), ST_OK, 0, NULL);
	/* The most candidates the storage holds: the last one ends at the guard page. */
	host_cand many[HOST_MAX_CANDIDATES];
	for (size_t i = 0; i < HOST_MAX_CANDIDATES; i++) many[i] = (host_cand){.id = 100 + i, .cached = i == 5 ? 800 : 0, .capacity = 4096};
	CHOOSE(st, host_build(storage, many, HOST_MAX_CANDIDATES, 1600, have), ST_OK, 5, NULL);

	STEP("select: USE_DEFAULT for what is missing");
	CHOOSE(st, host_build(storage, c, 0, 1600, have), ST_USE_DEFAULT, 0, "no candidates");
	if (host_known_inputs) {
		CHOOSE(st, host_build(storage, c, 3, 1600, have & ~IN_LOAD), ST_USE_DEFAULT, 0, "no load");
		CHOOSE(st, host_build(storage, c, 3, 1600, have & ~IN_CACHED), ST_USE_DEFAULT, 0, "no cached tokens");
		CHOOSE(st, host_build(storage, c, 3, 1600, IN_IDENTITY), ST_USE_DEFAULT, 0, "no load");
		CHOOSE(st, host_build(storage, c, 3, 1600, 0), ST_USE_DEFAULT, 0, "no load");
		/* Capacity is optional for ttft: without it the choice stands. */
		c[2].capacity = 4096;
		CHOOSE(st, host_build(storage, c, 3, 1600, have & ~IN_CAPACITY), ST_OK, 2, NULL);
	}
	host_destroy(st);
}

static void unfamiliar(void *storage) {
	STEP("select: inputs the plugin cannot use are USE_DEFAULT");
	void *st = CREATE(NULL, ROLE_DECODE, ST_OK, NULL);
	uint64_t have = provided(st);
	host_cand c[2] = {{.id = 1, .cached = 16, .capacity = 64}, {.id = 2, .capacity = 64}};
	for (size_t i = 0;; i++) {
		const char *expect = NULL;
		const void *in = host_build(storage, c, 2, 64, have);
		const char *name = host_mutate(storage, i, &expect);
		if (!name) break;
		step = name;
		CHOOSE(st, in, ST_USE_DEFAULT, 0, expect);
	}
	STEP("select: NULL arguments, unknown and destroyed states");
	const void *in = host_build(storage, c, 2, 64, have);
	errbuf e;
	size_t index = 777;
	CHOOSE(st, NULL, ST_USE_DEFAULT, 0, "input is NULL");
	CHECK(host_select(st, in, NULL, fresh(&e, 200)) == ST_USE_DEFAULT && strstr(MSG(&e), "candidate_index_out is NULL"), "select(NULL index out): %s",
	      MSG(&e));
	CHECK(host_select(st, in, &index, NULL) == ST_OK && index == 0, "select with a NULL error buffer = index %zu, want 0", index);
	CHOOSE((void *)(uintptr_t)0xdeadbeef, in, ST_USE_DEFAULT, 0, "not a live plugin state");
	CHECK(host_select(NULL, in, &index, fresh(&e, 5)) == ST_USE_DEFAULT, "select(NULL state) is not USE_DEFAULT");
	MSG(&e);
	CHECK(e.eb.written == 5, "a 5-byte error buffer got %zu bytes, want 5 (the message cut)", e.eb.written);
	CHECK(host_select(st, in, &index, fresh(&e, 0)) == ST_OK && e.eb.written == 0, "select with a 0-byte error buffer");
	host_destroy(st);
	CHOOSE(st, in, ST_USE_DEFAULT, 0, "not a live plugin state");
}

static void replica(void *storage) {
	STEP("select: a configured replica that does not exist");
	void *st = CREATE("{\"replica\": \"/nonexistent-goindex-test/goindex-1.replica\", \"dc\": 3}", ROLE_DECODE, ST_OK, NULL);
	host_cand c[2] = {{.id = 1, .cached = 16, .capacity = 64}, {.id = 2, .capacity = 64}};
	CHOOSE(st, host_build(storage, c, 2, 64, provided(st)), ST_USE_DEFAULT, 0, "no such file");
	CHOOSE(st, host_build(storage, c, 2, 64, provided(st)), ST_USE_DEFAULT, 0, "no such file");
	host_destroy(st);
}

/* Two router states (decode, prefill) selecting at once: Dynamo may call
 * them from different threads. */
static void *selector_thread(void *arg) {
	void *st = NULL;
	if (host_create(slice(NULL), (uint32_t)(uintptr_t)arg, &st, NULL) != ST_OK) return (void *)1;
	void *storage = malloc(host_storage_size);
	host_cand c[4] = {{.id = 1, .capacity = 999}, {.id = 2, .cached = 512, .capacity = 999}, {.id = 3, .cached = 256, .capacity = 999}, {.id = 4, .capacity = 999}};
	long bad = 0;
	for (int i = 0; i < 20000; i++) {
		size_t index = 9;
		if (host_select(st, host_build(storage, c, 4, 1024, provided(st)), &index, NULL) != ST_OK || index != 1) bad++;
	}
	free(storage);
	host_destroy(st);
	return (void *)bad;
}

static void threads(void) {
	STEP("two states on two threads");
	pthread_t t[2];
	for (uintptr_t i = 0; i < 2; i++) pthread_create(&t[i], NULL, selector_thread, (void *)(i + 1));
	for (int i = 0; i < 2; i++) {
		void *bad = NULL;
		pthread_join(t[i], &bad);
		CHECK(bad == NULL, "thread %d: %ld selections failed or chose another worker than the 512-token cache", i, (long)bad);
	}
}

int main(int argc, char **argv) {
	if (argc != 2 || argv[1][0] != '/') {
		fprintf(stderr, "usage: plugin_host /absolute/path/to/libgoindex.so (the loaders reject relative paths)\n");
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "FAIL [load] %s: dlopen(%s): %s\n", host_name, argv[1], dlerror());
		return 1;
	}
	const void *(*entry)(void) = (const void *(*)(void))dlsym(lib, "dynamo_worker_selector_plugin_v1");
	const void *descriptor = entry ? entry() : NULL;
	const char *why = !entry ? "no dynamo_worker_selector_plugin_v1" : !descriptor ? "a NULL descriptor" : host_adopt(descriptor);
	if (why) {
		fprintf(stderr, "FAIL [load] %s: the loader refuses the library: %s\n", host_name, why);
		return 1;
	}
	CHECK(entry() == descriptor, "the descriptor is not static: a second call returned another pointer");
	void *storage = guarded(host_storage_size);
	lifecycle();
	choices(storage);
	unfamiliar(storage);
	replica(storage);
	threads();
	if (failures) {
		fprintf(stderr, "tests/c: plugin host %s: %d checks failed\n", host_name, failures);
		return 1;
	}
	printf("tests/c: plugin host %s: all checks passed\n", host_name);
	return 0;
}
