/* plugin_columns.c: the columnar layouts' hosts, one binary each, written
 * from the forks' API crates (lib/worker-selector-plugin-api/src/lib.rs):
 *   -DLAYOUT_COLUMNS72       ishandhanani/dynamo d18d569: a 72-byte column
 *                            table (through routing), "candidate signal
 *                            groups" bits 0–5, required_candidate_groups;
 *   -DLAYOUT_COLUMNS96       ishandhanani/dynamo d4c1cc2: the table grows
 *                            the three default_* columns (96 bytes),
 *                            "candidate inputs" bits 0–8,
 *                            required_candidate_inputs;
 *   -DLAYOUT_WORKER_COLUMNS  the renamed crate of PR #11884
 *                            ("dynamo-worker-selection-api"): the 96-byte
 *                            layout under worker names (worker_columns_format,
 *                            worker_columns, worker_count, WorkerInputs,
 *                            required_worker_inputs), so only the names
 *                            below change with it.
 * Their loader (lib/kv-router/src/scheduling/runtime_plugin.rs of the fork)
 * checks abi_version 1, struct_size >= 40 and all four callbacks, calls
 * the 4th once after create and refuses bits outside its known set, then
 * materializes only the requested columns (with the identity) and leaves
 * the others NULL. See plugin_host.h. */
#include <string.h>

#include "plugin_host.h"

#if defined(LAYOUT_COLUMNS72)
#define HOST_NAME "columns72 (ishandhanani/dynamo d18d569)"
#define PROVIDED provided_groups
#define FORMAT candidate_format
#define TABLE candidate_columns
#define COUNT candidate_count
#define REQUIRED required_candidate_groups
#define KNOWN_INPUTS 0x3Full /* CandidateSignalGroups::ALL */
#define TABLE_SIZE 72
#elif defined(LAYOUT_COLUMNS96)
#define HOST_NAME "columns96 (ishandhanani/dynamo d4c1cc2)"
#define PROVIDED provided_inputs
#define FORMAT candidate_format
#define TABLE candidate_columns
#define COUNT candidate_count
#define REQUIRED required_candidate_inputs
#define KNOWN_INPUTS 0x1FFull /* CandidateInputs::ALL */
#define TABLE_SIZE 96
#elif defined(LAYOUT_WORKER_COLUMNS)
#define HOST_NAME "worker columns (dynamo-worker-selection-api, PR #11884)"
#define PROVIDED provided_inputs
#define FORMAT worker_columns_format
#define TABLE worker_columns
#define COUNT worker_count
#define REQUIRED required_worker_inputs
#define KNOWN_INPUTS 0x1FFull /* WorkerInputs::ALL */
#define TABLE_SIZE 96
#else
#error "define LAYOUT_COLUMNS72, LAYOUT_COLUMNS96 or LAYOUT_WORKER_COLUMNS"
#endif

typedef struct {
	double effective_overlap_blocks;
	uint64_t device_overlap_blocks;
	uint64_t host_pinned_overlap_blocks;
	uint64_t disk_overlap_blocks;
	uint64_t shared_cache_beyond_device_blocks;
} WorkerSelectorCacheTiersV1;

typedef struct {
	uint64_t active_prefill_tokens;
	uint64_t active_decode_blocks;
	uint64_t additional_active_blocks;
} WorkerSelectorLoadV1;

typedef struct {
	uint64_t total_kv_blocks;        /* CAPACITY_UNAVAILABLE = UINT64_MAX */
	uint64_t max_num_batched_tokens; /* the same */
} WorkerSelectorCapacityV1;

typedef struct {
	host_slice stable_routing_id;
	double preferred_taint_multiplier;
} WorkerSelectorRoutingV1;

/* WorkerSelectorCandidateColumnsV1 (WorkerSelectorColumnsV1 in the renamed crate). */
typedef struct {
	uint32_t struct_size;
	uint32_t _reserved;
	uint64_t PROVIDED;
	const uint64_t *worker_ids;
	const uint32_t *dp_ranks;
	const uint64_t *cached_tokens;
	const WorkerSelectorCacheTiersV1 *cache_tiers;
	const WorkerSelectorLoadV1 *loads;
	const WorkerSelectorCapacityV1 *capacities;
	const WorkerSelectorRoutingV1 *routing;
#if TABLE_SIZE == 96
	const double *default_costs;
	const double *default_kv_overlaps;
	const uint64_t *default_decode_loads;
#endif
} Columns;

