package relay

import (
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

// IntakeStats counts what a pool's event intake did with Dynamo messages.
type IntakeStats struct {
	Messages   uint64 // messages received on both event subjects
	Events     uint64 // primary-tier events handed to the producer
	NonPrimary uint64 // valid events of other storage tiers (ignored)
	Malformed  uint64 // messages that did not decode
	Duplicates uint64 // envelopes at or below their publisher's last sequence (dropped)
	Gaps       uint64 // envelopes missing between two of one publisher's sequences
}

// intake decodes Dynamo messages into kv.Events. It runs on the pool's
// writer goroutine, so its state needs no lock.
type intake struct {
	last  map[uint64]uint64 // publisher id → last envelope sequence
	stats *IntakeStats
}

func newIntake(st *IntakeStats) *intake { return &intake{last: map[uint64]uint64{}, stats: st} }

// envelope decodes an event-plane message (msgpack envelope, or the early
// JSON envelope), drops duplicates, counts gaps per publisher, and returns
// the primary-tier event.
func (in *intake) envelope(b []byte) (kv.Event, bool) {
	in.stats.Messages++
	env, ev, err := dynamo.DecodeMessage(b)
	if err != nil {
		in.stats.Malformed++
		return kv.Event{}, false
	}
	if last, seen := in.last[env.PublisherID]; seen {
		if env.Sequence <= last {
			in.stats.Duplicates++
			return kv.Event{}, false
		}
		in.stats.Gaps += env.Sequence - last - 1
	}
	in.last[env.PublisherID] = env.Sequence
	return in.event(&ev)
}

// legacy decodes a G2025 JSON RouterEvent (no envelope, no sequence).
func (in *intake) legacy(b []byte) (kv.Event, bool) {
	in.stats.Messages++
	ev, err := dynamo.DecodeJSON(b)
	if err != nil {
		in.stats.Malformed++
		return kv.Event{}, false
	}
	return in.event(&ev)
}

func (in *intake) event(ev *dynamo.RouterEvent) (kv.Event, bool) {
	if !ev.Primary() {
		in.stats.NonPrimary++
		return kv.Event{}, false
	}
	k, err := ev.KV()
	if err != nil {
		in.stats.Malformed++
		return kv.Event{}, false
	}
	in.stats.Events++
	return k, true
}
