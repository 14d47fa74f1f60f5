// Package follow is the one reader of a replica: it follows the router-site
// consumer's shared-memory replica file (goindex/shm) for every process
// that routes on it — `goindex route`, libgoindex.so's global handles and
// the worker-selector plugin — and offers the same lanes for frames a host
// feeds in process. It attaches the file, maps each new generation and
// retires the old mapping once its last search ends, judges the replica's
// health (missing, damaged, stale writer), and turns lane records into
// scorer signals that are never read as zero when stale or missing.
//
// # Concepts
//
// A View is one set of lanes a search reads: one generation of an attached
// file, or a Feed's in-process lanes. Searches (Match, Search,
// SearchLocals) and lane reads take a View from Acquire and Release it
// after use; the View counts its users, so a retired generation is
// unmapped by its last user, never under a search.
//
// A Follower owns the views of one path. Attach maps the file now; Refresh
// checks it (shm.Reader.Stale: the consumer retired it, or another file
// is at the path) and maps the new generation; Acquire runs that check at
// most every CheckEvery, on one caller at a time while the others go on
// with the current view. Health says whether routing on the replica is
// degraded and why: Missing (nothing attached: no file, unreadable),
// Damaged (the file at the path is not a valid replica), Stale (the
// consumer's heartbeat is older than MaxStaleness). A failed check keeps
// the current view serving, and DCs keeps the last known lane list.
//
// Nothing done to the file may crash a reader (shm's package doc gives the
// mechanism): every search of a file view runs inside shm's fault guard,
// and lane, ready-mask and heartbeat reads guard themselves, so a file
// truncated in place turns those reads into "nothing known" (no depth, no
// signal) and marks the mapping faulted. The follower then checks the file
// at once (shm.Reader.Check: shorter than its header, header changed, a
// fault), retires the view, reports the replica Damaged and attaches
// whatever valid file the consumer rebuilds at the path.
//
// Integrity (shm's segment sums): Attach verifies every segment of every
// ready lane before the new view serves (about 2 GiB/s: 30 ms for the
// default 64 MiB file), and a background goroutine goes on a segment at a
// time, a whole pass every VerifyEvery. A lane that fails leaves searches
// and Ready at once (a mask the search already applies: no cost on the
// probe path), shows in Health.BadLanes and IntegrityFailures, and comes
// back when its consumer seals it with a new snapshot, or after a whole
// clean round (its published sums were damaged and republished).
//
// A Feed is the lanes a host feeds relay frames to (goindex_apply_frame):
// ingest's Consumer over an in-process replica image (shm.NewMemory),
// with the fan-out transport's consumer-local leases stamped on frames that
// carry none, load reports recorded in the lane records (shm.LoadOf, the
// consumer's conversion too) and RTTs from the host. Its View reads
// exactly as an attached file's does.
//
// SetSignals turns a lane record into a score.Candidate's load and RTT,
// each only when younger than the caller's staleness limit (or whatever its
// age, for degraded routing): the one place route and the library age
// signals. Open is the one fail-open decision both make: the policy over
// fresh signals, else over the last known ones with cached blocks ignored,
// else a default candidate; Reason (ReasonOf the replica's Health) says why
// a decision was degraded, as route's X-Goindex-Degraded header and the
// ABI's GOINDEX_DEGRADED_* codes spell it. Turnover differences each DC's
// stored-blocks counter (the load record's, per relay incarnation) into
// its score.InsertRate and sets ttft's EvictionFactor from it: 0 while the
// counter is unknown (a relay before it, one report only, a restart).
//
// # Invariants
//
//   - A View is unmapped only after it is retired and its last user
//     released it; a search that loads a retired view backs off and loads
//     its successor.
//   - A view is replaced only by a file that attached successfully, or
//     retired without a successor when its own file was damaged in place.
//   - No access to a file mapping escapes the fault guard.
//   - A lane that failed its integrity check is searched by no one until
//     it is sealed anew or verified clean for a whole round.
//   - Every depth a search reports is ≤ the query's length, and only ready
//     lanes report one.
//
// # Errors
//
// Attach and Refresh return ErrNoReplica for a file that cannot be opened
// and shm's sentinels (ErrForeign, ErrVersion, ErrCorrupt) for one that is
// not a valid replica; either leaves the current view serving unless that
// view's own file was damaged (shm.ErrCorrupt, shm.ErrFault), which retires
// it. Searches and lane reads have no error: a fault reads as nothing
// known and shows in Health. NewFeed
// returns ErrBadConfig; Feed.Apply a *wire.FrameError,
// *ingest.LaneError or ErrFrameRejected (the lane's state is what
// ingest says); SetRTT ErrUnknownDC.
//
// # Concurrency
//
// Acquire, Health, DCs and every View method may run from any number of
// goroutines, concurrently with the consumer writing the file (reads are
// weak: spec §5.4, no seqlock). Attach and Refresh serialize among
// themselves; Close must not race with them. A Feed has one ingestor:
// Apply and SetRTT are serialized by the caller; Acquire and Counts may run
// concurrently with them.
//
// Non-goals: no writing (the consumer owns the file), no retry of a search
// that raced a generation change (the next search sees the new one).
//
// # Files
//
//   - view.go: View: reference counting, retirement, searches, lane reads.
//   - follower.go: Config, State, Health, Follower: attach, refresh, acquire, health.
//   - feed.go: FeedConfig, Feed: relay frames into in-process lanes, lease stamping, loads, RTTs.
//   - signals.go: SetSignals, lane records into scorer signals.
//   - turnover.go: Turnover: load records' stored-blocks counters into insert rates and eviction factors.
//   - open.go: Reason, Step, Open: the fail-open decision.
//   - errors.go: sentinels.
//
// # Tests
//
// The tests prove that a file truncated in place under searching
// goroutines (past the ready line, so the rows fault in the row kernels,
// and to nothing) leaves the process running, is reported Damaged with its
// view retired, and that the rebuilt file is followed; that a lane
// corrupted behind the consumer's back is found by the background verifier,
// left out of searches while the others serve, and back after a new
// snapshot; that a follower
// attaches a file written by shm.Writer,
// follows new generations (also when only the path changed) while views
// held across the change keep answering until released, and never unmaps
// a view in use; that lanes carried into a grown generation (a consumer
// adding a DC) answer their full depth in every search across the change,
// pass verification, and the added lane answers nothing until installed;
// that Health reports Missing, Damaged, Stale and Healthy
// as the file and its heartbeat say; that a Feed's lanes answer probes of
// the DCs' published blocks, stamp leases, record load reports (a
// sample's counted layout over its uncounted one) and RTTs, and refuse
// unknown DCs; that SetSignals keeps stale and missing signals out; that
// Turnover's rates equal a plain decayed sum of the counter's increments
// over random relay histories (restarts, counters going down, uncounted
// layouts, repeated reads), and its factor is a half for a cache storing
// its capacity per reuse window and 0 whenever a signal is unknown. BenchmarkMatch times a probe of a 13-lane file with and
// without the fault guard; BenchmarkTurnover the eviction charge's
// bookkeeping over 13 DCs.
package follow
