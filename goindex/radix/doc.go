// Package radix is goindex's exact KV-block index: Dynamo's radix tree with
// CUR semantics (dynamo-compat §3), the reference every lossy index is held
// against and the user-selectable "exact" mode of the C library.
//
// # Concepts
//
// The tree is shared by all members (kv.Member: worker, dp rank). A node is
// a block position: the path of local hashes (tokens_hash) from the root.
// Each member also keeps its own lookup from external hashes (the engine's
// opaque block_hash) to nodes, because events name blocks by external hash
// while queries carry local hashes. A member *holds* a node when its lookup
// names it, and *reaches* it when it holds the node and every node above it
// through chains it stored and has not removed since. A held node the member
// does not reach is an *orphan*: it counts in the member's tree size, may be
// removed or used as a parent without error, but never scores.
//
// Events (Apply):
//   - Stored: the parent (if any) must be held by the member, or the event
//     is rejected whole (ErrParentNotFound). Each block is created or walked
//     by local hash and becomes held; the blocks are reached iff the parent
//     is reached (or is the root). Re-storing a held block is idempotent; a
//     store that changes nothing counts as a duplicate (Stats.Duplicates).
//     A parent equal to one of the blocks, or a block named twice, is
//     ErrInvalidBlockSequence.
//   - Removed: each named block stops being held. If the member reached it,
//     everything below it that the member reached becomes an orphan, so
//     re-storing only the removed block does not revive its descendants
//     (dynamo-compat §3.5). Unknown hashes are skipped and reported (CUR) or
//     stop the event (Config.StopAtUnknownRemoval, G2025).
//   - Cleared: drops every block of the member (ClearRank) or of every rank
//     of its worker (ClearWorker); the members stay known with tree size 0.
//
// RemoveMember and RemoveWorker drop blocks and forget the members.
//
// Match gives each member the number of leading query blocks it reaches:
// exactly the reference model's reach_len (dynamo-compat §3.6), never more
// than held_len. Members scoring 0 are omitted; there is no early exit.
//
// # Invariants
//
//   - Reachability is prefix-closed: a member reaching a node reaches its
//     parent. Match relies on it (a member's depth is where it drops out of
//     the running set) and so does Dynamo's tree.
//   - Per member, external hashes and held nodes are in one-to-one
//     correspondence; a store that would break it is ErrConflictingBlock.
//     With external hashes derived from the token prefix (every engine
//     Dynamo supports, and the router chain) it never happens.
//   - A node's holders count equals the members holding it; a node with no
//     holders and no children is freed at once, so the tree never keeps
//     dead branches.
//   - Members get the lowest free slot, so an index with at most 64 members
//     keeps every member in the node's 64-bit mask (the fast path); slots
//     from 64 up live in per-node sorted sets.
//
// # Errors
//
// Every error is one of the sentinels in errors.go, typed as *BlockError
// (stores) or *RemoveError (removals). A failed store or an invalid event
// changes nothing. A removal that returns a *RemoveError has removed every
// hash the member held (CUR) or every hash before the first unknown one
// (StopAtUnknownRemoval); the error says how many of each. RemoveMember,
// RemoveWorker and Cleared never fail; on unknown members they do nothing.
//
// # Concurrency
//
// Two locks. Readers (Match, MatchDetailed, Dump, Snapshot, Stats, TreeSize,
// TreeSizes) share a sync.RWMutex and run concurrently with each other from
// any number of goroutines. Writers (Apply, RemoveMember, RemoveWorker,
// Compact) are serialized by a second mutex and take the RWMutex exclusively
// while they change the index, so every reader sees the state between two
// whole events. Compact builds its new layout under the read lock and
// excludes readers only to swap it in. Non-goal: lock-free or seqlock reads;
// Match holds the read lock for about a microsecond, and a torn read of a Go
// map can crash the process.
//
// # Performance
//
// Nodes are single 64-byte cache lines in a pointer-free arena of 1 MiB
// chunks (never scanned by the garbage collector, never copied on growth);
// the first two children are inline in the parent with their local hashes,
// more spill into a map. A chain stored in one event takes consecutive ids,
// so a walk down it reads consecutive cache lines: Match of a Mooncake-shaped
// request at 16 members × 1M blocks takes about 1.5 µs at p50 without
// allocating (BENCHMARKS.md). Freed ids are reused; after long churn a
// chain's nodes scatter and Match slows down six- to eightfold, which Compact
// undoes. A held block costs about 100 bytes when no other member shares its
// node (64 for the node, the rest the member's lookup entry). Non-goal: a
// compressed (run-length) tree; Dynamo's compressed variant exists but the
// classic tree is the compatibility reference.
//
// # Files
//
//   - doc.go: this overview.
//   - errors.go: sentinels and the typed BlockError and RemoveError.
//   - index.go: Config, ClearScope, Index, New, Apply, RemoveMember,
//     RemoveWorker, member slots, Stats, TreeSize, TreeSizes.
//   - arena.go: the node layout, chunked arena, children, reachable sets,
//     pruning.
//   - store.go: Stored and Removed events, orphaning.
//   - match.go: Match, MatchDetailed and Detail.
//   - dump.go: Dump, Snapshot, Entry.
//   - compact.go: Compact.
//
// # Tests
//
// The tests prove every scenario of dynamo-compat §3.5 and the shrunk-5 and
// six-event regressions; the reference model's self-checks of §3.6; that
// randomized event streams (fixed seeds, RADIX_SEED to override, more than
// 64 members included, Compact in between) give every query exactly the
// model's reach_len, with detailed matches agreeing and the index's
// internal invariants intact; that Dump replays into an equal Snapshot; that
// failed events change nothing; that Match does not allocate; and that
// readers racing a writer always see whole events (run under -race). A
// fuzz target drives the same model comparison from arbitrary bytes.
package radix
