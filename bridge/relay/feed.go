package relay

import (
	"context"

	"github.com/goindex/goindex/dynamo"
)

// Feed is a source of messages on a transport other than the relay's NATS
// connection: Dynamo's ZMQ event plane, or a vLLM/SGLang engine's own ZMQ
// publisher. The pool runs each of its feeds' Run while it serves; the
// feed hands it messages through deliver, which blocks while the pool's
// queue is full (ZMQ then queues and drops by its high-water mark, which
// shows up as a sequence gap) and returns false once the pool stops. The
// pool decodes, checks and counts every message on its writer goroutine,
// exactly as it does NATS messages. Run returns when ctx ends; an error
// before that is logged and the feed is not restarted.
type Feed interface {
	Run(ctx context.Context, deliver func(Message) bool) error
	// String names the feed in logs.
	String() string
}

// HealthReporter is a Feed that can say whether it works: one following
// discovery reports whether that has listed and still answers. Health is
// called from any goroutine (the pool's status); nil means working, an
// error says why not. A pool with a feed that does not work is not ready
// (PoolStatus.FeedErr).
type HealthReporter interface {
	Health() error
}

// MessageKind says what a Feed's Message is.
type MessageKind uint8

// The message kinds.
const (
	// KindPlane is one message of Dynamo's ZMQ event plane: four parts
	// (topic, publisher id, sequence, framed envelope), checked against
	// Source's scope and publisher id; its topic (kv-events or kv_metrics)
	// selects events or load.
	KindPlane MessageKind = iota + 1
	// KindEngine is one vLLM/SGLang KVEventBatch: three parts (topic,
	// sequence, msgpack batch), normalized with Source's worker, rank and
	// block size by Dynamo's rules.
	KindEngine
	// KindResync says Source's engine stream lost batches that no replay
	// could cover: the members it fed are cleared (their blocks would
	// otherwise include removed ones forever) and fill again from the
	// stream's next stores.
	KindResync
	// KindGone says Source's publisher is gone (its discovery record was
	// deleted or its lease expired): the members whose latest events came
	// from it are cleared; a restarted worker's new publisher keeps the
	// members it has already sent events for.
	KindGone
	// KindWorkerGone says the worker Worker is gone (its instance record
	// was deleted or its lease expired: how broker mode, whose publishers
	// register no channel, learns of a departure): every member of the
	// worker is cleared, whichever source fed it, and it leaves the load
	// reports at once.
	KindWorkerGone
	// KindWorkerPresent says the worker Worker is present: it counts as
	// live in the load reports, however long it is silent, with no load
	// sample at Config.WorkerCapacityBlocks. From a Source that reports
	// its going (a KV event source record, v1.4 on) it holds the worker
	// until that Source's KindGone, which clears nothing else; from
	// another (an instance record that appeared or was listed again:
	// broker mode's liveness, where a worker's publishers register
	// nothing whose going a feed could report) until the worker's
	// KindWorkerGone.
	KindWorkerPresent
	// KindPresent says Source, a NATS publisher whose discovery record a
	// feed follows (NATS and ReportsGone set), is present: its envelopes
	// arrive on NATS rather than through the feed, so this is how the pool
	// learns that their workers may be held live until the source's
	// KindGone. Other sources need no such message: their own messages
	// come with the Source.
	KindPresent
)

// Message is one message of a Feed.
type Message struct {
	Kind   MessageKind
	Frames [][]byte // the ZMQ parts (KindPlane, KindEngine)
	Source *Source
	// Replayed marks a KindEngine batch that came from the engine's replay
	// socket, filling a gap.
	Replayed bool
	// Lost is how many batches a KindResync's gap lost (counted as gaps).
	Lost uint64
	// Worker is the worker a KindWorkerGone or KindWorkerPresent names.
	Worker uint64
}

// Source is who a feed's messages come from. A feed keeps one Source per
// publisher for its whole life (the pool keys its per-source state by the
// pointer).
type Source struct {
	// Scope is the scope the event-plane publisher registered (KindPlane):
	// frame 0 may be its subject (broker mode).
	Scope dynamo.Scope
	// PublisherID is the discovered publisher id (KindPlane); 0 accepts any
	// (a static publisher list, broker mode).
	PublisherID uint64
	// Restarts marks a source of one publisher whose id is not known (a
	// static endpoint): a KV-event message with another publisher id than
	// the last one taken is a restart (Dynamo draws a new id per
	// incarnation), and the members the old incarnation fed are cleared
	// first, as for KindGone.
	Restarts bool
	// NamespaceLoad marks a publisher registered on namespace scope (older
	// releases' kv_metrics): its ActiveLoad counts only for workers the
	// pool already saw events from.
	NamespaceLoad bool
	// WorkerID, DpRank and BlockSize are the engine's worker, the rank it
	// was started with (a batch's data_parallel_rank overrides it) and
	// Dynamo's kv_block_size (KindEngine).
	WorkerID  uint64
	DpRank    uint32
	BlockSize int
	// NATS marks a publisher of the NATS event plane (DYN_EVENT_PLANE=nats)
	// whose discovery record a feed follows: it delivers nothing but a
	// KindGone when the record goes, which clears the members whose latest
	// events came in NATS envelopes of PublisherID.
	NATS bool
	// ReportsGone marks a source whose feed delivers a KindGone when it
	// goes: a discovered publisher (its record's going), a fixed one with
	// an expiry (its connection down that long), a NATS publisher whose
	// record the feed follows. While it is present, the workers it
	// delivered KV events or worker-sent ActiveLoad samples for count as
	// live in the load reports however long they are silent (Dynamo sends
	// ActiveLoad only when it changes, so an idle worker is a silent one);
	// after its KindGone they fall back to Config.LiveWindow. Sources
	// whose departure nobody reports (broker mode's, a fixed publisher
	// without expiry, an engine's) leave it false: their workers count
	// only while they send within the window, since nothing would ever
	// end a hold.
	ReportsGone bool
	// Name names the source in logs (an endpoint).
	Name string
}
