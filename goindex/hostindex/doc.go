// Package hostindex is the index a host process opens by config: what
// libgoindex.so's goindex_open gives a C host, for Go callers too. One
// JSON config (include/goindex.h documents every key) picks a mode: "exact"
// (goindex/radix, Dynamo's semantics), "ckf" (goindex/ckfindex, one
// cuckoo-filter lane per member) or "global" (one lane per DC, fed relay
// frames through a follow.Feed or read from the consumer's replica file
// through a follow.Follower). Over any mode it answers probes (per-member or
// per-lane prefix depth), scores (goindex/score's four ABI policies over
// the caller's candidates or a global index's lanes), token hashing and
// counters.
//
// # Concepts
//
// Probes take the query's local block hashes from the root; Match returns
// one overlap per member with a positive depth (global: Worker = DC id,
// Rank = lane), SortMembers orders them as the ABI promises. Score gives
// each candidate its probe depth and lets the policy choose; a global index
// asked without candidates offers its ready lanes with their load reports
// and RTTs, each only while younger than max_staleness_ms (a stale or
// missing signal is excluded, never read as zero: follow.SetSignals), and
// each lane's eviction factor from its reports' stored-blocks counters
// (follow.Turnover; 0 until two counted reports of one relay incarnation).
// A score asked to fail open (ScoreQuery.Open, what the ABI's 80-byte result
// asks) never answers "no eligible candidate" while it has any: follow.Open
// falls back to every known lane's last known signals, then to
// "default_dc", and Scored.Degraded says why (the replica's health, or
// signals-stale).
//
// # Invariants
//
//   - Match never reports a depth below the exact depth of a tracked block
//     (ckf and global overcount only through fingerprint collisions).
//   - Match reads its query only during the call and keeps nothing of it;
//     Apply may keep the event's slices (the ABI layer copies host memory
//     first).
//
// # Errors
//
// ParseConfig and Open return ErrConfig and build nothing. Event errors
// leave what the indexes document: a rejected store changes nothing; a
// removal naming unknown hashes has removed the known ones; in ckf mode a
// capacity error means the blocks are tracked but not all in the filter.
// ErrMode reports a call the mode does not offer (before any change),
// ErrClosed a call after Close. A frame error leaves what follow.Feed.Apply
// says; a failed AttachReplica changes nothing.
//
// # Concurrency
//
// Match, ProbeBatch, Score, HashTokens and Counters take no lock and may
// run from any number of goroutines concurrently with event calls, which
// serialize on the index's mutex (Apply, RemoveWorker, RemoveMember,
// ApplyFrame, SetRTT, AttachReplica), as does Close. In global mode the
// index is every fed lane's one ingestor; probes read the lanes under the
// weak-read contract of spec §5.4.
//
// # Files
//
//   - config.go: Config, its defaults, ParseConfig and Check.
//   - index.go: Mode, Index, Open, the KV event calls, HashTokens, Counters, Close.
//   - global.go: global mode: fed lanes or an attached replica, lane candidates, frames, RTTs.
//   - probe.go: Match, ProbeBatch, SortMembers.
//   - score.go: ScoreQuery, Scored, Score.
//   - errors.go: sentinels.
//
// # Tests
//
// The tests prove the config's defaults, every key and every rejection (a
// fuzz target round-trips accepted configs); SortMembers against a stable
// sort; calls after Close; that a global index's score uses only fresh
// signals and names lanes; that the stored-blocks counter turns a choice
// (and a relay restart turns it back); and that it fails open on a stale consumer (the
// last known signals) and a truncated file (the default DC of the last
// file), and only without any lane still fails. The ABI's suites (ffi, tests/c, tests/python,
// tests/gohost) drive every mode end to end.
package hostindex
