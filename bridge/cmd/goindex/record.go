package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/bridge/obs"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/nats-io/nats.go"
)

const recordSynopsis = `Usage: goindex record --out FILE [--nats URL] [--namespace NS --component COMP [--endpoint EP] | --subject S] [--max-events N] [--duration D] [--json]

Captures Dynamo KV events from live NATS subjects into an event log: one
Dynamo JSON RouterEvent per line (CUR shape, as dynamo.AppendJSON writes it),
no header, in arrival order. That is exactly the file
` + "`goindex parity --events FILE`" + ` replays, so a production capture can be held
against the exact index later. Without --nats it starts an embedded
nats-server on --listen and prints its URL for publishers.

Input:
  --namespace NS --component COMP [--endpoint EP]   every released event subject:
      namespace.<NS>.component.<COMP>.endpoint.<EP>.kv-events   v1.4+: msgpack
                   EventEnvelope, payload a list of RouterEvents (each recorded)
      namespace.<NS>.component.<COMP>.kv-events   v1.3 and older: one per envelope
      namespace.<NS>.component.<COMP>.kv_events   legacy G2025 JSON RouterEvent
  --subject S      one subject instead (NATS wildcards allowed); each message's
                   form is detected: an envelope (msgpack, or the early JSON
                   envelope), else a bare JSON RouterEvent
  Envelopes at or below their publisher's last sequence are dropped as
  duplicates and missing sequences counted as gaps; messages that do not
  decode are counted and skipped. Events of every storage tier are written
  (parity skips and counts the non-device ones).
Output:
  --out FILE       appended to, created if missing: runs may add to one log. A
                   partial last line (a killed writer's) is cut off first, so
                   every line stays one whole event; --truncate starts empty.
                   Lines go out whole, at least every --flush-every.
Stopping:
  --max-events N   after N events are written (0: no limit)
  --duration D     after D (0: no limit); SIGINT/SIGTERM stop cleanly too
Progress goes to stderr every --progress-every; the summary to stdout (one
JSON object with --json).` + natsSecurityUsage

// recordFlushBytes is how much encoded output record buffers before it
// writes: whole lines only, so a killed run never leaves half an event.
const recordFlushBytes = 64 << 10

// recordPendingMsgs bounds the messages a subscription queues ahead of the
// writer (nats.go's default, 512k, at up to 1 MiB each would be unbounded
// in practice); beyond it NATS drops and reports a slow consumer.
const recordPendingMsgs = 1 << 16

// tailScanBytes is the chunk record reads backwards in to find the last
// newline of an existing log.
const tailScanBytes = 64 << 10

// msgForm is how a subject's messages are encoded.
type msgForm uint8

const (
	formEnvelope msgForm = iota // event-plane envelope (msgpack or early JSON)
	formLegacy                  // bare JSON RouterEvent (G2025)
	formDetect                  // either, told apart per message
)

// recordStats counts what record did; its JSON form is part of the summary.
type recordStats struct {
	Messages   uint64 `json:"messages"`   // messages received while recording
	Events     uint64 `json:"events"`     // events written, one line each
	Stored     uint64 `json:"stored"`     // of Events: stored runs
	Removed    uint64 `json:"removed"`    // of Events: removals
	Cleared    uint64 `json:"cleared"`    // of Events: clears
	NonDevice  uint64 `json:"non_device"` // of Events: a storage tier other than device
	Malformed  uint64 `json:"malformed"`  // messages that did not decode (skipped)
	Duplicates uint64 `json:"duplicates"` // envelopes at or below their publisher's last sequence (skipped)
	Gaps       uint64 `json:"gaps"`       // envelope sequences never received
	Bytes      int64  `json:"bytes"`      // bytes appended to the log
}

// recorder turns messages into log lines. NATS delivers each subscription
// on its own goroutine, so every method takes mu.
type recorder struct {
	mu      sync.Mutex
	w       io.Writer
	buf     []byte
	last    map[uint64]uint64 // publisher id → last envelope sequence
	st      recordStats
	max     uint64 // 0: no limit
	full    chan struct{}
	stopped bool
	err     error // sticky write error
}

func newRecorder(w io.Writer, maxEvents uint64) *recorder {
	return &recorder{w: w, last: map[uint64]uint64{}, max: maxEvents, full: make(chan struct{})}
}

// handle records one message of the given form.
func (r *recorder) handle(form msgForm, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.st.Messages++
	evs, err := r.decode(form, b)
	if err != nil {
		if !errors.Is(err, errDuplicate) {
			r.st.Malformed++
		}
		return
	}
	for i := range evs {
		if r.record(&evs[i]); r.stopped {
			return
		}
	}
}

