package zmqfeed

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/discovery"
	"github.com/goindex/goindex/bridge/discovery/etcdtest"
	"github.com/goindex/goindex/bridge/obs"
	"github.com/goindex/goindex/bridge/obs/obstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// putLeased writes one discovery record under a new 60 s lease, as
// Dynamo's KV-store discovery keeps a worker's records, and returns the
// lease.
func putLeased(t *testing.T, cli *clientv3.Client, key, value string) clientv3.LeaseID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	if _, err := cli.Put(ctx, key, value, clientv3.WithLease(l.ID)); err != nil {
		t.Fatalf("Put %s: %v", key, err)
	}
	return l.ID
}

// registerInstance writes a worker's instance record (the workers a
// broker-mode relay follows) under a new lease and returns the lease.
func registerInstance(t *testing.T, cli *clientv3.Client, worker uint64) clientv3.LeaseID {
	t.Helper()
	key := fmt.Sprintf("v1/instances/%s/%s/%s/%x", testScope.Namespace, testScope.Component, testScope.Endpoint, worker)
	value := fmt.Sprintf(`{"type":"Endpoint","component":%q,"endpoint":%q,"namespace":%q,"instance_id":%d,"transport":{"tcp":"10.0.0.1:9000"}}`,
		testScope.Component, testScope.Endpoint, testScope.Namespace, worker)
	return putLeased(t, cli, key, value)
}

// channelRecord is the key and value of the EventChannel record a worker
// publishing KV events at endpoint under id registers (KV-store discovery).
func channelRecord(id uint64, endpoint string) (key, value string) {
	return testScope.ChannelPrefix("kv-events") + strconv.FormatUint(id, 16),
		fmt.Sprintf(`{"type":"EventChannel","scope":{"kind":"endpoint","endpoint":{"namespace":%q,"component":%q,"name":%q}},`+
			`"topic":"kv-events","instance_id":%d,"transport":{"kind":"Zmq","config":{"endpoint":%q}}}`,
			testScope.Namespace, testScope.Component, testScope.Endpoint, id, endpoint)
}

// register writes a worker's EventChannel record under a new lease and
// returns the lease.
func register(t *testing.T, cli *clientv3.Client, id uint64, endpoint string) clientv3.LeaseID {
	t.Helper()
	key, value := channelRecord(id, endpoint)
	return putLeased(t, cli, key, value)
}

// TestPlane_PublishersDiscoveredInEtcdComeAndGo registers Python
// publishers in a real etcd: the relay connects to each as its record
// appears (one of them after the relay started), rejects and counts a
// message whose publisher id is not the registered one, and drops a
// worker's blocks when its lease is revoked.
func TestPlane_PublishersDiscoveredInEtcdComeAndGo(t *testing.T) {
	url, cli := etcdtest.Start(t)
	a := startPy(t, "dynamo_pub.py", "--bind", "tcp://127.0.0.1:0")
	leaseA := register(t, cli, pubA, a.Endpoints[0])
	etcd, err := discovery.NewEtcd(discovery.EtcdConfig{Endpoints: []string{url}, Scope: testScope, Logger: testLogger()})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	r := startRelay(t, newPlane(t, PlaneConfig{Discovery: etcd}))
	a.do("warm", msg{"pub": pubA, "seq": 0, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xA1, 0x11})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 1 {
			return errors.New("worker 1's block not tracked yet")
		}
		return nil
	})
	// The registered publisher id is pubA; a message claiming another one
	// on that socket is refused.
	a.do("send", msg{"pub": pubA + 5, "seq": 1, "payload": []any{storedMap(9, 1, 0, nil, [2]uint64{0xE1, 0x51})}})
	// A worker that appears later.
	b := startPy(t, "dynamo_pub.py", "--bind", "tcp://127.0.0.1:0")
	register(t, cli, pubA+1, b.Endpoints[0])
	b.do("warm", msg{"pub": pubA + 1, "seq": 0, "payload": []any{storedMap(2, 1, 0, nil, [2]uint64{0xB1, 0x21}, [2]uint64{0xB2, 0x22})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 3 || st.Intake.Identity != 1 {
			return fmt.Errorf("tracked %d, identity mismatches %d; want 3 and 1", st.Producer.TrackedBlocks, st.Intake.Identity)
		}
		return nil
	})
	// Worker 1 leaves: its lease goes, and with it its blocks.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	revokeWorker1(ctx, t, r, cli, leaseA)
}

