/* handles.h: the handle bookkeeping of the C suites linked against
 * libgoindex.so (abi_test.c, global_test.c), after check.h: open_cfg records
 * every handle a suite opens, so that no_handle_left can prove at the end
 * that each one was closed (goindex_stats on it: GOINDEX_EHANDLE); and the
 * helpers both suites read handles with (stats_of, last_error,
 * EXPECT_ERROR). */
#ifndef GOINDEX_TEST_HANDLES_H
#define GOINDEX_TEST_HANDLES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "goindex.h"

static uint64_t opened[64];
static size_t n_opened;

/* open_cfg opens a handle with config json, or ends the suite (status 1)
 * with goindex_last_error's detail: nothing after it can run. Handles must
 * grow: they are never reused. */
static inline uint64_t open_cfg(const char *json) {
	uint64_t h = 0;
	int rc = goindex_open(json, strlen(json), &h);
	if (rc != GOINDEX_OK) {
		char msg[512];
		goindex_last_error(0, msg, sizeof msg, NULL);
		fail_at(__LINE__, "goindex_open(%s) = %d (%s): %s", json, rc, goindex_strerror(rc), msg);
		exit(1);
	}
	for (size_t i = 0; i < n_opened; i++) CHECK(opened[i] < h, "goindex_open returned %llu after %llu: handles must grow", (unsigned long long)h, (unsigned long long)opened[i]);
	if (n_opened < sizeof opened / sizeof opened[0]) opened[n_opened++] = h;
	return h;
}

/* last_error returns h's last error (this thread's copy), or a note that
 * goindex_last_error itself failed. */
static inline const char *last_error(uint64_t h) {
	static _Thread_local char msg[1024];
	if (goindex_last_error(h, msg, sizeof msg, NULL) != GOINDEX_OK) snprintf(msg, sizeof msg, "(goindex_last_error failed)");
	return msg;
}

/* EXPECT_ERROR checks that h's last error mentions fragment. */
static inline void expect_error_in(const char *file, int line, uint64_t h, const char *fragment) {
	const char *msg = last_error(h);
	if (!strstr(msg, fragment)) fail_in(file, line, "goindex_last_error(%llu) = \"%s\", want it to mention \"%s\"", (unsigned long long)h, msg, fragment);
}
#define EXPECT_ERROR(h, fragment) expect_error_in(__FILE__, __LINE__, h, fragment)

static inline goindex_counters stats_of(uint64_t h) {
	goindex_counters c;
	memset(&c, 0, sizeof c);
	c.struct_size = sizeof c;
	CHECK_RC(goindex_stats(h, &c), GOINDEX_OK);
	return c;
}

/* no_handle_left is each suite's last step: every handle open_cfg recorded
 * is closed, and the suite opened at least min_opened. */
static inline void no_handle_left(size_t min_opened) {
	STEP("the end: no handle is left open");
	for (size_t i = 0; i < n_opened; i++) {
		goindex_counters c = {.struct_size = sizeof c};
		CHECK_RC(goindex_stats(opened[i], &c), GOINDEX_EHANDLE);
	}
	CHECK(n_opened >= min_opened, "the suite opened only %zu handles, want at least %zu", n_opened, min_opened);
}

#endif
