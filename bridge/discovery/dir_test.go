package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/internal/syncbuf"
)

// fileStoreName is a key's file name in Dynamo's file store: every byte but
// an ASCII letter or digit percent-encoded, in upper-case hex (Rust's
// percent_encode with NON_ALPHANUMERIC, storage/kv.rs Key::url_safe).
func fileStoreName(key string) string {
	var b strings.Builder
	for i := range len(key) {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// fileStore writes records as Dynamo's file store does: a temp file in the
// bucket's directory renamed to the key's name.
type fileStore struct {
	t    *testing.T
	root string
}

// path is where key (a full key, "v1/<bucket>/<rest>") is stored.
func (s fileStore) path(key string) string {
	parts := strings.SplitN(key, "/", 3)
	return filepath.Join(s.root, parts[0], parts[1], fileStoreName(parts[2]))
}

func (s fileStore) put(key, value string) {
	s.t.Helper()
	p := s.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(p), tempPrefix+"0123456789abcdef")
	if err := os.WriteFile(tmp, []byte(value), 0o644); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		s.t.Fatal(err)
	}
}

func (s fileStore) remove(key string) {
	s.t.Helper()
	if err := os.Remove(s.path(key)); err != nil {
		s.t.Fatal(err)
	}
}

// age sets key's file as last touched d ago.
func (s fileStore) age(key string, d time.Duration) {
	s.t.Helper()
	at := time.Now().Add(-d)
	if err := os.Chtimes(s.path(key), at, at); err != nil {
		s.t.Fatal(err)
	}
}

// waitChannels polls until the live channels are want ("id=endpoint" in
// hex, sorted).
func (c *collector) waitChannels(t *testing.T, want ...string) {
	t.Helper()
	c.waitLabels(t, "channels", func(p Publisher) string {
		if p.KVSource || p.Worker {
			return ""
		}
		return fmt.Sprintf("%x=%s", p.PublisherID, p.Endpoint)
	}, want...)
}

// watchDir starts d's watch into a collector, stopped at the test's end.
func watchDir(t *testing.T, d *Dir) *collector {
	t.Helper()
	c := &collector{set: map[string]Publisher{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Watch(ctx, c.add) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch = %v", err)
		}
	})
	return c
}

