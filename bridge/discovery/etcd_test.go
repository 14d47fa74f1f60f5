package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/goindex/goindex/bridge/discovery/etcdtest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/internal/syncbuf"
	"github.com/goindex/goindex/internal/testcert"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var testScope = dynamo.Scope{Namespace: "dyn.ns", Component: "backend", Endpoint: "generate"}

// channelValue is an EventChannel record as Dynamo stores it (§1.7).
func channelValue(scope dynamo.Scope, topic string, id uint64, endpoint string) string {
	return fmt.Sprintf(`{"type":"EventChannel","scope":{"kind":"endpoint","endpoint":{"namespace":%q,"component":%q,"name":%q}},`+
		`"topic":%q,"instance_id":%d,"transport":{"kind":"Zmq","config":{"endpoint":%q}}}`,
		scope.Namespace, scope.Component, scope.Endpoint, topic, id, endpoint)
}

// channelKey is the record's key: the scope path, the topic, the id in hex.
func channelKey(scope dynamo.Scope, topic string, id uint64) string {
	return scope.ChannelPrefix(topic) + strconv.FormatUint(id, 16)
}

// leases returns helpers that grant a lease of ttl seconds and put a key
// under a lease, as Dynamo's workers keep their records.
func leases(ctx context.Context, t *testing.T, cli *clientv3.Client) (func(ttl int64) clientv3.LeaseID, func(key, value string, l clientv3.LeaseID)) {
	lease := func(ttl int64) clientv3.LeaseID {
		l, err := cli.Grant(ctx, ttl)
		if err != nil {
			t.Fatalf("Grant: %v", err)
		}
		return l.ID
	}
	put := func(key, value string, l clientv3.LeaseID) {
		if _, err := cli.Put(ctx, key, value, clientv3.WithLease(l)); err != nil {
			t.Fatalf("Put %s: %v", key, err)
		}
	}
	return lease, put
}

// collector gathers a watch's updates.
type collector struct {
	mu  sync.Mutex
	set map[string]Publisher // live publishers by key
	log []Update
}

func (c *collector) add(u Update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, u)
	if u.Gone {
		delete(c.set, u.Publisher.Key)
	} else {
		c.set[u.Publisher.Key] = u.Publisher
	}
}

