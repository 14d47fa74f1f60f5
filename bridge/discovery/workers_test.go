package discovery

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/discovery/etcdtest"
	"github.com/goindex/goindex/dynamo"
)

// instanceKey is a worker's endpoint instance key (Dynamo's
// EndpointInstanceId path under v1/instances).
func instanceKey(scope dynamo.Scope, id uint64) string {
	return instancesRoot + scope.Namespace + "/" + scope.Component + "/" + scope.Endpoint + "/" + strconv.FormatUint(id, 16)
}

// instanceValue is the record a worker serving scope's endpoint registers
// (DiscoveryInstance::Endpoint: the Instance struct tagged by the enum).
func instanceValue(scope dynamo.Scope, id uint64) string {
	return fmt.Sprintf(`{"type":"Endpoint","component":%q,"endpoint":%q,"namespace":%q,"instance_id":%d,`+
		`"transport":{"tcp":"10.0.0.9:9000/generate"}}`, scope.Component, scope.Endpoint, scope.Namespace, id)
}

// labels returns, sorted, label's name of every publisher of the live set
// it names ("" skips one).
func (c *collector) labels(label func(Publisher) string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.set {
		if l := label(p); l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// waitLabels polls until the live set's labels are want (sorted).
func (c *collector) waitLabels(t *testing.T, what string, label func(Publisher) string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Equal(c.labels(label), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %q, want %q", what, c.labels(label), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// workerLabel names a worker record by its id in hex.
func workerLabel(p Publisher) string {
	if !p.Worker {
		return ""
	}
	return strconv.FormatUint(p.WorkerID, 16)
}

// waitWorkers polls until the live workers are want.
func (c *collector) waitWorkers(t *testing.T, want ...uint64) {
	t.Helper()
	labels := make([]string, len(want))
	for i, id := range want {
		labels[i] = strconv.FormatUint(id, 16)
	}
	slices.Sort(labels)
	c.waitLabels(t, "workers", workerLabel, labels...)
}

// TestEtcd_WorkersFollowTheEndpointsInstances follows, as broker mode does,
// the instance records of the workers serving the pool's endpoint in a
// real etcd: records of every plausible form are listed and followed,
// other endpoints and event channels are ignored, a revoked lease and an
// expired one say their worker is gone; and while etcd is down nobody is
// reported gone (a failed list is not an empty one).
func TestEtcd_WorkersFollowTheEndpointsInstances(t *testing.T) {
	srv := etcdtest.Launch(t, etcdtest.Options{})
	cli := srv.Client
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lease, put := leases(ctx, t, cli)
	w1, w2 := lease(60), lease(60)
	put(instanceKey(testScope, 0x11), instanceValue(testScope, 0x11), w1)
	e, err := NewEtcd(EtcdConfig{Endpoints: []string{srv.URL}, Scope: testScope, Workers: true, DialTimeout: 200 * time.Millisecond,
		RequestTimeout: 300 * time.Millisecond, CheckEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	c := &collector{set: map[string]Publisher{}}
	startWatch(t, e, c.add, nil)
	c.waitWorkers(t, 0x11)

	// A worker whose record has no type tag and a string id, one whose id
	// is only in its key; records to ignore: another endpoint's worker, an
	// event channel, a model card under the endpoint, a bad record.
	put(instanceKey(testScope, 0x22), fmt.Sprintf(`{"namespace":%q,"component":%q,"endpoint":%q,"instance_id":"34"}`,
		testScope.Namespace, testScope.Component, testScope.Endpoint), w2)
	put(instanceKey(testScope, 0x23), `{"type":"Endpoint"}`, w2)
	other := dynamo.Scope{Namespace: testScope.Namespace, Component: testScope.Component, Endpoint: "clear_kv_blocks"}
	put(instanceKey(other, 0x31), instanceValue(other, 0x31), w2)
	put(channelKey(testScope, "kv-events", 0x32), channelValue(testScope, "kv-events", 0x32, "tcp://10.0.0.3:1"), w2)
	put(instanceKey(testScope, 0x33), `{"type":"Model","instance_id":51}`, w2)
	put(instanceKey(testScope, 0x34), `{"type":"Endpoint",`, w2)
	c.waitWorkers(t, 0x11, 34, 0x23)

	// etcd goes down: the source fails, and reports nobody gone.
	srv.Stop()
	waitHealth(t, e, false, nil)
	srv.Restart()
	waitHealth(t, e, true, nil)
	if got := c.labels(workerLabel); !slices.Equal(got, []string{"11", "22", "23"}) {
		t.Errorf("workers after an etcd outage = %q, want all three kept", got)
	}
	for _, u := range c.log {
		if u.Gone {
			t.Errorf("an etcd outage reported %+v gone", u.Publisher)
		}
	}

	// Worker 1 stops (its lease revoked); worker 2's lease is not kept
	// alive and expires.
	if _, err := cli.Revoke(ctx, w1); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	c.waitWorkers(t, 34, 0x23)
	w2b := lease(2)
	if _, err := cli.Revoke(ctx, w2); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	put(instanceKey(testScope, 0x44), instanceValue(testScope, 0x44), w2b)
	c.waitWorkers(t, 0x44)
	c.waitWorkers(t)
}

// TestKube_WorkersFollowTheEndpointsInstances finds the instance records
// of the pool's endpoint in DynamoWorkerMetadata resources (broker mode):
// a resource deleted with its pod, or rewritten without the record, says
// its worker is gone.
func TestKube_WorkersFollowTheEndpointsInstances(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("sekrit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	scope := dynamo.Scope{Namespace: "dyn", Component: "backend", Endpoint: "generate"}
	withInstances := func(name string, asString bool, instances ...string) map[string]any {
		obj := resource(name, asString)
		meta := `{"instances":{`
		for i, in := range instances {
			if i > 0 {
				meta += ","
			}
			meta += fmt.Sprintf("%q:%s", fmt.Sprint(i), in)
		}
		meta += `},"event_channels":{}}`
		if asString {
			obj["spec"] = map[string]any{"data": meta}
		} else {
			obj["data"] = rawJSON(meta)
		}
		return obj
	}
	other := dynamo.Scope{Namespace: "dyn", Component: "prefill", Endpoint: "generate"}
	f := &fakeAPI{items: map[string]any{
		"w1": withInstances("w1", false, instanceValue(scope, 1)),
		"w2": withInstances("w2", true, instanceValue(scope, 2), instanceValue(other, 7)),
		"w3": withInstances("w3", false, instanceValue(other, 3)),
	}, events: make(chan string, 16)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close) // after the watch's cleanup, which ends the stream
	k, err := NewKube(KubeConfig{APIServer: srv.URL, Namespace: "dyn", TokenFile: tok, Scope: scope, Client: srv.Client(), Workers: true})
	if err != nil {
		t.Fatalf("NewKube: %v", err)
	}
	c := &collector{set: map[string]Publisher{}}
	startWatch(t, k, c.add, f.events)
	c.waitWorkers(t, 1, 2)
	f.events <- event("ADDED", withInstances("w4", false, `{"namespace":"dyn","component":"backend","endpoint":"generate","instance_id":"4"}`))
	c.waitWorkers(t, 1, 2, 4)
	f.events <- event("DELETED", f.items["w1"])
	f.events <- event("MODIFIED", withInstances("w2", true, instanceValue(other, 7)))
	c.waitWorkers(t, 4)
}

// rawJSON keeps a JSON object as it is when a resource is encoded.
type rawJSON string

// MarshalJSON implements json.Marshaler.
func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func TestParseInstance_EveryPlausibleForm(t *testing.T) {
	cases := []struct {
		name, in, keyID string
		id              uint64
	}{
		{"tagged, number", `{"type":"Endpoint","namespace":"n","component":"c","endpoint":"e","instance_id":7}`, "ff", 7},
		{"untagged, decimal string", `{"namespace":"n","instance_id":"9007199254740993"}`, "", 9007199254740993},
		{"id in the key only", `{"type":"Endpoint"}`, "1a2b", 0x1a2b},
	}
	for _, c := range cases {
		if got, err := parseInstance([]byte(c.in), c.keyID); err != nil || got != c.id {
			t.Errorf("%s: parseInstance = %d, %v; want %d", c.name, got, err, c.id)
		}
	}
	for _, bad := range []struct{ in, keyID string }{{`{"type":"Endpoint"}`, "zz"}, {`{"instance_id":-1}`, "1"}, {`[1]`, "1"},
		{`{"type":"Model","instance_id":1}`, "1"}} {
		if _, err := parseInstance([]byte(bad.in), bad.keyID); err == nil {
			t.Errorf("parseInstance(%s, %q) = nil error, want one", bad.in, bad.keyID)
		}
	}
}