// TestPlane_NATSWorkerGoneWithItsRecordDropsItsBlocks runs workers on the
// NATS event plane (DYN_EVENT_PLANE=nats): each registers a NATS
// EventChannel record under its lease and sends its envelopes, with its
// publisher id, on the relay's NATS subject. A worker whose lease goes has
// its blocks dropped, as Dynamo's router drops a dead worker's; they used
// to stay in the DC's filter until the relay restarted, so the router kept
// sending that DC requests for a cache nobody held. The other worker's
// blocks stay.
func TestPlane_NATSWorkerGoneWithItsRecordDropsItsBlocks(t *testing.T) {
	url, cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	registerNATS := func(id uint64) clientv3.LeaseID {
		t.Helper()
		value := fmt.Sprintf(`{"type":"EventChannel","scope":{"kind":"endpoint","endpoint":{"namespace":%q,"component":%q,"name":%q}},`+
			`"topic":"kv-events","instance_id":%d,"transport":{"kind":"Nats","config":{"subject_prefix":%q}}}`,
			testScope.Namespace, testScope.Component, testScope.Endpoint, id, testScope.Subject(""))
		return putLeased(t, cli, testScope.ChannelPrefix("kv-events")+strconv.FormatUint(id, 16), value)
	}
	etcd, err := discovery.NewEtcd(discovery.EtcdConfig{Endpoints: []string{url}, Scope: testScope, Logger: testLogger()})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	r, nc := startRelayNATS(t, newPlane(t, PlaneConfig{Discovery: etcd}))
	send := func(pub, worker uint64, blocks ...[2]uint64) {
		t.Helper()
		ev := dynamo.RouterEvent{WorkerID: worker, Event: dynamo.CacheEvent{EventID: 1, Kind: kv.Stored}}
		for _, b := range blocks {
			ev.Event.Stored.Blocks = append(ev.Event.Stored.Blocks, dynamo.StoredBlock{BlockHash: b[0], TokensHash: b[1]})
		}
		payload, err := dynamo.AppendMsgpackEvents(nil, []dynamo.RouterEvent{ev})
		if err != nil {
			t.Fatalf("AppendMsgpackEvents: %v", err)
		}
		env := dynamo.AppendEnvelope(nil, &dynamo.Envelope{Topic: dynamo.EventTopic, PublisherID: pub, PublishedAtMs: 1, Payload: payload})
		if err := nc.Publish(testScope.Subject(dynamo.EventTopic), env); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	leaseA := registerNATS(pubA)
	registerNATS(pubA + 1)
	send(pubA, 1, [2]uint64{0xA1, 0x11})
	send(pubA+1, 2, [2]uint64{0xB1, 0x21}, [2]uint64{0xB2, 0x22})
	waitBothWorkers(t, r)
	revokeWorker1(ctx, t, r, cli, leaseA)
}

// TestPlane_RelayIsNotReadyWhileEtcdIsDown stops the etcd a relay
// discovers its publishers in: the relay used to stay ready, blind to
// workers coming and going; now its pool's status, readiness and
// goindex_relay_feeds_ready gauge name the failing discovery until etcd
// is back and listed again.
func TestPlane_RelayIsNotReadyWhileEtcdIsDown(t *testing.T) {
	srv := etcdtest.Launch(t, etcdtest.Options{})
	etcd, err := discovery.NewEtcd(discovery.EtcdConfig{Endpoints: []string{srv.URL}, Scope: testScope, Logger: testLogger(),
		DialTimeout: 200 * time.Millisecond, RequestTimeout: 300 * time.Millisecond, CheckEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	r := startRelay(t, newPlane(t, PlaneConfig{Discovery: etcd}))
	ready := obs.RelayReady(r)
	reg, err := obs.NewRegistry(obs.NewRelayCollector(r))
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	metrics := httptest.NewServer(obs.Handler(reg, ready))
	t.Cleanup(metrics.Close)
	// working waits until the pool's feeds, its readiness and its gauge
	// all say the discovery works (a check may fail now and then on a
	// loaded machine: each is polled until it agrees).
	working := func() {
		t.Helper()
		waitFor(t, r, func(st relay.PoolStatus) error {
			if st.FeedErr != "" {
				return errors.New(st.FeedErr)
			}
			if err := ready(); err != nil {
				return err
			}
			return obstest.Want(metrics.URL, 1, "goindex_relay_feeds_ready")
		})
	}
	working()
	srv.Stop()
	waitFor(t, r, func(st relay.PoolStatus) error {
		if !strings.Contains(st.FeedErr, "discovery "+etcd.String()) {
			return fmt.Errorf("FeedErr = %q, want the failing discovery named", st.FeedErr)
		}
		return nil
	})
	if err := ready(); !errors.Is(err, obs.ErrNotReady) || !strings.Contains(err.Error(), etcd.String()) {
		t.Errorf("RelayReady() with etcd down = %v, want ErrNotReady naming %s", err, etcd)
	}
	if err := obstest.Want(metrics.URL, 0, "goindex_relay_feeds_ready"); err != nil {
		t.Errorf("with etcd down: %v", err)
	}
	srv.Restart()
	working()
}

// TestPlane_BrokerModeDropsAWorkerWhoseInstanceRecordGoes runs a relay in
// broker mode with etcd (goindex relay --zmq-broker --etcd): Dynamo's
// broker-mode publishers register no channel, so the relay used to keep a
// departed worker's blocks until it restarted. It now follows the
// instance records of the workers serving the pool's endpoint and drops
// a worker's blocks when its lease is revoked, keeping the others'.
func TestPlane_BrokerModeDropsAWorkerWhoseInstanceRecordGoes(t *testing.T) {
	url, cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leaseA := registerInstance(t, cli, 1)
	registerInstance(t, cli, 2)
	py := startPy(t, "dynamo_pub.py", "--brokers", "1")
	feeds, err := Feeds(FeedsConfig{Scope: testScope, Etcd: []string{url}, Logger: testLogger(),
		Broker: "xsub=tcp://127.0.0.1:1,xpub=" + strings.Join(py.Endpoints, ";")})
	if err != nil {
		t.Fatalf("Feeds: %v", err)
	}
	r, nc := startRelayNATS(t, feeds...)
	bothWorkersThroughBroker(t, r, py)
	revokeWorker1(ctx, t, r, cli, leaseA)
	// Its load goes with it: the next report counts worker 2 alone (it
	// used to count worker 1 until the 10 s live window passed).
	sub, err := nc.SubscribeSync(relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 1}.LoadSubject())
	if err != nil {
		t.Fatalf("subscribe load: %v", err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("load report: %v", err)
	}
	lr, _, err := wire.Decode(m.Data)
	if err != nil {
		t.Fatalf("decode load report: %v", err)
	}
	if got := lr.(*relayproto.LoadReport).LiveWorkers; got != 1 {
		t.Errorf("load report after worker 1's instance went: %d live workers, want 1", got)
	}
}

// bothWorkersThroughBroker publishes, through the broker script py runs,
// worker 1's block (repeated until the relay takes it, since the broker
// may not have the relay's subscription yet) and worker 2's two, and waits
// for all three.
func bothWorkersThroughBroker(t *testing.T, r *relay.Relay, py *pyProc) {
	t.Helper()
	subject := testScope.Subject("kv-events")
	py.do("warm", msg{"pub": pubA, "seq": 0, "frame_topic": subject, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xA1, 0x11})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events == 0 {
			return errors.New("no event through the broker yet")
		}
		return nil
	})
	py.do("send", msg{"pub": pubA + 1, "seq": 0, "frame_topic": subject,
		"payload": []any{storedMap(2, 1, 0, nil, [2]uint64{0xB1, 0x21}, [2]uint64{0xB2, 0x22})}})
	waitBothWorkers(t, r)
}

// waitBothWorkers waits for worker 1's block (0xA1) and worker 2's two
// (0xB1, 0xB2).
func waitBothWorkers(t *testing.T, r *relay.Relay) {
	t.Helper()
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 3 {
			return fmt.Errorf("tracked %d blocks, want both workers' 3", st.Producer.TrackedBlocks)
		}
		return nil
	})
}