// waitSet polls until the live set is want (by publisher id → endpoint).
func (c *collector) waitSet(t *testing.T, want map[uint64]string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.mu.Lock()
		got := map[uint64]string{}
		for _, p := range c.set {
			got[p.PublisherID] = p.Endpoint
		}
		c.mu.Unlock()
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("publishers = %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEtcd_FollowsChannelsAsTheyComeAndGo registers channel records in a
// real etcd under leases, as Dynamo's workers do: present records are
// listed, new ones followed, a revoked lease and an expired one remove
// theirs, a restart (new id) replaces the old, and records of other scopes,
// other transports and bad records are skipped.
func TestEtcd_FollowsChannelsAsTheyComeAndGo(t *testing.T) {
	url, cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lease, put := leases(ctx, t, cli)
	component := dynamo.Scope{Namespace: testScope.Namespace, Component: testScope.Component}
	worker1 := lease(60)
	// Present before the watch: an endpoint-scoped KV channel (v1.4+).
	put(channelKey(testScope, "kv-events", 0x11), channelValue(testScope, "kv-events", 0x11, "tcp://10.0.0.1:4001"), worker1)
	e, err := NewEtcd(EtcdConfig{Endpoints: []string{url}, Scope: testScope})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	c := &collector{set: map[string]Publisher{}}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Watch(wctx, c.add) }()
	defer func() { stop(); <-done }()
	c.waitSet(t, map[uint64]string{0x11: "tcp://10.0.0.1:4001"})

	// Later: a component-scoped one (v1.3), an endpoint load channel, a
	// namespace load channel, and ones that must be skipped.
	worker2 := lease(60)
	put(channelKey(component, "kv-events", 0x22), channelValue(component, "kv-events", 0x22, "tcp://10.0.0.2:4002"), worker2)
	put(channelKey(testScope, "kv_metrics", 0x23), channelValue(testScope, "kv_metrics", 0x23, "tcp://10.0.0.2:4003"), worker2)
	put(channelKey(dynamo.Scope{Namespace: testScope.Namespace}, "kv_metrics", 0x24),
		channelValue(dynamo.Scope{Namespace: testScope.Namespace}, "kv_metrics", 0x24, "tcp://10.0.0.2:4004"), worker2)
	other := dynamo.Scope{Namespace: testScope.Namespace, Component: "prefill", Endpoint: "generate"}
	put(channelKey(other, "kv-events", 0x31), channelValue(other, "kv-events", 0x31, "tcp://10.0.0.3:1"), worker2)
	put(channelKey(testScope, "kv-events", 0x32), `{"type":"EventChannel","topic":"kv-events","instance_id":50,"transport":{"kind":"Nats","config":{"subject_prefix":"x"}}}`, worker2)
	put(channelKey(testScope, "kv-events", 0x33), `{"type":"EventChannel",`, worker2)
	put(channelKey(testScope, "active_sequences_events", 0x34), channelValue(testScope, "active_sequences_events", 0x34, "tcp://10.0.0.3:2"), worker2)
	// The NATS channel (id 50) is a publisher without an endpoint: its
	// record's going says its worker is gone.
	c.waitSet(t, map[uint64]string{0x11: "tcp://10.0.0.1:4001", 0x22: "tcp://10.0.0.2:4002", 0x23: "tcp://10.0.0.2:4003", 0x24: "tcp://10.0.0.2:4004", 50: ""})

	// Worker 1 restarts: a new id under a new lease; the old lease is
	// revoked (a graceful stop).
	worker1b := lease(60)
	put(channelKey(testScope, "kv-events", 0x12), channelValue(testScope, "kv-events", 0x12, "tcp://10.0.0.1:4011"), worker1b)
	if _, err := cli.Revoke(ctx, worker1); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	c.waitSet(t, map[uint64]string{0x12: "tcp://10.0.0.1:4011", 0x22: "tcp://10.0.0.2:4002", 0x23: "tcp://10.0.0.2:4003", 0x24: "tcp://10.0.0.2:4004", 50: ""})

	// Worker 2 dies: its lease (2 s) is not kept alive and expires.
	worker2b := lease(2)
	if _, err := cli.Revoke(ctx, worker2); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	put(channelKey(component, "kv-events", 0x25), channelValue(component, "kv-events", 0x25, "tcp://10.0.0.2:4005"), worker2b)
	c.waitSet(t, map[uint64]string{0x12: "tcp://10.0.0.1:4011", 0x25: "tcp://10.0.0.2:4005"})
	c.waitSet(t, map[uint64]string{0x12: "tcp://10.0.0.1:4011"})

	// Each publisher carries the scope and topic of its key.
	for _, u := range c.log {
		p := u.Publisher
		if p.PublisherID == 0x24 && (p.Scope != dynamo.Scope{Namespace: testScope.Namespace} || p.Topic != "kv_metrics") {
			t.Errorf("namespace load channel = %+v, want namespace scope, topic kv_metrics", p)
		}
		if p.PublisherID == 0x22 && (p.Scope != component || p.Topic != "kv-events") {
			t.Errorf("component channel = %+v, want component scope, topic kv-events", p)
		}
		if (p.PublisherID == 50) != p.NATS {
			t.Errorf("publisher %+v: NATS %v, want it set for the NATS channel (id 50) only", p, p.NATS)
		}
	}
}

func TestParseChannel_EveryPlausibleForm(t *testing.T) {
	cases := []struct {
		name, in string
		id       uint64
		hasID    bool
		endpoint string
	}{
		{"adjacent, instance_id", `{"type":"EventChannel","topic":"kv-events","instance_id":7,"transport":{"kind":"Zmq","config":{"endpoint":"tcp://a:1"}}}`, 7, true, "tcp://a:1"},
		{"publisher_id string", `{"type":"EventChannel","topic":"kv-events","publisher_id":"9007199254740991","transport":{"kind":"zmq","config":{"endpoint":"tcp://a:1"}}}`, 1<<53 - 1, true, "tcp://a:1"},
		{"externally tagged, no id", `{"topic":"kv-events","transport":{"Zmq":{"endpoint":"tcp://b:2"}}}`, 0, false, "tcp://b:2"},
		{"nats", `{"type":"EventChannel","instance_id":1,"transport":{"kind":"Nats","config":{"subject_prefix":"p"}}}`, 1, true, ""},
		{"broker", `{"type":"EventChannel","instance_id":1,"transport":{"kind":"ZmqBroker","config":{"xsub_endpoints":["tcp://x:1"],"xpub_endpoints":["tcp://x:2"]}}}`, 1, true, ""},
	}
	for _, c := range cases {
		got, err := parseChannel([]byte(c.in))
		if err != nil || got.id != c.id || got.hasID != c.hasID || got.endpoint != c.endpoint {
			t.Errorf("%s: parseChannel = %+v, %v; want id %d (%v), endpoint %q", c.name, got, err, c.id, c.hasID, c.endpoint)
		}
	}
	for _, bad := range []string{`{"type":"Instance"}`, `[1]`, `{"type":"EventChannel","instance_id":-1,"transport":{"kind":"Zmq"}}`,
		`{"type":"EventChannel","instance_id":1}`, `{"type":"EventChannel","instance_id":1,"transport":{"a":{},"b":{}}}`} {
		if _, err := parseChannel([]byte(bad)); err == nil {
			t.Errorf("parseChannel(%s) = nil error, want one", bad)
		}
	}
}

// TestEtcd_UnreachableIsLoggedAndRetried watches an etcd that cannot be
// reached (a wrong --etcd, or etcd down when the relay starts): each list
// fails within RequestTimeout and is retried, where the relay used to wait
// without a word for as long as etcd stayed away; the failure is logged
// once however many retries it lasts (it was logged on every one, once a
// second), and once etcd is reachable the channels are listed and the
// end of the failure logged.
func TestEtcd_UnreachableIsLoggedAndRetried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	logs := &syncbuf.Buffer{}
	e, err := NewEtcd(EtcdConfig{Endpoints: []string{"http://" + addr}, Scope: testScope, DialTimeout: 100 * time.Millisecond,
		RequestTimeout: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	c := &collector{set: map[string]Publisher{}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Watch(wctx, c.add) }()
	defer func() { stop(); <-done }()
	// Failing for three retry periods: at least two retries after the
	// first failure.
	waitHealth(t, e, false, func(he *HealthError) bool { return he.Err != nil && time.Since(he.Since) > 3*retryEvery })
	if n := strings.Count(logs.String(), "etcd discovery failing"); n != 1 {
		t.Errorf("%d failure lines logged, want 1 (one failure, however many retries):\n%s", n, logs.String())
	}
	url, cli := etcdtest.Start(t)
	if _, err := cli.Put(ctx, channelKey(testScope, "kv-events", 0x11), channelValue(testScope, "kv-events", 0x11, "tcp://10.0.0.1:4001")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	proxy := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()), "etcd", addr,
		strings.TrimPrefix(url, "http://"))
	if err := proxy.Start(); err != nil {
		t.Fatalf("proxy on %s: %v", addr, err)
	}
	t.Cleanup(proxy.Stop)
	c.waitSet(t, map[uint64]string{0x11: "tcp://10.0.0.1:4001"})
	waitLog(t, logs, "etcd discovery listed again")
}

// TestEtcd_AuthenticationAndMutualTLS reads the channels from an etcd
// secured as Dynamo's security guide asks (its ETCD_AUTH_* settings):
// one with authentication on, first with a wrong password (refused,
// logged, retried: nothing listed) then the right one, and one serving
// TLS that requires a client certificate. The relay used to have no way
// to give either, so a secured etcd listed nothing.
func TestEtcd_AuthenticationAndMutualTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	watch := func(cfg EtcdConfig) (*collector, *syncbuf.Buffer) {
		t.Helper()
		logs := &syncbuf.Buffer{}
		cfg.Scope, cfg.RequestTimeout, cfg.Logger = testScope, 2*time.Second, slog.New(slog.NewTextHandler(logs, nil))
		e, err := NewEtcd(cfg)
		if err != nil {
			t.Fatalf("NewEtcd: %v", err)
		}
		c := &collector{set: map[string]Publisher{}}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- e.Watch(wctx, c.add) }()
		t.Cleanup(func() { stop(); <-done })
		return c, logs
	}
	put := func(cli *clientv3.Client, id uint64) {
		t.Helper()
		if _, err := cli.Put(ctx, channelKey(testScope, "kv-events", id), channelValue(testScope, "kv-events", id, "tcp://10.0.0.1:4001")); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}

	url, cli := etcdtest.Start(t)
	root := etcdtest.EnableAuth(t, url, cli, "sekret")
	put(root, 0x11)
	wrong, wrongLogs := watch(EtcdConfig{Endpoints: []string{url}, EtcdCredentials: EtcdCredentials{Username: "root", Password: "wrong"}})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(wrongLogs.String(), "authentication failed") {
		if time.Now().After(deadline) {
			t.Fatalf("a wrong etcd password was not reported within 20 s; logs:\n%s", wrongLogs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	right, _ := watch(EtcdConfig{Endpoints: []string{url}, EtcdCredentials: EtcdCredentials{Username: "root", Password: "sekret"}})
	right.waitSet(t, map[uint64]string{0x11: "tcp://10.0.0.1:4001"})
	wrong.mu.Lock()
	if len(wrong.set) != 0 {
		t.Errorf("a watch with a wrong password listed %v", wrong.set)
	}
	wrong.mu.Unlock()

	certs := testcert.New(t, "127.0.0.1")
	turl, tcli := etcdtest.Run(t, etcdtest.Options{TLS: certs})
	put(tcli, 0x22)
	mtls, _ := watch(EtcdConfig{Endpoints: []string{turl}, EtcdCredentials: EtcdCredentials{CAFile: certs.CA,
		CertFile: certs.ClientCert, KeyFile: certs.ClientKey}})
	mtls.waitSet(t, map[uint64]string{0x22: "tcp://10.0.0.1:4001"})

	for i, cfg := range []EtcdConfig{
		{Endpoints: []string{url}, Scope: testScope, EtcdCredentials: EtcdCredentials{Username: "root"}},
		{Endpoints: []string{turl}, Scope: testScope, EtcdCredentials: EtcdCredentials{CertFile: certs.ClientCert}},
		{Endpoints: []string{turl}, Scope: testScope, EtcdCredentials: EtcdCredentials{CAFile: certs.ClientKey}},
		{Endpoints: []string{turl}, Scope: testScope, EtcdCredentials: EtcdCredentials{CAFile: filepath.Join(t.TempDir(), "missing.pem")}},
	} {
		if _, err := NewEtcd(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("NewEtcd(bad credentials %d) = %v, want ErrBadConfig", i, err)
		}
	}
}
