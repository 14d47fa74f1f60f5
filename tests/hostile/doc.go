// Package hostile is goindex's hostile-input suite (tests only): what a
// router site's consumer and the event decoders do with frames and
// messages an attacker, a broken peer or a replaced relay can send.
//
// Every test builds a real consumer over a real replica.Table with two
// READY lanes and checks the whole state a frame could touch (both lanes'
// words, the ready bits, each lane's state, installed sequence and lease)
// before and after:
//
//   - undecodable frames (bad magic, wire version, checksum, truncation, a
//     header claiming more than MaxFrameBytes or 4 GiB) are *FrameErrors
//     and change nothing; encoders refuse over-limit deltas and chunks;
//   - forged or foreign frames (another consumer's lease, an unknown lane,
//     a past epoch, another pool's identity, a replaced incarnation or an
//     older layout generation, stale and duplicate sequences, another
//     pool's load report) are ignored and change nothing;
//   - frames the protocol must fault on (out-of-range and duplicate bucket
//     indices, empty deltas, gaps, a snapshot of the wrong layout size, a
//     different format under the lane's own identity, a heartbeat proving
//     a lost delta) fault only their lane, write none of its words, clear
//     its ready bit and leave the other lane exactly as it was;
//   - assignments of a wrong format, a foreign pool or a reused epoch are
//     refused and change nothing;
//   - a flood of 200,000 hostile frames neither panics nor changes state,
//     and the live heap stays within 4 MiB;
//   - Dynamo's event decoders refuse messages over MaxMessageBytes and tiny
//     messages claiming huge arrays without allocating for the claim;
//   - over NATS, with a live relay and consumer: deltas of another pool
//     and of an older incarnation written into the relay's delta log are
//     ignored (no fault, no resync, words equal to the producer's), and a
//     poison message (undecodable bytes, or a delta forging a newer
//     incarnation, which must fault like a restart) ends exactly one
//     subscription: the consumer asks for a fresh snapshot, the relay's
//     snapshot passes the foreign messages, and the lane converges and
//     stays without another resync.
//
// Floods of fake publisher and worker ids at the relay are in
// bridge/relay's Hostile tests (they need its unexported tables), wrong
// NATS credentials and TLS in bridge/natslink, oversized route and dynkv
// requests in bridge/route and bridge/dynkv. GOINDEX_HOSTILE_SEED
// overrides the random seeds, which are printed on failure.
//
// # Files
//
//   - doc.go: this description (the package has no other non-test file).
package hostile
