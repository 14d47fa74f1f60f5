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
// a flood of made-up publisher ids cannot grow the table past it (~2.5 MiB
// at ~600 bytes an entry, most of it the sequence window).
const maxPublishers = 4096

// fullSweepEvery spaces the sweeps of a full publisher or worker table for
// silent entries: without it every message of a flood of new ids would pay
// a scan of all maxPublishers entries, O(flood × table) instead of
// O(flood) (TestHostile_PublisherFloodIsBoundedAndCounted floods 12× the
// table).
const fullSweepEvery = time.Second

// IntakeStats counts what a pool's event intake did with Dynamo's and the
// engines' messages, from every transport.
type IntakeStats struct {
	Messages   uint64 // messages received on every event and load input
	Events     uint64 // primary-index events handed to the producer
	NonPrimary uint64 // valid events of other storage tiers or of cache owners (ignored)
	// Unsupported counts events Dynamo's rules refuse, skipped while the
	// rest of their message is taken: residency_domain explicitly null or
	// unknown, a cache owner's store or remove on the device tier, an
	// unknown storage tier (dynamo.RouterEvent.TargetsPrimary).
	Unsupported uint64
	Malformed   uint64 // messages that did not decode
	TooLarge    uint64 // messages over a decoder size limit (message bytes, blocks per event, …)
	WrongTopic  uint64 // envelopes whose topic is not the one of their input
	// Duplicates counts envelopes (and engine batches) whose sequence was
	// taken before, or lies too far below its publisher's highest one to
	// tell (windowSeqs); both are dropped.
	Duplicates uint64
	// Gaps counts the sequences a publisher skipped, as each later one
	// arrived (and engine batches a replay could not recover). It never
	// goes down: a skipped sequence that arrives later counts in Late too.
	Gaps uint64
	// Late counts envelopes taken below their publisher's highest sequence,
	// a slower broker's copy of one the others lost: each fills one counted
	// gap, so Late ≤ Gaps and Gaps − Late messages are missing (or still
	// on their way).
	Late uint64
	// Untracked counts envelopes of a new publisher dropped because
	// maxPublishers publishers were live within the live window.
	Untracked uint64
	// BadFrames counts ZMQ messages with the wrong part count, identity
	// parts that are not 8 bytes, or a bad frame header (dropped).
	BadFrames uint64
	// Identity counts ZMQ event-plane messages whose frames, envelope and
	// discovered publisher disagree (dropped, as Dynamo drops them).
	Identity uint64
	// LoadSamples counts worker load samples taken: Dynamo's ActiveLoad and
	// goindex's own WorkerLoad.
	LoadSamples uint64
	// EngineBatches counts vLLM/SGLang KVEventBatches taken; Replayed those
	// of them that came from a replay socket; Resyncs the sources whose
	// gap could not be replayed, whose workers were cleared instead.
	EngineBatches uint64
	Replayed      uint64
	Resyncs       uint64
}

// publisherState is the sequence window of one publisher and when its
// last envelope arrived.
type publisherState struct {
	win  seqWindow
	seen time.Time
}

// intake decodes Dynamo messages into kv.Events. It runs on the pool's
// writer goroutine, so its state needs no lock.
type intake struct {
	pubs   map[uint64]*publisherState // by publisher id
	window time.Duration              // a publisher silent this long may be forgotten
	swept  time.Time                  // last sweep of the full table
	stats  *IntakeStats
	// first, when set, is told of the first envelope taken from each
	// publisher (its id and sequence) before its events are appended: a
	// restored checkpoint's continuity test.
	first func(pub, seq uint64)
}

func newIntake(st *IntakeStats, window time.Duration) *intake {
	return &intake{pubs: map[uint64]*publisherState{}, window: window, stats: st}
}

// envelope decodes a NATS event-plane message (msgpack envelope, or the
// early JSON envelope) and takes it as sequenced does.
func (in *intake) envelope(b []byte, now time.Time, dst []kv.Event) ([]kv.Event, bool) {
	dst, _, ok := in.envelopeOf(b, now, dst)
	return dst, ok
}

