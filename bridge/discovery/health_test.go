package discovery

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/discovery/etcdtest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/internal/syncbuf"
)

// startWatch runs src.Watch with fn until the test ends, then closes
// events (a fake API server's streams; nil: none).
func startWatch(t *testing.T, src Source, fn func(Update), events chan string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Watch(ctx, fn) }()
	t.Cleanup(func() {
		cancel()
		if events != nil {
			close(events)
		}
		<-done
	})
}

// writeToken replaces a service account token file's value at once, as
// the kubelet does (written aside, then renamed): written in place, a
// request could read the file empty between its truncation and the write,
// send no token and log a 401 the test does not expect.
func writeToken(t *testing.T, path, v string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(v+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitHealth polls src.Health until it is nil (ready) or a *HealthError
// (not ready) satisfying ok, and returns the last one.
func waitHealth(t *testing.T, src Source, ready bool, ok func(*HealthError) bool) error {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := src.Health()
		var he *HealthError
		switch {
		case ready && err == nil:
			return nil
		case !ready && errors.As(err, &he) && (ok == nil || ok(he)):
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Health() = %v, want ready %v", src, err, ready)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLog waits until logs hold line: a source logs the end of a failure
// after Health reports it ended.
func waitLog(t *testing.T, logs *syncbuf.Buffer, line string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), line); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged:\n%s", line, logs.String())
		}
	}
}

// TestEtcd_HealthFollowsAnEtcdStoppedAndStartedAgain stops etcd under a
// watching source: the watch alone never noticed (the client waits for
// the server), so the relay stayed ready; the periodic check now fails,
// Health says why, and the next list after the restart makes it ready
// again, following records as before.
func TestEtcd_HealthFollowsAnEtcdStoppedAndStartedAgain(t *testing.T) {
	srv := etcdtest.Launch(t, etcdtest.Options{})
	e, err := NewEtcd(EtcdConfig{Endpoints: []string{srv.URL}, Scope: testScope, DialTimeout: 200 * time.Millisecond,
		RequestTimeout: 300 * time.Millisecond, CheckEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewEtcd: %v", err)
	}
	if err := e.Health(); !errors.As(err, new(*HealthError)) || !strings.Contains(err.Error(), "not listed yet") {
		t.Errorf("Health() before Watch = %v, want a *HealthError saying it has not listed yet", err)
	}
	c := &collector{set: map[string]Publisher{}}
	startWatch(t, e, c.add, nil)
	waitHealth(t, e, true, nil)

	srv.Stop()
	got := waitHealth(t, e, false, func(he *HealthError) bool { return he.Listed && he.Err != nil })
	if !strings.Contains(got.Error(), e.String()) {
		t.Errorf("Health() with etcd stopped = %q, want it to name %q", got, e.String())
	}
	srv.Restart()
	waitHealth(t, e, true, nil)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := srv.Client.Put(wctx, channelKey(testScope, "kv-events", 0x11), channelValue(testScope, "kv-events", 0x11, "tcp://10.0.0.1:4001")); err != nil {
		t.Fatalf("Put after the restart: %v", err)
	}
	c.waitSet(t, map[uint64]string{0x11: "tcp://10.0.0.1:4001"})
}

// TestKube_RefusedCredentialsAreRetriedUntilAccepted has the API server
// refuse the token (401, then 403 for another one) and then accept a
// token put in the file: the watch used to end at the first refusal, so
// discovery stopped until the relay restarted. Now it retries with
// backoff, reading the file each time, logs each distinct failure once,
// is not ready meanwhile, and lists once the token is accepted.
func TestKube_RefusedCredentialsAreRetriedUntilAccepted(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	writeToken(t, tok, "wrong")
	ch := `{"type":"EventChannel","scope":{"kind":"endpoint","endpoint":{"namespace":"dyn","component":"backend","name":"generate"}},` +
		`"topic":"kv-events","instance_id":1,"transport":{"kind":"Zmq","config":{"endpoint":"tcp://w1:1"}}}`
	f := &fakeAPI{items: map[string]any{"w1": resource("w1", false, ch)}, events: make(chan string, 4), forbidden: "forbidden"}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	logs := &syncbuf.Buffer{}
	k, err := NewKube(KubeConfig{APIServer: srv.URL, Namespace: "dyn", TokenFile: tok, Client: srv.Client(),
		Scope: dynamo.Scope{Namespace: "dyn", Component: "backend", Endpoint: "generate"}, RetryDelay: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("NewKube: %v", err)
	}
	c := &collector{set: map[string]Publisher{}}
	startWatch(t, k, c.add, f.events)

	refusedAtLeast := func(n int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			f.mu.Lock()
			got := f.refused
			f.mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("API server refused %d requests, want at least %d (the watch stopped retrying)", got, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	refusedAtLeast(3)
	if err := waitHealth(t, k, false, nil); !strings.Contains(err.Error(), "401") {
		t.Errorf("Health() while refused = %v, want the 401 named", err)
	}
	writeToken(t, tok, "forbidden")
	refusedAtLeast(6)
	waitHealth(t, k, false, func(he *HealthError) bool { return strings.Contains(he.Error(), "403") })
	writeToken(t, tok, "sekrit")
	c.waitSet(t, map[uint64]string{1: "tcp://w1:1"})
	waitHealth(t, k, true, nil)
	waitLog(t, logs, "kubernetes discovery listed again")
	if n := strings.Count(logs.String(), "kubernetes discovery failing"); n != 2 {
		t.Errorf("%d failure lines logged, want 2 (the 401 and the 403, each once):\n%s", n, logs.String())
	}
}

// TestKube_HealthFollowsAnAPIServerThatFailsAndRecovers has the API
// server fail (503) while the watch stream stays open: the check notices,
// Health says why, and the list after recovery makes it ready again.
func TestKube_HealthFollowsAnAPIServerThatFailsAndRecovers(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	writeToken(t, tok, "sekrit")
	f := &fakeAPI{items: map[string]any{}, events: make(chan string, 4)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	k, err := NewKube(KubeConfig{APIServer: srv.URL, Namespace: "dyn", TokenFile: tok, Client: srv.Client(),
		Scope: dynamo.Scope{Namespace: "dyn", Component: "backend", Endpoint: "generate"}, RetryDelay: 5 * time.Millisecond,
		CheckEvery: 20 * time.Millisecond, RequestTimeout: time.Second})
	if err != nil {
		t.Fatalf("NewKube: %v", err)
	}
	if err := k.Health(); !errors.As(err, new(*HealthError)) {
		t.Errorf("Health() before Watch = %v, want a *HealthError (not listed yet)", err)
	}
	startWatch(t, k, func(Update) {}, f.events)
	waitHealth(t, k, true, nil)
	f.setDown(true)
	if err := waitHealth(t, k, false, func(he *HealthError) bool { return he.Listed }); !strings.Contains(err.Error(), "503") {
		t.Errorf("Health() with the API server failing = %v, want its 503 named", err)
	}
	f.setDown(false)
	waitHealth(t, k, true, nil)
}

// setDown makes the fake answer every request 503 (down) or serve again.
func (f *fakeAPI) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}
