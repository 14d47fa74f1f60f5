package publish

import (
	"fmt"
	"math"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/snapenc"
)

// Sink carries messages from a publisher to its consumers (a leased
// per-consumer stream, a fan-out subject, or a snapshot store). A nil error
// means the message was delivered; an error means delivery is uncertain (the
// consumer may or may not have it). Send must not keep m or its slices after
// it returns.
type Sink interface {
	// Send delivers m.
	Send(m relayproto.Message) error
}

// Source is the producer a publisher drains; *ckf.Producer implements it.
// Both calls happen on the producer's single writer goroutine.
type Source interface {
	// AppendWords appends a copy of all n bucket words to dst.
	AppendWords(dst []uint64) []uint64
	// Drain is a publication boundary: it appends the net-changed images to
	// dst (none when nothing changed) and starts a new window.
	Drain(dst []relayproto.Image) []relayproto.Image
}

// FenceReason is why a publisher refuses to publish.
type FenceReason uint8

// Fence reasons (spec §5.2).
const (
	// FenceNone: not fenced.
	FenceNone FenceReason = iota
	// FenceSequenceExhausted: the sequence reached u64max; a new producer
	// generation is needed.
	FenceSequenceExhausted
	// FenceDeliveryUncertain: a send failed; a new lease (or a stored
	// fan-out snapshot) must follow.
	FenceDeliveryUncertain
	// FenceLeaseStalled: the lease was retired because its consumer stalled.
	FenceLeaseStalled
)

// String names r.
func (r FenceReason) String() string {
	return [...]string{"none", "sequence-exhausted", "delivery-uncertain", "lease-stalled"}[r]
}

func (r FenceReason) err() error {
	return [...]error{nil, errSequenceExhausted, errDeliveryUncertain, errLeaseStalled}[r]
}

// Status is a publisher's state and counters.
type Status struct {
	Identity     relayproto.ProducerIdentity
	Lease        relayproto.Lease // zero when none (always zero for fan-out)
	LastSequence uint64
	Fence        FenceReason
	Deltas       uint64 // delta frames delivered
	Dropped      uint64 // batches dropped without a lease (covered by the next snapshot)
	Absorbed     uint64 // barrier tails absorbed into a snapshot instead of being published
}

// Config configures a Publisher.
type Config struct {
	Identity relayproto.ProducerIdentity
	// StartSequence is the first lastSeq; optional; default: 0 (upstream).
	StartSequence uint64
	// Sink receives the deltas; required.
	Sink Sink
	// Source is drained at barriers; required.
	Source Source
}

func (c *Config) validate() error {
	if err := c.Identity.Format.Validate(); err != nil {
		return fmt.Errorf("%w: %w", errBadConfig, err)
	}
	if c.Sink == nil || c.Source == nil {
		return fmt.Errorf("%w: a publisher needs a sink and a source", errBadConfig)
	}
	return nil
}

// stream is the sequencing core both publishers share: identity, lastSeq,
// the fence, and sending batches as deltas.
type stream struct {
	identity relayproto.ProducerIdentity
	lastSeq  uint64
	fence    FenceReason
	sink     Sink
	source   Source
	tail     []relayproto.Image
	status   Status
}

func newStream(c *Config) stream {
	return stream{identity: c.Identity, lastSeq: c.StartSequence, sink: c.Sink, source: c.Source}
}

func (s *stream) fenced() error {
	if s.fence == FenceNone {
		return nil
	}
	return fmt.Errorf("%w: %w", errFenced, s.fence.err())
}

