package zmqfeed

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	zmq "github.com/pebbe/zmq4"
)

// DefaultReplayTimeout bounds one replay exchange with an engine.
const DefaultReplayTimeout = 2 * time.Second

// DefaultMaxReplayBatches bounds the batches one replay may bring: vLLM
// buffers 10,000 by default (buffer_steps); a larger gap is a resync
// without asking, so a hostile sequence jump cannot make the feed hold an
// unbounded replay.
const DefaultMaxReplayBatches = 16384

// endOfReplay is the sequence part of the message that ends a replay: -1
// as a signed 8-byte big-endian integer (vLLM's END_SEQ).
const endOfReplay = ^uint64(0)

// EngineConfig configures an Engine feed.
type EngineConfig struct {
	// Endpoint is the engine's KV-event PUB socket (vLLM's
	// kv_events_config endpoint, by default port 5557); required.
	Endpoint string
	// Replay is the engine's replay ROUTER socket (vLLM's replay_endpoint);
	// optional: without it every gap is a resync.
	Replay string
	// Topic is the subscription prefix (vLLM's topic, "" by default);
	// optional.
	Topic string
	// WorkerID is the worker the engine's events belong to; DpRank the rank
	// it serves unless a batch names its data_parallel_rank; optional;
	// defaults: 0.
	WorkerID uint64
	DpRank   uint32
	// BlockSize is the engine's KV block size in tokens; required.
	BlockSize int
	// ReplayTimeout bounds one replay; optional; default: 2s.
	ReplayTimeout time.Duration
	// MaxReplayBatches bounds the gap a replay is asked to cover; optional;
	// default: DefaultMaxReplayBatches.
	MaxReplayBatches uint64
	// MaxMessageBytes and RecvHWM bound the sockets as in PlaneConfig;
	// optional.
	MaxMessageBytes int64
	RecvHWM         int
	// Logger receives gap and replay logs; optional; default: discard.
	Logger *slog.Logger
}

// Engine is a relay.Feed of one vLLM or SGLang engine's own KV-event
// publisher, without Dynamo (as llm-d reads it): 3-part messages (topic,
// 8-byte big-endian sequence, msgpack KVEventBatch), normalized by the
// relay with Dynamo's rules. A gap in the sequence is asked of the replay
// socket (request: an empty part and the first missing sequence; replies:
// an empty part, the sequence and the batch each, then the end marker
// with sequence -1 and an empty batch). When the replay cannot cover the
// gap — no replay socket, no answer within ReplayTimeout, or batches the
// engine no longer buffers — the relay is told to resync: the members the
// engine fed are cleared and fill again from its next stores, so no
// removed block stays. A sequence that goes back means the engine
// restarted (its cache is gone): a resync too, and so is a new connection
// (the stream names no incarnation, and a restarted engine's sequence can
// outrun the last one seen). A feed that joins late, or resyncs, asks the
// replay socket for everything from sequence 0 the engine still holds.
type Engine struct {
	cfg EngineConfig
	src *relay.Source
}

// NewEngine checks cfg and returns the feed; it does no I/O.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if err := checkEndpoint(cfg.Endpoint); err != nil {
		return nil, err
	}
	if cfg.Replay != "" {
		if err := checkEndpoint(cfg.Replay); err != nil {
			return nil, err
		}
	}
	if cfg.BlockSize <= 0 {
		return nil, fmt.Errorf("%w: the engine's block size is required", ErrBadConfig)
	}
	if cfg.ReplayTimeout <= 0 {
		cfg.ReplayTimeout = DefaultReplayTimeout
	}
	if cfg.MaxReplayBatches == 0 {
		cfg.MaxReplayBatches = DefaultMaxReplayBatches
	}
	cfg.MaxMessageBytes, cfg.RecvHWM, cfg.Logger = socketDefaults(cfg.MaxMessageBytes, cfg.RecvHWM, cfg.Logger)
	src := &relay.Source{WorkerID: cfg.WorkerID, DpRank: cfg.DpRank, BlockSize: cfg.BlockSize, Name: cfg.Endpoint}
	return &Engine{cfg: cfg, src: src}, nil
}

// String names the feed in logs.
func (e *Engine) String() string { return "engine zmq publisher " + e.cfg.Endpoint }

