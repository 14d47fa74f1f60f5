/* plugin_test.c: Dynamo's worker-selector plugin in libgoindex.so, from C
 * (run by tests/c/run.sh as: plugin_test /absolute/path/libgoindex.so).
 *
 * The library is loaded the way Dynamo loads a plugin (dlopen with
 * RTLD_NOW | RTLD_LOCAL, then dlsym of dynamo_worker_selector_plugin_v1),
 * and every input is laid out byte by byte at the offsets of
 * dynamo-compat §5a, not through goindex.h's structs, so a header that
 * drifted from the spec fails here. Steps, each named on failure:
 *   - the descriptor: version, size, callbacks, static;
 *   - create / required_candidate_inputs / destroy, bad configs and roles;
 *   - select: the ttft choice over cached tokens, queued prefill and full
 *     KV capacity, as dynamo/selector's cost model gives it;
 *   - USE_DEFAULT: zero candidates, a column the policy needs not provided;
 *   - malformed input: wrong struct sizes, NULL columns, a misaligned
 *     column, the array-of-structs format, block size 0, too many
 *     candidates, unknown and destroyed states, NULL outputs; the error
 *     buffer is never written past its capacity;
 *   - two states selecting on two threads at once.
 * Exit status 0 when every check passed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goindex.h"
#include "check.h"

/* The header's structs must sit at the spec's offsets too (hosts that use
 * goindex.h get Dynamo's layout). */
_Static_assert(sizeof(dynamo_ws_input) == 88 && offsetof(dynamo_ws_input, candidate_columns) == 72, "input layout");
_Static_assert(sizeof(dynamo_ws_columns) == 96 && offsetof(dynamo_ws_columns, default_decode_loads) == 88, "columns layout");
_Static_assert(sizeof(dynamo_ws_descriptor_v1) == 40 && offsetof(dynamo_ws_descriptor_v1, required_candidate_inputs) == 32, "descriptor");

/* ---- raw layouts of §5a ---- */

enum { INPUT_SIZE = 88, COLUMNS_SIZE = 96, LOAD_SIZE = 24, CAPACITY_SIZE = 16, MAXC = 8 };
enum { ST_OK = 0, ST_INVALID = 1, ST_ERROR = 2, ST_PANICKED = 3, ST_USE_DEFAULT = 4 };
#define IN_IDENTITY (1ull << 0)
#define IN_CACHED (1ull << 1)
#define IN_LOAD (1ull << 3)
#define IN_CAPACITY (1ull << 4)

static void put32(uint8_t *b, size_t off, uint32_t v) { memcpy(b + off, &v, 4); }
static void put64(uint8_t *b, size_t off, uint64_t v) { memcpy(b + off, &v, 8); }
static void putp(uint8_t *b, size_t off, const void *p) { memcpy(b + off, &p, sizeof p); }

/* A selection: the Input and Columns structs as bytes, and the columns'
 * entries. Alignment comes from the unions' uint64_t members. */
typedef struct {
	union {
		uint8_t b[INPUT_SIZE + 8];
		uint64_t align;
	} in;
	union {
		uint8_t b[COLUMNS_SIZE + 8];
		uint64_t align;
	} cols;
	uint64_t ids[MAXC];
	uint32_t ranks[MAXC];
	uint64_t cached[MAXC];
	uint64_t loads[MAXC * 3];      /* LOAD_SIZE bytes each */
	uint64_t capacities[MAXC * 2]; /* CAPACITY_SIZE bytes each */
	uint64_t provided;
	size_t n;
} selection;

/* cand describes one candidate. */
typedef struct {
	uint64_t id, cached, prefill, decode, capacity;
} cand;

/* build lays out n candidates with every column ttft reads, for a prompt
 * of isl tokens in blocks of 16. */