// TestDir_FollowsTheFileStoreAsWorkersComeAndGo writes channel and KV
// source records the way Dynamo's file store does, into a store that does
// not exist yet when the watch starts: present and new records are
// followed, a record replaced by a new file is read again, a deleted one
// and one left untouched past the TTL (its worker died) go, and temp
// files, other scopes, broker channels and bad records are skipped.
func TestDir_FollowsTheFileStoreAsWorkersComeAndGo(t *testing.T) {
	root := filepath.Join(t.TempDir(), "dynamo_store_kv")
	s := fileStore{t: t, root: root}
	d, err := NewDir(DirConfig{Root: root, Scope: testScope, PollEvery: 5 * time.Millisecond, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c := watchDir(t, d)
	time.Sleep(20 * time.Millisecond) // a few polls of a store not made yet
	if err := d.Health(); err != nil {
		t.Fatalf("Health of a store not made yet = %v, want nil (an empty store)", err)
	}
	component := dynamo.Scope{Namespace: testScope.Namespace, Component: testScope.Component}
	other := dynamo.Scope{Namespace: "other", Component: "backend", Endpoint: "generate"}
	s.put(channelKey(testScope, "kv-events", 0x11), channelValue(testScope, "kv-events", 0x11, "tcp://10.0.0.1:4001"))
	s.put(channelKey(component, "kv-events", 0x12), channelValue(component, "kv-events", 0x12, "tcp://10.0.0.2:4002"))
	s.put(channelKey(other, "kv-events", 0x13), channelValue(other, "kv-events", 0x13, "tcp://10.0.0.3:4003"))
	s.put(channelKey(testScope, "kv-events", 0x14), `{"topic":"kv-events","transport":{"kind":"ZmqBroker","config":{"xsub_endpoints":[],"xpub_endpoints":["tcp://b:1"]}}}`)
	s.put(channelKey(testScope, "kv-events", 0x15), `{not json`)
	s.put(sourceKey(testScope, 0x11), sourceValue(testScope, 0x11, 0x77, 0))
	tmp := filepath.Join(root, "v1", "event_channels", tempPrefix+"half")
	if err := os.WriteFile(tmp, []byte(channelValue(testScope, "kv-events", 0x16, "tcp://10.0.0.6:4006")), 0o644); err != nil {
		t.Fatal(err)
	}
	c.waitChannels(t, "11=tcp://10.0.0.1:4001", "12=tcp://10.0.0.2:4002")
	c.waitSources(t, "77/0/11")
	c.mu.Lock()
	p := c.set[channelKey(testScope, "kv-events", 0x11)]
	c.mu.Unlock()
	if p.Scope != testScope || p.Topic != dynamo.EventTopic {
		t.Errorf("the endpoint channel = %+v, want the pool's scope and kv-events", p)
	}

	// A worker restarts its record with a new endpoint (a new file renamed over).
	s.put(channelKey(component, "kv-events", 0x12), channelValue(component, "kv-events", 0x12, "tcp://10.0.0.2:5002"))
	c.waitChannels(t, "11=tcp://10.0.0.1:4001", "12=tcp://10.0.0.2:5002")
	// A worker stops cleanly (its files deleted); another dies (its files
	// no longer touched).
	s.remove(channelKey(component, "kv-events", 0x12))
	s.age(channelKey(testScope, "kv-events", 0x11), 2*time.Minute)
	s.age(sourceKey(testScope, 0x11), 2*time.Minute)
	c.waitChannels(t)
	c.waitSources(t)
	if err := d.Health(); err != nil {
		t.Errorf("Health = %v, want nil", err)
	}
}

// TestDir_ReadsEachFileOnceAndNestedLayouts checks that a bad record is
// read and logged once, not once per poll, and that a bucket kept as nested
// directories (one per key segment) is read as the flat layout is.
func TestDir_ReadsEachFileOnceAndNestedLayouts(t *testing.T) {
	root := t.TempDir()
	s := fileStore{t: t, root: root}
	logs := &syncbuf.Buffer{}
	d, err := NewDir(DirConfig{Root: root, Scope: testScope, PollEvery: 2 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.put(channelKey(testScope, "kv-events", 0x15), `{not json`)
	key := channelKey(testScope, "kv-events", 0x21)
	segments := strings.Split(key, "/")
	for i := 2; i < len(segments); i++ { // below the bucket, v1/event_channels
		segments[i] = fileStoreName(segments[i])
	}
	nested := filepath.Join(append([]string{root}, segments...)...)
	if err := os.MkdirAll(filepath.Dir(nested), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nested, []byte(channelValue(testScope, "kv-events", 0x21, "tcp://10.0.0.21:4021")), 0o644); err != nil {
		t.Fatal(err)
	}
	c := watchDir(t, d)
	c.waitSet(t, map[uint64]string{0x21: "tcp://10.0.0.21:4021"})
	time.Sleep(50 * time.Millisecond) // many more polls
	if n := strings.Count(logs.String(), "discovery record skipped"); n != 1 {
		t.Errorf("the bad record was logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestDir_V12RecordsInTheLayoutBeforeEventScope reads v1.2 workers'
// channel records (no scope field; flat namespace and component) under the
// key layout before EventScope, v1/event_channels/<ns>/<component>/<topic>/<id>,
// component "" for namespace scope: the pool's component kv-events and
// namespace kv_metrics count, another component's does not.
func TestDir_V12RecordsInTheLayoutBeforeEventScope(t *testing.T) {
	root := t.TempDir()
	s := fileStore{t: t, root: root}
	d, err := NewDir(DirConfig{Root: root, Scope: testScope, PollEvery: 2 * time.Millisecond, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []struct {
		scope dynamo.Scope
		topic string
	}{
		{dynamo.Scope{Namespace: testScope.Namespace, Component: testScope.Component}, dynamo.EventTopic},
		{dynamo.Scope{Namespace: testScope.Namespace}, dynamo.MetricsTopic},
		{dynamo.Scope{Namespace: testScope.Namespace, Component: "prefill"}, dynamo.EventTopic},
	} {
		s.put(channelsRoot+ch.scope.Namespace+"/"+ch.scope.Component+"/"+ch.topic+"/2a", v12ChannelValue(ch.scope, ch.topic, 0x2a))
	}
	c := watchDir(t, d)
	ns, comp := testScope.Namespace, testScope.Component
	c.waitLabels(t, "v1.2 channels", channelLabel, ns+"// kv_metrics 2a nats=true", ns+"/"+comp+"/ kv-events 2a nats=true")
}

// TestDir_WorkersAndAFailingRoot follows instance records (broker mode)
// and reports a root that is not a directory as unhealthy, until it is one.
func TestDir_WorkersAndAFailingRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	if err := os.WriteFile(root, []byte("a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := NewDir(DirConfig{Root: root, Scope: testScope, Workers: true, PollEvery: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := watchDir(t, d)
	deadline := time.Now().Add(10 * time.Second)
	for d.Health() == nil {
		if time.Now().After(deadline) {
			t.Fatal("a root that is a file is reported healthy")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if he := (*HealthError)(nil); !errors.As(d.Health(), &he) {
		t.Errorf("Health = %v, want a *HealthError", d.Health())
	}
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	s := fileStore{t: t, root: root}
	s.put(instanceKey(testScope, 0x31), instanceValue(testScope, 0x31))
	s.put(channelKey(testScope, "kv-events", 0x32), channelValue(testScope, "kv-events", 0x32, "tcp://10.0.0.32:1"))
	c.waitWorkers(t, 0x31)
	for d.Health() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("Health after the root became a store = %v", d.Health())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestNewDir_RefusesABadConfig(t *testing.T) {
	for name, cfg := range map[string]DirConfig{
		"no root":  {Scope: testScope},
		"no scope": {Root: "/tmp/x", Scope: dynamo.Scope{Namespace: "n"}},
	} {
		if _, err := NewDir(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: NewDir = %v, want ErrBadConfig", name, err)
		}
	}
}

// TestReadRecord_RefusesWhatIsNotARegularFile: a FIFO where a record was
// listed is refused at once instead of holding the poll until a writer
// comes; an oversized record is refused too.
func TestReadRecord_RefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readRecord(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("readRecord(a FIFO) = nil error, want a refusal")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("readRecord(a FIFO) blocked")
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxRecordBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readRecord(big); err == nil {
		t.Errorf("readRecord(%d bytes) = nil error, want a refusal", MaxRecordBytes+1)
	}
}
