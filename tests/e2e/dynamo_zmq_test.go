package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/discovery/etcdtest"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/bridge/route"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/internal/syncbuf"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// goindexBinary returns the goindex command the test runs:
// $GOINDEX_BUILD/goindex (./build.sh builds it), else one built here.
func goindexBinary(t *testing.T) string {
	t.Helper()
	if build := os.Getenv("GOINDEX_BUILD"); build != "" {
		p := filepath.Join(build, "goindex")
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("goindex binary: %v (./build.sh builds it into $GOINDEX_BUILD)", err)
		}
		return p
	}
	p := filepath.Join(t.TempDir(), "goindex")
	if out, err := exec.Command("go", "build", "-o", p, "github.com/goindex/goindex/bridge/cmd/goindex").CombinedOutput(); err != nil {
		t.Fatalf("go build goindex: %v\n%s", err, out)
	}
	return p
}

// command runs bin with args until the test ends (SIGINT, then a wait), and
// returns its stderr.
func command(t *testing.T, bin string, args ...string) *syncbuf.Buffer {
	t.Helper()
	stderr := &syncbuf.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stderr, cmd.Stdout = stderr, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("goindex %s stderr:\n%s", args[0], stderr.String())
		}
	})
	return stderr
}

// worker is a Python Dynamo worker's event-plane publisher
// (bridge/zmqfeed/testdata/dynamo_pub.py: Debian python3-zmq and
// python3-msgpack, frames built field by field from the spec).
type worker struct {
	cmd      *exec.Cmd
	in       io.WriteCloser
	endpoint string
}

func startWorker(t *testing.T) *worker {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", "../../bridge/zmqfeed/testdata/dynamo_pub.py", "--bind", "tcp://127.0.0.1:0")
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("worker endpoint: %v", err)
	}
	return &worker{cmd: cmd, in: in, endpoint: strings.TrimPrefix(strings.TrimSpace(line), "pub=")}
}

// warm has the worker repeat one message until the test ends (the relay
// takes it once; the repeats cover the subscription's set-up).
func (w *worker) warm(t *testing.T, m map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"op": "warm", "msg": m})
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("worker command: %v", err)
	}
}

// register writes the worker's EventChannel record into its DC's etcd,
// under a lease, at the pool's endpoint scope, as Dynamo's discovery does.
func register(t *testing.T, cli *clientv3.Client, scope dynamo.Scope, id uint64, endpoint string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	value := fmt.Sprintf(`{"type":"EventChannel","scope":{"kind":"endpoint","endpoint":{"namespace":%q,"component":%q,"name":%q}},`+
		`"topic":"kv-events","instance_id":%d,"transport":{"kind":"Zmq","config":{"endpoint":%q}}}`,
		scope.Namespace, scope.Component, scope.Endpoint, id, endpoint)
	if _, err := cli.Put(ctx, scope.ChannelPrefix("kv-events")+strconv.FormatUint(id, 16), value, clientv3.WithLease(l.ID)); err != nil {
		t.Fatalf("Put: %v", err)
	}
}

// storedRun is a v1.4+ batch with one stored run of tokens' blocks from
// the root: external hashes base+i, tokens_hash as Dynamo computes it.
func storedRun(t *testing.T, workerID, base uint64, toks []uint32) []any {
	t.Helper()
	h, err := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: 16})
	if err != nil {
		t.Fatalf("NewHasher: %v", err)
	}
	var blocks []any
	for i, local := range h.AppendLocal(nil, toks) {
		blocks = append(blocks, map[string]any{"block_hash": base + uint64(i), "tokens_hash": local, "mm_extra_info": nil})
	}
	return []any{map[string]any{"worker_id": workerID, "storage_tier": "device", "event": map[string]any{"event_id": 1,
		"data": map[string]any{"stored": map[string]any{"parent_hash": nil, "start_position": nil, "blocks": blocks}}, "dp_rank": 0}}}
}

func promptTokens(first uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = first + uint32(i)
	}
	return out
}

var listeningPattern = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// TestE2E_DynamoZMQWorkersInTwoDCsRouteByPrefix runs Dynamo as released
// (v1.3+ defaults: the ZMQ event plane, etcd discovery) in two DCs: Python
// workers publish Dynamo-framed events on PUB sockets they register in
// their DC's etcd; `goindex relay --etcd` in each DC finds and reads them
// and publishes its filter over NATS; `goindex consume` builds the
// replica; `goindex route` sends each prompt to the DC that holds its
// prefix.
func TestE2E_DynamoZMQWorkersInTwoDCsRouteByPrefix(t *testing.T) {
	bin := goindexBinary(t)
	srv, _ := natstest.Start(t)
	scope := dynamo.Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"}
	prompts := map[string][]uint32{"fra": promptTokens(1000, 32*16), "lon": promptTokens(50000, 32*16)}
	for i, dc := range []string{"fra", "lon"} {
		etcdURL, cli := etcdtest.Start(t)
		for j := range 2 {
			w := startWorker(t)
			id := uint64(1<<52 + 10*i + j)
			register(t, cli, scope, id, w.endpoint)
			toks := prompts[dc]
			if j == 1 {
				toks = promptTokens(uint32(90000+1000*i), 8*16) // another prompt, elsewhere
			}
			w.warm(t, map[string]any{"pub": id, "seq": 0, "payload": storedRun(t, uint64(100*(i+1)+j), uint64(1<<40*(i+1)+1<<20*j), toks)})
		}
		command(t, bin, "relay", "--nats", srv.ClientURL(), "--dc", strconv.Itoa(i+1), "--name", dc,
			"--etcd", etcdURL, "--namespace", scope.Namespace, "--component", scope.Component, "--endpoint", scope.Endpoint,
			"--expected-blocks", "4096", "--heartbeat-every", "50ms", "--load-every", "100ms", "--status-every", "0")
	}
	replica := filepath.Join(t.TempDir(), "replica")
	command(t, bin, "consume", "--nats", srv.ClientURL(), "--shm", replica, "--dcs", "1,2", "--ping-every", "50ms")
	stubs := map[string]*httptest.Server{}
	for _, dc := range []string{"fra", "lon"} {
		stubs[dc] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, `{"dc":%q}`, dc)
		}))
		t.Cleanup(stubs[dc].Close)
	}
	routeErr := command(t, bin, "route", "--listen", "127.0.0.1:0", "--replica", replica, "--replica-poll", "20ms",
		"--dc", "1:fra="+stubs["fra"].URL, "--dc", "2:lon="+stubs["lon"].URL, "--block-size", "16")
	var base string
	relaytest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		m := listeningPattern.FindStringSubmatch(routeErr.String())
		if m == nil {
			return fmt.Errorf("goindex route not listening yet")
		}
		base = m[1]
		return nil
	})
	for _, dc := range []string{"fra", "lon"} {
		body, _ := json.Marshal(map[string]any{"model": "m", "prompt": prompts[dc]})
		relaytest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
			resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if got := resp.Header.Get(route.HeaderDC); resp.StatusCode != http.StatusOK || got != dc ||
				resp.Header.Get(route.HeaderCachedTokens) != "512" {
				return fmt.Errorf("prompt of %s: status %d, routed to %q with %q cached tokens; want %s with 512",
					dc, resp.StatusCode, got, resp.Header.Get(route.HeaderCachedTokens), dc)
			}
			return nil
		})
	}
}
