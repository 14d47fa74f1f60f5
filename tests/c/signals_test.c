/* signals_test.c: what loading libgoindex.so does to a host's signal
 * handlers, as include/goindex.h states it. The host installs handlers
 * (with SA_ONSTACK, as Go asks) for asynchronous signals and for SIGSEGV,
 * then loads the library with dlopen and calls it:
 *   - its SIGINT, SIGTERM, SIGHUP and SIGUSR1 handlers are still its own,
 *     and a raised SIGUSR1 reaches it;
 *   - SIGSEGV now has the Go runtime's handler, and a fault in the host's
 *     own code still reaches the host's handler (the runtime forwards
 *     faults outside Go code to the handler it found).
 * Usage: signals_test /abs/path/libgoindex.so */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static volatile sig_atomic_t seen[NSIG];
static sigjmp_buf fault_return;

static void host_async(int sig, siginfo_t *info, void *ctx) {
	(void)info;
	(void)ctx;
	seen[sig]++;
}

static void host_segv(int sig, siginfo_t *info, void *ctx) {
	(void)info;
	(void)ctx;
	seen[sig]++;
	siglongjmp(fault_return, 1);
}

/* install sets fn as sig's handler, with SA_ONSTACK and SA_SIGINFO. */
static void install(int sig, void (*fn)(int, siginfo_t *, void *)) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = fn;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0) {
		perror("sigaction");
		exit(2);
	}
}

/* handler returns sig's handler now. */
static void *handler(int sig) {
	struct sigaction sa;
	if (sigaction(sig, NULL, &sa) != 0) {
		perror("sigaction");
		exit(2);
	}
	return (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
}

/* fault dereferences a null pointer in the host's own code. */
static __attribute__((noinline)) int fault(volatile int *p) { return *p; }

int main(int argc, char **argv) {
	if (argc != 2 || argv[1][0] != '/') {
		fprintf(stderr, "usage: signals_test /abs/path/libgoindex.so\n");
		return 2;
	}
	static const int async_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
	for (size_t i = 0; i < sizeof async_sigs / sizeof async_sigs[0]; i++) install(async_sigs[i], host_async);
	install(SIGSEGV, host_segv);

	STEP("load");
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "FAIL [load] dlopen(%s): %s\n", argv[1], dlerror());
		return 1;
	}
	uint32_t (*abi_version)(void) = (uint32_t(*)(void))dlsym(lib, "goindex_abi_version");
	CHECK(abi_version != NULL, "dlsym(goindex_abi_version): %s", dlerror());
	if (abi_version) CHECK(abi_version() >= 1, "goindex_abi_version() = %u", abi_version());

	STEP("the host's asynchronous handlers stay its own");
	for (size_t i = 0; i < sizeof async_sigs / sizeof async_sigs[0]; i++) {
		int sig = async_sigs[i];
		CHECK(handler(sig) == (void *)host_async, "signal %d (%s): handler %p after loading, want the host's %p", sig,
		      strsignal(sig), handler(sig), (void *)host_async);
	}
	raise(SIGUSR1);
	CHECK(seen[SIGUSR1] == 1, "raise(SIGUSR1) reached the host's handler %d times, want 1", (int)seen[SIGUSR1]);

	STEP("a fault in the host's code reaches the host's handler");
	CHECK(handler(SIGSEGV) != (void *)host_segv, "SIGSEGV: the host's handler is still installed; want the Go runtime's");
	if (sigsetjmp(fault_return, 1) == 0) {
		fault(NULL);
		fail_at(__LINE__, "a null dereference did not fault");
	}
	CHECK(seen[SIGSEGV] == 1, "the host's SIGSEGV handler ran %d times, want 1", (int)seen[SIGSEGV]);
	if (abi_version) CHECK(abi_version() >= 1, "the library after the host's fault: goindex_abi_version() = %u", abi_version());

	if (failures) {
		fprintf(stderr, "signals_test: %d failures\n", failures);
		return 1;
	}
	printf("signals_test: passed\n");
	return 0;
}