// record writes one event as a line of the log.
func (r *recorder) record(ev *dynamo.RouterEvent) {
	line, err := dynamo.AppendJSON(r.buf, ev)
	if err != nil {
		r.st.Malformed++
		return
	}
	r.buf = append(line, '\n')
	r.st.Events++
	switch ev.Event.Kind {
	case kv.Stored:
		r.st.Stored++
	case kv.Removed:
		r.st.Removed++
	case kv.Cleared:
		r.st.Cleared++
	}
	if !ev.Primary() {
		r.st.NonDevice++
	}
	if len(r.buf) >= recordFlushBytes {
		r.flushLocked()
	}
	if r.max > 0 && r.st.Events >= r.max {
		r.stopLocked()
	}
}

// errDuplicate marks an envelope already seen; it is counted apart from
// malformed messages.
var errDuplicate = errors.New("record: duplicate envelope")

// decode returns the message's RouterEvents (one, or a v1.4+ batch),
// applying the envelope sequence rules.
func (r *recorder) decode(form msgForm, b []byte) ([]dynamo.RouterEvent, error) {
	decodeJSON := func() ([]dynamo.RouterEvent, error) {
		ev, err := dynamo.DecodeJSON(b)
		if err != nil {
			return nil, err
		}
		return []dynamo.RouterEvent{ev}, nil
	}
	if form == formLegacy {
		return decodeJSON()
	}
	env, evs, err := dynamo.DecodeMessage(b)
	if err != nil {
		if form == formDetect && len(b) > 0 && b[0] == '{' {
			return decodeJSON()
		}
		return nil, err
	}
	if last, seen := r.last[env.PublisherID]; seen {
		if env.Sequence <= last {
			r.st.Duplicates++
			return nil, errDuplicate
		}
		r.st.Gaps += env.Sequence - last - 1
	}
	r.last[env.PublisherID] = env.Sequence
	return evs, nil
}

// flushLocked writes the buffered lines; a write error stops recording.
func (r *recorder) flushLocked() {
	if len(r.buf) == 0 || r.err != nil {
		return
	}
	n, err := r.w.Write(r.buf)
	r.st.Bytes += int64(n)
	r.buf = r.buf[:0]
	if err != nil {
		r.err = fmt.Errorf("record: write: %w", err)
		r.stopLocked()
	}
}

func (r *recorder) stopLocked() {
	if !r.stopped {
		r.stopped = true
		close(r.full)
	}
}

// flush writes the buffered lines and returns the sticky write error.
func (r *recorder) flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked()
	return r.err
}

// stop ends recording: later messages are ignored.
func (r *recorder) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

func (r *recorder) stats() recordStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// recordReport is the summary record prints when it stops.
type recordReport struct {
	Command  string   `json:"command"`
	NATS     string   `json:"nats"`
	Subjects []string `json:"subjects"`
	Out      string   `json:"out"`
	// CutBytes is the partial last line removed from an existing log.
	CutBytes int64   `json:"cut_bytes"`
	Seconds  float64 `json:"seconds"`
	// Stopped says why: "max-events", "duration" or "signal".
	Stopped string `json:"stopped"`
	recordStats
}