// engineRun is one Run's state: the sockets, the last sequence delivered.
type engineRun struct {
	e       *Engine
	sub     *socket
	seen    uint64  // sub.connects when the last message was taken
	replay  *socket // nil without a replay endpoint
	deliver func(relay.Message) bool
	last    uint64
	hasLast bool
	// resubscribed marks sockets made again after a failed read loop: the
	// next message is taken as after a reconnection.
	resubscribed bool
}

// Run subscribes to the engine until ctx ends. Its sockets are made again
// after a failure (subscribe), and what was known of the engine is then
// dropped and replayed, as after a reconnection.
func (e *Engine) Run(ctx context.Context, deliver func(relay.Message) bool) error {
	zctx, err := zmq.NewContext()
	if err != nil {
		return fmt.Errorf("zmq context: %w", err)
	}
	defer func() { _ = zctx.Term() }()
	run := &engineRun{e: e, deliver: deliver}
	defer run.closeReplay()
	subscribe(ctx, e.cfg.Logger.With("engine", e.cfg.Endpoint), func() (*socket, error) { return run.open(zctx) }, run.live)
	return nil
}

// open makes the run's sockets, replacing the replay socket of an earlier
// attempt, and returns the SUB socket for subscribe to read (and close).
func (r *engineRun) open(zctx *zmq.Context) (*socket, error) {
	r.closeReplay()
	cfg := r.e.cfg
	sub, err := newSocket(zctx, socketConfig{kind: zmq.SUB, endpoints: []string{cfg.Endpoint}, subscribe: []string{cfg.Topic},
		maxMessageBytes: cfg.MaxMessageBytes, recvHWM: cfg.RecvHWM})
	if err != nil {
		return nil, err
	}
	if cfg.Replay != "" {
		if r.replay, err = newSocket(zctx, socketConfig{kind: zmq.DEALER, endpoints: []string{cfg.Replay},
			maxMessageBytes: cfg.MaxMessageBytes, recvHWM: cfg.RecvHWM}); err != nil {
			sub.close()
			return nil, err
		}
	}
	r.use(sub)
	return sub, nil
}

// use makes sub the run's SUB socket. One made after another (its read
// loop failed) has the next message taken as after a reconnection.
func (r *engineRun) use(sub *socket) {
	r.resubscribed = r.resubscribed || r.sub != nil
	r.sub, r.seen = sub, 0
}

// closeReplay closes the replay socket, if any.
func (r *engineRun) closeReplay() {
	if r.replay != nil {
		r.replay.close()
		r.replay = nil
	}
}

// live takes one message of the PUB socket: it covers a gap before it
// (replay or resync) and delivers it.
func (r *engineRun) live(parts [][]byte) bool {
	if len(parts) != 3 || len(parts[1]) != 8 {
		return r.deliver(relay.Message{Kind: relay.KindEngine, Frames: parts, Source: r.e.src}) // the relay counts it
	}
	seq := binary.BigEndian.Uint64(parts[1])
	log := r.e.cfg.Logger.With("engine", r.e.cfg.Endpoint)
	reconnected := r.resubscribed || r.sub.connects > r.seen && r.seen > 0
	r.seen, r.resubscribed = r.sub.connects, false
	switch {
	case r.hasLast && reconnected:
		// vLLM's stream names no incarnation: after a new connection the
		// engine may have restarted (its sequence starting over, and a
		// restart can outrun the last sequence seen), so what was known
		// is dropped and the engine's buffer taken from the start.
		log.Warn("engine reconnected; resync", "last", r.last, "sequence", seq)
		if !r.resync(0) {
			return false
		}
	case r.hasLast && seq <= r.last:
		log.Warn("engine sequence went back: a restart; resync", "last", r.last, "sequence", seq)
		if !r.resync(0) {
			return false
		}
	}
	switch {
	case !r.hasLast && seq > 0 && r.replay != nil:
		// Joined late, or the engine restarted: take what it still buffers.
		if !r.fill(parts[0], 0, seq, false) {
			return false
		}
	case r.hasLast && seq > r.last+1:
		log.Warn("engine sequence gap", "last", r.last, "sequence", seq)
		if !r.fill(parts[0], r.last+1, seq, true) {
			return false
		}
	}
	r.last, r.hasLast = seq, true
	return r.deliver(relay.Message{Kind: relay.KindEngine, Frames: parts, Source: r.e.src})
}