// revokeWorker1 revokes worker 1's lease and checks that only worker 2's
// blocks (0xB1, 0xB2) are left.
func revokeWorker1(ctx context.Context, t *testing.T, r *relay.Relay, cli *clientv3.Client, lease clientv3.LeaseID) {
	t.Helper()
	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 2 {
			return fmt.Errorf("tracked %d after worker 1's lease went, want worker 2's 2", st.Producer.TrackedBlocks)
		}
		return nil
	})
	checkWords(t, r, []kv.Event{storedKV(2, 1, 0, nil, [2]uint64{0xB1, 0x21}, [2]uint64{0xB2, 0x22})})
}

// TestPlane_BrokersFoundInEtcd runs Dynamo's broker-mode deployment with
// DYN_ZMQ_BROKER_ENABLED: the relay is given etcd alone; the broker
// (libzmq's XSUB/XPUB proxy, python3-zmq) registers its ZmqBroker channel
// under component zmq_broker after the relay has looked once and found
// none. The relay finds it, subscribes through it, and follows the
// workers' instance records: a worker whose record goes loses its blocks.
func TestPlane_BrokersFoundInEtcd(t *testing.T) {
	url, cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leaseA := registerInstance(t, cli, 1)
	registerInstance(t, cli, 2)
	feeds, err := Feeds(FeedsConfig{Scope: testScope, Etcd: []string{url}, FindBrokers: true, Logger: testLogger()})
	if err != nil {
		t.Fatalf("Feeds: %v", err)
	}
	r := startRelay(t, feeds...)
	time.Sleep(200 * time.Millisecond) // the relay's first look finds no broker
	py := startPy(t, "dynamo_pub.py", "--brokers", "1")
	brokers := dynamo.Scope{Namespace: testScope.Namespace, Component: discovery.BrokerComponent}
	putLeased(t, cli, brokers.ChannelPrefix("broker")+"b1", fmt.Sprintf(`{"type":"EventChannel",`+
		`"scope":{"kind":"component","namespace":%q,"component":"zmq_broker"},"topic":"broker","instance_id":177,`+
		`"transport":{"kind":"ZmqBroker","config":{"xsub_endpoints":["tcp://127.0.0.1:1"],"xpub_endpoints":[%q]}}}`,
		testScope.Namespace, py.Endpoints[0]))
	bothWorkersThroughBroker(t, r, py)
	revokeWorker1(ctx, t, r, cli, leaseA)
}

