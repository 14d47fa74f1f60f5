// Package etcdtest runs a real etcd for tests: Debian's /usr/bin/etcd
// (build.sh DEBS) on free loopback ports with its data in t.TempDir(),
// stopped when the test ends.
package etcdtest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Binary is the etcd server the tests run.
const Binary = "/usr/bin/etcd"

// freePort returns a loopback port nobody listens on now.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: listen: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start runs etcd and returns its client URL and a client of it, once it
// answers; a failure to start fails the test (its log is printed).
func Start(t testing.TB) (string, *clientv3.Client) {
	t.Helper()
	dir := t.TempDir()
	client, peer := "http://"+freePort(t), "http://"+freePort(t)
	logPath := filepath.Join(dir, "etcd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	cmd := exec.Command(Binary, "--name", "test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test="+peer, "--initial-cluster-state", "new")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcdtest: start %s: %v", Binary, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "probe")
		cancel()
		if err == nil {
			return client, cli
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("etcdtest: etcd not answering after 30s: %v\n%s", err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
