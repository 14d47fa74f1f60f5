// Package consume is the router-site consumer: it keeps one lane per DC of a
// domain in a shared-memory replica file (package shm), following each
// DC relay's stored snapshot and ordered delta log over NATS JetStream
// through ingest's lane state machine, and records each DC's RTT and
// load in the lane's record for the scorer.
//
// # Concepts
//
// The format is fixed at New, from the Config or from the relays (the one
// most of them publish); a relay of another format is logged and, when
// discovered, left out, so one misconfigured DC never stops the router
// site. The DC list comes from the Config, fixed, or from discovery
// (every relay of the domain answering the domain's discover request);
// discovered, it is asked again every DiscoverEvery while Run runs, and a
// relay that answers for the first time with the consumer's format (one
// down when the consumer started, a DC that joined later) gets a lane
// appended in a new generation of the replica file. Adding a lane costs
// only that lane: the lanes following their logs stop between two log
// messages without retiring, are carried into the new generation before
// it replaces the old (their words, sums, records and ready bits copied:
// shm.Writer.ResizeCarrying; their protocol state moved:
// ingest.Consumer.Extend) and go on from their log positions under the
// same lease, so a router sees them ready in every generation it maps;
// only the new lane (and a lane that was resyncing anyway, or one followed
// from a Pool Relay) syncs from a snapshot. A relay of another format is
// logged once and never followed. Each lane has one ingestor goroutine that runs
// subscriptions in a loop. One subscription: ping the relay for its Info
// (identity, JetStream domain, asset names); take the lane's next lease
// and Assign the identity; install the stored snapshot, whose metadata say
// which log position it reflects (read in one of Config.SnapshotReads
// slots: a cold start's lanes read in turns, so the chunks in
// flight stay under the NATS server's per-connection limit); then follow the log from just after that
// position with an ordered JetStream consumer (PullMessages pipelined, so
// the WAN round trip is paid once), stamping the subscription's lease on
// every delta, heartbeat and drain marker (fan-out transport [EXT]).
//
// A DC's JetStream can hang while its relay answers pings (a half-broken
// leafnode link, a JetStream API that never answers, a stored snapshot
// whose chunks stop coming); it costs its own lane, never the others. An
// install bounds each JetStream request (the store, the watch, the
// snapshot's info, the log's state) by Config.RequestTimeout, and takes a
// read slot only once the snapshot is located and the log holds the
// deltas after it, so a request that hangs holds no slot. The read, which
// holds one, goes on as long as chunks keep coming and is given up after a
// RequestTimeout without one (or without an answer to starting it), or
// after 10 × RequestTimeout plus a second per MiB in all (a trickle): a
// large snapshot on a slow link completes, and a hung DC gives its slot
// back within a RequestTimeout. The read pulls the object's chunks through
// a consumer of its own (not the object store's Get, whose blocked read
// ends only at its deadline), so a read given up ends at once: its pull
// stops and its consumer is deleted (by the server, a RequestTimeout after
// its pulls lapse, when the delete does not get through). It checks the
// object as Get did: its chunk count, size and SHA-256 digest. The lane's fault (ErrJetStreamTimeout)
// names the JetStream domain and what it was waiting for, and the lane
// retries, as after any fault.
//
// A lane resyncs RetryEvery after a subscription that kept it READY for at
// least MaxRetryEvery ends, so a transient fault costs little.
// While its attempts keep failing (its relay, NATS or JetStream down, or
// every install faulting at once) the pause doubles up to MaxRetryEvery,
// jittered between half and all of it (internal/backoff): 13 lanes that
// lost their server together neither retry in lockstep nor four times a
// second for the whole outage. Every attempt is counted (Resyncs,
// LastFault); the warning is logged for the 1st, 2nd, 4th, 8th… failure
// in a row and whenever the error changes, the rest at debug level.
//
// Lag is freshness, not failure: a slow lane keeps its state and reads on
// from where it is; it re-snapshots only after a fault. A fault, a bad
// frame or a transport failure ends the subscription; the next one
// installs the stored snapshot and replays the retained log after it, and
// asks the relay for a fresh snapshot only when the store holds another
// identity or the log no longer retains the deltas after the stored one
// (ErrDeltasGone). A relay restart shows up as a new identity in the log
// (WrongIdentity) and is recovered the same way. A stored snapshot the relay
// replaces while a lane reads it (a refresh purges the replaced object's
// chunks) ends that read at once, seen by a watch of the store, and the next
// subscription reads the new one. A log message that ends a
// subscription (a bad frame, a fault) also asks the relay for a fresh
// snapshot, so the next subscription starts past it instead of replaying
// a poison message forever. Frames of other pools and of superseded relay
// incarnations are ignored (ingest's ForeignIdentity).
//
// The replica file is the consumer's, whatever happens to it. New replaces
// a damaged file at the path (shm.Create) instead of refusing to start.
// Run checks the file every 100 ms with its heartbeat (shm.Writer.Check);
// when it was truncated, grown, scribbled on, removed or replaced, Run
// stops the lanes, writes a new generation at the path (Resize), carries
// the lanes' RTTs and load reports into it, and resyncs every lane from its
// relay's stored snapshot; routers follow the new generation. Every write
// to the mapping is fault-guarded (shm), so a truncation under a lane is a
// lost write, never a crash. A path that names another consumer's live
// replica is left to it (logged once) rather than fought over. Bytes
// written into the file behind the consumer's back are found too: every
// tick it restores a damaged ready mask (shm.Writer.RepairReady) and
// verifies about 1 MiB of the lanes against the sums it keeps
// (shm.Writer.VerifySegment), resyncing a damaged lane from its relay's
// snapshot (LaneStatus.IntegrityFailures counts both).
//
// A DC of Config.Upstream is followed from a Dynamo Pool Relay instead
// (bridge/kvrelay.Follow over dynamo.kvrelay.v1): its words and lane record
// are written by a kvrelay.ReplicaLane, and its status reads as a native
// lane's: state, incarnation, installed and latest sequences (a heartbeat
// names the relay's), snapshots, deltas, frames by kind, faults, resyncs,
// load windows as load reports, and the RTT of the contract's GetRelayInfo
// every PingEvery (heartbeats are one-way, stamped by the relay's clock).
// A lane whose words fail the consumer's integrity check is followed again
// from a fresh snapshot, as a native lane is resynced.
//
// Each lane's status counts what it received by frame type (log frames,
// stored snapshot chunks, load reports), its pending log messages (the
// lag JetStream reports) and its catch-ups (subscriptions that started
// behind the log's tail and reached it); its logs carry lane, pool and,
// within a subscription, the lease epoch and relay incarnation.
//
// # Invariants
//
//   - After snapshot N and the log's deltas N+1..M, a lane's words in the
//     replica file equal its producer's words at M, byte for byte; the ready
//     bit is set only after a snapshot is installed and cleared on every
//     fault, bad frame, resync and exit.
//   - A fault on one lane never touches another lane's words, ready bit or
//     record: each lane has its own ingestor, subscription and lease.
//
// # Errors
//
// New waits for the NATS connection to be up (a consumer may start before
// its server), then returns ErrBadConfig, ErrNoRelays, ErrFormatMismatch or a replica file
// error (a path it cannot write, or a directory) and leaves nothing behind
// but, for a replica file error, what Create leaves. A failed rebuild is
// logged and retried, backing off as a lane does. A subscription ends with a *SyncError (wrapping the ping, store or
// log error, ErrFormatMismatch (a relay of another format), ErrDeltasGone,
// ErrJetStreamTimeout, ErrSnapshotTooLarge, ErrSnapshotIncomplete,
// ErrSnapshotReplaced or a *ingest.LaneError); it is logged, counted and
// retried, never returned.
//
// # Concurrency
//
// Each lane's words, ready bit and protocol record are written only by its
// ingestor; its RTT by its prober; its load by the load subscriptions (the
// relays' load and load-stored subjects: each sample without and with its
// stored-blocks counter, the counted one kept whichever arrives first),
// whose callbacks Run orders before it unmaps the file (a callback can
// outlive its subscription). A rebuild replaces the file and protocol core only
// after every lane goroutine of the old file returned, under the lock the
// load callbacks take. Status and Rebuilds may be called from any
// goroutine.
//
// # Files
//
//   - config.go: Config and defaults.
//   - consumer.go: Consumer: New (resolve, replica file, lanes), Run (epochs, file checks, rebuilds), Status.
//   - discover.go: discovery, ping, resolving the DC list and format.
//   - lane.go: a lane's ingestor (sync, follow, apply), prober and load record.
//   - install.go: a lane's install of its relay's stored snapshot.
//   - upstream.go: a lane followed from a Dynamo Pool Relay, its status, RTT and load.
//   - status.go: Supervise (Run with periodic status), LogStatus, WriteStatus.
//   - errors.go: sentinels and SyncError.
//
// # Tests
//
// The tests prove that discovered lanes (in DC order) converge to their
// producers' exact words with every tracked block found, over several
// rounds of events, and carry RTT, load (with the relay's stored-blocks
// counter and incarnation) and READY in their records; that a relay which
// answers only after the consumer started gets a lane that converges,
// while one of another format is reported and left out, at the start as
// later; that while a third relay's lane is added, a reader following the
// replica path finds the two serving lanes ready with every block of
// theirs in every generation, they install no second snapshot, and all
// three converge and follow new events, and a lane that was not serving
// then (its relay down) syncs again once its relay is back; that a consumer
// whose NATS server is out of reach waits for it before discovering; that
// a lane of a relay of another format says both formats; that one load
// sample sent in both layouts, in either order, keeps its counter while a
// later sample replaces it; that a
// dropped or reordered delta faults only its lane, which then converges
// again, while a duplicate is ignored; that a lane started after the
// relay published catches up once from the retained log and receives
// exactly the delta frames and bytes the relay published (ObserveDelta
// seeing each applied delta and every image the producer emitted); that a
// lane whose stored snapshot is replaced while it reads it (the old chunks
// purged) reads the new one instead of waiting for its read's deadline;
// that while more DCs than read slots have a JetStream that never answers
// or a stored snapshot whose chunks never come, healthy lanes still
// install within a few RequestTimeouts, and each hung lane retries and
// says that JetStream timed out; that a stored snapshot's read completes
// while its chunks keep coming, past ten RequestTimeouts, and is given up
// when they stop, saying how far it got; that a read given up (snapshot
// replaced, countdown run out, context ended, consumer stopped) leaves
// no goroutine and no consumer on the DC's server behind, well within its
// bounds; that an object with a chunk altered, missing or one too many,
// or whose info gives another digest, size or chunk count, is refused
// with jetstream.ErrDigestMismatch before it holds more than its info's
// size; that a lane whose relay is down makes a logarithmic number of
// attempts over a second, converges once the relay is up, and after a
// fault then retries from RetryEvery again, and that a fault repeated a
// hundred times is warned of logarithmically often while every attempt is
// counted;
// that a consumer stopped while load reports stream in never writes its unmapped
// replica file; that a consumer starts over a damaged file and rebuilds
// its file after each of truncation, growth, a scribbled header, removal
// and replacement by garbage, converging again with RTTs and load carried
// over; that a lane whose words and ready bit were overwritten in the file
// is restored, resynced and converges back; that a lane followed from a
// Pool Relay holds its pool's words and shows state, sequences, frames,
// RTT and load like a native lane, is resynced from a fresh snapshot when
// its words are damaged in the file, and is left idle when the consumer
// stops; and that bad configs and missing relays are refused. The
// end-to-end suite (tests/e2e) adds WAN latency, relay and NATS restarts,
// cold restarts and slow consumers.
package consume