static void build(selection *s, const cand *c, size_t n, uint64_t isl) {
	memset(s, 0, sizeof *s);
	s->n = n;
	s->provided = IN_IDENTITY | IN_CACHED | IN_LOAD | IN_CAPACITY;
	for (size_t i = 0; i < n; i++) {
		s->ids[i] = c[i].id;
		s->ranks[i] = (uint32_t)i % 2;
		s->cached[i] = c[i].cached;
		s->loads[3 * i] = c[i].prefill;      /* active_prefill_tokens @0 */
		s->loads[3 * i + 1] = c[i].decode;   /* active_decode_blocks @8 */
		s->loads[3 * i + 2] = 0;             /* additional_active_blocks @16 */
		s->capacities[2 * i] = c[i].capacity; /* total_kv_blocks @0 */
		s->capacities[2 * i + 1] = UINT64_MAX; /* max_num_batched_tokens @8: unavailable */
	}
	uint8_t *in = s->in.b, *cols = s->cols.b;
	put32(in, 0, INPUT_SIZE); /* struct_size */
	put32(in, 4, 1);          /* candidate_format: columnar */
	put32(in, 8, 0);          /* flags */
	put32(in, 12, 16);        /* block_size */
	put32(in, 16, 1);         /* selection_mode: tracked */
	put64(in, 24, isl);       /* isl_tokens */
	put64(in, 32, 0);         /* expected_output_tokens */
	static const char rid[] = "req-1";
	putp(in, 40, rid);       /* request_id.ptr */
	put64(in, 48, 5);        /* request_id.len */
	putp(in, 72, cols);      /* candidate_columns */
	put64(in, 80, n);        /* candidate_count */
	put32(cols, 0, COLUMNS_SIZE);
	put64(cols, 8, s->provided);
	putp(cols, 16, s->ids);
	putp(cols, 24, s->ranks);
	putp(cols, 32, s->cached);
	putp(cols, 48, s->loads);
	putp(cols, 56, s->capacities);
}

static const dynamo_ws_input *input(selection *s) { return (const dynamo_ws_input *)(const void *)s->in.b; }

/* ---- the plugin, as Dynamo finds it ---- */

static const dynamo_ws_descriptor_v1 *d;

typedef struct {
	uint8_t buf[256];
	uint8_t canary[16];
	dynamo_ws_error_buffer eb;
} errbuf;

static dynamo_ws_error_buffer *fresh(errbuf *e, size_t capacity) {
	memset(e->buf, 0, sizeof e->buf);
	memset(e->canary, 0xA5, sizeof e->canary);
	e->eb.ptr = e->buf;
	e->eb.capacity = capacity;
	e->eb.written = 0;
	return &e->eb;
}

/* msg returns the error buffer's text and checks it stayed in bounds. */
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

static void *create(const char *config, uint32_t role, int want) {
	errbuf e;
	void *state = (void *)1;
	dynamo_ws_byte_slice cfg = {(const uint8_t *)config, config ? strlen(config) : 0};
	int32_t rc = d->create(cfg, role, &state, fresh(&e, sizeof e.buf));
	CHECK(rc == want, "create(%s, role %u) = %d, want %d: %s", config ? config : "NULL", role, rc, want, MSG(&e));
	CHECK((rc == ST_OK) == (state != NULL), "create(%s) = %d with state %p: a state exactly on OK", config ? config : "NULL", rc, state);
	return state;
}

/* choose selects and checks status and index (index only on OK). */
static void choose_at(int line, void *state, selection *s, int want, size_t want_index, const char *want_msg) {
	errbuf e;
	size_t index = 777;
	int32_t rc = d->select(state, input(s), &index, fresh(&e, 200));
	const char *m = MSG(&e);
	if (rc != want) fail_at(line, "select(%zu candidates) = %d, want %d: %s", s->n, rc, want, m);
	else if (rc == ST_OK && index != want_index) fail_at(line, "select(%zu candidates) chose %zu, want %zu", s->n, index, want_index);
	else if (rc != ST_OK && index != 777) fail_at(line, "select = %d wrote index %zu", rc, index);
	else if (want_msg && !strstr(m, want_msg)) fail_at(line, "select = %d: error \"%s\", want it to mention \"%s\"", rc, m, want_msg);
	if (rc == ST_OK || rc == ST_USE_DEFAULT) CHECK(e.eb.written == 0, "select = %d wrote an error message \"%s\"", rc, m);
}
#define CHOOSE(state, s, want, index, m) choose_at(__LINE__, state, s, want, index, m)

