/* plugin.c: the C half of Dynamo's worker-selector plugin (dynamo-compat
 * §5a). Dynamo needs the descriptor and its callbacks in C memory (a Go
 * pointer returned to the host aborts it), so they live here: each callback
 * turns the opaque state into its number (states are numbers cast to
 * pointers, never Go pointers), unpacks the config slice passed by value, and
 * calls one Go export of plugin.go, which does the checking and the work. */
#include <stddef.h>
#include <stdint.h>

#include "goindex.h"
#include "_cgo_export.h"

/* The layouts the upstream API crates pin (their layout tests; LP64):
 * columnar at d18d569/d4c1cc2 and the "worker columns" rename, row at
 * 167f1d6 (include/goindex.h names each). */
_Static_assert(sizeof(dynamo_ws_byte_slice) == 16, "ByteSlice is 16 bytes");
_Static_assert(sizeof(dynamo_ws_error_buffer) == 24 && offsetof(dynamo_ws_error_buffer, written) == 16, "ErrorBuffer");
_Static_assert(sizeof(dynamo_ws_cache_tiers) == 40 && sizeof(dynamo_ws_load) == 24 && sizeof(dynamo_ws_capacity) == 16 &&
                   sizeof(dynamo_ws_routing) == 24 && offsetof(dynamo_ws_routing, preferred_taint_multiplier) == 16,
               "column entries");
_Static_assert(sizeof(dynamo_ws_columns) == 96 && offsetof(dynamo_ws_columns, provided_inputs) == 8 &&
                   offsetof(dynamo_ws_columns, worker_ids) == 16 && offsetof(dynamo_ws_columns, loads) == 48 &&
                   offsetof(dynamo_ws_columns, default_decode_loads) == 88,
               "Columns");
_Static_assert(sizeof(dynamo_ws_input) == 88 && offsetof(dynamo_ws_input, isl_tokens) == 24 &&
                   offsetof(dynamo_ws_input, request_id) == 40 && offsetof(dynamo_ws_input, session_id) == 56 &&
                   offsetof(dynamo_ws_input, candidate_columns) == 72 && offsetof(dynamo_ws_input, candidate_count) == 80,
               "Input");
_Static_assert(offsetof(dynamo_ws_columns, default_costs) == DYNAMO_WS_COLUMNS72_SIZE, "the 72-byte table ends at default_costs");
_Static_assert(sizeof(dynamo_ws_candidate) == DYNAMO_WS_ROW_CANDIDATE_SIZE && offsetof(dynamo_ws_candidate, cached_tokens) == 16 &&
                   offsetof(dynamo_ws_candidate, active_prefill_tokens) == 64 && offsetof(dynamo_ws_candidate, stable_routing_id) == 88 &&
                   offsetof(dynamo_ws_candidate, preferred_taint_multiplier) == 104 && offsetof(dynamo_ws_candidate, total_kv_blocks) == 112 &&
                   offsetof(dynamo_ws_candidate, max_num_batched_tokens) == 120,
               "row candidate");
_Static_assert(sizeof(dynamo_ws_row_input) == sizeof(dynamo_ws_input) && offsetof(dynamo_ws_row_input, candidate_size) == 4 &&
                   offsetof(dynamo_ws_row_input, candidates) == offsetof(dynamo_ws_input, candidate_columns) &&
                   offsetof(dynamo_ws_row_input, candidate_count) == offsetof(dynamo_ws_input, candidate_count),
               "row input shares the columnar input's header");
_Static_assert(sizeof(dynamo_ws_descriptor_v1) == 40 && offsetof(dynamo_ws_descriptor_v1, create) == 8 &&
                   offsetof(dynamo_ws_descriptor_v1, required_candidate_inputs) == 32,
               "Descriptor");

static int32_t ws_create(dynamo_ws_byte_slice config, uint32_t router_role, void **state_out, dynamo_ws_error_buffer *err) {
	uint64_t id = 0;
	int32_t rc = dynamoSelectorCreate((goindex_in_u8 *)config.ptr, config.len, router_role, state_out ? &id : NULL, err);
	if (state_out) *state_out = (void *)(uintptr_t)id; /* NULL unless create succeeded */
	return rc;
}

static int32_t ws_select(void *state, const dynamo_ws_input *in, size_t *candidate_index_out, dynamo_ws_error_buffer *err) {
	return dynamoSelectorSelect((uint64_t)(uintptr_t)state, (dynamo_ws_input *)in, candidate_index_out, err);
}

static void ws_destroy(void *state) { dynamoSelectorDestroy((uint64_t)(uintptr_t)state); }

static int32_t ws_required(void *state, uint64_t *inputs_out, dynamo_ws_error_buffer *err) {
	return dynamoSelectorRequiredInputs((uint64_t)(uintptr_t)state, inputs_out, err);
}

int goindex_worker_costs(void *state, uint32_t block_size, uint64_t isl_tokens, goindex_in_worker *workers, size_t n, double *costs,
                         uint32_t *degraded, dynamo_ws_error_buffer *note) {
	return pluginWorkerCosts((uint64_t)(uintptr_t)state, block_size, isl_tokens, (goindex_worker *)workers, n, costs, degraded, note);
}

_Static_assert(sizeof(goindex_worker) == 40 && offsetof(goindex_worker, flags) == 32, "goindex_worker");

static const dynamo_ws_descriptor_v1 descriptor = {
    .abi_version = DYNAMO_WS_ABI_VERSION,
    .struct_size = sizeof(dynamo_ws_descriptor_v1),
    .create = ws_create,
    .select = ws_select,
    .destroy = ws_destroy,
    .required_candidate_inputs = ws_required,
};

const dynamo_ws_descriptor_v1 *dynamo_worker_selector_plugin_v1(void) { return &descriptor; }
