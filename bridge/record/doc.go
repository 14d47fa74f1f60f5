// Package record is the engine of `goindex record`: it captures Dynamo KV
// events from NATS subjects, or from Dynamo's ZMQ event plane (the default
// since v1.3) through relay.Feeds, into an event log, one Dynamo JSON RouterEvent
// per line (dynamo.AppendJSON's shape), no header, in arrival order: the
// file `goindex parity --events` replays.
//
// # Concepts
//
// A Recorder turns messages into log lines. Each subject has a Form: the
// event plane's envelopes (msgpack, or the early JSON envelope; a v1.4+
// envelope carries a batch of RouterEvents, each recorded), a bare JSON
// RouterEvent (the legacy G2025 subject), or either, told apart per
// message. Envelopes at or below their publisher's last sequence are
// dropped as duplicates and missing sequences counted as gaps; messages
// that do not decode are counted and skipped. Lines are buffered and
// written whole (at FlushBytes, and at every Flush), so a killed
// writer leaves at most a partial last line, which OpenLog cuts off before
// appending. HandlePlane takes a ZMQ event-plane message (four parts, as
// bridge/zmqfeed's Plane delivers them) the way Handle takes an envelope,
// skipping load samples. Run subscribes a Recorder to its subjects on a
// NATS connection, runs its feeds, and records until MaxEvents, Duration
// or its context ends.
//
// # Errors
//
// A write error stops the Recorder and is returned by every later Flush;
// what was written before stays. OpenLog returns the file's error and
// leaves the file as it found it, unless the cut of a partial line
// succeeded.
//
// # Concurrency
//
// A Recorder is safe for concurrent use (NATS delivers each subscription
// on its own goroutine). Run uses one Recorder for all its subjects.
//
// # Files
//
//   - doc.go: this overview.
//   - recorder.go: Form, Stats, Recorder (decode, dedupe, buffer, write).
//   - log.go: OpenLog, an event log opened for appending whole lines.
//   - run.go: Subject, Subjects, Config, Run, Report and its text.
//
// # Tests
//
// The tests prove the recorder on every form (envelopes of both
// encodings, batches, bare JSON, detection, ZMQ event-plane messages),
// duplicates, gaps, malformed
// messages, the event limit and a failing writer; OpenLog's cut of a
// partial last line, its truncate and a log without any newline; and Run
// against an embedded NATS server, whose log replays to the events sent.
package record