// resync tells the relay the engine's stream cannot be trusted up to
// here, lost batches (0: unknown) having gone missing.
func (r *engineRun) resync(lost uint64) bool {
	r.hasLast = false
	return r.deliver(relay.Message{Kind: relay.KindResync, Source: r.e.src, Lost: lost})
}

// fill asks the replay socket for sequences [from, until) and delivers
// them; when they are not all there and the gap matters (must), it
// resyncs first. It reports false once the relay stopped.
func (r *engineRun) fill(topic []byte, from, until uint64, must bool) bool {
	batches, err := r.replayRange(from, until)
	covered := err == nil && len(batches) > 0 && batches[0].seq == from && batches[len(batches)-1].seq == until-1
	if !covered && must {
		r.e.cfg.Logger.Warn("engine gap not replayed; resync", "engine", r.e.cfg.Endpoint, "from", from, "until", until, "err", err)
		if !r.resync(until - from - uint64(len(batches))) {
			return false
		}
	}
	for _, b := range batches {
		if r.hasLast && b.seq <= r.last {
			continue
		}
		if !r.deliver(relay.Message{Kind: relay.KindEngine, Frames: [][]byte{topic, b.seqPart, b.payload}, Source: r.e.src, Replayed: true}) {
			return false
		}
		r.last, r.hasLast = b.seq, true
	}
	return true
}

// replayed is one batch of a replay.
type replayed struct {
	seq     uint64
	seqPart []byte
	payload []byte
}

// errNoReplay reports a replay the engine did not answer in time.
var errNoReplay = errors.New("engine replay: no answer")

// replayRange runs one replay exchange and returns the batches of [from,
// until) in sequence order, consecutive from the first one the engine
// still had.
func (r *engineRun) replayRange(from, until uint64) ([]replayed, error) {
	if r.replay == nil {
		return nil, errors.New("engine replay: no replay endpoint")
	}
	if until-from > r.e.cfg.MaxReplayBatches {
		// Too far back to ask for all of it: keep the newest part (a late
		// join or a restart) or resync (a gap; fill sees it uncovered).
		from = until - r.e.cfg.MaxReplayBatches
	}
	s := r.replay.s
	for { // drop what a timed-out earlier exchange left
		if _, err := s.RecvMessageBytes(zmq.DONTWAIT); err != nil {
			break
		}
	}
	start := binary.BigEndian.AppendUint64(nil, from)
	if _, err := s.SendMessageDontwait([]byte{}, start); err != nil {
		return nil, fmt.Errorf("engine replay request: %w", err)
	}
	deadline := time.Now().Add(r.e.cfg.ReplayTimeout)
	var out []replayed
	for time.Now().Before(deadline) {
		mon, ready, err := r.replay.pending()
		if err != nil {
			return out, fmt.Errorf("engine replay: %w", err)
		}
		if mon {
			_, _, _, _ = r.replay.mon.RecvEvent(0) // its connection's state does not matter here
		}
		if !ready {
			if !mon {
				if err := r.replay.w.wait(context.Background(), deadline, r.replay.readable); err != nil {
					return out, fmt.Errorf("engine replay: %w", err)
				}
			}
			continue
		}
		parts, err := recv(s)
		if err != nil {
			return out, err
		}
		if len(parts) != 3 || len(parts[0]) != 0 || len(parts[1]) != 8 {
			return out, fmt.Errorf("engine replay: reply of %d parts, want 3", len(parts))
		}
		seq := binary.BigEndian.Uint64(parts[1])
		if seq == endOfReplay && len(parts[2]) == 0 {
			return out, nil
		}
		if seq < from || seq >= until {
			continue
		}
		if len(out) > 0 && seq != out[len(out)-1].seq+1 {
			return out, fmt.Errorf("engine replay: sequence %d after %d", seq, out[len(out)-1].seq)
		}
		out = append(out, replayed{seq: seq, seqPart: parts[1], payload: parts[2]})
	}
	return out, errNoReplay
}
