package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink"
	"github.com/nats-io/nats-server/v2/server"
)

// tokenServer starts an embedded server that wants token tok.
func tokenServer(t *testing.T, tok string) string {
	t.Helper()
	s, err := natslink.Start(natslink.ServerConfig{JetStream: true, StoreDir: t.TempDir(),
		Configure: func(o *server.Options) { o.Authorization = tok }})
	if err != nil {
		t.Fatalf("Start(token server): %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

func TestNATSFlags_RecordConnectsWithTheRightTokenOnly(t *testing.T) {
	url := tokenServer(t, "tok-1")
	out := filepath.Join(t.TempDir(), "events.jsonl")
	// stderr is shared by the runs: a run's NATS callbacks may still log
	// while the next one starts.
	var stdout, stderr syncBuffer
	args := []string{"--nats", url, "--nats-token", "tok-1", "--out", out, "--duration", "100ms", "--json"}
	if err := runRecord(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("record %v = %v (stderr %s), want success", args, err, stderr.String())
	}
	for _, tok := range []string{"tok-2", ""} {
		args := []string{"--nats", url, "--nats-token", tok, "--out", out, "--duration", "100ms"}
		err := runRecord(context.Background(), args, &stdout, &stderr)
		if !errors.Is(err, natslink.ErrAuth) || !strings.Contains(err.Error(), "--nats-token") {
			t.Errorf("record with token %q = %v, want ErrAuth naming the flags to check", tok, err)
		}
	}
}

func TestNATSFlags_ConsumeRefusesWrongCredentialsBeforeRunning(t *testing.T) {
	url := tokenServer(t, "tok-1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"--nats", url, "--nats-user", "u", "--nats-password", "p", "--dcs", "1",
		"--shm", filepath.Join(t.TempDir(), "r.replica"), "--duration", "100ms"}
	if err := runConsume(ctx, args, &stdout, &stderr); !errors.Is(err, natslink.ErrAuth) {
		t.Errorf("consume with a user against a token server = %v, want ErrAuth", err)
	}
}

func TestNATSFlags_BadCombinationsAreUsageErrorsNamingTheFlags(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.creds")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-user", "u"}, "without --nats"},
		{[]string{"--nats", "nats://127.0.0.1:1", "--nats-user", "u", "--nats-token", "t"}, "--nats-user and --nats-token exclude each other"},
		{[]string{"--nats", "nats://127.0.0.1:1", "--nats-password", "p"}, "--nats-password needs --nats-user"},
		{[]string{"--nats", "nats://127.0.0.1:1", "--nats-cert", "c.pem"}, "--nats-cert and --nats-key go together"},
		{[]string{"--nats", "nats://127.0.0.1:1", "--nats-creds", missing}, "creds file"},
		{[]string{"--prefix", "goindex.*"}, `--prefix: relay: bad config: prefix "goindex.*"`},
		{[]string{"--prefix", "a..b"}, "empty token"},
		{[]string{"--prefix", "tenant>"}, "not allowed"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"--dc", "1", "--listen", "127.0.0.1:0"}, c.args...)
		err := runRelay(context.Background(), args, &stdout, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("relay %v = %v, want a usage error naming %q", c.args, err, c.want)
		}
	}
}