static void descriptor(void) {
	STEP("the descriptor");
	CHECK(d->abi_version == 1, "abi_version = %u, want 1", d->abi_version);
	CHECK(d->struct_size >= 40, "struct_size = %u, want >= 40", d->struct_size);
	CHECK(d->create && d->select && d->destroy && d->required_candidate_inputs, "a callback is NULL");
	const uint8_t *raw = (const uint8_t *)d;
	uint32_t v;
	memcpy(&v, raw, 4);
	CHECK(v == 1, "abi_version at byte 0 = %u", v);
	memcpy(&v, raw + 4, 4);
	CHECK(v == 40, "struct_size at byte 4 = %u, want 40", v);
	void *fp;
	memcpy(&fp, raw + 16, sizeof fp);
	CHECK(fp == (void *)d->select, "select is not at byte 16");
}

static void lifecycle(void) {
	STEP("create, required_candidate_inputs, destroy");
	errbuf e;
	void *st = create(NULL, 1, ST_OK);
	uint64_t need = 0;
	CHECK(d->required_candidate_inputs(st, &need, fresh(&e, 64)) == ST_OK, "required_candidate_inputs failed: %s", MSG(&e));
	CHECK(need == (IN_IDENTITY | IN_CACHED | IN_LOAD | IN_CAPACITY), "ttft requires %#llx, want identity|cached|load|capacity (0x1b)",
	      (unsigned long long)need);
	d->destroy(st);
	st = create("{\"policy\": \"load-only\"}", 2, ST_OK);
	CHECK(d->required_candidate_inputs(st, &need, NULL) == ST_OK && need == (IN_IDENTITY | IN_LOAD), "load-only requires %#llx, want 0x9",
	      (unsigned long long)need);
	CHECK(d->required_candidate_inputs(st, NULL, fresh(&e, 64)) == ST_INVALID, "required_candidate_inputs(NULL out) is not INVALID_INPUT");
	d->destroy(st);
	CHECK(d->required_candidate_inputs(st, &need, fresh(&e, 200)) == ST_INVALID && strstr(MSG(&e), "not a live plugin state"),
	      "required_candidate_inputs on a destroyed state: %s", MSG(&e));
	d->destroy(st);   /* twice: ignored */
	d->destroy(NULL); /* never created: ignored */

	STEP("create: bad configs and roles");
	create("{\"polcy\": \"ttft\"}", 1, ST_INVALID);
	create("{\"policy\": \"round-robin\"}", 1, ST_INVALID);
	create("{\"prefill_tokens_per_ms\": -3}", 1, ST_INVALID);
	create("not json", 0, ST_INVALID);
	create("{}", 3, ST_INVALID);
	void *ok = create("  ", 0, ST_OK); /* blank: defaults */
	d->destroy(ok);
	dynamo_ws_byte_slice bad = {NULL, 4};
	void *state = (void *)1;
	CHECK(d->create(bad, 1, &state, NULL) == ST_INVALID && state == NULL, "create(NULL config with length 4) is not INVALID_INPUT with a NULL state");
	dynamo_ws_byte_slice none = {NULL, 0};
	CHECK(d->create(none, 1, NULL, fresh(&e, 8)) == ST_INVALID, "create(state_out NULL) is not INVALID_INPUT");
	CHECK(e.eb.written <= 8, "create wrote %zu bytes into an 8-byte error buffer", e.eb.written);
	MSG(&e);
}

