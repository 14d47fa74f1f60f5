/* check.h: how the C host suites (abi_test.c, global_test.c, the plugin hosts)
 * report a failure, so that each names its failing step the same way:
 *
 *   FAIL [step] file.c:line: the call, its input, what it got, what was wanted
 *
 * STEP names the step that follows. CHECK, CHECK_RC and fail_at (for helpers
 * that pass their caller's line) count each failure in `failures` and keep
 * going; main exits non-zero when any was counted. CHECK_RC names both
 * status codes through goindex_strerror, so only the suites linked against
 * libgoindex.so use it. handles.h adds those suites' handle bookkeeping. */
#ifndef GOINDEX_TEST_CHECK_H
#define GOINDEX_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int failures;
static const char *step = "setup";
#define STEP(name) (step = (name))

/* fail_in reports a failure at file:line, file without its directory
 * (run.sh compiles each suite by its absolute path). */
static inline void fail_in(const char *file, int line, const char *fmt, ...) {
	const char *base = strrchr(file, '/');
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "FAIL [%s] %s:%d: ", step, base ? base + 1 : file, line);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	failures++;
}

/* fail_at reports a failure at line of the file it is written in. */
#define fail_at(line, ...) fail_in(__FILE__, line, __VA_ARGS__)

#define CHECK(cond, ...)                             \
	do {                                             \
		if (!(cond)) fail_at(__LINE__, __VA_ARGS__); \
	} while (0)

/* CHECK_RC runs call and checks its status code, naming both codes. */
#define CHECK_RC(call, want)                                                                           \
	do {                                                                                               \
		int rc_ = (call);                                                                              \
		if (rc_ != (want))                                                                             \
			fail_at(__LINE__, "%s = %d (%s), want %d (%s)", #call, rc_, goindex_strerror(rc_), (want), \
			        goindex_strerror(want));                                                           \
	} while (0)

#endif
