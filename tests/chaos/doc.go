// Package chaos is goindex's chaos suite, short form (tests only): one
// round of bridge/chaos's default faults against goindex's real processes
// (nats-servers, relays, consumer, router and the C host of libgoindex.so in
// host/host.c), each fault once, in about a minute. It needs
// $GOINDEX_BUILD (./build.sh test sets it; without it the test is
// skipped) and does not run under -short (the -race pass of ./build.sh
// test, since the processes under test are not race builds anyway).
// `goindex bench chaos` is the long form; BENCHMARKS.md records its table.
//
// The test fails on any broken promise the driver reports (a process that
// exited on its own, a request failed while a DC was reachable, a system
// that did not converge back to its producers' bytes with no false
// negative, an error from libgoindex.so to its host) and checks the report
// itself: every fault injected, requests served during every fault, requests
// routed degraded while the consumer or the hub was down, the C host probing
// throughout.
package chaos
