package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/discovery/etcdtest"
	"github.com/goindex/goindex/dynamo"
)

// brokerValue is a broker's EventChannel record as Dynamo's zmq_broker
// binary writes it (adjacent serde tagging).
func brokerValue(ns string, xsub, xpub []string) string {
	q := func(eps []string) string {
		b := "["
		for i, ep := range eps {
			if i > 0 {
				b += ","
			}
			b += fmt.Sprintf("%q", ep)
		}
		return b + "]"
	}
	return fmt.Sprintf(`{"type":"EventChannel","scope":{"kind":"component","namespace":%q,"component":"zmq_broker"},"topic":"broker",`+
		`"instance_id":5,"transport":{"kind":"ZmqBroker","config":{"xsub_endpoints":%s,"xpub_endpoints":%s}}}`, ns, q(xsub), q(xpub))
}

func TestParseBroker_BothTaggingsAndNothingElse(t *testing.T) {
	for _, c := range []struct {
		name, record string
		want         []string
	}{
		{"adjacent", brokerValue("ns", []string{"tcp://a:5555"}, []string{"tcp://a:5556", "tcp://b:5556"}), []string{"tcp://a:5556", "tcp://b:5556"}},
		{"external", `{"transport":{"ZmqBroker":{"xsub_endpoints":["tcp://a:1"],"xpub_endpoints":["tcp://a:2"]}}}`, []string{"tcp://a:2"}},
		{"kind in another case", `{"transport":{"kind":"zmqbroker","config":{"xpub_endpoints":["tcp://c:2"]}}}`, []string{"tcp://c:2"}},
	} {
		got, err := parseBroker([]byte(c.record))
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: parseBroker = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	for _, bad := range []string{
		channelValue(testScope, "kv-events", 7, "tcp://a:1"), // a publisher's channel
		`{"transport":{"kind":"ZmqBroker","config":{"xsub_endpoints":["tcp://a:1"]}}}`,
		`{"transport":{"kind":"ZmqBroker"}}`,
		`{"transport":{"A":{},"B":{}}}`,
		`{"transport":7}`,
		`not json`,
	} {
		if got, err := parseBroker([]byte(bad)); !errors.Is(err, ErrBadRecord) {
			t.Errorf("parseBroker(%s) = %q, %v; want ErrBadRecord", bad, got, err)
		}
	}
}

// TestEtcd_BrokersListsTheNamespacesBrokers registers two brokers of the
// pool's namespace (one behind two XPUB endpoints), one of another
// namespace, a publisher's channel under zmq_broker, a bad record and a
// broker under the older key layout, in a real etcd: Brokers returns the namespace's XPUB endpoints, sorted and
// each once, and an empty list before any is registered.
func TestEtcd_BrokersListsTheNamespacesBrokers(t *testing.T) {
	url, cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := NewEtcd(EtcdConfig{Endpoints: []string{url}, Scope: testScope, Workers: true, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	if got, err := e.Brokers(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Brokers before any registered = %q, %v; want none", got, err)
	}
	scope := dynamo.Scope{Namespace: testScope.Namespace, Component: BrokerComponent}
	put := func(key, value string) {
		t.Helper()
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatalf("Put %s: %v", key, err)
		}
	}
	put(scope.ChannelPrefix("broker")+"5", brokerValue(testScope.Namespace, []string{"tcp://b1:5555"}, []string{"tcp://b1:5556", "tcp://b1:6556"}))
	put(scope.ChannelPrefix("broker")+"6", brokerValue(testScope.Namespace, []string{"tcp://b2:5555"}, []string{"tcp://b1:5556", "tcp://b0:5556"}))
	other := dynamo.Scope{Namespace: "other", Component: BrokerComponent}
	put(other.ChannelPrefix("broker")+"7", brokerValue("other", []string{"tcp://x:5555"}, []string{"tcp://x:5556"}))
	put(scope.ChannelPrefix("kv-events")+"8", channelValue(scope, "kv-events", 8, "tcp://p:1"))
	put(scope.ChannelPrefix("broker")+"9", `{"transport":`)
	// The key layout before EventScope: v1/event_channels/<ns>/<comp>/<topic>/<id>.
	put("v1/event_channels/"+testScope.Namespace+"/zmq_broker/broker/a", brokerValue(testScope.Namespace, nil, []string{"tcp://old:5556"}))
	got, err := e.Brokers(ctx)
	want := []string{"tcp://b0:5556", "tcp://b1:5556", "tcp://b1:6556", "tcp://old:5556"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Brokers = %q, %v; want %q", got, err, want)
	}
}
