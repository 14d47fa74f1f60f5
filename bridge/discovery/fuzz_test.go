package discovery

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/goindex/goindex/dynamo"
)

// FuzzParseChannel feeds discovery records (etcd values, Kubernetes data)
// to the record, KV source, broker and scope parsers, and the Kubernetes collector in
// both modes: they never panic, and a record they take has an endpoint only for
// a ZMQ transport.
func FuzzParseChannel(f *testing.F) {
	f.Add([]byte(channelValue(testScope, "kv-events", 7, "tcp://a:1")))
	f.Add([]byte(`{"topic":"kv-events","transport":{"Zmq":{"endpoint":"tcp://b:2"}}}`))
	f.Add([]byte(`{"kind":"endpoint","endpoint":"dyn://a.b.c"}`))
	f.Add([]byte(instanceValue(testScope, 9)))
	f.Add([]byte(sourceValue(testScope, 3, 4, 1)))
	f.Add([]byte(v12ChannelValue(dynamo.Scope{Namespace: testScope.Namespace, Component: testScope.Component}, "kv-events", 5)))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseChannel(b)
		if err == nil && c.endpoint != "" && !strings.EqualFold(c.kind, "zmq") {
			t.Fatalf("parseChannel(%q) = endpoint %q for transport %q", b, c.endpoint, c.kind)
		}
		_, _ = parseScope(json.RawMessage(b))
		k := &Kube{scopes: map[dynamo.Scope]map[string]bool{testScope: {dynamo.EventTopic: true}}, cfg: KubeConfig{Logger: discardLogger()}}
		k.collect("r", json.RawMessage(b), 0, map[string]Publisher{})
		_, _ = parseInstance(b, "1f")
		if p, err := kvSourcePublisher("k", b, testScope); err == nil && (!p.KVSource || p.Scope.Component != testScope.Component) {
			t.Fatalf("kvSourcePublisher(%q) = %+v", b, p)
		}
		if eps, err := parseBroker(b); err == nil && len(eps) == 0 {
			t.Fatalf("parseBroker(%q) took a broker with no XPUB endpoint", b)
		}
		w := &Kube{cfg: KubeConfig{Scope: testScope, Workers: true, Logger: discardLogger()}}
		w.collect("r", json.RawMessage(b), 0, map[string]Publisher{})
	})
}
