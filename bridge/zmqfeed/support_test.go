package zmqfeed

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/nats-io/nats.go"
)

// debianPython has python3-zmq and python3-msgpack (build.sh DEBS).
const debianPython = "/usr/bin/python3"

// testScope is the pool every test relay serves.
var testScope = dynamo.Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"}

const expectedBlocks = 4096

// pyProc is a Python publisher of testdata driven over stdin.
type pyProc struct {
	t   testing.TB
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	// Endpoints are what the script printed on its first line, after
	// "pub=" or "xpub=" (";"-separated).
	Endpoints []string
}

// startPy runs testdata/script with args and reads its endpoints.
func startPy(t testing.TB, script string, args ...string) *pyProc {
	t.Helper()
	cmd := exec.Command(debianPython, append([]string{"testdata/" + script}, args...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("stdin: %v", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", script, err)
	}
	p := &pyProc{t: t, cmd: cmd, in: in, out: bufio.NewReader(stdout)}
	t.Cleanup(p.kill)
	line, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("%s %v: no endpoint line: %v", script, args, err)
	}
	_, eps, _ := strings.Cut(strings.TrimSpace(line), "=")
	p.Endpoints = strings.Split(eps, ";")
	return p
}

// do sends one command; "send", "burst" and "subscribed" wait for the
// script's "ok".
func (p *pyProc) do(op string, msg any) {
	p.t.Helper()
	b, _ := json.Marshal(map[string]any{"op": op, "msg": msg})
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("command %s: %v", op, err)
	}
	if op == "send" || op == "burst" || op == "subscribed" {
		if line, err := p.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ok" {
			p.t.Fatalf("command %s: reply %q, %v", op, line, err)
		}
	}
}

// kill ends the script (a crash, as far as the relay can tell).
func (p *pyProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// freeEndpoint returns a loopback TCP endpoint nobody listens on now, for
// a publisher that starts after the relay connects to it. It never
// returns one it returned before in this process: a port freed by the
// last call may be handed out again by the kernel, and two publishers of
// one test would then bind the same endpoint.
func freeEndpoint(t *testing.T) string {
	t.Helper()
	handedMu.Lock()
	defer handedMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		ep := "tcp://" + l.Addr().String()
		l.Close()
		if !handed[ep] {
			handed[ep] = true
			return ep
		}
	}
}

// handed holds the endpoints freeEndpoint returned.
var (
	handedMu sync.Mutex
	handed   = map[string]bool{}
)

func testLogger() *slog.Logger {
	if os.Getenv("GOINDEX_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

// startRelay runs a relay of testScope on an embedded NATS server with feeds.
func startRelay(t *testing.T, feeds ...relay.Feed) *relay.Relay {
	t.Helper()
	r, _ := startRelayNATS(t, feeds...)
	return r
}

// startRelayNATS is startRelay that also returns a client of its server.
func startRelayNATS(t *testing.T, feeds ...relay.Feed) (*relay.Relay, *nats.Conn) {
	t.Helper()
	_, nc := natstest.Start(t)
	r, err := relay.New(relay.Config{Conn: nc, DC: 1, Logger: testLogger(), Pools: []relay.PoolConfig{{Domain: 1,
		Namespace: testScope.Namespace, Component: testScope.Component, Endpoint: testScope.Endpoint,
		ExpectedBlocks: expectedBlocks, Feeds: feeds}}})
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatalf("relay ended before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("relay not ready")
	}
	return r, nc
}

// status returns the relay's pool status.
func status(t *testing.T, r *relay.Relay) relay.PoolStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := r.Status(ctx)
	if err != nil || len(st) != 1 {
		t.Fatalf("Status = %v, %v", st, err)
	}
	return st[0]
}

// waitFor polls the pool status until ok accepts it.
func waitFor(t *testing.T, r *relay.Relay, ok func(st relay.PoolStatus) error) relay.PoolStatus {
	t.Helper()
	var last relay.PoolStatus
	relaytest.CheckFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		last = status(t, r)
		return ok(last)
	})
	return last
}

// wantWords returns the filter words of a producer of the relay's format
// fed events: what the relay must publish after the same events.
func wantWords(t *testing.T, events []kv.Event) []uint64 {
	t.Helper()
	n, _ := ckf.BucketCount(expectedBlocks)
	f, _ := ckf.NewFormat(ckf.DefaultSeed, n)
	p, err := ckf.New(ckf.Config{Format: f})
	if err != nil {
		t.Fatalf("ckf.New: %v", err)
	}
	for i := range events {
		if _, err := p.Apply(&events[i]); err != nil {
			t.Fatalf("reference Apply(%+v): %v", events[i], err)
		}
	}
	return p.AppendWords(nil)
}

// checkWords compares the relay's words with a reference producer's.
func checkWords(t *testing.T, r *relay.Relay, events []kv.Event) {
	t.Helper()
	want := wantWords(t, events)
	relaytest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		got, err := r.AppendWords(context.Background(), nil, 1)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("relay words differ from a producer fed the publishers' %d events", len(events))
		}
		return nil
	})
}

// Event builders: RouterEvent maps field by field (dynamo-current §2.2),
// and the kv.Events they mean.

func storedMap(worker, id uint64, rank uint32, parent *uint64, blocks ...[2]uint64) map[string]any {
	bs := []map[string]any{}
	for _, b := range blocks {
		bs = append(bs, map[string]any{"block_hash": b[0], "tokens_hash": b[1], "mm_extra_info": nil})
	}
	return map[string]any{"worker_id": worker, "storage_tier": "device", "event": map[string]any{"event_id": id,
		"data": map[string]any{"stored": map[string]any{"parent_hash": parent, "start_position": nil, "blocks": bs}}, "dp_rank": rank}}
}

func removedMap(worker, id uint64, rank uint32, hashes ...uint64) map[string]any {
	return map[string]any{"worker_id": worker, "storage_tier": "device", "event": map[string]any{"event_id": id,
		"data": map[string]any{"removed": map[string]any{"block_hashes": hashes}}, "dp_rank": rank}}
}

func storedKV(worker, id uint64, rank uint32, parent *uint64, blocks ...[2]uint64) kv.Event {
	ev := kv.Event{Member: kv.Member{Worker: worker, Rank: rank}, EventID: id, Kind: kv.Stored}
	if parent != nil {
		ev.HasParent, ev.Parent = true, *parent
	}
	for _, b := range blocks {
		ev.Blocks = append(ev.Blocks, kv.Block{External: b[0], Local: b[1]})
	}
	return ev
}

func removedKV(worker, id uint64, rank uint32, hashes ...uint64) kv.Event {
	return kv.Event{Member: kv.Member{Worker: worker, Rank: rank}, EventID: id, Kind: kv.Removed, Removed: hashes}
}

func ptr(v uint64) *uint64 { return &v }

// msg is one event-plane message for dynamo_pub.py.
type msg map[string]any

// osThreads is the test process's OS thread count (/proc/self/status).
func osThreads(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("thread count: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("thread count %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatal("thread count: no Threads line in /proc/self/status")
	return 0
}