// send publishes images as deltas lastSeq → lastSeq+1 under lease, in
// pieces of at most MaxDeltaImages (each piece is its own sequence; readers
// already see multi-bucket deltas non-atomically, spec §5.4). If the
// sequence would overflow it fences SequenceExhausted without sending; if
// the sink fails it fences DeliveryUncertain and leaves lastSeq at the last
// delivered delta.
func (s *stream) send(lease relayproto.Lease, images []relayproto.Image) error {
	for len(images) > 0 {
		if s.lastSeq == math.MaxUint64 {
			s.fence = FenceSequenceExhausted
			return s.fenced()
		}
		part := images[:min(len(images), relayproto.MaxDeltaImages)]
		d := relayproto.Delta{Identity: s.identity, Lease: lease, Base: s.lastSeq, Sequence: s.lastSeq + 1, Images: part}
		if err := s.sink.Send(&d); err != nil {
			s.fence = FenceDeliveryUncertain
			return fmt.Errorf("%w: delta %d→%d: %w", errDeliveryUncertain, d.Base, d.Sequence, err)
		}
		s.lastSeq++
		s.status.Deltas++
		images = images[len(part):]
	}
	return nil
}

// barrier copies all words, then drains the pending tail (copying first
// means a failed copy cannot lose the tail).
func (s *stream) barrier() ([]uint64, []relayproto.Image) {
	words := s.source.AppendWords(make([]uint64, 0, s.identity.Format.Buckets))
	s.tail = s.source.Drain(s.tail[:0])
	return words, s.tail
}

func (s *stream) statusOf(lease relayproto.Lease) Status {
	st := s.status
	st.Identity, st.Lease, st.LastSequence, st.Fence = s.identity, lease, s.lastSeq, s.fence
	return st
}

// Publisher is the leased publisher of spec §5.2: it holds (identity,
// lease?, lastSeq, fence?) for one producer stream bound to one consumer
// lane. Draining its Source is destructive, so a Source feeds one Publisher;
// many consumers of one producer are a Fanout's job. It is not safe
// for concurrent use; call it from the producer's writer goroutine.
type Publisher struct {
	s     stream
	lease relayproto.Lease
	last  relayproto.Lease // the last lease installed, kept across retirements
}

// New returns a publisher with no lease at cfg.StartSequence.
func New(cfg Config) (*Publisher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Publisher{s: newStream(&cfg)}, nil
}

// Publish publishes one drained batch. A fenced publisher returns an error
// naming the fence (Status().Fence says which). Without a lease the batch
// is dropped without advancing (the next snapshot covers it). An empty
// batch is no batch. If lastSeq+1 would overflow, the publisher fences
// SequenceExhausted without sending. A sink failure fences
// DeliveryUncertain and leaves lastSeq unchanged. sent reports whether the
// batch went out.
func (p *Publisher) Publish(images []relayproto.Image) (sent bool, err error) {
	if err := p.s.fenced(); err != nil {
		return false, err
	}
	if len(images) == 0 {
		return false, nil
	}
	if p.lease.IsZero() {
		p.s.status.Dropped++
		return false, nil
	}
	if err := p.s.send(p.lease, images); err != nil {
		return false, err
	}
	return true, nil
}

// SnapshotAfterBarrier moves the stream to newLease and returns the whole-lane
// snapshot the new lease starts from (send it with Snapshot.Chunks). It
// copies all words, drains the tail, publishes a non-empty tail under the
// old lease if the stream is healthy (a failure there just fences it), and
// then installs newLease, clears the fence and tags the snapshot with
// lastSeq. A tail that was not published is absorbed into the snapshot. It
// refuses (changing nothing) when the sequence is exhausted, when newLease
// is zero, or when newLease is for the same consumer lane as the last lease
// installed (even if since retired) without a higher epoch: a delayed, stale
// reassignment.
func (p *Publisher) SnapshotAfterBarrier(newLease relayproto.Lease) (*relayproto.Snapshot, error) {
	if newLease.IsZero() {
		return nil, fmt.Errorf("%w: the new lease is zero", errNoLease)
	}
	if last := p.last; !last.IsZero() && last.ConsumerInstance == newLease.ConsumerInstance && last.Lane == newLease.Lane && newLease.Epoch <= last.Epoch {
		return nil, fmt.Errorf("%w: %v after %v", errStaleLease, newLease, last)
	}
	if p.s.lastSeq == math.MaxUint64 {
		return nil, fmt.Errorf("%w: %w: snapshot at %d", errFenced, errSequenceExhausted, p.s.lastSeq)
	}
	words, tail := p.s.barrier()
	// A failed send fences the old stream; the snapshot then absorbs the tail.
	if len(tail) > 0 && (p.s.fence != FenceNone || p.lease.IsZero() || p.s.send(p.lease, tail) != nil) {
		p.s.status.Absorbed++
	}
	p.lease, p.last, p.s.fence = newLease, newLease, FenceNone
	return &relayproto.Snapshot{Identity: p.s.identity, Lease: newLease, Sequence: p.s.lastSeq, Total: uint64(len(words)), Words: words}, nil
}

