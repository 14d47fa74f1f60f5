package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/goindex/goindex/dynamo"
)

// fakeAPI serves DynamoWorkerMetadata list and watch requests from a
// script: the list's items, then the watch's events (one stream, then
// 410 Gone so the client lists again).
type fakeAPI struct {
	mu        sync.Mutex
	items     map[string]any // name → resource
	events    chan string    // watch lines
	lists     int
	token     string // the bearer token accepted; "": "sekrit"
	forbidden string // a token answered 403 (authenticated, not allowed)
	refused   int    // requests answered 401 or 403
	down      bool   // answer every request 503
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/apis/nvidia.com/v1alpha1/namespaces/dyn/dynamoworkermetadatas" {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	token := f.token
	if token == "" {
		token = "sekrit"
	}
	if f.down {
		f.mu.Unlock()
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	switch r.Header.Get("Authorization") {
	case "Bearer " + token:
	case "Bearer " + f.forbidden:
		f.refused++
		f.mu.Unlock()
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	default:
		f.refused++
		f.mu.Unlock()
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.URL.Query().Get("watch") == "" {
		f.lists++
		items := []any{}
		for _, it := range f.items {
			items = append(items, it)
		}
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"resourceVersion": "10"}, "items": items})
		return
	}
	f.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for line := range f.events {
		if line == "" { // end this stream
			return
		}
		fmt.Fprintln(w, line)
		w.(http.Flusher).Flush()
	}
}

// resource builds a DynamoWorkerMetadata whose data holds channels, in one
// of the plausible placements.
func resource(name string, asString bool, channels ...string) map[string]any {
	meta := fmt.Sprintf(`{"instances":{},"event_channels":{%s}}`, joinChannels(channels))
	obj := map[string]any{"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoWorkerMetadata",
		"metadata": map[string]any{"name": name, "namespace": "dyn"}}
	if asString {
		obj["spec"] = map[string]any{"data": meta}
	} else {
		obj["data"] = json.RawMessage(meta)
	}
	return obj
}

func joinChannels(cs []string) string {
	out := ""
	for i, c := range cs {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf("%q:%s", fmt.Sprint(i), c)
	}
	return out
}

func event(typ string, obj any) string {
	b, _ := json.Marshal(map[string]any{"type": typ, "object": obj})
	return string(b)
}