typedef struct {
	uint32_t struct_size;
	uint32_t FORMAT; /* CANDIDATE_FORMAT_COLUMNAR_V1 / WORKER_COLUMNS_FORMAT_V1 = 1 */
	uint32_t flags;
	uint32_t block_size;
	uint32_t selection_mode;
	uint64_t isl_tokens;
	uint64_t expected_output_tokens;
	host_slice request_id;
	host_slice session_id;
	const Columns *TABLE;
	size_t COUNT;
} WorkerSelectorInputV1;

typedef struct {
	uint32_t abi_version;
	uint32_t struct_size;
	int32_t (*create)(host_slice config, uint32_t router_role, void **state_out, host_errbuf *error_out);
	int32_t (*select)(void *state, const WorkerSelectorInputV1 *input, size_t *index_out, host_errbuf *error_out);
	void (*destroy)(void *state);
	int32_t (*REQUIRED)(void *state, uint64_t *inputs_out, host_errbuf *error_out);
} WorkerSelectorPluginV1;

/* The crates' abi_v1_layout_is_stable_on_64_bit_targets. */
_Static_assert(sizeof(WorkerSelectorCacheTiersV1) == 40 && sizeof(WorkerSelectorLoadV1) == 24 && sizeof(WorkerSelectorCapacityV1) == 16 &&
                   sizeof(WorkerSelectorRoutingV1) == 24 && offsetof(WorkerSelectorRoutingV1, preferred_taint_multiplier) == 16,
               "column entries 40, 24, 16, 24");
_Static_assert(sizeof(Columns) == TABLE_SIZE && offsetof(Columns, PROVIDED) == 8 && offsetof(Columns, worker_ids) == 16 &&
                   offsetof(Columns, dp_ranks) == 24 && offsetof(Columns, cached_tokens) == 32 && offsetof(Columns, cache_tiers) == 40 &&
                   offsetof(Columns, loads) == 48 && offsetof(Columns, capacities) == 56 && offsetof(Columns, routing) == 64,
               "column table offsets 0, 4, 8, 16, 24, 32, 40, 48, 56, 64");
#if TABLE_SIZE == 96
_Static_assert(offsetof(Columns, default_costs) == 72 && offsetof(Columns, default_kv_overlaps) == 80 &&
                   offsetof(Columns, default_decode_loads) == 88,
               "default_* columns at 72, 80, 88");
#endif
_Static_assert(sizeof(WorkerSelectorInputV1) == 88 && offsetof(WorkerSelectorInputV1, FORMAT) == 4 &&
                   offsetof(WorkerSelectorInputV1, block_size) == 12 && offsetof(WorkerSelectorInputV1, isl_tokens) == 24 &&
                   offsetof(WorkerSelectorInputV1, request_id) == 40 && offsetof(WorkerSelectorInputV1, session_id) == 56 &&
                   offsetof(WorkerSelectorInputV1, TABLE) == 72 && offsetof(WorkerSelectorInputV1, COUNT) == 80,
               "input offsets 0, 4, 8, 12, 16, 24, 32, 40, 56, 72, 80");
_Static_assert(sizeof(WorkerSelectorPluginV1) == 40 && offsetof(WorkerSelectorPluginV1, select) == 16 &&
                   offsetof(WorkerSelectorPluginV1, REQUIRED) == 32,
               "descriptor offsets 0, 4, 8, 16, 24, 32");

const char host_name[] = HOST_NAME;
const uint64_t host_known_inputs = KNOWN_INPUTS;

static const WorkerSelectorPluginV1 *plugin;

const char *host_adopt(const void *descriptor) {
	const WorkerSelectorPluginV1 *d = descriptor;
	if (d->abi_version != 1) return "abi_version is not 1";
	if (d->struct_size < sizeof(WorkerSelectorPluginV1)) return "descriptor smaller than 40 bytes";
	if (!d->create || !d->select || !d->destroy || !d->REQUIRED) return "a callback is missing";
	plugin = d;
	return NULL;
}

