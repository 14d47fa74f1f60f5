// Package shm is the shared-memory replica file: one file (under /dev/shm
// in production) that the router-site consumer writes and every router
// process on the host maps read-only. It holds a header, one metadata
// record per lane, and the transposed bucket table laid out exactly as
// replica.Table expects, so a reader searches the mapping in place with no
// copy and no system call.
//
// # Concepts
//
// A Writer (the consumer) creates the file for a Layout: the consumer's
// addressing format (seed, bucket count), its domain and instance, and the
// DC of each lane. The file's layout generation is one more than the file it
// replaces. A new layout (Create again, or Writer.Resize) is written under a
// temporary name and renamed into place, then the old file is marked
// retired (Writer.ResizeCarrying first copies chosen lanes' words, sums,
// records and ready bits into the new file, so a consumer adds a lane
// without its other lanes ever leaving a generation readers map); readers poll Reader.Stale and Attach again, keeping the old
// mapping until their in-flight searches end. A Reader (the router library)
// attaches read-only after checking magic, version, checksum and sizes.
// NewMemory builds the same image in process memory for a consumer whose
// readers share its process (a library handle fed relay frames).
//
// # Layout (little-endian; offsets in bytes)
//
// Fixed header, 256 bytes at offset 0:
//
//	  0  [8]  magic "GOIXREPL"
//	  8  u32  layout version (2)
//	 12  u32  H: offset of the bucket region = 256 + 832·D rounded up to 4096
//	 16  u64  layout generation (1 for a path's first file, +1 per Create)
//	 24  u64  addressing seed
//	 32  u64  bucket count n (power of two in [2, 2^24])
//	 40  u32  lanes D (1..64)
//	 44  u32  words per replica row: D rounded up to a multiple of 8
//	 48  u64  region bytes R = replica.RegionWords(D, n) × 8
//	 56  u64  domain id
//	 64  u64  consumer instance
//	 72  u64  created, ns since the Unix epoch
//	 80  u64  checksum: XXH3-64 of bytes 0..79 and every lane's DC id
//	 88  u64  state, atomic: 0 live, 1 retired (a newer generation replaced it)
//	 96  u64  writer heartbeat, atomic: ns since the Unix epoch
//	104  …    reserved, zero, up to 256
//
// Lane records, 256 bytes each at 256 + 256·l, 32 u64 words, all atomic
// (word: field): 0 DC id (immutable, under the checksum); 1 lane state
// (ingest.State); 2 producer incarnation; 3 producer layout generation;
// 4 lease epoch; 5 installed sequence; 6 latest known sequence; 7 last apply
// time; 8 RTT µs (0 unmeasured); 9 RTT measured at; 10 load sampled at
// (relay clock); 11 load received at; 12 active blocks; 13 queued prefill
// tokens; 14 active decode blocks; 15 live workers; 16 capacity blocks;
// 17 prefill tokens/ms, 18 queue tokens/ms, 19 decode blocks/ms (float64
// bits); 20 faults; 21 snapshots installed; 22 deltas applied; 23 load
// stored blocks (the report's counter; 0 unknown); 24 the relay
// incarnation that counted them; 25–31 reserved, zero. Times are ns since
// the Unix epoch, 0 when unknown. Words 23 and 24 were reserved (zero) in
// files of the same layout version written before them, which readers
// therefore take as "counter unknown"; readers that predate them never
// look at them. A field is added to a lane record only this way: in a
// reserved word whose zero means unknown, with the version unchanged.
//
// Integrity blocks, 576 bytes each at 256 + 256·D + 576·l, 72 u64 words,
// all atomic: 0 version (odd while the lane's writer stores its words);
// 1 seals (snapshots whose sums were set afresh); 2 stale (1 while a
// snapshot arrives in order and the sums wait for it: not verifiable);
// 3–7 reserved; 8..8+K the
// lane's segment sums, K = min(n, 64) segments of n/K consecutive buckets,
// each the sum mod 2^64 of mix(b, word) over its buckets (integrity.go).
//
// Bucket region, R bytes at H (page-aligned, hence 64-byte aligned): the
// replica region. Its first 64 bytes are the replica's header line: word 0
// at H is the ready-lane mask (bit l: lane l has an installed snapshot),
// words 1–7 reserved. Then n rows of S = ⌈D/8⌉·8 words: bucket b of lane l
// is the u64 at H + 64 + 8·(b·S + l), the packed 4 × 16-bit bucket of spec
// §3. The file is H + R bytes.
//
// # Invariants
//
//   - Bytes 0..87 and the lanes' DC ids never change after the rename; the
//     checksum covers them, so a reader never maps a half-written header.
//   - Every shared word (state, heartbeat, lane records, ready mask,
//     buckets) is read and written with single sync/atomic u64 operations:
//     the file is shared between processes and Go's atomics are plain
//     aligned loads and stores on it.
//   - Generations at one path strictly increase; the retired mark is set on
//     the old file only after the new one is in place.
//
// # Faults of the file
//
// The file lives in a shared tmpfs where anything may happen to it: an
// operator or a cleanup job truncates or deletes it, a second consumer
// renames another file over it, a stray write scribbles on its header. None
// of it may kill a process that maps it (route, consume, every host of
// libgoindex.so). The mechanism, and why:
//
//   - The writer never truncates or shrinks a live file. Every new
//     generation (Create, Resize, a rebuild) is written under a temporary
//     name and renamed over the path, so a reader's mapping stays valid
//     (the old inode lives until its last mapping goes) and only ever sees a
//     whole header. Create also replaces a path holding a file that is not a
//     valid replica (the path belongs to the consumer; Replaced says what
//     was there), so a consumer never refuses to start over a damaged file.
//   - Headers are read with pread before mapping (Attach), so a file
//     truncated meanwhile is an error, not a fault.
//   - What no writer discipline can stop is truncation in place by another
//     process: the next access past the new end raises SIGBUS. Every access
//     window over a file mapping therefore runs with
//     debug.SetPanicOnFault(true), which makes that fault a panic of the
//     accessing goroutine (in Go code and in goindex/replica's assembly row
//     kernels alike: both run as Go functions with frame info), and a
//     deferred guard turns a panic whose address lies inside the mapping
//     into ErrFault, recorded as the mapping's (Faulted); other panics go
//     on. Reader.Ready, Lane and WriterHeartbeat and every Writer and Lanes
//     write guard themselves and return zero values (nothing known) after a
//     fault; searches over Reader.Table guard with Reader.Guard. The cost is
//     one runtime call to set and one to restore the flag per window.
//   - Readers re-validate their mapping periodically (goindex/follow: every
//     100 ms by default, and at once after a fault): Stale (replaced), Check
//     (shorter than its header says, header changed since mapped, a fault
//     seen); a reader that fails Check stops using the mapping and attaches
//     the path again.
//     The writer's Check (the path still names its file, of exactly its
//     size, with its header, no write faulted) tells the consumer to
//     rebuild.
//
// A sealed memfd would stop truncation outright, but it cannot be named by
// a path in /dev/shm, which is how Dynamo's router and the other readers
// find the replica; the guard costs less than changing that contract.
//
// # Errors
//
// Attach and Create return *FieldError values wrapping ErrForeign,
// ErrVersion or ErrCorrupt, naming the field and byte offset; Attach
// rejects a file that is not a valid replica, Create replaces it (and
// leaves no temporary file behind on any error). ErrFault reports an
// access that faulted, ErrReplaced a writer whose path names another file
// or none, ErrBadLayout a Layout out of range, ErrClosed a closed handle.
//
// # Concurrency
//
// The replica's rule holds across processes: one writer per lane (the
// consumer's lane ingestor), any number of concurrent readers in any
// process. Each group of a lane record (protocol state, RTT, load) has one
// writer of its own. Reads are weak (spec §5.4):
// no seqlock, no lock; a lane record, like a multi-bucket delta, is not
// read atomically as a whole. Close must not race with uses of the mapping.
//
// # Integrity
//
// Faults aside, bytes written into the file behind the consumer's back
// (a stray process, a bad memory page) would be read as routing evidence
// for as long as the file lives. Every Lanes write keeps the lane's
// segment sums in step with the words it stores, from the words it
// replaces (two hashes and one load per word; BenchmarkApply). A snapshot
// arriving in order from bucket 0 only hashes its own words, is stored by
// the table's fast path and sets the sums afresh when whole (BenchmarkInstall:
// about 1.5× the bare stores); one abandoned half-way has its lane summed
// anew, and meanwhile the lane's stale word keeps verifiers off it.
// VerifySegment sums a segment of every lane as the file holds it and
// compares: a Reader against the published sums, the Writer against its
// private copy (which it publishes again when the file's copy was
// damaged). A lane's version word, odd while its writer stores, tells a
// verifier when it raced the writer (busy: try again); probes never read
// it, so the probe path is unchanged. The ready mask is no lane's word and
// no sum covers it: the Writer keeps its own copy (set through Lanes) and
// RepairReady writes it back when the file's was damaged. Who verifies:
// goindex/follow on attach and in the background, leaving failed lanes out
// of searches until healed; the consumer every tick, restoring the mask
// and resyncing failed lanes from a snapshot.
//
// Non-goals: no locking against two writers of one path (the consumer owns
// its path), no persistence across reboots (tmpfs), no in-place resize, no
// integrity of the lane records (their signals age out by their
// timestamps) or the mutable header words.
//
// # Files
//
//   - layout.go: Layout, the header byte offsets, header encoding and validation.
//   - lane.go: LaneInfo, LaneState and Load, the lane record's atomic encoding, LoadOf.
//   - mapping.go: mapping a file and building the replica table over it; re-validation; Info.
//   - guard.go: the fault guard of mapped accesses, Faulted.
//   - populate_linux.go, populate_other.go: backing a new file's pages at Create (MADV_POPULATE_WRITE).
//   - writer.go: Writer, Create (temporary file, rename, retire; replacing a damaged file), Resize, Check.
//   - lanes.go: Lanes, the guarded lane writes of a Writer (ingest.LaneTable).
//   - integrity.go: the lanes' segment sums: kept by every store, sealed by whole snapshots, verified.
//   - reader.go: Reader, Attach, Stale, Check.
//   - memory.go: NewMemory, the same image in process memory, and Writer.Reader.
//   - errors.go: sentinels and FieldError.
//
// # Tests
//
// The tests prove that a writer and readers (a second mapping and a child
// process) see the same buckets, ready mask and lane records; that every
// field sits at the byte offset documented above and the bucket region is
// word for word the replica's region; that a new generation retires the
// old file and readers detect it (also when only the path changed); that
// foreign, short, truncated, corrupted and other-version files are rejected
// with the right error; that Create replaces such a file (continuing its
// generation) but not a directory, and leaves no temporary file; that a
// file truncated under a reader, a searcher and a writer gives ErrFault
// and zero values instead of a crash, and Check reports it; that the
// writer's Check sees a replaced, removed, grown or scribbled file; that
// ResizeCarrying's new generation holds the carried lanes ready with their
// words, records and verifiable sums (a reader following the path never
// sees them leave) and refuses another format or a moved lane; and
// that the segment sums follow every write (random snapshots in chunks,
// deltas, clears: never a lane found bad, against a recomputation), that
// random bytes over the region are found in exactly the lanes they changed
// and healed by a whole snapshot, that scribbled sums are republished by
// the writer, that a verifier racing the writers sees no false damage and
// a version left odd is taken over, that RepairReady restores a damaged
// ready mask; and that this file map matches the
// directory. BenchmarkVerify, BenchmarkApply and BenchmarkInstall time
// verification and the writer's cost.
package shm
