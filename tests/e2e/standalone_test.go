package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/nats-io/nats.go"
)

// standaloneBinary returns the standalone nats-server the tests run:
// $GOINDEX_NATS_SERVER, else the one ./build.sh installs into
// $GOINDEX_BUILD. Without either the test is skipped (a plain `go test`);
// with GOINDEX_BUILD set the binary must be there.
func standaloneBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GOINDEX_NATS_SERVER"); p != "" {
		return p
	}
	build := os.Getenv("GOINDEX_BUILD")
	if build == "" {
		t.Skip("no standalone nats-server: ./build.sh test installs one into $GOINDEX_BUILD (or set GOINDEX_NATS_SERVER)")
	}
	p := filepath.Join(build, "nats-server")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("standalone nats-server: %v (./build.sh installs it into $GOINDEX_BUILD)", err)
	}
	return p
}

// standalone is a nats-server process with JetStream (domain dc1, so the
// site helpers of topology_test.go apply unchanged) and its store in dir.
type standalone struct {
	t    *testing.T
	bin  string
	dir  string
	port int // 0 until the first start picked one
	cmd  *exec.Cmd
	done chan error
	url  string
}

// start runs the server (on the port of the previous start, if any) and
// waits until it accepts connections.
func (s *standalone) start() {
	t := s.t
	t.Helper()
	listen := "127.0.0.1:-1"
	if s.port != 0 {
		listen = "127.0.0.1:" + strconv.Itoa(s.port)
	}
	ports := filepath.Join(s.dir, "ports")
	if err := os.MkdirAll(ports, 0o755); err != nil {
		t.Fatalf("ports dir: %v", err)
	}
	conf := fmt.Sprintf("listen: %q\nserver_name: \"standalone\"\nports_file_dir: %q\njetstream { store_dir: %q, domain: %q }\n",
		listen, ports, filepath.Join(s.dir, "js"), jsDomain(1))
	confPath := filepath.Join(s.dir, "server.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatalf("server config: %v", err)
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("server log: %v", err)
	}
	defer log.Close()
	s.cmd = exec.Command(s.bin, "-c", confPath)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.bin, err)
	}
	done := make(chan error, 1)
	go func(c *exec.Cmd) { done <- c.Wait() }(s.cmd)
	s.done = done
	// The server writes its client URL to <binary>_<pid>.ports once it
	// listens.
	file := filepath.Join(ports, fmt.Sprintf("%s_%d.ports", filepath.Base(s.bin), s.cmd.Process.Pid))
	relaytest.CheckFor(t, wait, pollStep, func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("nats-server exited: %v (log: %s)", err, filepath.Join(s.dir, "server.log"))
		default:
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var p struct{ Nats []string }
		if err := json.Unmarshal(b, &p); err != nil || len(p.Nats) == 0 {
			return fmt.Errorf("ports file %q: %v", b, err)
		}
		s.url = p.Nats[0]
		return nil
	})
	i := strings.LastIndexByte(s.url, ':')
	if s.port, err = strconv.Atoi(s.url[i+1:]); err != nil {
		t.Fatalf("client URL %s: %v", s.url, err)
	}
	relaytest.CheckFor(t, wait, pollStep, func() error {
		nc, err := nats.Connect(s.url)
		if err != nil {
			return err
		}
		nc.Close()
		return nil
	})
}

// stop ends the server with SIGTERM (its graceful shutdown) and waits.
func (s *standalone) stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(wait):
		s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// TestE2E_StandaloneServerRestartedLaneConverges runs a relay and a
// consumer against the standalone nats-server ./build.sh installs (its own
// process, not the embedded server the other tests use), restarts that
// process on the same port and store, and checks that the lane holds its
// producer's exact words and every tracked block before and after, and
// that the clients really lived through the restart.
func TestE2E_StandaloneServerRestartedLaneConverges(t *testing.T) {
	srv := &standalone{t: t, bin: standaloneBinary(t), dir: t.TempDir()}
	srv.start()
	t.Cleanup(srv.stop)
	conn := func(name string) *nats.Conn {
		nc, err := natslink.Connect(srv.url, name, nil)
		if err != nil {
			t.Fatalf("connect %s: %v", srv.url, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	s := &site{id: relayproto.DCID(1), name: "standalone", comp: "backend-standalone",
		gen: relaytest.NewGenerator(relaytest.Seed(t, 2027), 3)}
	s.relayNC, s.genNC = conn("e2e relay standalone"), conn("e2e workers standalone")
	top := &topology{t: t, hubNC: conn("e2e consumer standalone"), sites: []*site{s}, dir: srv.dir}
	top.startRelay(t, s)
	rp := &replica{path: filepath.Join(top.dir, "replica")}
	t.Cleanup(func() {
		if rp.r != nil {
			rp.r.Close()
		}
	})
	cons := top.startConsumer(rp.path, nil)

	top.feed(s, 300)
	top.settle(t, rp, "before the restart")
	pid := srv.cmd.Process.Pid
	srv.stop()
	srv.start()
	if srv.cmd.Process.Pid == pid {
		t.Fatalf("nats-server restart kept pid %d", pid)
	}
	top.waitPing(t, s)
	top.feed(s, 200)
	top.settle(t, rp, "after the restart")
	for _, nc := range []*nats.Conn{s.relayNC, s.genNC, top.hubNC} {
		if nc.Stats().Reconnects == 0 {
			t.Errorf("connection %q never reconnected: the server restart did not reach it", nc.Opts.Name)
		}
	}
	cons.stop()
	if err := cons.wait(); err != nil {
		t.Errorf("consumer Run: %v", err)
	}
}
