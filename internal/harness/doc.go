// Package harness is goindex's differential test harness: it holds any
// kv.Index (the exact radix tree, the CKF index, the dynkv server backend)
// against the exact semantics of Dynamo's KV index, using the reference
// model of dynamo-compat §3.6 and the random workload generator of §3.7.
// Other packages' tests call it in one line:
//
//	harness.Run(t, func() kv.Index { return radix.New(radix.Config{}) }, harness.Options{Short: testing.Short()})
//
// # Concepts
//
// A workload is a list of Ops (Generate): kv events, member removals and
// worker removals, each followed by the queries to check once it has been
// applied. The Model keeps, per member, the blocks it holds and the subset
// it reaches (its whole chain to the root is covered); for a query it gives
// held_len and reach_len, and a correct index scores every member within
// reach_len ≤ score ≤ held_len. An exact index scores reach_len; an index
// that counts contiguous held blocks (dynkv) may score up to held_len; the
// gap between them is a hole. Check turns one query into verdicts: exact,
// hole (allowed), overcount (above held_len, or a positive score for a
// member the model does not know), undercount (below reach_len), and
// malformed results. The model also says, per op, whether an exact index
// must accept it (MustApply) or may reject it (MayReject: a store below an
// orphaned parent, a removal naming a block the index may never have
// accepted).
//
// Run drives fresh indexes over many seeds in one of three Modes (serial;
// concurrent readers; the lane pool with any number of lanes), applies the
// failure policy (overcounts fail unless Options.AllowOvercount, which
// reports the rate instead, for probabilistic indexes; undercounts and
// errors on MustApply ops fail in strict mode; malformed results always
// fail), shrinks the first failing seed to a minimal engine-valid case
// (Shrink) and prints it with its seed. Knobs come from HARNESS_* variables
// (KnobsFromEnv).
//
// # Invariants
//
//   - The model's reachable set is a prefix-closed subset of its held set;
//     re-storing a removed block does not revive its descendants (Dynamo
//     CUR). Hence reach_len ≤ held_len for every member and query.
//   - Generated workloads are engine-valid (every store chains from the
//     root or a block its rank holds, every removal names distinct held
//     blocks), external hashes are the router chain of the local hashes
//     (kv.AppendChain), every store carries start_position, event ids
//     increase from 1, and the last op is a checkpoint. Shrink keeps
//     every candidate engine-valid.
//   - Generate is deterministic in (seed, GenConfig); a failing seed reruns
//     with HARNESS_SEED. The PCG stream is not upstream's fastrand stream:
//     the statistics of §3.7 are reproduced, not its exact workloads.
//
// # Deviation from §3.6
//
// §3.6 calls a removal Apply whenever it cuts a reachable block. Model.Remove
// also requires every named hash to be reachable: a CUR engine removes the
// rest and reports an unknown hash, and an exact index may never have
// accepted a held but orphaned block, so an error there is allowed. The held
// and reachable sets evolve exactly as in §3.6.
//
// # Errors
//
// Disagreements are *Violation values (typed, with the op, member, query and
// bounds); a bad knob is a *KnobError; Op.Apply on an invalid OpKind returns
// ErrOpKind. Nothing in the package fails half-way: Run reports through its
// TB and returns a Report, and Shrink never modifies its input.
//
// # Concurrency
//
// A Model is not safe for concurrent mutation; its read methods may run
// concurrently while nothing mutates it, which is how the concurrent readers
// mode checks a checkpoint from several goroutines. Run and Shrink may run
// concurrently with each other on different indexes. What the modes require
// of the index: ConcurrentReaders runs Match concurrently with itself and
// with one mutating goroutine; LanePool with more than one lane also runs
// mutations of different workers concurrently. Non-goal: bounds checks while
// events are in flight (readers then check only the shape of results), since
// a non-linearizable index has no single state to hold them against.
//
// # Files
//
//   - doc.go: this overview.
//   - errors.go: ErrOpKind, KnobError, ViolationKind and Violation.
//   - mix.go: the splitmix64 finalizer and the hash_parts fold of §3.7.
//   - model.go: ClearScope, Expect and the reference Model.
//   - op.go: Op, OpKind and Query; formatting ops.
//   - generate.go: GenConfig, the shared-prefix pool and Generate.
//   - check.go: Counters, Check, Detail and DetailMatcher.
//   - exec.go: Mode and the serial, concurrent-readers and lane-pool
//     executions.
//   - run.go: TB, Options, Report, Failure and Run.
//   - shrink.go: ShrinkConfig, Case and Shrink.
//   - knobs.go: Knobs, DefaultKnobs and KnobsFromEnv.
//
// # Tests
//
// The tests prove the model's self-checks of §3.6 and the model-visible
// scenarios of §3.5, and cross-check the model against a slow reference on
// generated workloads and under a fuzz target; pin mix to splitmix64's
// published outputs; check the pool's shape, the generator's stream rules
// and its step mix; pin every verdict of Check, detailed matches included;
// show that a simple model-backed exact index passes every mode while
// deliberately broken variants (overcounting, undercounting, wrong clear
// scope, spurious errors, malformed results, false positives) are caught,
// reported with their seed and shrunk to one- or two-op cases; and run the
// gate: goindex/radix over 40 seeds × 2000 steps in every mode (short mode:
// 8 × 400). A test keeps the file map above in step with the directory.
package harness
