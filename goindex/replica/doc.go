// Package replica is the consumer side of the CKF index: the transposed
// multi-lane table that holds every lane's (every DC's or member's) cuckoo
// filter side by side, and the prefix search that asks all ready lanes at
// once how many leading blocks of a request each one holds (spec
// ckf-algorithm.md §5.4, §6, §7).
//
// # Concepts
//
// A Table has D ≤ 64 lanes of n bucket words each (n is the consumer
// format's bucket count). It is one flat array, bucket-major and
// lane-minor: row b holds bucket b of every lane, word(b, l) = rows[b·D' +
// l], with D' = D rounded up to a multiple of 8 so that each row is whole
// cache lines and lane group g (lanes 8g…8g+7) is line g of the row. A
// probe of a canonical hash (fingerprint fp, buckets A and B) reads rows A
// and B, but only the lines of groups that hold a lane it still asks
// about: 4 lines for 16 lanes, at most 16 for 64, fewer as lanes drop out.
// The array is preceded by one header line whose first word is the
// ready-lane mask. The whole region (RegionWords words, 64-byte aligned)
// holds no pointers and every access is a single-copy-atomic 64-bit load
// or store (sync/atomic, or the row kernels' aligned vector loads and, for
// snapshot chunks on amd64, plain aligned MOVs in assembly), so it may live
// in a shared-memory mapping that one process writes and others read
// (NewInRegion).
//
// New allocates the region on the Go heap and, on linux, asks for
// transparent huge pages over it (a probe's lines are spread across the
// whole table, so 4 KiB pages make nearly every line a TLB miss as well).
//
// A Searcher runs searches for one goroutine over one Table and Format. A
// search takes the query's canonical sequence hashes (Search), its local
// hashes from the root, which it chains itself as far as it reads
// (SearchLocals), or their probes (SearchProbes); it loads the ready mask
// once, searches M = ready ∧ asked lanes, and writes each lane's depth in
// blocks into the caller's buffer. Four modes: Chunked (the default), a
// linear scan that hashes the query and prefetches both rows of every
// position a chunk or more ahead of the chunk it tests, tests rows A and B
// of a chunk for every active lane at once, and stops when no lane is left
// (two row kernels do the line work: on amd64 a PREFETCHT1 loop and an
// AVX-512 test of both rows' lines when the CPU has it, a pure-Go touch
// pass and SWAR test elsewhere); Bisect,
// upstream's galloping + grouped binary search + verification window +
// terminal-branch fallback, with its counters; Linear, the plain
// reference; and AFirst, Chunked reading row B only where row A leaves a
// lane unresolved (fewer lines, one more round of misses per chunk).
// Chunked is the default because it measured fastest on Mooncake-shaped
// requests (BenchmarkProbe, goindex bench ckf; see BENCHMARKS.md).
//
// # Invariants
//
//   - word(b, l) is region[8 + b·D' + l]; the padding words of a row are
//     never written. Install, Apply, StoreWords, StoreWord and Clear touch
//     only their lane's words; SetReady and ClearReady only its bit.
//   - Every search reports only lanes in its captured M (others get 0) and
//     every depth is ≤ L, whatever the writers do meanwhile.
//   - Chunked, AFirst and Linear return, on any table state that holds still
//     during the search, each lane's run of hits from position 0. Bisect
//     returns for each lane the smallest position at which it took part in
//     a probe and missed, or L: never less than Linear on a static table,
//     and equal to it when the lane's hits are prefix-closed.
//   - A search allocates nothing once its Searcher's scratch has grown to
//     the longest query seen.
//
// # Errors
//
// New, NewInRegion, RegionWords and NewSearcher reject bad configurations
// and regions (ErrBadConfig, ErrBadRegion) and build nothing. Install,
// Apply and Clear check the lane, the snapshot length and every image
// index before their first store, so an error leaves the table unchanged.
// The methods without an error result (StoreWords, StoreWord, SetReady,
// ClearReady, Word, AppendLane, Probe) take indices the caller has already
// validated, like slice indexing, and panic on one out of range.
//
// # Concurrency
//
// Each lane has one writer at a time (its ingestor); writers of different
// lanes may run concurrently. Any number of searches and probes, from any
// number of goroutines each with its own Searcher, may run concurrently
// with all writers. Reads are weak (spec §5.4): each image is one atomic
// store, the ready bit is set after a snapshot's words and cleared before a
// lane is cleared or reassigned, and a search loads the ready mask once and
// never re-checks it. A multi-bucket delta is not atomic to readers, so a
// search may see a half-applied batch (a moved fingerprint briefly absent
// or present twice), and a search that captured a ready bit may finish
// after the lane was cleared. Depths stay ≤ L and are advisory routing
// evidence.
//
// Non-goals: no seqlock, table lock, double buffering or query retry (spec
// §5.4 forbids them); no lane state machine, leases or sequences (package
// relayproto/ingest drives the lane ops); no file header beyond the ready mask
// (the shared-memory consumer owns its file's format and manifest); no
// online resize.
//
// # Files
//
//   - table.go: Config, RegionWords, New, NewInRegion, the Table and its lane ops, Probe, the pair and word tests.
//   - search.go: Mode, SearchConfig, Searcher, Search, SearchLocals and SearchProbes, the chunked scan.
//   - afirst.go: the AFirst scan.
//   - bisect.go: Stats, the membership seam, the Linear reference and upstream's bisection.
//   - rows.go: the row kernels' contract and their pure-Go versions (touch pass, SWAR pair test), the atomic column store.
//   - rows_amd64.go: the assembly kernels' declarations and the CPU feature check (x/sys/cpu).
//   - rows_amd64.s: the PREFETCHT1 and AVX-512 row kernels and the MOV column store, the package's only assembly.
//   - rows_other.go: the pure-Go kernels and column store as the native ones elsewhere.
//   - errors.go: every error of the package.
//
// The inlined XXH3 the search hashes with, ckf.Hash8 and Format.ProbeFast,
// lives in goindex/ckf/xxh3inline.go with its own cross-check against
// zeebo/xxh3.
//
// # Tests
//
// The tests prove spec §7's verified vectors (depths, fallback counters and
// the 39-probe order) on a bitmap membership and on a real table in every
// mode; 200,000 random prefix-closed cases (L ≤ 300, 1–16 and 64 lanes,
// random ready and asked masks and windows, each query given as hashes,
// locals or probes) where Bisect, Linear, Chunked and AFirst (the last two
// also on the pure-Go kernels) all return the exact depth; both row-test
// kernels against ckf.Contains per lane in either row on random words with
// the fingerprint in any slot; the column store against the atomic loop;
// random static membership with holes and false hits (a quarter of them in
// row B) where Chunked and AFirst equal the longest run and Bisect is never
// below it (the inflation rate is logged); Bisect's
// depth as the smallest observed miss; Probe, pairHits and wordHit against
// ckf.Contains per lane (the spec's adversarial words included); the lane
// ops against a plain model; regions (size, alignment, a second view seeing
// a writer's state); zero allocations per search; the chunked scan's line
// counters (fetched, tested, in flight) against its schedule; and, under
// -race, searches running while per-lane producers' images, clears and
// re-installs land, ending with every lane equal to its producer's words
// byte for byte and no admitted block missed. A test keeps the file map above in step with the
// directory.
package replica
