package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/goindex/goindex/bridge/record"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/demo"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

// traceEvents serves the first n requests of the conversation slice on
// workers engines (request i on worker i mod workers, capacity blocks each)
// and returns every worker's events as Dynamo RouterEvents, in emission
// order per worker (ids 1..workers).
func traceEvents(t *testing.T, n, workers, capacity int) map[uint64][]dynamo.RouterEvent {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "..", "testdata", "mooncake", "conversation_head400.jsonl"))
	if err != nil {
		t.Fatalf("open trace: %v", err)
	}
	defer f.Close()
	reqs, err := trace.ReadAll(f, trace.ReaderConfig{})
	if err != nil {
		t.Fatalf("read trace: %v", err)
	}
	m, err := trace.NewMapper(trace.MapperConfig{})
	if err != nil {
		t.Fatalf("mapper: %v", err)
	}
	engines := make([]*trace.Engine, workers)
	for w := range engines {
		if engines[w], err = trace.NewEngine(trace.EngineConfig{Member: kv.Member{Worker: uint64(w + 1)}, CapacityBlocks: capacity}); err != nil {
			t.Fatalf("engine: %v", err)
		}
	}
	out := map[uint64][]dynamo.RouterEvent{}
	var evs []kv.Event
	for i, r := range reqs[:n] {
		e := engines[i%workers]
		evs, _ = e.Serve(evs[:0], m.AppendLocals(nil, r.HashIDs))
		for j := range evs {
			out[e.Member().Worker] = append(out[e.Member().Worker], demo.RouterEvent(&evs[j]))
		}
	}
	return out
}

// readEventLog decodes every line of an event log.
func readEventLog(t *testing.T, path string) []dynamo.RouterEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	var evs []dynamo.RouterEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		ev, err := dynamo.DecodeJSON(sc.Bytes())
		if err != nil {
			t.Fatalf("log line %d %q: %v", len(evs)+1, sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("log does not end with a newline")
	}
	return evs
}

// normalized returns ev as DecodeJSON gives it back from AppendJSON (nil
// slices come back empty).
func normalized(t *testing.T, ev *dynamo.RouterEvent) dynamo.RouterEvent {
	t.Helper()
	b, err := dynamo.AppendJSON(nil, ev)
	if err != nil {
		t.Fatalf("AppendJSON: %v", err)
	}
	out, err := dynamo.DecodeJSON(b)
	if err != nil {
		t.Fatalf("DecodeJSON(%s): %v", b, err)
	}
	return out
}

// waitRecording waits for record's start line on stderr.
func waitRecording(t *testing.T, stderr *syncBuffer, done chan error) {
	t.Helper()
	relaytest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		select {
		case err := <-done:
			t.Fatalf("record exited early: %v\n%s", err, stderr.String())
		default:
		}
		if !strings.Contains(stderr.String(), "goindex record: recording") {
			return errors.New("no recording line yet")
		}
		return nil
	})
}

