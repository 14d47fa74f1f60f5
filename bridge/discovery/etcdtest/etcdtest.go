// Package etcdtest runs a real etcd for tests: Debian's /usr/bin/etcd
// (build.sh DEBS) on free loopback ports with its data in t.TempDir(),
// stopped when the test ends; optionally serving TLS with client
// certificates required (Options.TLS, with a throwaway CA made by
// internal/testcert).
package etcdtest

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/goindex/goindex/internal/testcert"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Binary is the etcd server the tests run.
const Binary = "/usr/bin/etcd"

// Options configures Run.
type Options struct {
	// TLS, when set, makes etcd serve its clients over TLS with its
	// certificate and require a client certificate signed by its CA.
	TLS *testcert.Files
}

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
	return Run(t, Options{})
}

// Run is Start with options: with TLS the URL is https:// and the client
// presents the test CA's client certificate.
func Run(t testing.TB, o Options) (string, *clientv3.Client) {
	t.Helper()
	dir := t.TempDir()
	scheme := "http://"
	var extra []string
	var tlsCfg *tls.Config
	if o.TLS != nil {
		scheme = "https://"
		extra = []string{"--cert-file", o.TLS.ServerCert, "--key-file", o.TLS.ServerKey,
			"--client-cert-auth", "--trusted-ca-file", o.TLS.CA}
		tlsCfg = o.TLS.ClientTLS(t)
	}
	client, peer := scheme+freePort(t), "http://"+freePort(t)
	logPath := filepath.Join(dir, "etcd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	args := append([]string{"--name", "test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test=" + peer, "--initial-cluster-state", "new"}, extra...)
	cmd := exec.Command(Binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcdtest: start %s: %v", Binary, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, TLS: tlsCfg, Logger: zap.NewNop()})
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

// EnableAuth turns etcd's authentication on with a root user of password
// (etcd's own steps: add root, grant it the root role, enable auth) and
// returns a client logged in as root; cli's later requests are refused.
func EnableAuth(t testing.TB, url string, cli *clientv3.Client, password string) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.UserAdd(ctx, "root", password); err != nil {
		t.Fatalf("etcdtest: add root: %v", err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatalf("etcdtest: grant root: %v", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatalf("etcdtest: enable auth: %v", err)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Username: "root",
		Password: password, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcdtest: root client: %v", err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}