func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("record", recordSynopsis, stderr)
	url := fs.String("nats", "", "NATS URL (empty: start an embedded nats-server)")
	listen := fs.String("listen", "127.0.0.1:4222", "embedded server: client address (port 0: a free one)")
	logLevel := fs.String("log-level", "warn", "stderr log level of the NATS client: debug, info, warn or error")
	sec := addNATSSecurityFlags(fs)
	namespace := fs.String("namespace", "dynamo", "Dynamo namespace of the KV events")
	component := fs.String("component", "backend", "Dynamo component of the KV events")
	endpoint := fs.String("endpoint", dynamo.DefaultEndpoint, "Dynamo endpoint of the workers (scopes KV events from v1.4 on)")
	subject := fs.String("subject", "", "record this one subject instead of the released three")
	out := fs.String("out", "", "event log to append to (required)")
	truncate := fs.Bool("truncate", false, "empty --out first instead of appending")
	maxEvents := fs.Uint64("max-events", 0, "stop after this many events (0: no limit)")
	duration := fs.Duration("duration", 0, "stop after this long (0: no limit)")
	flushEvery := fs.Duration("flush-every", 200*time.Millisecond, "write buffered lines at least this often")
	progressEvery := fs.Duration("progress-every", 2*time.Second, "progress line on stderr this often (0: never)")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *out == "":
		return fmt.Errorf("record: --out is required: %w", errUsage)
	case *subject != "" && (set["namespace"] || set["component"] || set["endpoint"]):
		return fmt.Errorf("record: --subject excludes --namespace, --component and --endpoint: %w", errUsage)
	case *duration < 0:
		return fmt.Errorf("record: --duration must not be negative: %w", errUsage)
	case *flushEvery <= 0:
		return fmt.Errorf("record: --flush-every must be positive: %w", errUsage)
	}
	subs := []struct {
		subject string
		form    msgForm
	}{{dynamo.EventSubject(*namespace, *component), formEnvelope}, {dynamo.LegacyEventSubject(*namespace, *component), formLegacy},
		{dynamo.Scope{Namespace: *namespace, Component: *component, Endpoint: *endpoint}.Subject(dynamo.EventTopic), formEnvelope}}
	if *subject != "" {
		subs = subs[:1]
		subs[0].subject, subs[0].form = *subject, formDetect
	}
	none := ""
	nf := natsFlags{url: url, listen: listen, store: &none, prefix: &none, sec: sec}
	text := obs.LogText
	log, err := obsFlags{logFormat: &text, logLevel: logLevel}.logger(stderr)
	if err != nil {
		return err
	}
	f, cut, err := openEventLog(*out, *truncate)
	if err != nil {
		return err
	}
	defer f.Close()
	if cut > 0 {
		fmt.Fprintf(stderr, "goindex record: cut a partial last line (%d bytes) off %s\n", cut, *out)
	}
	nc, closeNATS, err := nf.connect("goindex record", log)
	if err != nil {
		return err
	}
	defer closeNATS()

	rec := newRecorder(f, *maxEvents)
	rep := recordReport{Command: "record", NATS: nc.ConnectedUrl(), Out: *out, CutBytes: cut}
	for _, s := range subs {
		form := s.form
		sub, err := nc.Subscribe(s.subject, func(m *nats.Msg) { rec.handle(form, m.Data) })
		if err != nil {
			return fmt.Errorf("record: subscribe %s: %w", s.subject, err)
		}
		if err := sub.SetPendingLimits(recordPendingMsgs, -1); err != nil {
			return fmt.Errorf("record: %s: %w", s.subject, err)
		}
		defer sub.Unsubscribe()
		rep.Subjects = append(rep.Subjects, s.subject)
	}
	// The subscriptions are registered on the server once Flush returns, so
	// a publisher that waits for the next line loses nothing.
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	fmt.Fprintf(stderr, "goindex record: recording %s from %s into %s\n", strings.Join(rep.Subjects, ", "), rep.NATS, *out)

	began := time.Now()
	var deadline <-chan time.Time
	if *duration > 0 {
		t := time.NewTimer(*duration)
		defer t.Stop()
		deadline = t.C
	}
	flushTick := time.NewTicker(*flushEvery)
	defer flushTick.Stop()
	var progress <-chan time.Time
	if *progressEvery > 0 {
		t := time.NewTicker(*progressEvery)
		defer t.Stop()
		progress = t.C
	}
	for rep.Stopped == "" {
		select {
		case <-rec.full:
			rep.Stopped = "max-events"
		case <-deadline:
			rep.Stopped = "duration"
		case <-ctx.Done():
			rep.Stopped = "signal"
		case <-flushTick.C:
			if err := rec.flush(); err != nil {
				return err
			}
		case <-progress:
			st := rec.stats()
			fmt.Fprintf(stderr, "goindex record: %d events (%d stored, %d removed, %d cleared), %d messages, %d malformed, %d duplicates, %d gaps, %.0f events/s\n",
				st.Events, st.Stored, st.Removed, st.Cleared, st.Messages, st.Malformed, st.Duplicates, st.Gaps,
				float64(st.Events)/time.Since(began).Seconds())
		}
	}
	rec.stop()
	if err := rec.flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	rep.Seconds = time.Since(began).Seconds()
	rep.recordStats = rec.stats()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(&rep)
	}
	st := &rep.recordStats
	fmt.Fprintf(stdout, "goindex record: %d events (%d stored, %d removed, %d cleared; %d non-device) appended to %s (%d bytes) in %.1f s, stopped by %s\n",
		st.Events, st.Stored, st.Removed, st.Cleared, st.NonDevice, rep.Out, st.Bytes, rep.Seconds, rep.Stopped)
	fmt.Fprintf(stdout, "  %d messages on %s: %d malformed, %d duplicates, %d gaps\n",
		st.Messages, strings.Join(rep.Subjects, ", "), st.Malformed, st.Duplicates, st.Gaps)
	return nil
}

// openEventLog opens path for appending whole lines: created if missing,
// emptied with truncate, and otherwise cut back to just after its last
// newline (a killed writer's partial line is not an event). It returns the
// number of bytes cut.
func openEventLog(path string, truncate bool) (*os.File, int64, error) {
	flags := os.O_RDWR | os.O_CREATE | os.O_APPEND
	if truncate {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("record: %w", err)
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err == nil {
		var keep int64
		if keep, err = lastLineEnd(f, end); err == nil && keep < end {
			err = f.Truncate(keep) // O_APPEND: later writes land at the new end
		}
		if err == nil {
			return f, end - keep, nil
		}
	}
	f.Close()
	return nil, 0, fmt.Errorf("record: %s: %w", path, err)
}

// lastLineEnd returns the offset just after the last newline among the
// first size bytes of f (0 when there is none).
func lastLineEnd(f *os.File, size int64) (int64, error) {
	buf := make([]byte, min(size, tailScanBytes))
	for hi := size; hi > 0; {
		lo := max(0, hi-int64(len(buf)))
		chunk := buf[:hi-lo]
		if _, err := f.ReadAt(chunk, lo); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return lo + int64(i) + 1, nil
		}
		hi = lo
	}
	return 0, nil
}
