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
