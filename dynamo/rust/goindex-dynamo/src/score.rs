//! Routing questions for [`Indexer::score`](crate::Indexer::score): the
//! candidates with their live signals, the policy, and the chosen one with
//! its cost broken into parts.

use crate::event::{LocalBlockHash, WorkerWithDpRank};
use crate::sys;

/// Policy is a scoring rule (GOINDEX_POLICY_*).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Policy {
    /// Default is the handle's configured policy (config key "policy";
    /// default: ttft).
    #[default]
    Default = 0,
    /// Ttft is goindex's model: RTT + queue wait + prefill time of the
    /// uncached prompt, in ms. Needs load and RTT.
    Ttft = 1,
    /// PrefixThenLoad is upstream's proof of concept: longest prefix, then
    /// lowest load. Needs load.
    PrefixThenLoad = 2,
    /// LoadOnly is the lowest load, prefix ignored. Needs load.
    LoadOnly = 3,
    /// Credit is Dynamo's block-cost rule with overlap credit
    /// (`dynamo-compat` §4.2). Needs load.
    Credit = 4,
}

/// Load is a candidate's current work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Load {
    /// active_prefill_tokens are the tokens queued or running prefill.
    pub active_prefill_tokens: u64,
    /// active_decode_blocks are the KV blocks of running decodes.
    pub active_decode_blocks: u64,
}

/// Candidate is one place a request may go, with the signals the router
/// has for it. A signal that is `None` is left out of the cost, never read
/// as zero; a candidate missing one its policy needs is not eligible.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Candidate {
    /// worker is the rank; its probe depth is the candidate's cached prefix.
    pub worker: WorkerWithDpRank,
    /// load is the candidate's current work.
    pub load: Option<Load>,
    /// capacity_blocks is the candidate's KV capacity in blocks.
    pub capacity_blocks: Option<u64>,
    /// rtt_ms is the round trip from the router to the candidate, in ms
    /// (finite and >= 0).
    pub rtt_ms: Option<f64>,
}

impl Candidate {
    /// raw returns the candidate as the C ABI's goindex_candidate.
    pub(crate) fn raw(&self) -> sys::Candidate {
        let mut flags = 0;
        let load = self.load.inspect(|_| flags |= sys::CAND_LOAD).unwrap_or_default();
        let capacity_blocks = self.capacity_blocks.inspect(|_| flags |= sys::CAND_CAPACITY).unwrap_or(0);
        let rtt_ms = self.rtt_ms.inspect(|_| flags |= sys::CAND_RTT).unwrap_or(0.0);
        sys::Candidate {
            id: self.worker.worker_id,
            rank: self.worker.dp_rank,
            flags,
            active_prefill_tokens: load.active_prefill_tokens,
            active_decode_blocks: load.active_decode_blocks,
            capacity_blocks,
            rtt_ms,
        }
    }
}

/// ScoreRequest is one routing question. `..Default::default()` gives the
/// handle's policy, no candidates list, temperature 0 and a random seed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScoreRequest<'a> {
    /// policy is the rule to apply.
    pub policy: Policy,
    /// local_hashes are the prompt's local block hashes from the root.
    pub local_hashes: &'a [LocalBlockHash],
    /// isl_tokens is the prompt length in tokens; 0 means
    /// `local_hashes.len()` × block size.
    pub isl_tokens: u64,
    /// candidates are the places to choose from; `None` asks for every
    /// member the handle knows (members carry no load, so in exact and ckf
    /// modes no policy finds one eligible).
    pub candidates: Option<&'a [Candidate]>,
    /// temperature 0 picks the minimum cost (ties broken uniformly); above
    /// 0 it samples a softmax over costs as Dynamo does.
    pub temperature: f64,
    /// random_seed seeds tie-breaking and sampling; 0 picks one.
    pub random_seed: u64,
}

/// ScoreResult is the chosen candidate and its cost broken into parts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScoreResult {
    /// chosen is the index into the request's candidates (or the member's
    /// ordinal when the request had none).
    pub chosen: usize,
    /// worker is the chosen rank.
    pub worker: WorkerWithDpRank,
    /// eligible counts the candidates that had every signal the policy
    /// needs.
    pub eligible: u32,
    /// cached_blocks is the chosen candidate's probe depth.
    pub cached_blocks: u64,
    /// cached_tokens is cached_blocks × block size, capped at the prompt.
    pub cached_tokens: u64,
    /// cost is the policy's cost: ms for ttft, blocks for the others.
    pub cost: f64,
    /// rtt_ms is the ttft policy's RTT part (0 for the others).
    pub rtt_ms: f64,
    /// queue_ms is the ttft policy's queue-wait part.
    pub queue_ms: f64,
    /// prefill_ms is the ttft policy's prefill part.
    pub prefill_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_flags_follow_the_present_signals() {
        let w = WorkerWithDpRank::new(7, 2);
        let bare = Candidate { worker: w, ..Default::default() }.raw();
        assert_eq!((bare.id, bare.rank, bare.flags), (7, 2, 0), "no signals: {bare:?}");
        let full = Candidate {
            worker: w,
            load: Some(Load { active_prefill_tokens: 3, active_decode_blocks: 4 }),
            capacity_blocks: Some(5),
            rtt_ms: Some(6.5),
        }
        .raw();
        assert_eq!(full.flags, sys::CAND_LOAD | sys::CAND_CAPACITY | sys::CAND_RTT, "every signal: {full:?}");
        assert_eq!(
            (full.active_prefill_tokens, full.active_decode_blocks, full.capacity_blocks, full.rtt_ms),
            (3, 4, 5, 6.5),
            "every signal: {full:?}"
        );
        let rtt = Candidate { worker: w, rtt_ms: Some(0.0), ..Default::default() }.raw();
        assert_eq!(rtt.flags, sys::CAND_RTT, "an RTT of 0 is a signal, not its absence: {rtt:?}");
    }
}
