/* plugin_row.c: the row layout's host, written from ai-dynamo/dynamo's PR
 * branch: lib/worker-selector-plugin-api/src/lib.rs at 167f1d6 (types and
 * their layout test) and the loader
 * lib/kv-router/src/scheduling/runtime_plugin.rs at 33e85b1 (descriptor
 * checks: abi_version 1, struct_size >= 32, create/select/destroy set).
 * The input's word at offset 4 is candidate_size (128) and the candidates
 * are an array of 128-byte rows. See plugin_host.h. */
#include <string.h>

#include "plugin_host.h"

typedef struct {
	uint64_t worker_id;
	uint32_t dp_rank;
	uint32_t _padding;
	uint64_t cached_tokens;
	double effective_overlap_blocks;
	uint64_t device_overlap_blocks;
	uint64_t host_pinned_overlap_blocks;
	uint64_t disk_overlap_blocks;
	uint64_t shared_cache_beyond_device_blocks;
	uint64_t active_prefill_tokens;
	uint64_t active_decode_blocks;
	uint64_t additional_active_blocks;
	host_slice stable_routing_id;
	double preferred_taint_multiplier;
	uint64_t total_kv_blocks;        /* CAPACITY_UNAVAILABLE = UINT64_MAX */
	uint64_t max_num_batched_tokens; /* the same */
} WorkerSelectorCandidateV1;

typedef struct {
	uint32_t struct_size;
	uint32_t candidate_size;
	uint32_t flags;
	uint32_t block_size;
	uint32_t selection_mode;
	uint64_t isl_tokens;
	uint64_t expected_output_tokens;
	host_slice request_id;
	host_slice session_id;
	const WorkerSelectorCandidateV1 *candidates;
	size_t candidate_count;
} WorkerSelectorInputV1;

typedef int32_t (*WorkerSelectorCreateV1)(host_slice config, uint32_t router_role, void **state_out, host_errbuf *error_out);
typedef int32_t (*WorkerSelectorSelectV1)(void *state, const WorkerSelectorInputV1 *input, size_t *candidate_index_out, host_errbuf *error_out);
typedef void (*WorkerSelectorDestroyV1)(void *state);

typedef struct {
	uint32_t abi_version;
	uint32_t struct_size;
	WorkerSelectorCreateV1 create;
	WorkerSelectorSelectV1 select;
	WorkerSelectorDestroyV1 destroy;
} WorkerSelectorPluginV1;

/* The crate's abi_v1_layout_is_stable_on_64_bit_targets. */
_Static_assert(sizeof(WorkerSelectorCandidateV1) == 128 && sizeof(WorkerSelectorInputV1) == 88 && sizeof(WorkerSelectorPluginV1) == 32,
               "sizes 128, 88, 32");
_Static_assert(offsetof(WorkerSelectorCandidateV1, dp_rank) == 8 && offsetof(WorkerSelectorCandidateV1, _padding) == 12 &&
                   offsetof(WorkerSelectorCandidateV1, cached_tokens) == 16 && offsetof(WorkerSelectorCandidateV1, effective_overlap_blocks) == 24 &&
                   offsetof(WorkerSelectorCandidateV1, device_overlap_blocks) == 32 && offsetof(WorkerSelectorCandidateV1, host_pinned_overlap_blocks) == 40 &&
                   offsetof(WorkerSelectorCandidateV1, disk_overlap_blocks) == 48 &&
                   offsetof(WorkerSelectorCandidateV1, shared_cache_beyond_device_blocks) == 56 &&
                   offsetof(WorkerSelectorCandidateV1, active_prefill_tokens) == 64 && offsetof(WorkerSelectorCandidateV1, active_decode_blocks) == 72 &&
                   offsetof(WorkerSelectorCandidateV1, additional_active_blocks) == 80 && offsetof(WorkerSelectorCandidateV1, stable_routing_id) == 88 &&
                   offsetof(WorkerSelectorCandidateV1, preferred_taint_multiplier) == 104 &&
                   offsetof(WorkerSelectorCandidateV1, total_kv_blocks) == 112 && offsetof(WorkerSelectorCandidateV1, max_num_batched_tokens) == 120,
               "candidate offsets 0, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 104, 112, 120");
