package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/bench"
	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/syncbuf"
	"github.com/nats-io/nats.go"
)

// syncBuffer is what a background command or server writes while the test reads.
type syncBuffer = syncbuf.Buffer

// background runs a subcommand in the background and returns its stdout,
// stderr, a stop function and its result channel.
func background(run func(context.Context, []string, io.Writer, io.Writer) error, args ...string) (*syncBuffer, *syncBuffer, context.CancelFunc, chan error) {
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	return &stdout, &stderr, cancel, done
}

func TestRelayAndConsume_CommandsServeAReplicaAndPrintJSON(t *testing.T) {
	seed := relaytest.Seed(t, 21)
	srv, nc := natstest.Start(t)
	relayOut, relayErr, stopRelay, relayDone := background(runRelay,
		"--nats", srv.ClientURL(), "--dc", "5", "--name", "ams", "--component", "b5", "--expected-blocks", "4096",
		"--heartbeat-every", "20ms", "--load-every", "50ms", "--json")
	names := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 5}
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		_, err := nc.Request(names.PingSubject(), nil, 200*time.Millisecond)
		return err
	})
	gen := relaytest.NewGenerator(seed, 2)
	for range 200 {
		if err := nc.Publish(dynamo.EventSubject("dynamo", "b5"), gen.Next()); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	path := filepath.Join(t.TempDir(), "replica")
	consumeOut, _, stopConsume, consumeDone := background(runConsume,
		"--nats", srv.ClientURL(), "--shm", path, "--discover-for", "200ms", "--ping-every", "20ms", "--json")
	reader := attachReplicated(t, path, gen, func(r *shm.Reader) error {
		if r.Lane(0).RTT == 0 {
			return errors.New("no RTT yet")
		}
		return nil
	})
	defer reader.Close()

	stopConsume()
	if err := <-consumeDone; err != nil {
		t.Fatalf("consume: %v", err)
	}
	var cst struct {
		Replica string `json:"replica"`
		Lanes   []struct {
			DC        uint64
			Snapshots uint64
			Deltas    uint64
		} `json:"lanes"`
	}
	if err := json.Unmarshal([]byte(consumeOut.String()), &cst); err != nil {
		t.Fatalf("consume --json output %q: %v", consumeOut.String(), err)
	}
	if cst.Replica != path || len(cst.Lanes) != 1 || cst.Lanes[0].DC != 5 || cst.Lanes[0].Snapshots != 1 || cst.Lanes[0].Deltas == 0 {
		t.Errorf("consume status %+v: want one lane of dc 5 with a snapshot and deltas, replica %s", cst, path)
	}
	if got := reader.Ready(); got != 0 {
		t.Errorf("ready mask after the consumer stopped = %#x, want 0", got)
	}

	stopRelay()
	if err := <-relayDone; err != nil {
		t.Fatalf("relay: %v; stderr: %s", err, relayErr.String())
	}
	var rst struct {
		Pools []struct {
			DC     uint64
			Intake struct{ Events uint64 }
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(relayOut.String()), &rst); err != nil {
		t.Fatalf("relay --json output %q: %v", relayOut.String(), err)
	}
	if len(rst.Pools) != 1 || rst.Pools[0].DC != 5 || rst.Pools[0].Intake.Events != 200 {
		t.Errorf("relay status %+v: want one pool of dc 5 with 200 events", rst)
	}
	if !strings.Contains(relayErr.String(), "relay pool up") {
		t.Errorf("relay stderr lacks the start-up log: %s", relayErr.String())
	}
}

func TestRelayAndConsume_HelpAndUsageErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runRelay(context.Background(), []string{"--help"}, &out, &errb); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("relay --help = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"<P>.<D>.<DC>.delta", "kv-events", "kv_events", "drain marker", "--max-age",
		"endpoint.<EP>.kv-events", "kv_metrics", "--event-scope", "-load-source", "-endpoint string",
		"--zmq-publisher", "--zmq-broker", "--zmq-broker-discover", "-zmq-max-message-bytes", "--zmq-recv-hwm", "DYN_EVENT_PLANE", "--etcd", "--kube", "-kube-namespace", "--file-kv",
		"--zmq-endpoint", "--zmq-replay", "--zmq-topic", "-worker-id", "-dp-rank", "-block-size"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("relay --help lacks %q", want)
		}
	}
	errb.Reset()
	if err := runConsume(context.Background(), []string{"--help"}, &out, &errb); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("consume --help = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(errb.String(), "--dcs") || !strings.Contains(errb.String(), "/dev/shm") {
		t.Errorf("consume --help lacks --dcs or /dev/shm: %s", errb.String())
	}
	usage := map[string][]string{
		"relay without --dc":      {"relay"},
		"relay bad encoding":      {"relay", "--dc", "1", "--encoding", "zip"},
		"relay bad event scope":   {"relay", "--dc", "1", "--event-scope", "namespace"},
		"relay bad load source":   {"relay", "--dc", "1", "--load-source", "vllm"},
		"relay bad zmq publisher": {"relay", "--dc", "1", "--zmq-publisher", "udp://x:1"},
		"relay bad zmq broker":    {"relay", "--dc", "1", "--zmq-broker", "xpub=tcp://a:1"},
		"relay brokers, no etcd":  {"relay", "--dc", "1", "--zmq-broker-discover"},
		"relay kube outside k8s":  {"relay", "--dc", "1", "--kube"},
		"relay replay alone":      {"relay", "--dc", "1", "--zmq-replay", "tcp://a:1"},
		"relay zero block size":   {"relay", "--dc", "1", "--zmq-endpoint", "tcp://a:1", "--block-size", "0"},
		"relay bad log level":     {"relay", "--dc", "1", "--log-level", "loud"},
		"consume bad dcs":         {"consume", "--dcs", "1,x"},
		"consume seed alone":      {"consume", "--seed", "5"},
		"consume huge expected":   {"consume", "--expected-blocks", "99999999999"},
		"relay bad listen":        {"relay", "--dc", "1", "--listen", "nohost"},
		"consume unknown flag":    {"consume", "--nope"},
		"relay positional":        {"relay", "--dc", "1", "extra"},
		"consume zero dc in list": {"consume", "--dcs", "0"},
	}
	for name, args := range usage {
		run := runRelay
		if args[0] == "consume" {
			run = runConsume
		}
		if err := run(context.Background(), args[1:], &out, &errb); !errors.Is(err, errUsage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

func TestBenchRelay_FlagsReachTheRunAndItsJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	prof := filepath.Join(t.TempDir(), "resync.prof")
	args := []string{"--synthetic", "--lanes", "2", "--blocks", "3000", "--json", "--resync-profile", prof}
	if err := runBenchRelay(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench relay %q: %v; stderr: %s", args, err, stderr.String())
	}
	// A pprof profile is gzipped protobuf.
	if b, err := os.ReadFile(prof); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("bench relay %q: profile = %d bytes (%v), want a gzipped pprof profile", args, len(b), err)
	}
	var rep bench.RelayReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("bench relay --json output %q: %v", stdout.String(), err)
	}
	if !rep.Synthetic || rep.Lanes != 2 || rep.BlocksPerLane != 3000 || rep.Resync.ResidentBlocks != 6000 {
		t.Errorf("bench relay %q = %+v: want a synthetic 2 × 3000 run", args, rep)
	}
	stdout.Reset()
	if err := runBenchRelay(context.Background(), []string{"--synthetic", "--lanes", "1", "--blocks", "1000"}, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "SYNTHETIC") {
		t.Errorf("bench relay --synthetic = %v, output %q: want the human report", err, stdout.String())
	}
	for _, bad := range [][]string{{"--lanes", "65"}, {"--blocks", "0"}, {"--samples", "-1"}, {"extra"}, {"--cpuprofile", prof, "--resync-profile", prof}} {
		if err := runBenchRelay(context.Background(), bad, &stdout, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("bench relay %q = %v, want a usage error", bad, err)
		}
	}
}

