// Package natstest holds the test support for code that talks to NATS: an
// embedded JetStream server as STYLE.md's NATS tests want it (a random
// port, storage in t.TempDir(), shutdown in t.Cleanup) and a client of it.
package natstest

import (
	"testing"

	"github.com/goindex/goindex/bridge/natslink"
	"github.com/nats-io/nats.go"
)

// Start runs an embedded JetStream server on a free loopback port with its
// store in t.TempDir(), connects a client named "test" to it, and closes
// both when the test ends; a failure to do either fails the test.
func Start(t testing.TB) (*natslink.Server, *nats.Conn) {
	t.Helper()
	s, err := natslink.Start(natslink.ServerConfig{JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := natslink.Connect(s.ClientURL(), "test", nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}
