package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/discovery/etcdtest"
	"github.com/goindex/goindex/dynamo"
)

// sourceValue is a KV event source record as a v1.4+ publisher registers
// it beside its channel (§1.7): DiscoveryInstance::EventSource whose
// metadata is a KvEventSource.
func sourceValue(scope dynamo.Scope, pub, worker uint64, rank uint32) string {
	ep := fmt.Sprintf(`{"namespace":%q,"component":%q,"name":%q}`, scope.Namespace, scope.Component, scope.Endpoint)
	return fmt.Sprintf(`{"type":"EventSource","scope":{"kind":"endpoint","endpoint":%s},"topic":"kv-events","instance_id":%d,`+
		`"metadata":{"kv_state_endpoint":%s,"worker":{"worker_id":%d,"dp_rank":%d},"publisher_id":%d,"recovery_target":null}}`,
		ep, pub, ep, worker, rank, pub)
}

// sourceKey is a source record's key, laid out as the channels' are (the
// layout is [unverified]; the source reads any key of the bucket).
func sourceKey(scope dynamo.Scope, pub uint64) string {
	return sourcesRoot + "namespace/" + scope.Namespace + "/component/" + scope.Component + "/endpoint/" + scope.Endpoint +
		"/topic/kv-events/" + strconv.FormatUint(pub, 16)
}

// sourceLabel names a KV source record "worker/rank/publisher".
func sourceLabel(p Publisher) string {
	if !p.KVSource {
		return ""
	}
	return fmt.Sprintf("%x/%d/%x", p.WorkerID, p.DPRank, p.PublisherID)
}

// waitSources polls until the live KV sources are want (sorted).
func (c *collector) waitSources(t *testing.T, want ...string) {
	t.Helper()
	c.waitLabels(t, "sources", sourceLabel, want...)
}

func TestParseKVSource_EveryPlausibleForm(t *testing.T) {
	cases := []struct {
		name, in      string
		worker, id    uint64
		rank          uint32
		ns, component string
	}{
		{"as registered", sourceValue(testScope, 0xabc, 0x11, 3), 0x11, 0xabc, 3, testScope.Namespace, testScope.Component},
		{"flat worker, ids as strings, endpoint as a string",
			`{"type":"EventSource","topic":"kv-events","publisher_id":"12","metadata":{"kv_state_endpoint":"dyn://a.b.c","worker_id":"7","dp_rank":1}}`,
			7, 12, 1, "a", "b"},
		{"untagged, id and endpoint only in the metadata and the scope",
			`{"scope":{"kind":"component","namespace":"n","component":"c"},"metadata":{"publisher_id":5,"worker":{"worker_id":6}}}`,
			6, 5, 0, "n", "c"},
		{"no publisher id, null rank", `{"type":"EventSource","metadata":{"kv_state_endpoint":"n.c.e","worker":{"worker_id":1,"dp_rank":null}}}`,
			1, 0, 0, "n", "c"},
	}
	for _, c := range cases {
		s, err := parseKVSource([]byte(c.in))
		if err != nil || s.worker != c.worker || s.id != c.id || s.rank != c.rank || s.endpoint.Namespace != c.ns || s.endpoint.Component != c.component {
			t.Errorf("%s: parseKVSource = %+v, %v; want worker %d, id %d, rank %d, %s.%s", c.name, s, err, c.worker, c.id, c.rank, c.ns, c.component)
		}
	}
	for _, bad := range []string{
		`{"type":"EventSource","metadata":{"kv_state_endpoint":"n.c.e"}}`,                                    // no worker
		`{"type":"EventSource","metadata":{"worker":{"worker_id":1}}}`,                                       // no endpoint
		`{"type":"EventSource","topic":"kv_metrics","metadata":{"kv_state_endpoint":"n.c.e","worker_id":1}}`, // another topic
		`{"type":"EventSource","metadata":{"kv_state_endpoint":"n.c.e","worker_id":1,"dp_rank":4294967296}}`, // rank past u32
		`{"type":"EventSource","metadata":{"kv_state_endpoint":"n.c.e","worker_id":-1}}`,                     // negative id
		`{"type":"EventSource","metadata":{"kv_state_endpoint":"n.c.e","worker_id":1},"instance_id":"x"}`,    // bad publisher id
		`{"type":"EventSource","metadata":[1]}`, `[1]`,
	} {
		if _, err := parseKVSource([]byte(bad)); !errors.Is(err, ErrBadRecord) {
			t.Errorf("parseKVSource(%s) = %v, want ErrBadRecord", bad, err)
		}
	}
	if _, err := parseKVSource([]byte(channelValue(testScope, "kv-events", 1, "tcp://a:1"))); !errors.Is(err, ErrNotChannel) {
		t.Errorf("parseKVSource(a channel) = %v, want ErrNotChannel", err)
	}
}

