package record

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/dynamo"
	"github.com/nats-io/nats.go"
)

// PendingMsgs bounds the messages a subscription queues ahead of the
// writer (nats.go's default, 512k, at up to 1 MiB each would be unbounded
// in practice); beyond it NATS drops and reports a slow consumer.
const PendingMsgs = 1 << 16

// Subject is one subject to record and the form of its messages.
type Subject struct {
	Subject string
	Form    Form
}

// Subjects are the event subjects of every released Dynamo for a
// namespace, component and endpoint: the v1.3-and-older envelope subject,
// the legacy JSON one and the v1.4+ endpoint-scoped one.
func Subjects(namespace, component, endpoint string) []Subject {
	return []Subject{
		{dynamo.EventSubject(namespace, component), Envelope},
		{dynamo.LegacyEventSubject(namespace, component), Legacy},
		{dynamo.Scope{Namespace: namespace, Component: component, Endpoint: endpoint}.Subject(dynamo.EventTopic), Envelope},
	}
}

// Config is what Run records and when it stops.
type Config struct {
	Subjects []Subject
	// Feeds are Dynamo's ZMQ event plane (bridge/zmqfeed's Plane: the
	// default event plane since Dynamo v1.3, where NATS carries no event);
	// their KindPlane messages are recorded as NATS envelopes are, and
	// their other messages ignored. Optional.
	Feeds []relay.Feed
	// Out names the log written to, for the line saying recording began
	// and the Report.
	Out       string
	MaxEvents uint64        // stop after this many events; 0: no limit
	Duration  time.Duration // stop after this long; 0: no limit
	// FlushEvery is how often buffered lines are written at least; it
	// must be positive.
	FlushEvery time.Duration
	// ProgressEvery is how often a progress line goes to Log; 0: never.
	ProgressEvery time.Duration
	// Log receives the line saying recording began and the progress
	// lines; nil: io.Discard.
	Log io.Writer
}

// Report is what a recording did; its JSON form is record's --json
// summary. Run fills every field but Command and CutBytes, which are its
// caller's.
type Report struct {
	Command  string   `json:"command"`
	NATS     string   `json:"nats"`
	Subjects []string `json:"subjects"`
	Out      string   `json:"out"`
	// CutBytes is the partial last line removed from an existing log.
	CutBytes int64   `json:"cut_bytes"`
	Seconds  float64 `json:"seconds"`
	// Stopped says why: "max-events", "duration" or "signal".
	Stopped string `json:"stopped"`
	Stats
}

// Run subscribes to cfg's subjects on nc, runs cfg's feeds, and records
// their messages into w until MaxEvents, Duration or ctx ends it (a cancelled ctx is a clean
// stop, "signal"). It returns a write error of w, or a subscription's.
func Run(ctx context.Context, nc *nats.Conn, w io.Writer, cfg Config) (*Report, error) {
	if cfg.FlushEvery <= 0 {
		return nil, fmt.Errorf("record: flush period %v must be positive", cfg.FlushEvery)
	}
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	rec := NewRecorder(w, cfg.MaxEvents)
	rep := &Report{NATS: nc.ConnectedUrl(), Out: cfg.Out}
	for _, s := range cfg.Subjects {
		form := s.Form
		sub, err := nc.Subscribe(s.Subject, func(m *nats.Msg) { rec.Handle(form, m.Data) })
		if err != nil {
			return nil, fmt.Errorf("record: subscribe %s: %w", s.Subject, err)
		}
		defer sub.Unsubscribe()
		if err := sub.SetPendingLimits(PendingMsgs, -1); err != nil {
			return nil, fmt.Errorf("record: %s: %w", s.Subject, err)
		}
		rep.Subjects = append(rep.Subjects, s.Subject)
	}
	// The subscriptions are registered on the server once Flush returns, so
	// a publisher that waits for the next line loses nothing.
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	fctx, stopFeeds := context.WithCancel(ctx)
	var feeds sync.WaitGroup
	defer func() { stopFeeds(); feeds.Wait() }()
	for _, f := range cfg.Feeds {
		feeds.Go(func() {
			err := f.Run(fctx, func(m relay.Message) bool {
				if m.Kind == relay.KindPlane {
					rec.HandlePlane(m.Frames)
				}
				return fctx.Err() == nil
			})
			if err != nil && fctx.Err() == nil {
				fmt.Fprintf(log, "goindex record: %s stopped: %v\n", f, err)
			}
		})
		rep.Subjects = append(rep.Subjects, f.String())
	}
	fmt.Fprintf(log, "goindex record: recording %s from %s into %s\n", strings.Join(rep.Subjects, ", "), rep.NATS, cfg.Out)
	began := time.Now()
	stopped, err := wait(ctx, rec, cfg, log, began)
	if err != nil {
		return nil, err
	}
	rec.Stop()
	if err := rec.Flush(); err != nil {
		return nil, err
	}
	rep.Stopped, rep.Seconds, rep.Stats = stopped, time.Since(began).Seconds(), rec.Stats()
	return rep, nil
}

// wait flushes rec every FlushEvery and prints progress until one of the
// stops, which it names.
func wait(ctx context.Context, rec *Recorder, cfg Config, log io.Writer, began time.Time) (string, error) {
	var deadline <-chan time.Time
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	flushTick := time.NewTicker(cfg.FlushEvery)
	defer flushTick.Stop()
	var progress <-chan time.Time
	if cfg.ProgressEvery > 0 {
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		progress = t.C
	}
	for {
		select {
		case <-rec.Stopped():
			return "max-events", nil
		case <-deadline:
			return "duration", nil
		case <-ctx.Done():
			return "signal", nil
		case <-flushTick.C:
			if err := rec.Flush(); err != nil {
				return "", err
			}
		case <-progress:
			st := rec.Stats()
			fmt.Fprintf(log, "goindex record: %d events (%d stored, %d removed, %d cleared), %d messages, %d malformed, %d duplicates, %d gaps, %.0f events/s\n",
				st.Events, st.Stored, st.Removed, st.Cleared, st.Messages, st.Malformed, st.Duplicates, st.Gaps,
				float64(st.Events)/time.Since(began).Seconds())
		}
	}
}

// WriteText writes the report as record's two summary lines.
func (rep *Report) WriteText(w io.Writer) error {
	st := &rep.Stats
	fmt.Fprintf(w, "goindex record: %d events (%d stored, %d removed, %d cleared; %d not for the primary index) appended to %s (%d bytes) in %.1f s, stopped by %s\n",
		st.Events, st.Stored, st.Removed, st.Cleared, st.NonPrimary, rep.Out, st.Bytes, rep.Seconds, rep.Stopped)
	_, err := fmt.Fprintf(w, "  %d messages on %s: %d malformed, %d duplicates, %d gaps\n",
		st.Messages, strings.Join(rep.Subjects, ", "), st.Malformed, st.Duplicates, st.Gaps)
	return err
}