// DrainMarker returns the marker that follows the final delta: the lease and
// lastSeq. It fails when there is no lease.
func (p *Publisher) DrainMarker() (*relayproto.DrainMarker, error) {
	if p.lease.IsZero() {
		return nil, errNoLease
	}
	return &relayproto.DrainMarker{Identity: p.s.identity, Lease: p.lease, Expected: p.s.lastSeq}, nil
}

// Heartbeat returns an idle-stream heartbeat carrying lastSeq [EXT]. It
// fails when there is no lease.
func (p *Publisher) Heartbeat() (*relayproto.Heartbeat, error) {
	if p.lease.IsZero() {
		return nil, errNoLease
	}
	return &relayproto.Heartbeat{Identity: p.s.identity, Lease: p.lease, Sequence: p.s.lastSeq}, nil
}

// RetireLease drops the lease; later batches are dropped until the next
// snapshot.
func (p *Publisher) RetireLease() { p.lease = relayproto.Lease{} }

// RetireStalledLease drops the lease and fences LeaseStalled.
func (p *Publisher) RetireStalledLease() {
	p.lease = relayproto.Lease{}
	p.s.fence = FenceLeaseStalled
}

// Status returns the publisher's state and counters.
func (p *Publisher) Status() Status { return p.s.statusOf(p.lease) }

// FanoutConfig configures a Fanout.
type FanoutConfig struct {
	Config // Sink is the ordered delta log (heartbeats and drain markers belong there too)
	// Snapshots is the snapshot store cold consumers load from; required.
	Snapshots Sink
	// ChunkWords bounds the words per stored snapshot chunk; optional;
	// default: relayproto.MaxChunkWords.
	ChunkWords int
	// Encoding of stored snapshots; optional; default: snapenc.Compact.
	Encoding snapenc.Encoding
}

// Fanout [EXT] publishes one producer stream to many consumers over
// a broadcast transport with a durable log (NATS JetStream). It holds no
// lease: messages carry the identity and sequence, and consumers take a
// fresh local epoch per subscription. A batch that is not published does not
// advance the sequence, and the snapshot store must hold a newer snapshot
// before any later delta goes out. It is not safe for concurrent use.
type Fanout struct {
	s          stream
	snapshots  Sink
	chunkWords int
	encoding   snapenc.Encoding
}

// NewFanout returns a fan-out publisher at cfg.StartSequence.
func NewFanout(cfg FanoutConfig) (*Fanout, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Snapshots == nil {
		return nil, fmt.Errorf("%w: a fan-out publisher needs a snapshot store", errBadConfig)
	}
	if !cfg.Encoding.Valid() {
		return nil, fmt.Errorf("%w: unknown %v", errBadConfig, cfg.Encoding)
	}
	return &Fanout{s: newStream(&cfg.Config), snapshots: cfg.Snapshots, chunkWords: cfg.ChunkWords, encoding: cfg.Encoding}, nil
}