// embeddedURLPattern finds the client URL of the embedded nats-server a
// command logged, in text or JSON logs.
var embeddedURLPattern = regexp.MustCompile(`embedded nats-server up"?[ ,]"?url"?[=:]"?(nats://[0-9.:]+)`)

// embeddedURL waits for the command running in the background (its stderr
// and done channel) to log its embedded nats-server's URL, failing the
// test if it exits first.
func embeddedURL(t *testing.T, name string, stderr *syncBuffer, done <-chan error) string {
	t.Helper()
	return awaitLogged(t, name+" without --nats", embeddedURLPattern, stderr, done)
}

// awaitLogged waits until the command what, running in the background (its
// stderr and done channel), logs a line that pattern matches, and returns
// the pattern's first group; the test fails if the command ends first or
// nothing matches within 30 s.
func awaitLogged(t *testing.T, what string, pattern *regexp.Regexp, stderr *syncBuffer, done <-chan error) string {
	t.Helper()
	var group string
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		select {
		case err := <-done:
			t.Fatalf("%s exited early: %v\n%s", what, err, stderr.String())
		default:
		}
		m := pattern.FindStringSubmatch(stderr.String())
		if m == nil {
			return fmt.Errorf("no line matching %s yet", pattern)
		}
		group = m[1]
		return nil
	})
	return group
}

