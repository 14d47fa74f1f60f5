// Package e2e is goindex's NATS end-to-end suite (tests only, loopback).
//
// A router-site hub server and one leaf-node server per simulated DC, each
// leaf with its own JetStream domain, are joined through toxiproxy proxies
// (embedded) that add each DC's round trip from testdata/wan/grid13_rtt_ms.csv.
// Every DC runs a relay fed by a generator of Dynamo KV events (msgpack
// envelopes); one consumer at the hub maintains the shared-memory replica,
// which the tests read through a read-only shm.Reader.
//
// The suite injects, one after another: dropped, duplicated and reordered
// deltas (at the consumer's transport hook), a relay killed and restarted,
// a DC's NATS server restarted, a slow consumer that catches up from the
// retained log, one that falls past the log's retention and re-snapshots,
// and a consumer restarted cold; it ends with a graceful drain. After each
// step it waits (polling, never sleeping) until every relay has taken
// every event published at its DC, for as long as the relays keep taking
// them (their pace is the machine's), then until every lane's words equal
// its producer's exact words and every block the DC's workers hold is
// found by a probe of the replica, and checks that the fault stayed in its
// lane; it logs how long each wait took. After the drain the real libgoindex.so attaches the consumer's
// replica in a child process (tests/c/global_test.c's attach mode, compiled
// against $GOINDEX_BUILD) and probes the run of every block the producers
// track: no lane may report less than its exact depth (skipped without
// GOINDEX_BUILD, which ./build.sh test sets). The default runs 4 DCs;
// GOINDEX_E2E_FULL=1 runs all 12 remote DCs of the grid (up to 232 ms RTT).
//
// A second test runs a relay and a consumer against the standalone
// nats-server that ./build.sh installs into $GOINDEX_BUILD (its own process;
// GOINDEX_NATS_SERVER names another binary), restarts that process on the
// same port and store, and checks the lane converges again with every
// client reconnected. A plain `go test` without either variable skips it.
//
// A third test (dynamo_zmq_test.go) runs Dynamo as released, with its
// defaults: in each of two DCs, Python workers (Debian's python3-zmq and
// python3-msgpack) publish Dynamo-framed event-plane messages on PUB
// sockets they register in that DC's etcd (Debian's /usr/bin/etcd);
// `goindex relay --etcd` (the binary in $GOINDEX_BUILD, else one built by
// the test) discovers and reads them, `goindex consume` builds the
// replica, and `goindex route` must send each DC's prompt to that DC with
// its whole prefix cached.
package e2e
