package natslink

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// waitFor polls cond every few milliseconds until it holds or total passes.
func waitFor(t *testing.T, total time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(total)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, total)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLeafDomain_ReachableFromHubAndSurvivesRestart(t *testing.T) {
	hub, err := Start(ServerConfig{Leaf: true})
	if err != nil {
		t.Fatalf("Start(hub): %v", err)
	}
	t.Cleanup(hub.Shutdown)
	leaf, err := Start(ServerConfig{Name: "dc1", JetStream: true, JSDomain: "dc1", StoreDir: t.TempDir(),
		LeafRemotes: []string{hub.LeafURL()}, LeafReconnect: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("Start(leaf): %v", err)
	}
	t.Cleanup(leaf.Shutdown)
	waitFor(t, 10*time.Second, "leaf connected to hub", func() bool { return hub.NATS().NumLeafNodes() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lc, err := Connect(leaf.ClientURL(), "leaf-client", nil)
	if err != nil {
		t.Fatalf("Connect(leaf): %v", err)
	}
	defer lc.Close()
	ljs, _ := jetstream.New(lc)
	if _, err := ljs.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("CreateStream on the leaf: %v", err)
	}
	if _, err := ljs.Publish(ctx, "s.a", []byte("one")); err != nil {
		t.Fatalf("Publish on the leaf: %v", err)
	}

	hc, err := Connect(hub.ClientURL(), "hub-client", nil)
	if err != nil {
		t.Fatalf("Connect(hub): %v", err)
	}
	defer hc.Close()
	hjs, err := jetstream.NewWithDomain(hc, "dc1")
	if err != nil {
		t.Fatalf("NewWithDomain: %v", err)
	}
	// Each poll has its own short deadline: a request sent while the hub
	// still routes to the leaf's old connection gets no reply at all, and
	// must not eat the whole wait.
	getLast := func() string {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		s, err := hjs.Stream(ctx, "S")
		if err != nil {
			return "stream: " + err.Error()
		}
		m, err := s.GetLastMsgForSubject(ctx, "s.a")
		if err != nil {
			return "get: " + err.Error()
		}
		return string(m.Data)
	}
	waitFor(t, 10*time.Second, "hub reads the leaf's stream", func() bool { return getLast() == "one" })

	port := leaf.Config().Port
	if err := leaf.Restart(); err != nil {
		t.Fatalf("Restart(leaf): %v", err)
	}
	if got := leaf.Config().Port; got != port {
		t.Errorf("leaf port after Restart = %d, want %d", got, port)
	}
	waitFor(t, 20*time.Second, "hub reads the restarted leaf's stream", func() bool { return getLast() == "one" })
	waitFor(t, 10*time.Second, "leaf client reconnected", func() bool { return lc.Status() == nats.CONNECTED })
}