// waitRelay waits until the relay of names answers pings.
func waitRelay(t *testing.T, nc *nats.Conn, names relay.Names) {
	t.Helper()
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		_, err := nc.Request(names.PingSubject(), nil, 200*time.Millisecond)
		return err
	})
}

// publishUntilReplicated waits until the relay of names answers pings,
// publishes 100 generated Dynamo events on component's subject and waits
// until the replica file at path holds every block they left tracked.
func publishUntilReplicated(t *testing.T, nc *nats.Conn, names relay.Names, component string, seed uint64, path string) {
	t.Helper()
	waitRelay(t, nc, names)
	gen := relaytest.NewGenerator(seed, 2)
	for range 100 {
		if err := nc.Publish(dynamo.EventSubject("dynamo", component), gen.Next()); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	if len(gen.Tracked()) == 0 {
		t.Fatal("the generated events left no block tracked")
	}
	attachReplicated(t, path, gen, nil).Close()
}

// attachReplicated attaches the replica file at path, again and again
// until it holds every block gen tracks and also (optional) returns nil,
// and returns that reader for the caller to close.
func attachReplicated(t *testing.T, path string, gen *relaytest.Generator, also func(*shm.Reader) error) *shm.Reader {
	t.Helper()
	var reader *shm.Reader
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		r, err := shm.Attach(path)
		if err != nil {
			return err
		}
		if reader != nil {
			reader.Close()
		}
		reader = r
		f := r.Format()
		for _, c := range gen.Tracked() {
			if r.Table().Probe(f.Probe(c), 1) == 0 {
				return fmt.Errorf("tracked block %#x is missing from the replica", c)
			}
		}
		if also != nil {
			return also(r)
		}
		return nil
	})
	return reader
}

// TestRelay_WithoutNATSStartsAnEmbeddedJetStreamServer runs `goindex relay`
// with no --nats: it must start its own nats-server with JetStream on
// --listen (the relay's delta log and snapshot store need JetStream), and a
// consumer given that server's URL must build a replica holding every
// tracked block from it.
func TestRelay_WithoutNATSStartsAnEmbeddedJetStreamServer(t *testing.T) {
	seed := relaytest.Seed(t, 23)
	_, relayErr, stopRelay, relayDone := background(runRelay,
		"--listen", "127.0.0.1:0", "--store", t.TempDir(), "--dc", "7", "--component", "b7", "--expected-blocks", "4096",
		"--heartbeat-every", "20ms", "--load-every", "50ms")
	url := embeddedURL(t, "relay", relayErr, relayDone)
	nc, err := natslink.Connect(url, "test", nil)
	if err != nil {
		t.Fatalf("connect to the relay's embedded server %s: %v", url, err)
	}
	defer nc.Close()
	names := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 7}
	// The consumer learns the format from the relay (no --expected-blocks).
	waitRelay(t, nc, names)
	path := filepath.Join(t.TempDir(), "replica")
	_, _, stopConsume, consumeDone := background(runConsume,
		"--nats", url, "--shm", path, "--dcs", "7", "--ping-every", "20ms")
	publishUntilReplicated(t, nc, names, "b7", seed, path)
	stopConsume()
	if err := <-consumeDone; err != nil {
		t.Errorf("consume: %v", err)
	}
	stopRelay()
	if err := <-relayDone; err != nil {
		t.Errorf("relay: %v; stderr: %s", err, relayErr.String())
	}
}