int32_t host_create(host_slice config, uint32_t role, void **state, host_errbuf *err) { return plugin->create(config, role, state, err); }
int32_t host_select(void *state, const void *input, size_t *index, host_errbuf *err) { return plugin->select(state, input, index, err); }
void host_destroy(void *state) { plugin->destroy(state); }
int32_t host_required(void *state, uint64_t *inputs, host_errbuf *err) { return plugin->REQUIRED(state, inputs, err); }

/* A selection: the input, the columns' entries, then the column table,
 * which ends at the guard page (a read past its TABLE_SIZE bytes faults). */
typedef struct {
	WorkerSelectorInputV1 in;
	uint64_t ids[HOST_MAX_CANDIDATES];
	uint32_t ranks[HOST_MAX_CANDIDATES];
	uint64_t cached[HOST_MAX_CANDIDATES];
	WorkerSelectorLoadV1 loads[HOST_MAX_CANDIDATES];
	WorkerSelectorCapacityV1 caps[HOST_MAX_CANDIDATES];
	Columns table;
} selection;
const size_t host_storage_size = sizeof(selection);

#define IF(bit, column) (provided & (bit) ? (column) : NULL)

const void *host_build(void *storage, const host_cand *c, size_t n, uint64_t isl, uint64_t provided) {
	static const char rid[] = "req-1";
	selection *s = storage;
	memset(s, 0, sizeof *s);
	for (size_t i = 0; i < n; i++) {
		s->ids[i] = c[i].id;
		s->ranks[i] = (uint32_t)i % 2;
		s->cached[i] = c[i].cached;
		s->loads[i] = (WorkerSelectorLoadV1){c[i].prefill, c[i].decode, 0};
		s->caps[i] = (WorkerSelectorCapacityV1){c[i].capacity, UINT64_MAX};
	}
	s->table = (Columns){.struct_size = sizeof(Columns), .PROVIDED = provided, .worker_ids = IF(IN_IDENTITY, s->ids),
	                     .dp_ranks = IF(IN_IDENTITY, s->ranks), .cached_tokens = IF(IN_CACHED, s->cached), .loads = IF(IN_LOAD, s->loads),
	                     .capacities = IF(IN_CAPACITY, s->caps)};
	s->in = (WorkerSelectorInputV1){.struct_size = sizeof(WorkerSelectorInputV1), .FORMAT = 1, .flags = 1 /* INPUT_HAS_REQUEST_ID */,
	                                .block_size = 16, .selection_mode = 1, .isl_tokens = isl, .request_id = {(const uint8_t *)rid, 5},
	                                .TABLE = &s->table, .COUNT = n};
	return &s->in;
}

const char *host_mutate(void *storage, size_t i, const char **expect) {
	selection *s = storage;
	static uint64_t misaligned[4];
	switch (i) {
	case 0: s->in.FORMAT = 2; *expect = "word @4 is 2"; return "format 2";
	case 1: s->in.FORMAT = 0; *expect = "word @4 is 0"; return "format 0";
	case 2: s->in.struct_size = 80; *expect = "struct_size 80"; return "input struct_size 80";
	case 3: s->in.TABLE = NULL; *expect = "candidate_columns is NULL"; return "column table NULL";
	case 4: s->table.struct_size = 64; *expect = "columns struct_size 64"; return "column table struct_size 64";
	case 5: s->table.worker_ids = NULL; *expect = "worker_ids"; return "worker_ids provided but NULL";
	case 6: s->table.loads = NULL; *expect = "loads"; return "loads provided but NULL";
	case 7: s->table.loads = (const void *)((const uint8_t *)misaligned + 4); *expect = "aligned"; return "misaligned loads";
	case 8: s->in.COUNT = (1u << 16) + 1; *expect = "at most"; return "too many candidates";
	case 9: s->in.block_size = 0; *expect = "block size 0"; return "block size 0";
	case 10: s->in.TABLE = (const void *)((const uint8_t *)&s->table - 4); *expect = "aligned"; return "misaligned column table";
	}
	return NULL;
}