// TestKube_FollowsWorkerMetadataThroughListAndWatch serves a fake API
// server: channels in data (an object) and spec.data (a JSON string) are
// found, endpoint ids in both plausible shapes are read, other scopes are
// skipped, and ADDED, MODIFIED and DELETED events and a re-list after the
// stream ends keep the set right.
func TestKube_FollowsWorkerMetadataThroughListAndWatch(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("sekrit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	scope := dynamo.Scope{Namespace: "dyn", Component: "backend", Endpoint: "generate"}
	endpointCh := func(id uint64, ep string) string {
		return fmt.Sprintf(`{"type":"EventChannel","scope":{"kind":"endpoint","endpoint":{"namespace":"dyn","component":"backend","name":"generate"}},`+
			`"topic":"kv-events","instance_id":%d,"transport":{"kind":"Zmq","config":{"endpoint":%q}}}`, id, ep)
	}
	stringIDCh := fmt.Sprintf(`{"type":"EventChannel","scope":{"kind":"endpoint","endpoint":"dyn.backend.generate"},"topic":"kv_metrics","instance_id":3,"transport":{"kind":"Zmq","config":{"endpoint":%q}}}`, "tcp://w2:3")
	componentCh := `{"type":"EventChannel","scope":{"kind":"component","namespace":"dyn","component":"backend"},"topic":"kv-events","instance_id":4,"transport":{"kind":"Zmq","config":{"endpoint":"tcp://w3:4"}}}`
	otherCh := `{"type":"EventChannel","scope":{"kind":"component","namespace":"dyn","component":"prefill"},"topic":"kv-events","instance_id":5,"transport":{"kind":"Zmq","config":{"endpoint":"tcp://w4:5"}}}`
	f := &fakeAPI{items: map[string]any{
		"w1": resource("w1", false, endpointCh(1, "tcp://w1:1")),
		"w2": resource("w2", true, endpointCh(2, "tcp://w2:2"), stringIDCh),
		"w4": resource("w4", false, otherCh),
	}, events: make(chan string, 16)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	k, err := NewKube(KubeConfig{APIServer: srv.URL, Namespace: "dyn", TokenFile: tok, Scope: scope, Client: srv.Client()})
	if err != nil {
		t.Fatalf("NewKube: %v", err)
	}
	c := &collector{set: map[string]Publisher{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Watch(ctx, c.add) }()
	defer func() { cancel(); close(f.events); <-done }()
	c.waitSet(t, map[uint64]string{1: "tcp://w1:1", 2: "tcp://w2:2", 3: "tcp://w2:3"})

	w3 := resource("w3", false, componentCh)
	f.events <- event("ADDED", w3)
	c.waitSet(t, map[uint64]string{1: "tcp://w1:1", 2: "tcp://w2:2", 3: "tcp://w2:3", 4: "tcp://w3:4"})
	f.events <- event("MODIFIED", resource("w1", false, endpointCh(11, "tcp://w1:11"))) // w1 restarted
	f.events <- event("DELETED", f.items["w2"])
	c.waitSet(t, map[uint64]string{11: "tcp://w1:11", 4: "tcp://w3:4"})

	// The stream ends; meanwhile w3 left: the re-list reports it gone.
	f.mu.Lock()
	f.items = map[string]any{"w1": resource("w1", false, endpointCh(11, "tcp://w1:11"))}
	f.mu.Unlock()
	f.events <- ""
	c.waitSet(t, map[uint64]string{11: "tcp://w1:11"})
	f.mu.Lock()
	lists := f.lists
	f.mu.Unlock()
	if lists < 2 {
		t.Errorf("lists = %d, want a re-list after the watch ended", lists)
	}
}

// TestKube_RotatedTokenIsReadAgain rotates the service account token in
// its file, as the kubelet does, and has the API server take only the new
// one (the old one expired): the watch's next list sends the new token and
// goes on, where it used to send the token read at start for ever, be
// refused and stop discovering.
func TestKube_RotatedTokenIsReadAgain(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("sekrit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ch := `{"type":"EventChannel","scope":{"kind":"endpoint","endpoint":{"namespace":"dyn","component":"backend","name":"generate"}},` +
		`"topic":"kv-events","instance_id":1,"transport":{"kind":"Zmq","config":{"endpoint":"tcp://w1:1"}}}`
	f := &fakeAPI{items: map[string]any{"w1": resource("w1", false, ch)}, events: make(chan string, 4)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	k, err := NewKube(KubeConfig{APIServer: srv.URL, Namespace: "dyn", TokenFile: tok,
		Scope: dynamo.Scope{Namespace: "dyn", Component: "backend", Endpoint: "generate"}, Client: srv.Client()})
	if err != nil {
		t.Fatalf("NewKube: %v", err)
	}
	c := &collector{set: map[string]Publisher{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Watch(ctx, c.add) }()
	defer func() { cancel(); close(f.events); <-done }()
	c.waitSet(t, map[uint64]string{1: "tcp://w1:1"})
	if err := os.WriteFile(tok, []byte("rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.token = "rotated"
	f.items["w2"] = resource("w2", false, strings.Replace(strings.Replace(ch, `"instance_id":1`, `"instance_id":2`, 1), "w1:1", "w2:2", 1))
	f.mu.Unlock()
	f.events <- "" // the stream ends: the watch lists again
	c.waitSet(t, map[uint64]string{1: "tcp://w1:1", 2: "tcp://w2:2"})
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// v12ChannelValue is an event channel record as a v1.2 worker writes it
// (ai-dynamo/dynamo lib/runtime/src/discovery/kube/fixtures/v1_2_dwm.json):
// flat namespace and component fields and no scope (component "" for
// namespace scope), over NATS.
func v12ChannelValue(sc dynamo.Scope, topic string, id uint64) string {
	prefix := "namespace." + sc.Namespace
	if sc.Component != "" {
		prefix += ".component." + sc.Component
	}
	return fmt.Sprintf(`{"type": "EventChannel", "namespace": %q, "component": %q, "topic": %q, "instance_id": %d,
		"transport": {"kind": "Nats", "config": {"subject_prefix": %q}}}`, sc.Namespace, sc.Component, topic, id, prefix)
}

// v12Resource is a DynamoWorkerMetadata shaped as a v1.2 worker writes it:
// its endpoint instance and model card, then event channels in the v1.2
// form keyed <ns>/<component>/<topic>/<id> (the pool's kv-events and
// kv_metrics, another component's kv-events), and one with neither scope
// nor namespace.
func v12Resource(name string, id uint64) map[string]any {
	channel := func(sc dynamo.Scope, topic string) string {
		return fmt.Sprintf("%q: %s", fmt.Sprintf("%s/%s/%s/%x", sc.Namespace, sc.Component, topic, id), v12ChannelValue(sc, topic, id))
	}
	data := fmt.Sprintf(`{
	"endpoints": {"dyn/backend/generate/%[1]x": {"type": "Endpoint", "namespace": "dyn", "component": "backend",
		"endpoint": "generate", "instance_id": %[1]d, "transport": {"nats_tcp": "dyn.backend.generate"}}},
	"model_cards": {"dyn/backend/generate/%[1]x": {"type": "Model", "namespace": "dyn", "component": "backend",
		"endpoint": "generate", "instance_id": %[1]d, "card_json": {"display_name": "m"}, "model_suffix": null}},
	"event_channels": {%[2]s, %[3]s, %[4]s,
		"no-namespace": {"type": "EventChannel", "component": "backend", "topic": "kv-events", "instance_id": %[1]d,
			"transport": {"kind": "Nats", "config": {"subject_prefix": "x"}}}}}`, id,
		channel(dynamo.Scope{Namespace: "dyn", Component: "backend"}, dynamo.EventTopic),
		channel(dynamo.Scope{Namespace: "dyn"}, dynamo.MetricsTopic),
		channel(dynamo.Scope{Namespace: "dyn", Component: "prefill"}, dynamo.EventTopic))
	return map[string]any{"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoWorkerMetadata",
		"metadata": map[string]any{"name": name, "namespace": "dyn"}, "spec": map[string]any{"data": rawJSON(data)}}
}

// channelLabel names a channel by scope, topic, publisher id and transport.
func channelLabel(p Publisher) string {
	return fmt.Sprintf("%s/%s/%s %s %x nats=%v", p.Scope.Namespace, p.Scope.Component, p.Scope.Endpoint, p.Topic, p.PublisherID, p.NATS)
}

// TestKube_V12WorkersChannelsHaveFlatScopes reads v1.2 workers' channels,
// which carry no scope field: their flat namespace and component give the
// scope (component scope kv-events, namespace scope kv_metrics, both NATS),
// another component's and a record without a namespace are skipped, and
// the same resource gives the worker when following workers.
func TestKube_V12WorkersChannelsHaveFlatScopes(t *testing.T) {
	scope := dynamo.Scope{Namespace: "dyn", Component: "backend", Endpoint: "generate"}
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("sekrit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, workers := range []bool{false, true} {
		f := &fakeAPI{items: map[string]any{"w1": v12Resource("w1", 0x2a)}, events: make(chan string, 16)}
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		k, err := NewKube(KubeConfig{APIServer: srv.URL, Namespace: "dyn", TokenFile: tok, Scope: scope, Client: srv.Client(),
			Workers: workers, Logger: discardLogger()})
		if err != nil {
			t.Fatalf("NewKube(Workers: %v): %v", workers, err)
		}
		c := &collector{set: map[string]Publisher{}}
		startWatch(t, k, c.add, f.events)
		if workers {
			c.waitWorkers(t, 0x2a)
			continue
		}
		c.waitLabels(t, "v1.2 channels", channelLabel, "dyn// kv_metrics 2a nats=true", "dyn/backend/ kv-events 2a nats=true")
	}
}