// TestConsume_WithoutNATSStartsAnEmbeddedJetStreamServer runs `goindex
// consume` with no --nats: it must start its own nats-server with
// JetStream on --listen, and a relay given that server's URL (which needs
// JetStream for its delta log and snapshot store) must serve the consumer's
// lane, whose replica then holds every tracked block.
func TestConsume_WithoutNATSStartsAnEmbeddedJetStreamServer(t *testing.T) {
	seed := relaytest.Seed(t, 24)
	path := filepath.Join(t.TempDir(), "replica")
	consumeOut, consumeErr, stopConsume, consumeDone := background(runConsume,
		"--listen", "127.0.0.1:0", "--store", t.TempDir(), "--shm", path, "--dcs", "8", "--expected-blocks", "4096",
		"--ping-every", "20ms", "--retry-every", "20ms", "--json")
	url := embeddedURL(t, "consume", consumeErr, consumeDone)
	_, relayErr, stopRelay, relayDone := background(runRelay,
		"--nats", url, "--dc", "8", "--component", "b8", "--expected-blocks", "4096",
		"--heartbeat-every", "20ms", "--load-every", "50ms")
	nc, err := natslink.Connect(url, "test", nil)
	if err != nil {
		t.Fatalf("connect to the consumer's embedded server %s: %v", url, err)
	}
	defer nc.Close()
	publishUntilReplicated(t, nc, relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 8}, "b8", seed, path)
	// The relay first: the consumer owns the server it runs on.
	stopRelay()
	if err := <-relayDone; err != nil {
		t.Errorf("relay: %v; stderr: %s", err, relayErr.String())
	}
	stopConsume()
	if err := <-consumeDone; err != nil {
		t.Fatalf("consume: %v; stderr: %s", err, consumeErr.String())
	}
	var st struct {
		Lanes []struct {
			DC        uint64
			Snapshots uint64
		} `json:"lanes"`
	}
	if err := json.Unmarshal([]byte(consumeOut.String()), &st); err != nil {
		t.Fatalf("consume --json output %q: %v", consumeOut.String(), err)
	}
	if len(st.Lanes) != 1 || st.Lanes[0].DC != 8 || st.Lanes[0].Snapshots == 0 {
		t.Errorf("consume status %+v: want one lane of dc 8 with a snapshot installed", st)
	}
}

// TestWarnIfNATSOnly_WarnsADefaultZMQDeployment checks the start-up
// warning of a relay or recorder given no ZMQ source: it is logged unless
// a feed exists or the deployment says its event plane is NATS.
func TestWarnIfNATSOnly_WarnsADefaultZMQDeployment(t *testing.T) {
	cases := []struct {
		feeds int
		plane string
		warn  bool
	}{
		{0, "", true}, {0, "zmq", true}, {0, "NATS", false}, {0, " nats ", false}, {1, "", false}, {2, "zmq", false},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		got := warnIfNATSOnly(log, c.feeds, c.plane)
		logged := strings.Contains(buf.String(), "DYN_EVENT_PLANE=nats")
		if got != c.warn || logged != c.warn {
			t.Errorf("warnIfNATSOnly(%d feeds, %q) = %v, logged %v; want %v", c.feeds, c.plane, got, logged, c.warn)
		}
	}
}
