package record

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

// FlushBytes is how much encoded output a Recorder buffers before it
// writes: whole lines only, so a killed run never leaves half an event.
const FlushBytes = 64 << 10

// Form is how a subject's messages are encoded.
type Form uint8

const (
	Envelope Form = iota // event-plane envelope (msgpack or early JSON)
	Legacy               // bare JSON RouterEvent (G2025)
	Detect               // either, told apart per message
)

// Stats counts what a Recorder did; its JSON form is part of record's
// summary.
type Stats struct {
	Messages   uint64 `json:"messages"`    // messages received while recording
	Events     uint64 `json:"events"`      // events written, one line each
	Stored     uint64 `json:"stored"`      // of Events: stored runs
	Removed    uint64 `json:"removed"`     // of Events: removals
	Cleared    uint64 `json:"cleared"`     // of Events: clears
	NonPrimary uint64 `json:"non_primary"` // of Events: not for the primary index (dynamo.RouterEvent.TargetsPrimary)
	Malformed  uint64 `json:"malformed"`   // messages that did not decode (skipped)
	Duplicates uint64 `json:"duplicates"`  // envelopes at or below their publisher's last sequence (skipped)
	Gaps       uint64 `json:"gaps"`        // envelope sequences never received
	Bytes      int64  `json:"bytes"`       // bytes appended to the log
}

// Recorder turns messages into log lines written to its writer. Every
// method takes its lock.
type Recorder struct {
	mu      sync.Mutex
	w       io.Writer
	buf     []byte
	last    map[uint64]uint64 // publisher id → last envelope sequence
	st      Stats
	max     uint64 // 0: no limit
	full    chan struct{}
	stopped bool
	err     error // sticky write error
}

// NewRecorder returns a Recorder writing to w that stops after maxEvents
// events (0: no limit).
func NewRecorder(w io.Writer, maxEvents uint64) *Recorder {
	return &Recorder{w: w, last: map[uint64]uint64{}, max: maxEvents, full: make(chan struct{})}
}

// Stopped is closed once the Recorder stops: its event limit reached, a
// write failed, or Stop.
func (r *Recorder) Stopped() <-chan struct{} { return r.full }

// Handle records one message of the given form; a stopped Recorder
// ignores it.
func (r *Recorder) Handle(form Form, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.st.Messages++
	r.take(r.decode(form, b))
}

// take records a message's events, or counts why it has none: a
// duplicate, or a malformed message (r.mu held).
func (r *Recorder) take(evs []dynamo.RouterEvent, err error) {
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
func (r *Recorder) record(ev *dynamo.RouterEvent) {
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
	if primary, err := ev.TargetsPrimary(); err != nil || !primary {
		r.st.NonPrimary++
	}
	if len(r.buf) >= FlushBytes {
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
func (r *Recorder) decode(form Form, b []byte) ([]dynamo.RouterEvent, error) {
	decodeJSON := func() ([]dynamo.RouterEvent, error) {
		ev, err := dynamo.DecodeJSON(b)
		if err != nil {
			return nil, err
		}
		return []dynamo.RouterEvent{ev}, nil
	}
	if form == Legacy {
		return decodeJSON()
	}
	env, evs, err := dynamo.DecodeMessage(b)
	if err != nil {
		if form == Detect && len(b) > 0 && b[0] == '{' {
			return decodeJSON()
		}
		return nil, err
	}
	if err := r.sequenced(&env); err != nil {
		return nil, err
	}
	return evs, nil
}

// sequenced applies the envelope sequence rules: errDuplicate for an
// envelope at or below its publisher's last sequence, gaps counted.
func (r *Recorder) sequenced(env *dynamo.Envelope) error {
	if last, seen := r.last[env.PublisherID]; seen {
		if env.Sequence <= last {
			r.st.Duplicates++
			return errDuplicate
		}
		r.st.Gaps += env.Sequence - last - 1
	}
	r.last[env.PublisherID] = env.Sequence
	return nil
}

// HandlePlane records one message of Dynamo's ZMQ event plane (its four
// parts: topic, publisher id, sequence, framed envelope) as Handle does an
// envelope; a load sample (kv_metrics) is not an event and is skipped
// uncounted. A stopped Recorder ignores it.
func (r *Recorder) HandlePlane(parts [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	pm, err := dynamo.DecodePlane(parts)
	if err == nil && dynamo.PlaneTopic(pm.Topic) != dynamo.EventTopic {
		return
	}
	r.st.Messages++
	var evs []dynamo.RouterEvent
	if err == nil {
		evs, err = pm.Envelope.Events()
	}
	if err == nil {
		err = r.sequenced(&pm.Envelope)
	}
	r.take(evs, err)
}

// flushLocked writes the buffered lines; a write error stops recording.
func (r *Recorder) flushLocked() {
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

func (r *Recorder) stopLocked() {
	if !r.stopped {
		r.stopped = true
		close(r.full)
	}
}

// Flush writes the buffered lines and returns the sticky write error.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked()
	return r.err
}

// Stop ends recording: later messages are ignored.
func (r *Recorder) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

// Stats returns the counts so far.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}