// Publish publishes one drained batch to the delta log, with the same fence,
// overflow and sink-failure rules as Publisher.Publish (there is no lease,
// so nothing is dropped).
func (p *Fanout) Publish(images []relayproto.Image) (sent bool, err error) {
	if err := p.s.fenced(); err != nil {
		return false, err
	}
	if len(images) == 0 {
		return false, nil
	}
	if err := p.s.send(relayproto.Lease{}, images); err != nil {
		return false, err
	}
	return true, nil
}

// uncertainBurn is how many sequence numbers a snapshot after a failed send
// skips: one for the batch whose delivery is uncertain, one for the tail the
// snapshot absorbs.
const uncertainBurn = 2

// Snapshot takes a barrier snapshot and stores it, chunk by chunk, in the
// snapshot store; it returns the whole-lane snapshot. A healthy stream first
// publishes the pending tail to the log, so the snapshot at lastSeq is
// exactly the log's state at lastSeq.
//
// After a failed send the log may or may not hold delta lastSeq+1, and a
// live consumer may have applied it; a snapshot at lastSeq followed by a
// different delta lastSeq+1 would then be ignored as stale and that
// consumer would silently diverge. So the snapshot is tagged
// lastSeq+2 instead (the uncertain batch's sequence and the absorbed tail's
// are burned): every live lane then sees a base mismatch on the next delta
// and re-subscribes from the store. This goes beyond spec §5.2, which has
// leases to make the same distinction.
//
// If storing fails the publisher stays fenced DeliveryUncertain, so no delta
// is sent before a newer snapshot is stored. It refuses when the sequence is
// exhausted (or would be by the burn), fencing SequenceExhausted.
func (p *Fanout) Snapshot() (*relayproto.Snapshot, error) {
	if p.s.lastSeq == math.MaxUint64 || (p.s.fence == FenceDeliveryUncertain && p.s.lastSeq > math.MaxUint64-uncertainBurn) {
		p.s.fence = FenceSequenceExhausted
		return nil, p.s.fenced()
	}
	words, tail := p.s.barrier()
	// A failed send fences DeliveryUncertain, handled below.
	if len(tail) > 0 && (p.s.fence != FenceNone || p.s.send(relayproto.Lease{}, tail) != nil) {
		p.s.status.Absorbed++
	}
	switch p.s.fence {
	case FenceSequenceExhausted:
		return nil, p.s.fenced()
	case FenceDeliveryUncertain:
		if p.s.lastSeq > math.MaxUint64-uncertainBurn {
			p.s.fence = FenceSequenceExhausted
			return nil, p.s.fenced()
		}
		p.s.lastSeq += uncertainBurn
	}
	snap := &relayproto.Snapshot{Identity: p.s.identity, Sequence: p.s.lastSeq, Total: uint64(len(words)), Words: words, Encoding: p.encoding}
	for c := range snap.Chunks(p.chunkWords) {
		if err := p.snapshots.Send(c); err != nil {
			p.s.fence = FenceDeliveryUncertain
			return nil, fmt.Errorf("%w: snapshot %d chunk at %d: %w", errDeliveryUncertain, c.Sequence, c.Offset, err)
		}
	}
	p.s.fence = FenceNone
	return snap, nil
}

// DrainMarker returns the marker for the delta log: the identity and
// lastSeq, with no lease.
func (p *Fanout) DrainMarker() *relayproto.DrainMarker {
	return &relayproto.DrainMarker{Identity: p.s.identity, Expected: p.s.lastSeq}
}

// Heartbeat returns an idle-stream heartbeat for the delta log carrying
// lastSeq.
func (p *Fanout) Heartbeat() *relayproto.Heartbeat {
	return &relayproto.Heartbeat{Identity: p.s.identity, Sequence: p.s.lastSeq}
}

// Status returns the publisher's state and counters.
func (p *Fanout) Status() Status { return p.s.statusOf(relayproto.Lease{}) }
