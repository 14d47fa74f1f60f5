/* plugin_host.h: what each layout's host (plugin_row.c, plugin_columns.c)
 * gives the shared driver plugin_host.c, which loads libgoindex.so as a
 * Dynamo router would and runs the same scenarios against every layout.
 *
 * A host file holds one layout's types, written from that upstream API
 * crate's definitions (not from goindex.h, which no host includes) with
 * static asserts of the sizes and offsets the crate's own layout test pins;
 * its loader (dlopen is the driver's; the descriptor checks are the
 * layout's own loader's); and how to lay out a selection in its layout.
 * Build: gcc plugin_host.c plugin_<layout>.c -ldl -pthread. */
#ifndef GOINDEX_TEST_PLUGIN_HOST_H
#define GOINDEX_TEST_PLUGIN_HOST_H

#include <stddef.h>
#include <stdint.h>

/* Statuses every layout shares (ABI_VERSION_V1 = 1). */
enum { ST_OK = 0, ST_INVALID = 1, ST_ERROR = 2, ST_PANICKED = 3, ST_USE_DEFAULT = 4 };
enum { ROLE_UNKNOWN = 0, ROLE_DECODE = 1, ROLE_PREFILL = 2 };

/* Signal bits of the columnar layouts (CandidateSignalGroups,
 * CandidateInputs, WorkerInputs: the same bits under three names). */
#define IN_IDENTITY (1ull << 0)
#define IN_CACHED (1ull << 1)
#define IN_LOAD (1ull << 3)
#define IN_CAPACITY (1ull << 4)

/* ByteSliceV1 and WorkerSelectorErrorBufferV1: identical in every crate. */
typedef struct {
	const uint8_t *ptr;
	size_t len;
} host_slice;
typedef struct {
	uint8_t *ptr;
	size_t capacity;
	size_t written;
} host_errbuf;
_Static_assert(sizeof(host_slice) == 16 && offsetof(host_slice, len) == 8, "ByteSliceV1");
_Static_assert(sizeof(host_errbuf) == 24 && offsetof(host_errbuf, written) == 16, "WorkerSelectorErrorBufferV1");

/* host_cand is one candidate worker of a scenario. */
typedef struct {
	uint64_t id, cached, prefill, decode, capacity;
} host_cand;

/* ---- implemented by each layout's host file ---- */

/* host_name names the layout and its origin in the driver's messages. */
extern const char host_name[];

/* host_adopt checks the descriptor dynamo_worker_selector_plugin_v1
 * returned (non-NULL) the way this layout's loader does and keeps it;
 * NULL, or the loader's reason for refusing it. */
const char *host_adopt(const void *descriptor);

/* The callbacks, through the layout's own descriptor type. host_required
 * is the columnar 4th callback; host_known_inputs is the mask of bits that
 * layout's loader accepts from it (0: the layout has no such callback). */
int32_t host_create(host_slice config, uint32_t role, void **state, host_errbuf *err);
int32_t host_select(void *state, const void *input, size_t *index, host_errbuf *err);
void host_destroy(void *state);
int32_t host_required(void *state, uint64_t *inputs, host_errbuf *err);
extern const uint64_t host_known_inputs;

/* A selection lives in host_storage_size bytes the driver allocates (its
 * end against a guard page, so a read past the layout's last struct
 * faults). host_build lays out n candidates (at most HOST_MAX_CANDIDATES)
 * for an isl-token prompt in blocks of 16, materializing the columns in
 * provided as Dynamo does (the row layout always has all), and returns the
 * input to pass to select. host_mutate turns a built selection into
 * mutation i, one the plugin must not use (it must answer USE_DEFAULT with
 * a message holding *expect), and returns its name; NULL past the last.
 * The input host_build returns is the storage's first bytes, so a mutated
 * selection is passed to select the same way. */
#define HOST_MAX_CANDIDATES 8
extern const size_t host_storage_size;
const void *host_build(void *storage, const host_cand *c, size_t n, uint64_t isl, uint64_t provided);
const char *host_mutate(void *storage, size_t i, const char **expect);

#endif
