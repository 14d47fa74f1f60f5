package relay

import (
	"errors"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

// maxPublishers bounds the duplicate and gap table: one entry per event
// publisher (a worker's runtime instance; a new one on every restart). 4096
// covers a 1,000-worker pool restarting three times within the live window;
// a flood of made-up publisher ids cannot grow the table past it.
const maxPublishers = 4096

// fullSweepEvery spaces the sweeps of a full publisher or worker table for
// silent entries: without it every message of a flood of new ids would pay
// a scan of all maxPublishers entries, O(flood × table) instead of
// O(flood) (TestHostile_PublisherFloodIsBoundedAndCounted floods 12× the
// table).
const fullSweepEvery = time.Second

// IntakeStats counts what a pool's event intake did with Dynamo messages.
type IntakeStats struct {
	Messages   uint64 // messages received on both event subjects
	Events     uint64 // primary-tier events handed to the producer
	NonPrimary uint64 // valid events of other storage tiers (ignored)
	Malformed  uint64 // messages that did not decode
	TooLarge   uint64 // messages over a decoder size limit (message bytes, blocks per event, …)
	WrongTopic uint64 // envelopes whose topic is not Dynamo's kv-events
	Duplicates uint64 // envelopes at or below their publisher's last sequence (dropped)
	Gaps       uint64 // envelopes missing between two of one publisher's sequences
	// Untracked counts envelopes of a new publisher dropped because
	// maxPublishers publishers were live within the live window.
	Untracked uint64
}

// publisherState is the last envelope sequence of one publisher and when
// it arrived.
type publisherState struct {
	seq  uint64
	seen time.Time
}

// intake decodes Dynamo messages into kv.Events. It runs on the pool's
// writer goroutine, so its state needs no lock.
type intake struct {
	last   map[uint64]publisherState // by publisher id
	window time.Duration             // a publisher silent this long may be forgotten
	swept  time.Time                 // last sweep of the full table
	stats  *IntakeStats
}

func newIntake(st *IntakeStats, window time.Duration) *intake {
	return &intake{last: map[uint64]publisherState{}, window: window, stats: st}
}

// envelope decodes an event-plane message (msgpack envelope, or the early
// JSON envelope), drops duplicates and other topics, counts gaps per
// publisher, and returns the primary-tier event.
func (in *intake) envelope(b []byte, now time.Time) (kv.Event, bool) {
	in.stats.Messages++
	env, ev, err := dynamo.DecodeMessage(b)
	if err != nil {
		in.decodeFailed(err)
		return kv.Event{}, false
	}
	if env.Topic != "" && env.Topic != dynamo.EventTopic {
		in.stats.WrongTopic++
		return kv.Event{}, false
	}
	last, seen := in.last[env.PublisherID]
	if seen {
		if env.Sequence <= last.seq {
			in.stats.Duplicates++
			return kv.Event{}, false
		}
		in.stats.Gaps += env.Sequence - last.seq - 1
	} else if !in.admit(now) {
		in.stats.Untracked++
		return kv.Event{}, false
	}
	in.last[env.PublisherID] = publisherState{seq: env.Sequence, seen: now}
	return in.event(&ev)
}

// admit makes room for one more publisher: when the table is full it
// forgets publishers silent for longer than the window (at most once per
// fullSweepEvery), and refuses when none is.
func (in *intake) admit(now time.Time) bool {
	if len(in.last) < maxPublishers {
		return true
	}
	if now.Sub(in.swept) < fullSweepEvery {
		return false
	}
	in.swept = now
	for id, p := range in.last {
		if now.Sub(p.seen) > in.window {
			delete(in.last, id)
		}
	}
	return len(in.last) < maxPublishers
}

// legacy decodes a G2025 JSON RouterEvent (no envelope, no sequence).
func (in *intake) legacy(b []byte, _ time.Time) (kv.Event, bool) {
	in.stats.Messages++
	ev, err := dynamo.DecodeJSON(b)
	if err != nil {
		in.decodeFailed(err)
		return kv.Event{}, false
	}
	return in.event(&ev)
}

// decodeFailed counts a message that did not decode: over a size limit, or
// malformed.
func (in *intake) decodeFailed(err error) {
	var le *dynamo.LimitError
	if errors.As(err, &le) {
		in.stats.TooLarge++
		return
	}
	in.stats.Malformed++
}

func (in *intake) event(ev *dynamo.RouterEvent) (kv.Event, bool) {
	if !ev.Primary() {
		in.stats.NonPrimary++
		return kv.Event{}, false
	}
	k, err := ev.KV()
	if err != nil {
		in.decodeFailed(err)
		return kv.Event{}, false
	}
	in.stats.Events++
	return k, true
}