// TestRecord_EnvelopesAndLegacyEventsReplayThroughParity records real
// Mooncake engine events published as msgpack envelopes (workers 1, 2) and
// legacy JSON (worker 3), with a duplicate, a gap, a malformed message and a
// host-tier event among them, stops at --max-events, and replays the log
// through goindex parity --events.
func TestRecord_EnvelopesAndLegacyEventsReplayThroughParity(t *testing.T) {
	srv, nc := natstest.Start(t)
	byWorker := traceEvents(t, 60, 3, 256)
	out := filepath.Join(t.TempDir(), "events.jsonl")
	total := len(byWorker[1]) + len(byWorker[2]) + len(byWorker[3]) + 1 // + the host-tier event
	stdout, stderr, cancel, done := background(runRecord, "--nats", srv.ClientURL(), "--namespace", "ns", "--component", "rec",
		"--out", out, "--max-events", fmt.Sprint(total), "--flush-every", "10ms", "--json")
	defer cancel()
	waitRecording(t, stderr, done)

	pubs := map[uint64]*demo.Publisher{1: demo.NewPublisher(101), 2: demo.NewPublisher(102)}
	envelope := func(w uint64, ev *dynamo.RouterEvent) []byte {
		b, err := pubs[w].AppendEnvelope(nil, ev, time.Now())
		if err != nil {
			t.Fatalf("envelope: %v", err)
		}
		return b
	}
	publish := func(subject string, b []byte) {
		if err := nc.Publish(subject, b); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	current, legacy := dynamo.EventSubject("ns", "rec"), dynamo.LegacyEventSubject("ns", "rec")
	host := dynamo.RouterEvent{WorkerID: 1, StorageTier: dynamo.TierHostPinned, Event: dynamo.CacheEvent{Kind: kv.Removed, Removed: []uint64{7}}}
	publish(current, []byte("not an event"))
	for w := uint64(1); w <= 2; w++ {
		for i := range byWorker[w] {
			b := envelope(w, &byWorker[w][i])
			publish(current, b)
			if w == 1 && i == 0 {
				publish(current, b) // duplicate: dropped
				publish(current, envelope(1, &host))
				envelope(1, &host) // a sequence never sent: one gap
			}
		}
	}
	for i := range byWorker[3] {
		b, err := dynamo.AppendJSON(nil, &byWorker[3][i])
		if err != nil {
			t.Fatalf("AppendJSON: %v", err)
		}
		publish(legacy, b)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("record: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("record did not stop at --max-events %d; stderr: %s", total, stderr.String())
	}

	var rep record.Report
	dec := json.NewDecoder(strings.NewReader(stdout.String()))
	if err := dec.Decode(&rep); err != nil || dec.More() {
		t.Fatalf("record --json stdout %q: want one JSON object (%v)", stdout.String(), err)
	}
	var stored, removed uint64
	for _, evs := range byWorker {
		for _, ev := range evs {
			if ev.Event.Kind == kv.Stored {
				stored++
			} else {
				removed++
			}
		}
	}
	want := record.Stats{Messages: uint64(total) + 2, Events: uint64(total), Stored: stored, Removed: removed + 1, NonPrimary: 1,
		Malformed: 1, Duplicates: 1, Gaps: 1}
	got := rep.Stats
	got.Bytes = 0
	endpoint := dynamo.Scope{Namespace: "ns", Component: "rec", Endpoint: "generate"}.Subject(dynamo.EventTopic)
	if got != want || rep.Stopped != "max-events" || len(rep.Subjects) != 3 || rep.Subjects[0] != current || rep.Subjects[1] != legacy ||
		rep.Subjects[2] != endpoint {
		t.Errorf("record summary %+v, want stats %+v, stopped by max-events, subjects %s, %s and %s", rep, want, current, legacy, endpoint)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() != rep.Bytes {
		t.Errorf("log size %v (%v), summary says %d bytes", fi.Size(), err, rep.Bytes)
	}

	recorded := map[uint64][]dynamo.RouterEvent{}
	for _, ev := range readEventLog(t, out) {
		if primary, err := ev.TargetsPrimary(); err == nil && primary {
			recorded[ev.WorkerID] = append(recorded[ev.WorkerID], ev)
		} else if !reflect.DeepEqual(ev, normalized(t, &host)) {
			t.Errorf("non-primary line %+v, want %+v", ev, host)
		}
	}
	for w, evs := range byWorker {
		if len(recorded[w]) != len(evs) {
			t.Errorf("worker %d: %d events recorded, want %d", w, len(recorded[w]), len(evs))
			continue
		}
		for i := range evs {
			if want := normalized(t, &evs[i]); !reflect.DeepEqual(recorded[w][i], want) {
				t.Errorf("worker %d event %d recorded as %+v, want %+v", w, i, recorded[w][i], want)
			}
		}
	}

	prep, _ := parityJSON(t, "--events", out, "--lanes", "4", "--blocks-per-lane", "4096", "--load", "0.5", "--queries", "200")
	if prep.Source.SkippedTier != 1 || prep.Apply.Events != total-1 || prep.Underestimates != 0 || prep.FalseNegatives != 0 {
		t.Errorf("parity --events on the recording: source %+v, apply %+v, %d underestimates, %d false negatives; want %d events, 1 skipped, none under",
			prep.Source, prep.Apply, prep.Underestimates, prep.FalseNegatives, total-1)
	}
}

// TestRecord_SubjectDetectsEachFormAndAppendsAfterAPartialLine appends to a
// log whose last line a killed writer left half-written, on one explicit
// subject carrying all three message forms, and stops on a signal.
func TestRecord_SubjectDetectsEachFormAndAppendsAfterAPartialLine(t *testing.T) {
	srv, nc := natstest.Start(t)
	evs := traceEvents(t, 3, 1, 64)[1]
	out := filepath.Join(t.TempDir(), "events.jsonl")
	first, err := dynamo.AppendJSON(nil, &evs[0])
	if err != nil {
		t.Fatalf("AppendJSON: %v", err)
	}
	partial := `{"worker_id":1,"event":{"ev`
	if err := os.WriteFile(out, append(append(first, '\n'), partial...), 0o644); err != nil {
		t.Fatalf("write log: %v", err)
	}
	stdout, stderr, cancel, done := background(runRecord, "--nats", srv.ClientURL(), "--subject", "capture.>",
		"--out", out, "--flush-every", "10ms")
	waitRecording(t, stderr, done)

	pub := demo.NewPublisher(9)
	msgpackEnv, err := pub.AppendEnvelope(nil, &evs[1], time.Now())
	if err != nil {
		t.Fatalf("envelope: %v", err)
	}
	payload, _ := dynamo.AppendJSON(nil, &evs[2])
	ints := make([]string, len(payload))
	for i, c := range payload {
		ints[i] = fmt.Sprint(c)
	}
	jsonEnv := fmt.Sprintf(`{"publisher_id":9,"sequence":1,"published_at":1,"payload":[%s]}`, strings.Join(ints, ","))
	bare, _ := dynamo.AppendJSON(nil, &evs[0])
	for _, m := range [][]byte{msgpackEnv, []byte(jsonEnv), bare} {
		if err := nc.Publish("capture.dc1", m); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	wantEvs := []dynamo.RouterEvent{evs[0], evs[1], evs[2], evs[0]}
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		b, _ := os.ReadFile(out)
		if n := bytes.Count(b, []byte{'\n'}); n != len(wantEvs) {
			return fmt.Errorf("%d lines, want %d", n, len(wantEvs))
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("record: %v\n%s", err, stderr.String())
	}
	got := readEventLog(t, out)
	for i := range wantEvs {
		if i >= len(got) || !reflect.DeepEqual(got[i], normalized(t, &wantEvs[i])) {
			t.Errorf("log line %d = %+v, want %+v", i+1, got, wantEvs[i])
			break
		}
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("cut a partial last line (%d bytes)", len(partial))) {
		t.Errorf("stderr does not report the cut partial line: %s", stderr.String())
	}
	for _, want := range []string{"3 events", "stopped by signal", "3 messages on capture.>: 0 malformed"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("human summary %q lacks %q", stdout.String(), want)
		}
	}
}

func TestRecord_DurationStopsAnIdleCapture(t *testing.T) {
	srv, _ := natstest.Start(t)
	out := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(out, []byte("old\n"), 0o644); err != nil {
		t.Fatalf("write: %v", err)
	}
	var stdout, stderr bytes.Buffer
	err := runRecord(context.Background(), []string{"--nats", srv.ClientURL(), "--out", out, "--truncate", "--duration", "50ms", "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("record: %v\n%s", err, stderr.String())
	}
	var rep record.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
	if rep.Stopped != "duration" || rep.Events != 0 || rep.Messages != 0 {
		t.Errorf("idle record summary %+v, want stopped by duration with nothing recorded", rep)
	}
	if b, _ := os.ReadFile(out); len(b) != 0 {
		t.Errorf("--truncate left %q in the log", b)
	}
}

func TestRecord_UsageErrorsAndHelp(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--out", "x", "--subject", "a.b", "--component", "c"},
		{"--out", "x", "--duration", "-1s"},
		{"--out", "x", "--flush-every", "0s"},
		{"--out", "x", "--log-level", "loud"},
		{"--out", "x", "extra"},
	} {
		var stderr bytes.Buffer
		if err := runRecord(context.Background(), args, &bytes.Buffer{}, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("record %q = %v, want a usage error", args, err)
		}
	}
	var stderr bytes.Buffer
	if err := runRecord(context.Background(), []string{"--help"}, &bytes.Buffer{}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("record --help = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: goindex record", "Input:", "Output:", "Stopping:", "kv-events", "kv_events", "goindex parity --events"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("record --help lacks %q", want)
		}
	}
}

// TestRecord_TakesEndpointScopedBatches publishes a v1.4 message (an
// endpoint-scoped subject, a list of two RouterEvents, written by Debian's
// python3-msgpack) and records both events.
func TestRecord_TakesEndpointScopedBatches(t *testing.T) {
	srv, nc := natstest.Start(t)
	out := filepath.Join(t.TempDir(), "events.jsonl")
	_, stderr, cancel, done := background(runRecord, "--nats", srv.ClientURL(), "--namespace", "ns", "--component", "rec",
		"--out", out, "--max-events", "2", "--flush-every", "10ms")
	defer cancel()
	waitRecording(t, stderr, done)
	b, err := os.ReadFile("../../../dynamo/testdata/releases/v1.4-endpoint-batch.msgpack")
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	subject := dynamo.Scope{Namespace: "ns", Component: "rec", Endpoint: "generate"}.Subject(dynamo.EventTopic)
	if err := nc.Publish(subject, b); err != nil {
		t.Fatalf("publish: %v", err)
	}
	waitStopped(t, stderr, done)
	if got := readEventLog(t, out); len(got) != 2 || got[0].WorkerID != 4 || got[1].Event.Kind != kv.Removed {
		t.Errorf("recorded %+v, want worker 4's store and removal", got)
	}
}

// TestRecord_TakesTheZMQEventPlane records from Dynamo's default event
// plane (ZMQ since v1.3, NATS then carrying no KV event): a worker's PUB
// socket, written by Debian's python3-zmq field by field from the spec,
// given as --zmq-publisher. The capture used to stay empty, so README's
// hash-mismatch troubleshooting had nothing to replay on a default
// deployment.
func TestRecord_TakesTheZMQEventPlane(t *testing.T) {
	srv, _ := natstest.Start(t)
	cmd := exec.Command("/usr/bin/python3", "../../zmqfeed/testdata/dynamo_pub.py", "--bind", "tcp://127.0.0.1:0")
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	pubOut, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the publisher: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(pubOut).ReadString('\n')
	if err != nil {
		t.Fatalf("publisher endpoint: %v", err)
	}
	endpoint := strings.TrimPrefix(strings.TrimSpace(line), "pub=")
	out := filepath.Join(t.TempDir(), "events.jsonl")
	_, stderr, cancel, done := background(runRecord, "--nats", srv.ClientURL(), "--etcd", "", "--zmq-broker", "",
		"--zmq-publisher", endpoint, "--out", out, "--max-events", "2", "--flush-every", "10ms")
	defer cancel()
	waitRecording(t, stderr, done)
	batch := []any{
		map[string]any{"worker_id": 4, "storage_tier": "device", "event": map[string]any{"event_id": 1, "dp_rank": 0,
			"data": map[string]any{"stored": map[string]any{"parent_hash": nil, "start_position": nil,
				"blocks": []any{map[string]any{"block_hash": 0x1401, "tokens_hash": 0xB1, "mm_extra_info": nil}}}}}},
		map[string]any{"worker_id": 4, "storage_tier": "device", "event": map[string]any{"event_id": 2, "dp_rank": 0,
			"data": map[string]any{"removed": map[string]any{"block_hashes": []any{0x1401}}}}},
	}
	// The publisher repeats the message (one publisher id and sequence)
	// until the recorder has subscribed; the copies are duplicates.
	b, _ := json.Marshal(map[string]any{"op": "warm", "msg": map[string]any{"pub": 77, "seq": 0, "payload": batch}})
	if _, err := in.Write(append(b, '\n')); err != nil {
		t.Fatalf("publisher command: %v", err)
	}
	waitStopped(t, stderr, done)
	if got := readEventLog(t, out); len(got) != 2 || got[0].WorkerID != 4 || got[0].Event.Kind != kv.Stored ||
		got[1].Event.Kind != kv.Removed {
		t.Errorf("recorded %+v, want worker 4's store and removal", got)
	}
}

// waitStopped waits for a record run limited to 2 events to end well.
func waitStopped(t *testing.T, stderr *syncBuffer, done chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("record: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("record did not stop at 2 events; stderr: %s", stderr.String())
	}
}