// collect runs plane p with a deliver that hands every message on the
// returned channel, until the test ends.
func collect(t *testing.T, p *Plane) <-chan relay.Message {
	t.Helper()
	out := make(chan relay.Message, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Run(ctx, func(m relay.Message) bool {
			select {
			case out <- m:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Plane.Run: %v", err)
		}
	})
	return out
}

// next returns the plane's next message.
func next(t *testing.T, msgs <-chan relay.Message, what string) relay.Message {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(20 * time.Second):
		t.Fatalf("no message from the plane; want %s", what)
		return relay.Message{}
	}
}

// TestPlane_WorkerRecordsDeliverPresentThenGone follows workers' instance
// records (broker mode's discovery): a record listed at start and one
// written later are each delivered as relay.KindWorkerPresent, which the
// relay holds live until the worker's KindWorkerGone (a broker-mode worker
// used to leave the load reports once silent for the live window, though
// its record said it was there); a revoked lease is delivered as
// KindWorkerGone.
func TestPlane_WorkerRecordsDeliverPresentThenGone(t *testing.T) {
	url, cli := etcdtest.Start(t)
	registerInstance(t, cli, 5)
	etcd, err := discovery.NewEtcd(discovery.EtcdConfig{Endpoints: []string{url}, Scope: testScope, Workers: true, Logger: testLogger()})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	msgs := collect(t, newPlane(t, PlaneConfig{Discovery: etcd}))
	if m := next(t, msgs, "worker 5 present"); m.Kind != relay.KindWorkerPresent || m.Worker != 5 {
		t.Errorf("message for listed instance record 5 = kind %d worker %d, want KindWorkerPresent (%d) of 5", m.Kind, m.Worker, relay.KindWorkerPresent)
	}
	lease := registerInstance(t, cli, 6)
	if m := next(t, msgs, "worker 6 present"); m.Kind != relay.KindWorkerPresent || m.Worker != 6 {
		t.Errorf("message for new instance record 6 = kind %d worker %d, want KindWorkerPresent (%d) of 6", m.Kind, m.Worker, relay.KindWorkerPresent)
	}
	if _, err := cli.Revoke(context.Background(), lease); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if m := next(t, msgs, "worker 6 gone"); m.Kind != relay.KindWorkerGone || m.Worker != 6 {
		t.Errorf("message for revoked instance record 6 = kind %d worker %d, want KindWorkerGone (%d) of 6", m.Kind, m.Worker, relay.KindWorkerGone)
	}
}

