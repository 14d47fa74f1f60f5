// Package etcdtest runs a real etcd for tests: Debian's /usr/bin/etcd
// (build.sh DEBS) on free loopback ports with its data in t.TempDir(),
// stopped when the test ends; optionally serving TLS with client
// certificates required (Options.TLS, with a throwaway CA made by
// internal/testcert). Launch's Server may be stopped and started again on
// the same ports and data.
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

// freePorts returns n distinct loopback addresses nobody listens on now
// (etcd takes addresses, not listeners). Every listener stays open until
// all are picked: closed one by one, the kernel could hand the same port
// out twice, and etcd would fail to bind its peer port.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("etcdtest: listen: %v", err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs
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
	s := Launch(t, o)
	return s.URL, s.Client
}

// Server is a running etcd that a test may stop and start again, on the
// same ports with the same data (an outage of the whole cluster).
type Server struct {
	// URL is the client URL; Client a client of it.
	URL    string
	Client *clientv3.Client

	t       testing.TB
	args    []string
	logPath string
	cmd     *exec.Cmd
}

// Launch is Run returning the Server.
func Launch(t testing.TB, o Options) *Server {
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
	ports := freePorts(t, 2)
	client, peer := scheme+ports[0], "http://"+ports[1]
	s := &Server{URL: client, t: t, logPath: filepath.Join(dir, "etcd.log"),
		args: append([]string{"--name", "test", "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "test=" + peer, "--initial-cluster-state", "new"}, extra...)}
	t.Cleanup(s.Stop)
	s.start()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, TLS: tlsCfg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	s.Client = cli
	s.await()
	return s
}

// start runs the etcd process, its output appended to the log.
func (s *Server) start() {
	s.t.Helper()
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatalf("etcdtest: %v", err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(Binary, s.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("etcdtest: start %s: %v", Binary, err)
	}
	s.cmd = cmd
}

// await waits until etcd answers a read; 30 s without an answer fails the
// test with etcd's log.
func (s *Server) await() {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := s.Client.Get(ctx, "probe")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.logPath)
			s.t.Fatalf("etcdtest: etcd not answering after 30s: %v\n%s", err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills etcd and waits for it to exit; stopping a stopped Server does
// nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts a stopped etcd again on the same ports and data, and
// waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
	s.await()
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
