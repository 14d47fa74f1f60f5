//! Helpers shared by the tests that drive the policy through the shim's host.

use dynamo_kv_router::host::Row;
use dynamo_kv_router::protocols::WorkerWithDpRank;

/// row is a candidate worker with a load observation.
pub fn row(id: u64, cached_tokens: usize, active_prefill_tokens: usize) -> Row {
    Row {
        worker: WorkerWithDpRank::new(id, 0),
        cached_tokens,
        device_overlap_blocks: cached_tokens as f64 / 16.0,
        load_available: true,
        active_prefill_tokens,
        ..Row::default()
    }
}