// TestEtcd_FollowsKVSources registers KV event source records in a real
// etcd beside channels: the pool's component's sources are listed and
// followed as KVSource publishers whatever their key's layout, other
// components' and bad records are skipped, and a revoked lease removes
// them; following workers (broker mode) reads no source.
func TestEtcd_FollowsKVSources(t *testing.T) {
	url, cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lease, put := leases(ctx, t, cli)
	other := dynamo.Scope{Namespace: testScope.Namespace, Component: "prefill", Endpoint: "generate"}
	w1, w2 := lease(60), lease(60)
	put(channelKey(testScope, "kv-events", 0xa1), channelValue(testScope, "kv-events", 0xa1, "tcp://10.0.0.1:4001"), w1)
	put(sourceKey(testScope, 0xa1), sourceValue(testScope, 0xa1, 0x11, 0), w1)
	put(sourceKey(other, 0xb1), sourceValue(other, 0xb1, 0x31, 0), w1)
	e, err := NewEtcd(EtcdConfig{Endpoints: []string{url}, Scope: testScope, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	c := &collector{set: map[string]Publisher{}}
	startWatch(t, e, c.add, nil)
	c.waitSources(t, "11/0/a1")
	c.mu.Lock()
	ch := c.set[channelKey(testScope, "kv-events", 0xa1)]
	c.mu.Unlock()
	if ch.Endpoint != "tcp://10.0.0.1:4001" || ch.KVSource {
		t.Errorf("the channel beside the source = %+v", ch)
	}

	// A second worker with two dp ranks, one under another key layout; a
	// bad record and a record of another type are skipped.
	put(sourceKey(testScope, 0xa2), sourceValue(testScope, 0xa2, 0x22, 0), w2)
	put(sourcesRoot+"dyn.ns/backend/kv-events/a3", sourceValue(testScope, 0xa3, 0x22, 1), w2)
	put(sourcesRoot+"bad", `{"type":"EventSource","metadata":{}}`, w2)
	put(sourcesRoot+"model", `{"type":"Model"}`, w2)
	c.waitSources(t, "11/0/a1", "22/0/a2", "22/1/a3")
	if _, err := cli.Revoke(ctx, w1); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	c.waitSources(t, "22/0/a2", "22/1/a3")

	ew, err := NewEtcd(EtcdConfig{Endpoints: []string{url}, Scope: testScope, Workers: true, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	cw := &collector{set: map[string]Publisher{}}
	put(instanceKey(testScope, 0x22), instanceValue(testScope, 0x22), w2)
	startWatch(t, ew, cw.add, nil)
	cw.waitWorkers(t, 0x22)
	if got := cw.labels(sourceLabel); len(got) != 0 {
		t.Errorf("following workers, sources = %q, want none", got)
	}
}

// TestKube_FindsKVSources finds the KV event source records of the pool's
// component in DynamoWorkerMetadata resources beside their channels, and
// drops them with their resource.
func TestKube_FindsKVSources(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("sekrit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	scope := dynamo.Scope{Namespace: "dyn", Component: "backend", Endpoint: "generate"}
	other := dynamo.Scope{Namespace: "dyn", Component: "prefill", Endpoint: "generate"}
	withSources := func(name string, asString bool, sources ...string) map[string]any {
		obj := resource(name, asString, channelValue(scope, "kv-events", 0xf0, "tcp://10.0.0.9:1"))
		meta := fmt.Sprintf(`{"instances":{},"event_channels":{"0":%s},"event_sources":{%s}}`,
			channelValue(scope, "kv-events", 0xf0, "tcp://10.0.0.9:1"), joinChannels(sources))
		if asString {
			obj["spec"] = map[string]any{"data": meta}
		} else {
			obj["data"] = rawJSON(meta)
		}
		return obj
	}
	f := &fakeAPI{items: map[string]any{
		"w1": withSources("w1", false, sourceValue(scope, 0xa1, 1, 0), sourceValue(other, 0xb1, 9, 0)),
		"w2": withSources("w2", true, sourceValue(scope, 0xa2, 2, 0), sourceValue(scope, 0xa3, 2, 1)),
	}, events: make(chan string, 16)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	k, err := NewKube(KubeConfig{APIServer: srv.URL, Namespace: "dyn", TokenFile: tok, Scope: scope, Client: srv.Client(), Logger: discardLogger()})
	if err != nil {
		t.Fatalf("NewKube: %v", err)
	}
	c := &collector{set: map[string]Publisher{}}
	startWatch(t, k, c.add, f.events)
	c.waitSources(t, "1/0/a1", "2/0/a2", "2/1/a3")
	f.events <- event("DELETED", f.items["w2"])
	c.waitSources(t, "1/0/a1")
}