// envelopeOf is envelope that also returns the publisher id of an
// envelope it took.
func (in *intake) envelopeOf(b []byte, now time.Time, dst []kv.Event) ([]kv.Event, uint64, bool) {
	in.stats.Messages++
	env, err := dynamo.DecodeEnvelope(b)
	if err != nil {
		in.decodeFailed(err)
		return dst, 0, false
	}
	dst, ok := in.sequenced(&env, now, dst)
	return dst, env.PublisherID, ok
}

// sequenced takes a decoded KV-event envelope from any transport: it drops
// other topics and undecodable payloads, drops duplicates and counts gaps
// and late fills per publisher (order), and appends the primary-index
// events of its payload (one event or a batch) to dst; an unsupported
// event is skipped alone. It reports whether the envelope was taken.
func (in *intake) sequenced(env *dynamo.Envelope, now time.Time, dst []kv.Event) ([]kv.Event, bool) {
	if env.Topic != "" && env.Topic != dynamo.EventTopic {
		in.stats.WrongTopic++
		return dst, false
	}
	evs, err := env.Events()
	if err != nil {
		in.decodeFailed(err)
		return dst, false
	}
	if p := in.pubs[env.PublisherID]; p != nil {
		if !in.order(&p.win, env.Sequence) {
			return dst, false
		}
		p.seen = now
	} else {
		if !in.admit(now) {
			in.stats.Untracked++
			return dst, false
		}
		in.pubs[env.PublisherID] = &publisherState{win: newSeqWindow(env.Sequence), seen: now}
		if in.first != nil {
			in.first(env.PublisherID, env.Sequence)
		}
	}
	for i := range evs {
		dst = in.event(&evs[i], dst)
	}
	return dst, true
}

// order takes seq into a stream's window and counts what it was: the
// sequences it skipped as Gaps, a late one as Late, a copy or a sequence
// too old to tell as a Duplicate. It reports whether seq is taken.
func (in *intake) order(w *seqWindow, seq uint64) bool {
	v, skipped := w.take(seq)
	switch v {
	case seqNext:
		in.stats.Gaps += skipped
	case seqLate:
		in.stats.Late++
	default:
		in.stats.Duplicates++
		return false
	}
	return true
}

// admit makes room for one more publisher: when the table is full it
// forgets publishers silent for longer than the window (at most once per
// fullSweepEvery), and refuses when none is.
func (in *intake) admit(now time.Time) bool {
	if len(in.pubs) < maxPublishers {
		return true
	}
	if now.Sub(in.swept) < fullSweepEvery {
		return false
	}
	in.swept = now
	for id, p := range in.pubs {
		if now.Sub(p.seen) > in.window {
			delete(in.pubs, id)
		}
	}
	return len(in.pubs) < maxPublishers
}

// legacy decodes a G2025 JSON RouterEvent (no envelope, no sequence).
func (in *intake) legacy(b []byte, _ time.Time, dst []kv.Event) ([]kv.Event, bool) {
	in.stats.Messages++
	ev, err := dynamo.DecodeJSON(b)
	if err != nil {
		in.decodeFailed(err)
		return dst, false
	}
	return in.event(&ev, dst), true
}

// decodeFailed counts a message that did not decode: over a size limit,
// bad ZMQ frames, or malformed.
func (in *intake) decodeFailed(err error) {
	var le *dynamo.LimitError
	switch {
	case errors.As(err, &le):
		in.stats.TooLarge++
	case errors.Is(err, dynamo.ErrFrameCount), errors.Is(err, dynamo.ErrFrameHeader):
		in.stats.BadFrames++
	case errors.Is(err, dynamo.ErrIdentity):
		in.stats.Identity++
	default:
		in.stats.Malformed++
	}
}

// event appends ev to dst as a kv.Event when it is for the primary index
// and valid, and counts it.
func (in *intake) event(ev *dynamo.RouterEvent, dst []kv.Event) []kv.Event {
	switch primary, err := ev.TargetsPrimary(); {
	case err != nil:
		in.stats.Unsupported++
		return dst
	case !primary:
		in.stats.NonPrimary++
		return dst
	}
	k, err := ev.KV()
	if err != nil {
		in.decodeFailed(err)
		return dst
	}
	in.stats.Events++
	return append(dst, k)
}