_Static_assert(offsetof(WorkerSelectorInputV1, candidate_size) == 4 && offsetof(WorkerSelectorInputV1, flags) == 8 &&
                   offsetof(WorkerSelectorInputV1, block_size) == 12 && offsetof(WorkerSelectorInputV1, selection_mode) == 16 &&
                   offsetof(WorkerSelectorInputV1, isl_tokens) == 24 && offsetof(WorkerSelectorInputV1, expected_output_tokens) == 32 &&
                   offsetof(WorkerSelectorInputV1, request_id) == 40 && offsetof(WorkerSelectorInputV1, session_id) == 56 &&
                   offsetof(WorkerSelectorInputV1, candidates) == 72 && offsetof(WorkerSelectorInputV1, candidate_count) == 80,
               "input offsets 0, 4, 8, 12, 16, 24, 32, 40, 56, 72, 80");
_Static_assert(offsetof(WorkerSelectorPluginV1, create) == 8 && offsetof(WorkerSelectorPluginV1, select) == 16 &&
                   offsetof(WorkerSelectorPluginV1, destroy) == 24,
               "descriptor offsets 0, 4, 8, 16, 24");

const char host_name[] = "row (ai-dynamo/dynamo 167f1d6, loader 33e85b1)";
const uint64_t host_known_inputs = 0;

static const WorkerSelectorPluginV1 *plugin;

const char *host_adopt(const void *descriptor) {
	const WorkerSelectorPluginV1 *d = descriptor;
	if (d->abi_version != 1) return "abi_version is not 1";
	if (d->struct_size < sizeof(WorkerSelectorPluginV1)) return "descriptor smaller than 32 bytes";
	if (!d->create || !d->select || !d->destroy) return "a callback is missing";
	plugin = d;
	return NULL;
}

int32_t host_create(host_slice config, uint32_t role, void **state, host_errbuf *err) { return plugin->create(config, role, state, err); }
int32_t host_select(void *state, const void *input, size_t *index, host_errbuf *err) { return plugin->select(state, input, index, err); }
void host_destroy(void *state) { plugin->destroy(state); }
int32_t host_required(void *state, uint64_t *inputs, host_errbuf *err) {
	(void)state, (void)inputs, (void)err;
	return ST_ERROR; /* the row layout has no such callback; never called */
}

/* A selection: the input, then the rows, the last of which ends at the
 * guard page (n rows are the array's last n). */
typedef struct {
	WorkerSelectorInputV1 in;
	WorkerSelectorCandidateV1 rows[HOST_MAX_CANDIDATES];
} selection;
const size_t host_storage_size = sizeof(selection);

const void *host_build(void *storage, const host_cand *c, size_t n, uint64_t isl, uint64_t provided) {
	(void)provided;
	static const char rid[] = "req-1";
	selection *s = storage;
	memset(s, 0, sizeof *s);
	WorkerSelectorCandidateV1 *rows = s->rows + HOST_MAX_CANDIDATES - n;
	for (size_t i = 0; i < n; i++)
		rows[i] = (WorkerSelectorCandidateV1){.worker_id = c[i].id, .dp_rank = (uint32_t)i % 2, .cached_tokens = c[i].cached,
		                                      .effective_overlap_blocks = (double)c[i].cached / 16, .device_overlap_blocks = c[i].cached / 16,
		                                      .active_prefill_tokens = c[i].prefill, .active_decode_blocks = c[i].decode,
		                                      .preferred_taint_multiplier = 1.0, .total_kv_blocks = c[i].capacity,
		                                      .max_num_batched_tokens = UINT64_MAX};
	s->in = (WorkerSelectorInputV1){.struct_size = sizeof(WorkerSelectorInputV1), .candidate_size = sizeof(WorkerSelectorCandidateV1),
	                                .flags = 1 /* INPUT_HAS_REQUEST_ID */, .block_size = 16, .selection_mode = 1, .isl_tokens = isl,
	                                .request_id = {(const uint8_t *)rid, 5}, .candidates = rows, .candidate_count = n};
	return &s->in;
}

const char *host_mutate(void *storage, size_t i, const char **expect) {
	selection *s = storage;
	switch (i) {
	case 0: s->in.candidate_size = 136; *expect = "word @4 is 136"; return "a larger candidate size";
	case 1: s->in.candidate_size = 0; *expect = "word @4 is 0"; return "candidate size 0";
	case 2: s->in.struct_size = 80; *expect = "struct_size 80"; return "input struct_size 80";
	case 3: s->in.candidates = NULL; *expect = "candidates is NULL"; return "candidates NULL";
	case 4: s->in.candidates = (const void *)((const uint8_t *)s->in.candidates + 4); *expect = "aligned"; return "misaligned candidates";
	case 5: s->in.candidate_count = (1u << 16) + 1; *expect = "at most"; return "too many candidates";
	case 6: s->in.block_size = 0; *expect = "block size 0"; return "block size 0";
	}
	return NULL;
}