static void choices(void) {
	STEP("select: ttft over Dynamo's columns");
	/* prefill 10 tokens/ms, a 1600-token prompt: uncached prefill is
	 * 160 ms for no cache, 32 ms with 1280 cached tokens, 96 with 640. */
	void *st = create("{\"prefill_tokens_per_ms\": 10}", 1, ST_OK);
	selection s;
	cand c[3] = {{.id = 11, .capacity = UINT64_MAX}, {.id = 22, .cached = 1280, .capacity = 4096}, {.id = 33, .cached = 640, .capacity = 4096}};
	build(&s, c, 3, 1600);
	CHOOSE(st, &s, ST_OK, 1, NULL);
	/* 2000 queued prefill tokens on worker 22: 200 + 32 ms, worse than 96. */
	c[1].prefill = 2000;
	build(&s, c, 3, 1600);
	CHOOSE(st, &s, ST_OK, 2, NULL);
	/* Worker 33 busy: 4000 decode blocks plus the request's 60 uncached
	 * blocks still fit its 4096, so it stays best at 96 ms; with a capacity
	 * of 100 the 3960 blocks over it drain at 1 block/ms, so worker 11's
	 * 160 ms wins (its capacity is unavailable: no admission wait). */
	c[2].decode = 4000;
	build(&s, c, 3, 1600);
	CHOOSE(st, &s, ST_OK, 2, NULL);
	c[2].capacity = 100;
	build(&s, c, 3, 1600);
	CHOOSE(st, &s, ST_OK, 0, NULL);
	/* Candidate order is unstable in Dynamo: the choice follows the worker. */
	cand r[3] = {c[2], c[0], c[1]};
	build(&s, r, 3, 1600);
	CHOOSE(st, &s, ST_OK, 1, NULL);
	/* One candidate: it. */
	build(&s, c, 1, 1600);
	CHOOSE(st, &s, ST_OK, 0, NULL);

	STEP("select: USE_DEFAULT when inputs are missing");
	build(&s, c, 0, 1600);
	CHOOSE(st, &s, ST_USE_DEFAULT, 0, NULL);
	putp(s.in.b, 72, NULL); /* zero candidates, no columns at all */
	CHOOSE(st, &s, ST_USE_DEFAULT, 0, NULL);
	build(&s, c, 3, 1600);
	put64(s.cols.b, 8, IN_IDENTITY | IN_CACHED | IN_CAPACITY); /* no load */
	putp(s.cols.b, 48, NULL);
	CHOOSE(st, &s, ST_USE_DEFAULT, 0, NULL);
	build(&s, c, 3, 1600);
	put64(s.cols.b, 8, IN_IDENTITY | IN_LOAD | IN_CAPACITY); /* no cached tokens; the pointer is ignored */
	CHOOSE(st, &s, ST_USE_DEFAULT, 0, NULL);
	build(&s, c, 3, 1600);
	put64(s.cols.b, 8, 0); /* nothing provided (required_candidate_inputs NONE) */
	CHOOSE(st, &s, ST_USE_DEFAULT, 0, NULL);
	d->destroy(st);
}

