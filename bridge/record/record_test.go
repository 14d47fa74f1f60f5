package record

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/demo"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/internal/syncbuf"
)

func stored(worker, id uint64, hashes ...uint64) dynamo.RouterEvent {
	ev := dynamo.RouterEvent{WorkerID: worker, Event: dynamo.CacheEvent{EventID: id, Kind: kv.Stored}}
	for _, h := range hashes {
		ev.Event.Stored.Blocks = append(ev.Event.Stored.Blocks, dynamo.StoredBlock{BlockHash: h, TokensHash: h + 1000})
	}
	return ev
}

func envelope(t *testing.T, p *demo.Publisher, ev dynamo.RouterEvent) []byte {
	t.Helper()
	b, err := p.AppendEnvelope(nil, &ev, time.Now())
	if err != nil {
		t.Fatalf("AppendEnvelope: %v", err)
	}
	return b
}

func bare(t *testing.T, ev dynamo.RouterEvent) []byte {
	t.Helper()
	b, err := dynamo.AppendJSON(nil, &ev)
	if err != nil {
		t.Fatalf("AppendJSON: %v", err)
	}
	return b
}

// lines decodes a log's lines.
func lines(t *testing.T, b []byte) []dynamo.RouterEvent {
	t.Helper()
	var out []dynamo.RouterEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		ev, err := dynamo.DecodeJSON(sc.Bytes())
		if err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

func TestRecorder_FormsDuplicatesGapsAndMalformed(t *testing.T) {
	var log bytes.Buffer
	r := NewRecorder(&log, 0)
	pub := demo.NewPublisher(7)
	a, b, c := stored(1, 1, 10), stored(1, 2, 11), stored(2, 1, 12)
	first := envelope(t, pub, a)
	r.Handle(Envelope, first)
	r.Handle(Envelope, first) // duplicate
	envelope(t, pub, b)       // never sent: one gap
	r.Handle(Envelope, envelope(t, pub, b))
	r.Handle(Envelope, bare(t, c))   // not an envelope on an envelope subject
	r.Handle(Legacy, bare(t, c))     // the legacy subject's form
	r.Handle(Detect, bare(t, a))     // told apart: bare JSON
	r.Handle(Detect, []byte("junk")) // neither
	host := dynamo.RouterEvent{WorkerID: 3, StorageTier: dynamo.TierHostPinned, Event: dynamo.CacheEvent{Kind: kv.Removed, Removed: []uint64{12}}}
	r.Handle(Legacy, bare(t, host))
	if err := r.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	want := Stats{Messages: 8, Events: 5, Stored: 4, Removed: 1, NonPrimary: 1, Malformed: 2, Duplicates: 1, Gaps: 1, Bytes: int64(log.Len())}
	if got := r.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	got := lines(t, log.Bytes())
	if len(got) != 5 || got[0].Event.EventID != 1 || got[1].Event.EventID != 2 || got[2].WorkerID != 2 || got[4].WorkerID != 3 {
		t.Errorf("log = %+v, want a, b, c, a and the host-tier removal in order", got)
	}
}

func TestRecorder_StopsAtItsLimitAndOnAWriteError(t *testing.T) {
	var log bytes.Buffer
	r := NewRecorder(&log, 2)
	for i := range uint64(4) {
		r.Handle(Legacy, bare(t, stored(1, i, i)))
	}
	select {
	case <-r.Stopped():
	default:
		t.Errorf("Stopped not closed after the limit of 2 events")
	}
	if err := r.Flush(); err != nil || r.Stats().Events != 2 || r.Stats().Messages != 2 || len(lines(t, log.Bytes())) != 2 {
		t.Errorf("after the limit: Flush %v, stats %+v, %d lines; want 2 events of 2 messages", err, r.Stats(), len(lines(t, log.Bytes())))
	}

	broken := errors.New("disk full")
	w := NewRecorder(failingWriter{broken}, 0)
	w.Handle(Legacy, bare(t, stored(1, 1, 1)))
	if err := w.Flush(); !errors.Is(err, broken) {
		t.Errorf("Flush into a failing writer = %v, want %v", err, broken)
	}
	select {
	case <-w.Stopped():
	default:
		t.Errorf("a write error did not stop the recorder")
	}
	if err := w.Flush(); !errors.Is(err, broken) {
		t.Errorf("second Flush = %v, want the sticky %v", err, broken)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

func TestOpenLog_CutsAPartialLastLine(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, before string
		truncate     bool
		cut          int64
		after        string
	}{
		{"whole lines", "a\nb\n", false, 0, "a\nb\n"},
		{"partial last line", "a\nb\n{\"wor", false, 5, "a\nb\n"},
		{"no newline at all", "{\"wor", false, 5, ""},
		{"truncate", "a\nb\n", true, 0, ""},
		{"a partial line longer than the scan chunk", "a\n" + strings.Repeat("x", 3*tailScanBytes/2), false, 3 * tailScanBytes / 2, "a\n"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.WriteFile(path, []byte(c.before), 0o644); err != nil {
			t.Fatal(err)
		}
		f, cut, err := OpenLog(path, c.truncate)
		if err != nil {
			t.Errorf("%s: OpenLog: %v", c.name, err)
			continue
		}
		if _, err := f.WriteString("z\n"); err != nil {
			t.Errorf("%s: append: %v", c.name, err)
		}
		f.Close()
		if got, _ := os.ReadFile(path); cut != c.cut || string(got) != c.after+"z\n" {
			t.Errorf("%s: OpenLog cut %d, then the log is %q; want cut %d and %q", c.name, cut, got, c.cut, c.after+"z\n")
		}
	}
	if _, _, err := OpenLog(filepath.Join(dir, "missing", "log"), false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenLog in a missing directory = %v, want os.ErrNotExist", err)
	}
}

func TestRun_RecordsTheSubjectsUntilItsLimit(t *testing.T) {
	_, nc := natstest.Start(t)
	subs := Subjects("ns", "rec", "generate")
	var log, progress syncBuffer
	evs := []dynamo.RouterEvent{stored(1, 1, 10), stored(1, 2, 11, 12), stored(2, 1, 20)}
	type result struct {
		rep *Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := Run(context.Background(), nc, &log, Config{Subjects: subs, Out: "events.jsonl", MaxEvents: uint64(len(evs)),
			FlushEvery: 5 * time.Millisecond, Log: &progress})
		done <- result{rep, err}
	}()
	for !strings.Contains(progress.String(), "recording ") {
		select {
		case r := <-done:
			t.Fatalf("Run ended before recording: %+v", r)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// One publisher per subject: each subscription delivers on its own
	// goroutine, so one publisher's sequence across two subjects could
	// arrive out of order (and be dropped as a duplicate).
	for _, m := range []struct {
		subject string
		b       []byte
	}{{subs[0].Subject, envelope(t, demo.NewPublisher(5), evs[0])}, {subs[2].Subject, envelope(t, demo.NewPublisher(6), evs[1])}, {subs[1].Subject, bare(t, evs[2])}} {
		if err := nc.Publish(m.subject, m.b); err != nil {
			t.Fatalf("publish %s: %v", m.subject, err)
		}
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not stop at MaxEvents %d", len(evs))
	}
	if r.err != nil || r.rep.Stopped != "max-events" || r.rep.Events != 3 || r.rep.Out != "events.jsonl" || len(r.rep.Subjects) != 3 {
		t.Fatalf("Run = %+v, %v; want 3 events on 3 subjects, stopped by max-events", r.rep, r.err)
	}
	// Each subject has its own subscription, so the log keeps each
	// worker's order but not the order across subjects.
	got := lines(t, []byte(log.String()))
	key := func(e dynamo.RouterEvent) [2]uint64 { return [2]uint64{uint64(e.WorkerID), uint64(e.Event.EventID)} }
	slices.SortFunc(got, func(a, b dynamo.RouterEvent) int { ka, kb := key(a), key(b); return slices.Compare(ka[:], kb[:]) })
	if len(got) != len(evs) {
		t.Fatalf("log holds %d events, want %d: %+v", len(got), len(evs), got)
	}
	for i := range evs {
		if !reflect.DeepEqual(got[i].Event.Stored.Blocks, evs[i].Event.Stored.Blocks) || key(got[i]) != key(evs[i]) {
			t.Errorf("log event %d (by worker, id) = %+v, want %+v", i, got[i], evs[i])
		}
	}
	var text bytes.Buffer
	if err := r.rep.WriteText(&text); err != nil || !strings.Contains(text.String(), "3 events (3 stored, 0 removed, 0 cleared; 0 not for the primary index) appended to events.jsonl") {
		t.Errorf("WriteText = %q, %v", text.String(), err)
	}
	if _, err := Run(context.Background(), nc, &log, Config{}); err == nil {
		t.Errorf("Run without a flush period = nil error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if rep, err := Run(ctx, nc, &log, Config{Subjects: subs[:1], FlushEvery: time.Millisecond}); err != nil || rep.Stopped != "signal" {
		t.Errorf("Run with a cancelled context = %+v, %v; want stopped by signal", rep, err)
	}
}

// syncBuffer is what a background command or server writes while the test reads.
type syncBuffer = syncbuf.Buffer

// plane builds one ZMQ event-plane message: topic, publisher id and
// sequence frames, then the 5-byte frame header and the envelope.
func plane(topic string, pub, seq uint64, payload []byte) [][]byte {
	env := dynamo.AppendEnvelope(nil, &dynamo.Envelope{Topic: topic, PublisherID: pub, Sequence: seq, PublishedAtMs: 1, Payload: payload})
	frame := append([]byte{1, 0, 0, 0, 0}, env...)
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(env)))
	return [][]byte{[]byte(topic), binary.BigEndian.AppendUint64(nil, pub), binary.BigEndian.AppendUint64(nil, seq), frame}
}

// HandlePlane records a ZMQ event-plane message's events as Handle does an
// envelope's, drops a repeated sequence, counts a message of the wrong
// shape as malformed and skips load samples uncounted.
func TestRecorder_ZMQEventPlaneMessages(t *testing.T) {
	var out bytes.Buffer
	r := NewRecorder(&out, 0)
	batch, err := dynamo.AppendMsgpackEvents(nil, []dynamo.RouterEvent{stored(3, 1, 10, 11)})
	if err != nil {
		t.Fatalf("AppendMsgpackEvents: %v", err)
	}
	r.HandlePlane(plane(dynamo.EventTopic, 9, 0, batch))
	r.HandlePlane(plane(dynamo.EventTopic, 9, 0, batch))     // the same sequence again
	r.HandlePlane(plane(dynamo.EventTopic, 9, 1, batch)[:3]) // three parts
	r.HandlePlane(plane(dynamo.MetricsTopic, 8, 0, []byte{0x80}))
	if err := r.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	st := r.Stats()
	if st.Messages != 3 || st.Events != 1 || st.Duplicates != 1 || st.Malformed != 1 {
		t.Errorf("stats %+v, want 3 messages, 1 event, 1 duplicate, 1 malformed (the load sample uncounted)", st)
	}
	if got := lines(t, out.Bytes()); len(got) != 1 || !reflect.DeepEqual(got[0], stored(3, 1, 10, 11)) {
		t.Errorf("recorded %+v, want worker 3's store", got)
	}
}
