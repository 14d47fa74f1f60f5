// Package zmqfeed feeds the relay from ZeroMQ: Dynamo's ZMQ event plane
// (the default transport since Dynamo v1.3) and the vLLM/SGLang engines'
// own KV-event publishers (dynamo.DecodeZMQ and the Normalizer, in the
// relay, read their batches). Its feeds are relay.Feeds; they only move
// messages, whole, from sockets to the relay, which decodes, checks and
// counts them on its writer goroutine.
//
// # ZeroMQ implementation
//
// libzmq (Debian's libzmq5, 4.3) through github.com/pebbe/zmq4 (cgo; the
// build needs libzmq3-dev). The pure-Go github.com/go-zeromq/zmq4 (v0.17.0)
// would keep the goindex binary cgo-free, but it allocates whatever part
// length a peer announces before reading it: nine bytes from a peer end
// the process with an unrecoverable out-of-memory error
// (TestHostile_HugeFrameClaimIsRefusedWithoutAllocating plays them), and
// its automatic reconnect redials the socket's last endpoint only. libzmq
// is what Dynamo (Rust zmq/tmq) and vLLM (pyzmq) run: MAXMSGSIZE drops an
// oversized peer before buffering the part, RCVHWM bounds the queue,
// reconnects back off from 100 ms to 5 s as Dynamo's sockets do, and
// XSUB/XPUB brokers interoperate by construction. The tests drive it
// against Debian's python3-zmq publishers, never against itself.
//
// # Endpoints
//
// Publishers, brokers and engines are given as tcp://host:port or
// ipc://path. The host is a DNS name, an IPv4 address or an IPv6 address:
// in brackets, with an optional zone (tcp://[fd00::2]:5557,
// tcp://[fe80::1%eth0]:5557), or without them as libzmq also reads it
// (tcp://fd00::2:5557, the port after the last colon). Every socket sets
// ZMQ_IPV6: without it libzmq resolves IPv4 only, and a connect to an
// IPv6 publisher (Dynamo binds tcp://[::]:* when DYN_EVENT_PLANE_HOST is
// IPv6) returns no error yet never connects; with it, IPv4 endpoints and
// names still connect as before. A malformed endpoint is ErrBadConfig when
// the feed is made (a broker found in etcd with one is logged and left
// out); a discovered publisher's endpoint is not checked, and one libzmq
// refuses is logged and tried again like any socket that cannot be made.
//
// # Concepts
//
// Plane (plane.go) subscribes, in direct mode, one SUB socket per
// publisher (Dynamo's KV ingress keeps one validated socket per
// publisher): static ones (Publishers, an endpoint each) and those a
// Discovery reports (etcd or Kubernetes records, bridge/discovery), whose
// publisher id the relay then requires in every message. A discovered
// publisher that leaves is answered with relay.KindGone, and so is a
// discovered NATS channel (a worker on DYN_EVENT_PLANE=nats: nothing to
// connect to, its envelopes reach the relay on NATS) whose record goes,
// and a static publisher whose connection stays down (dropped, no new
// ZMTP handshake; heartbeats every expiry/4 catch a peer that stops
// answering) for PublisherExpiry: it stays subscribed and continues if it
// comes back. A static publisher's new id (a restart) is noticed by the
// relay. In broker mode
// (Brokers: the XPUB side of Dynamo's stateless XSUB/XPUB brokers,
// DYN_ZMQ_BROKER_URL's xpub part) one SUB socket connects to every broker
// and subscribes to the pool's scoped subjects; a message heard through
// two brokers is taken once, and a copy one broker lost is taken from
// the other even when it comes later (the relay's per-publisher window
// of recent sequences). The brokers are given (DYN_ZMQ_BROKER_URL) or, with
// FindBrokers (DYN_ZMQ_BROKER_ENABLED), looked up in etcd until one is
// registered. A worker's departure is not observable through a broker
// (the brokers forward messages, not their publishers' connections, and
// broker-mode publishers register no channel), so with discovery the
// plane follows the instance records of the workers serving the pool's
// endpoint instead (discovery's Workers mode, which Feeds selects with a
// broker) and answers a record's appearance with relay.KindWorkerPresent
// and its going with relay.KindWorkerGone; without discovery broker mode
// has no liveness, and no silence timeout stands in for it, as it would
// drop idle workers' blocks.
//
// Liveness in the load reports follows the same signals. Every source
// whose departure the plane reports — a discovered publisher, a fixed one
// with a PublisherExpiry, a followed NATS channel (announced with
// relay.KindPresent, as its envelopes come on NATS) — is marked
// relay.Source.ReportsGone, and the relay counts the workers it fed as
// live while it is present, however long they are silent (Dynamo sends a
// worker's ActiveLoad only when it changes), and a worker whose instance
// record is present until KindWorkerGone. A KV event source record
// (v1.4 on: a worker's publisher, rank and endpoint, registered beside its
// channel) is answered with relay.KindWorkerPresent from a Source of its
// own that reports its going, and its going with KindGone of that Source:
// a relay started after an idle worker's last event still counts it, and
// the record's going ends the hold without clearing what the worker's
// publisher fed (its channel's going does that). Workers fed only through the
// brokers, a fixed publisher without expiry or an engine count while they
// sent something within the relay's LiveWindow.
//
// Engine (engine.go) subscribes to one vLLM or SGLang engine's own
// publisher, without Dynamo: 3-part batches the relay normalizes by
// Dynamo's rules for the configured worker, rank and block size. Gaps are
// asked of the engine's replay socket; what it cannot cover, an engine
// restart (its sequence going back) and a new connection (the stream
// names no incarnation) become relay.KindResync: the engine's members are
// cleared, and what the engine still buffers is replayed from sequence 0.
//
// # Limits and failure
//
// Every part is bounded by MaxMessageBytes (libzmq MAXMSGSIZE), every
// socket's queue by RecvHWM messages, every message by maxParts parts
// kept, every replay by MaxReplayBatches batches and ReplayTimeout. libzmq gives an endpoint up after a protocol error (an oversized
// part); every disconnect is therefore answered by a fresh connect
// (socket.go). A plane's context holds MaxSockets libzmq sockets, three a
// publisher (libzmq's default of 1023 would stop at 341 publishers). A
// socket waiting for input parks in Go's network poller on its ZMQ_FD
// descriptors (waiter_linux.go), so an idle publisher holds neither an OS
// thread nor a timer: a DC's thousands of workers cost goroutines, not
// threads (a process that cannot create a thread dies). A feed never stops the relay, nor stops itself: a publisher's, the
// brokers' or an engine's socket that cannot be made, or whose read loop
// fails, is logged and made again after a backoff (1 s doubling to 30 s,
// jittered: internal/backoff) until the publisher goes; an engine then
// resyncs, as after a reconnection.
//
// # Concurrency
//
// One goroutine per socket (libzmq sockets are not thread-safe); the
// feed's Run owns the publisher table. A waiter's interrupt is the one
// call made from another goroutine (the context's end).
//
// # Files
//
//   - doc.go: this overview.
//   - errors.go: ErrBadConfig.
//   - endpoint.go: checkEndpoint, the endpoint forms accepted (IPv6 with
//     or without brackets, zones).
//   - socket.go: libzmq socket set-up, limits, receive loop and re-connects.
//   - plane.go: Plane (direct and broker mode), ParseBrokerURL.
//   - engine.go: Engine, the vLLM/SGLang publisher feed with replay and
//     resync.
//   - feeds.go: Feeds, a pool's feeds from every configured source.
//   - waiter_linux.go: a socket's wait for input in Go's network poller
//     (an epoll instance watching its ZMQ_FD descriptors).
//   - waiter_other.go: elsewhere, or built with the zmqpoll tag, a libzmq
//     poll that holds a thread and looks at its context every recvPoll.
//   - support_test.go: the Python publisher driver, relay and reference
//     producer helpers.
//   - discovery_test.go: publishers registered in a real etcd come and go;
//     the relay is not ready while that etcd is down, and ready again once
//     it is back; in broker mode a worker whose instance record goes loses
//     its blocks and its load; brokers found in etcd once one registers;
//     instance records listed or written deliver KindWorkerPresent and
//     their going KindWorkerGone; KV event source records deliver
//     KindWorkerPresent from a source of their own and their going (or a
//     rewrite) KindGone of it; a NATS channel record delivers
//     KindPresent of a source marked ReportsGone, and KindGone of it.
//   - feeds_test.go: one feed per source, bad sources refused, broker
//     mode without discovery warned about.
//   - plane_test.go: late publisher, batches and single events, gaps,
//     identity and frame rejections, load; restart with a new id; brokers,
//     a copy one broker lost taken late from the other;
//     400 publishers, past libzmq's default socket limit, holding no
//     thread each; a publisher past the plane's socket limit subscribed
//     once another's sockets free; bursts with pauses delivered whole.
//   - waiter_linux_test.go, waiter_other_test.go: which wait the build has.
//   - bench_test.go: idle publishers' CPU and threads; one subscription's
//     receive rate (BENCHMARKS.md).
//   - engine_test.go: vLLM array and SGLang map batches (with and without
//     medium, lora_name, extra_keys; several dp ranks); a replayed gap; an
//     unreplayable gap, a gap past the replay bound and an engine restart
//     resync; a socket made again after a failed one resyncs.
//   - hostile_test.go: a peer announcing a 1 TiB part; a part over the
//     limit.
//   - ipv6_test.go: direct-mode publishers bound on [::1], given in
//     brackets and without, and an engine and its replay socket on [::1],
//     all delivered (skipped where the machine has no IPv6 loopback); the
//     endpoint forms accepted and refused.
//   - expiry_test.go: a fixed publisher killed, and one frozen (SIGSTOP),
//     cleared after its expiry while another stays; each continues when
//     it comes back.
//   - testdata/dynamo_pub.py: a Dynamo event-plane publisher and brokers
//     built field by field from the spec with python3-zmq and
//     python3-msgpack.
//   - testdata/engine_pub.py: a vLLM-protocol publisher with its replay
//     socket and buffer.
//
// # Tests
//
// Each test runs a relay with a feed against Debian's python3-zmq
// publishers and compares the relay's filter words with a producer fed
// the events the publishers stored; one runs workers on the NATS event
// plane registered in etcd, whose blocks go with their records.
package zmqfeed