static void malformed(void) {
	STEP("select: malformed input");
	void *st = create(NULL, 1, ST_OK);
	selection s;
	cand c[2] = {{.id = 1, .cached = 16, .capacity = 64}, {.id = 2, .capacity = 64}};
	static uint64_t misaligned[4];
	struct {
		const char *what, *msg;
		size_t off;
		int cols; /* 1: the offset is into Columns */
		int width; /* 4 or 8 bytes; 0: a pointer */
		uint64_t value;
		const void *ptr;
	} cases[] = {
	    {"input struct_size 80", "struct_size 80", 0, 0, 4, 80, NULL},
	    {"input struct_size 0", "struct_size 0", 0, 0, 4, 0, NULL},
	    {"array-of-structs format", "candidate_format 0", 4, 0, 4, 0, NULL},
	    {"format 2", "candidate_format 2", 4, 0, 4, 2, NULL},
	    {"block size 0", "block size 0", 12, 0, 4, 0, NULL},
	    {"columns NULL", "candidate_columns is NULL", 72, 0, 0, 0, NULL},
	    {"too many candidates", "at most", 80, 0, 8, (1u << 16) + 1, NULL},
	    {"columns struct_size 64", "columns struct_size 64", 0, 1, 4, 64, NULL},
	    {"worker_ids NULL", "worker_ids", 16, 1, 0, 0, NULL},
	    {"dp_ranks NULL", "dp_ranks", 24, 1, 0, 0, NULL},
	    {"cached_tokens NULL", "cached_tokens", 32, 1, 0, 0, NULL},
	    {"loads NULL", "loads", 48, 1, 0, 0, NULL},
	    {"capacities NULL", "capacities", 56, 1, 0, 0, NULL},
	    {"misaligned loads", "aligned", 48, 1, 0, 0, (const uint8_t *)misaligned + 4},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		build(&s, c, 2, 64);
		uint8_t *b = cases[i].cols ? s.cols.b : s.in.b;
		if (cases[i].width == 4) put32(b, cases[i].off, (uint32_t)cases[i].value);
		else if (cases[i].width == 8) put64(b, cases[i].off, cases[i].value);
		else putp(b, cases[i].off, cases[i].ptr);
		step = cases[i].what;
		CHOOSE(st, &s, ST_INVALID, 0, cases[i].msg);
	}
	STEP("select: NULL arguments, unknown and destroyed states");
	build(&s, c, 2, 64);
	errbuf e;
	size_t index;
	CHECK(d->select(st, NULL, &index, fresh(&e, 64)) == ST_INVALID, "select(NULL input) is not INVALID_INPUT");
	CHECK(d->select(st, input(&s), NULL, fresh(&e, 64)) == ST_INVALID, "select(NULL index out) is not INVALID_INPUT");
	CHECK(d->select(st, input(&s), &index, NULL) == ST_OK && index == 0, "select with a NULL error buffer = index %zu, want 0", index);
	CHECK(d->select((void *)(uintptr_t)0xdeadbeef, input(&s), &index, fresh(&e, 0)) == ST_INVALID && e.eb.written == 0,
	      "select(unknown state, 0-byte error buffer): written %zu", e.eb.written);
	CHECK(d->select(NULL, input(&s), &index, fresh(&e, 5)) == ST_INVALID, "select(NULL state) is not INVALID_INPUT");
	MSG(&e);
	CHECK(e.eb.written == 5, "a 5-byte error buffer got %zu bytes, want 5 (the message cut)", e.eb.written);
	d->destroy(st);
	CHECK(d->select(st, input(&s), &index, fresh(&e, 64)) == ST_INVALID, "select on a destroyed state is not INVALID_INPUT");
	MSG(&e);
}

/* Two router states (decode, prefill) selecting at once: Dynamo may call
 * them from different threads. */
static void *selector_thread(void *arg) {
	uint32_t role = (uint32_t)(uintptr_t)arg;
	void *st = NULL;
	dynamo_ws_byte_slice none = {NULL, 0};
	if (d->create(none, role, &st, NULL) != ST_OK) return (void *)1;
	selection *s = malloc(sizeof *s);
	cand c[4] = {{.id = 1, .capacity = 999}, {.id = 2, .cached = 512, .capacity = 999}, {.id = 3, .cached = 256, .capacity = 999}, {.id = 4, .capacity = 999}};
	long bad = 0;
	for (int i = 0; i < 20000; i++) {
		build(s, c, 4, 1024);
		size_t index = 9;
		if (d->select(st, input(s), &index, NULL) != ST_OK || index != 1) bad++;
	}
	free(s);
	d->destroy(st);
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
		fprintf(stderr, "usage: plugin_test /absolute/path/to/libgoindex.so (Dynamo rejects relative paths)\n");
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "FAIL [load] dlopen(%s): %s\n", argv[1], dlerror());
		return 1;
	}
	const dynamo_ws_descriptor_v1 *(*entry)(void) = (const dynamo_ws_descriptor_v1 *(*)(void))dlsym(lib, "dynamo_worker_selector_plugin_v1");
	if (!entry) {
		fprintf(stderr, "FAIL [load] dlsym(dynamo_worker_selector_plugin_v1): %s\n", dlerror());
		return 1;
	}
	d = entry();
	CHECK(d != NULL && entry() == d, "the descriptor is NULL or not static");
	if (!d) return 1;
	descriptor();
	lifecycle();
	choices();
	malformed();
	threads();
	if (failures) {
		fprintf(stderr, "tests/c: plugin_test: %d checks failed\n", failures);
		return 1;
	}
	printf("tests/c: plugin_test: all checks passed\n");
	return 0;
}