// TestPlane_KVSourceRecordsHoldTheirWorkers follows KV event source
// records (v1.4 on): one listed at start and one written later are each
// delivered as relay.KindWorkerPresent of their worker from a Source of
// their own whose departure is reported; a record rewritten for another
// worker ends the old hold (KindGone) before the new one; a revoked lease
// is KindGone of the record's Source, nothing else.
func TestPlane_KVSourceRecordsHoldTheirWorkers(t *testing.T) {
	url, cli := etcdtest.Start(t)
	source := func(pub, worker uint64) (string, string) {
		ep := fmt.Sprintf(`{"namespace":%q,"component":%q,"name":%q}`, testScope.Namespace, testScope.Component, testScope.Endpoint)
		return fmt.Sprintf("v1/event_sources/%s/%x", testScope.Subject(dynamo.EventTopic), pub),
			fmt.Sprintf(`{"type":"EventSource","scope":{"kind":"endpoint","endpoint":%s},"topic":"kv-events","instance_id":%d,`+
				`"metadata":{"kv_state_endpoint":%s,"worker":{"worker_id":%d,"dp_rank":0},"publisher_id":%d}}`, ep, pub, ep, worker, pub)
	}
	key, value := source(0xa5, 5)
	putLeased(t, cli, key, value)
	etcd, err := discovery.NewEtcd(discovery.EtcdConfig{Endpoints: []string{url}, Scope: testScope, Logger: testLogger()})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	msgs := collect(t, newPlane(t, PlaneConfig{Discovery: etcd}))
	present := func(what string, worker uint64) *relay.Source {
		t.Helper()
		m := next(t, msgs, what)
		if m.Kind != relay.KindWorkerPresent || m.Worker != worker || m.Source == nil || !m.Source.ReportsGone {
			t.Fatalf("%s: message = kind %d worker %d source %+v, want KindWorkerPresent (%d) of %d from a source that reports its going",
				what, m.Kind, m.Worker, m.Source, relay.KindWorkerPresent, worker)
		}
		return m.Source
	}
	gone := func(what string, src *relay.Source) {
		t.Helper()
		if m := next(t, msgs, what); m.Kind != relay.KindGone || m.Source != src {
			t.Fatalf("%s: message = kind %d source %p, want KindGone (%d) of %p", what, m.Kind, m.Source, relay.KindGone, src)
		}
	}
	src5 := present("listed record of worker 5", 5)
	key, value = source(0xa6, 6)
	lease := putLeased(t, cli, key, value)
	src6 := present("new record of worker 6", 6)
	_, value = source(0xa6, 7)
	if _, err := cli.Put(context.Background(), key, value, clientv3.WithLease(lease)); err != nil {
		t.Fatalf("Put: %v", err)
	}
	gone("record of worker 6 rewritten", src6)
	src7 := present("the rewritten record, of worker 7", 7)
	if _, err := cli.Revoke(context.Background(), lease); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	gone("record of worker 7 revoked", src7)
	select {
	case m := <-msgs:
		t.Errorf("unexpected message kind %d worker %d source %p (worker 5's is %p)", m.Kind, m.Worker, m.Source, src5)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestPlane_FollowedNATSChannelIsAnnouncedWithReportedDeparture follows a
// NATS EventChannel record: its appearance is delivered as
// relay.KindPresent of a Source whose departure is reported (the relay
// holds the workers of its envelopes live), its going as KindGone of the
// same Source.
func TestPlane_FollowedNATSChannelIsAnnouncedWithReportedDeparture(t *testing.T) {
	url, cli := etcdtest.Start(t)
	etcd, err := discovery.NewEtcd(discovery.EtcdConfig{Endpoints: []string{url}, Scope: testScope, Logger: testLogger()})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	msgs := collect(t, newPlane(t, PlaneConfig{Discovery: etcd}))
	value := fmt.Sprintf(`{"type":"EventChannel","scope":{"kind":"endpoint","endpoint":{"namespace":%q,"component":%q,"name":%q}},`+
		`"topic":"kv-events","instance_id":%d,"transport":{"kind":"Nats","config":{"subject_prefix":%q}}}`,
		testScope.Namespace, testScope.Component, testScope.Endpoint, pubA, testScope.Subject(""))
	lease := putLeased(t, cli, testScope.ChannelPrefix("kv-events")+strconv.FormatUint(pubA, 16), value)
	present := next(t, msgs, "the NATS publisher present")
	if present.Kind != relay.KindPresent || present.Source == nil || !present.Source.NATS || !present.Source.ReportsGone ||
		present.Source.PublisherID != pubA {
		t.Fatalf("message for a NATS channel record = kind %d source %+v, want KindPresent (%d) of a NATS source of %#x with ReportsGone",
			present.Kind, present.Source, relay.KindPresent, pubA)
	}
	if _, err := cli.Revoke(context.Background(), lease); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if m := next(t, msgs, "the NATS publisher gone"); m.Kind != relay.KindGone || m.Source != present.Source {
		t.Errorf("message for the revoked NATS channel record = kind %d source %p, want KindGone (%d) of %p", m.Kind, m.Source, relay.KindGone, present.Source)
	}
}

// TestPlane_PublishersDiscoveredInTheFileStore registers a Python
// publisher the way Dynamo's file store does (DYN_DISCOVERY_BACKEND=file:
// a file under DYN_FILE_KV/v1/event_channels named by its percent-encoded
// key, renamed into place): the relay connects to it and takes its blocks,
// and drops them once the worker stops touching its file (it died).
func TestPlane_PublishersDiscoveredInTheFileStore(t *testing.T) {
	root := t.TempDir()
	a := startPy(t, "dynamo_pub.py", "--bind", "tcp://127.0.0.1:0")
	key, value := channelRecord(pubA, a.Endpoints[0])
	key = strings.TrimPrefix(key, "v1/event_channels/")
	dir := filepath.Join(root, "v1", "event_channels")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, url.PathEscape(key)) // the relay decodes either escaping
	tmp := filepath.Join(dir, ".tmp_0123456789abcdef")
	if err := os.WriteFile(tmp, []byte(value), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	d, err := discovery.NewDir(discovery.DirConfig{Root: root, Scope: testScope, PollEvery: 10 * time.Millisecond, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, newPlane(t, PlaneConfig{Discovery: d}))
	a.do("warm", msg{"pub": pubA, "seq": 0, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xA1, 0x11})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 1 {
			return errors.New("the worker's block not tracked yet")
		}
		return nil
	})
	stale := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path, stale, stale); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 0 {
			return fmt.Errorf("%d blocks still tracked after the worker's record expired", st.Producer.TrackedBlocks)
		}
		return nil
	})
}
