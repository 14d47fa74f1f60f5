package relayproto

import (
	"iter"
	"strconv"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto/snapenc"
)

// Message size limits. Publishers split what is larger; the frame codec
// refuses it on both ends (goindex/relayproto/wire), before allocating.
const (
	// MaxDeltaImages bounds the images of one Delta: 6 MiB of images
	// leaves room for the rest of a frame under the 8 MiB frame limit.
	MaxDeltaImages = 1 << 19
	// MaxChunkWords bounds the words of one Snapshot chunk: 4 MiB dense, as
	// upstream's chunks, and at most 4.25 MiB compact (every slot full).
	MaxChunkWords = 1 << 19
)

// Image is one absolute bucket image of a delta: the bucket index and its
// packed word at drain time (a final removal publishes a 0 word). Applying
// an image twice is harmless. It is the producer's own type, so a drained
// batch is published without copying.
type Image = ckf.Image

// FrameType says which message a frame carries.
type FrameType uint8

// Frame types on the wire (header byte 5).
const (
	FrameSnapshot    FrameType = 1
	FrameDelta       FrameType = 2
	FrameDrainMarker FrameType = 3
	FrameHeartbeat   FrameType = 4
	FrameLoadReport  FrameType = 5
)

var frameTypeNames = [...]string{FrameSnapshot: "snapshot", FrameDelta: "delta", FrameDrainMarker: "drain-marker", FrameHeartbeat: "heartbeat", FrameLoadReport: "load-report"}

// String names t.
func (t FrameType) String() string {
	if int(t) < len(frameTypeNames) && frameTypeNames[t] != "" {
		return frameTypeNames[t]
	}
	return "frame-type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// Message is one protocol message: *Snapshot, *Delta, *DrainMarker,
// *Heartbeat or *LoadReport.
type Message interface {
	// Type returns the message's frame type.
	Type() FrameType
}

// Snapshot is one chunk of a barrier snapshot (spec §5.1): the words of
// buckets [Offset, Offset+len(Words)) of a snapshot of Total words (n for a
// valid one) whose terminal sequence is Sequence (the last batch reflected
// in the words; continuation starts at Sequence+1). A whole-lane snapshot is
// the chunk at Offset 0 with all Total words; Chunks splits it for the wire.
// Lease is zero on fan-out transports, where the consumer stamps its local
// subscription lease on delivery.
type Snapshot struct {
	Identity ProducerIdentity
	Lease    Lease
	Sequence uint64
	Total    uint64 // words in the whole snapshot, across all chunks
	Offset   uint64
	Words    []uint64
	Encoding snapenc.Encoding // wire encoding; optional; default: snapenc.Compact
}

// Type returns FrameSnapshot.
func (*Snapshot) Type() FrameType { return FrameSnapshot }

// Chunks yields s split into chunks of at most maxWords words (MaxChunkWords
// when maxWords is ≤ 0 or larger), in order and contiguous. The chunks share
// s.Words.
func (s *Snapshot) Chunks(maxWords int) iter.Seq[*Snapshot] {
	if maxWords <= 0 || maxWords > MaxChunkWords {
		maxWords = MaxChunkWords
	}
	return func(yield func(*Snapshot) bool) {
		for start := 0; start < len(s.Words) || start == 0; start += maxWords {
			end := min(start+maxWords, len(s.Words))
			c := *s
			c.Offset = s.Offset + uint64(start)
			c.Words = s.Words[start:end]
			if !yield(&c) || end == len(s.Words) {
				return
			}
		}
	}
}

// Delta is one published batch (spec §5.1): absolute images that move the
// lane from sequence Base to Sequence = Base+1. Images are non-empty, their
// indices are < n and unique; producers send them in ascending bucket order
// but consumers do not depend on it.
type Delta struct {
	Identity ProducerIdentity
	Lease    Lease
	Base     uint64
	Sequence uint64
	Images   []Image
}

// Type returns FrameDelta.
func (*Delta) Type() FrameType { return FrameDelta }

// DrainMarker follows the final delta of a stream and names the sequence the
// lane must have installed (spec §5.1), exposing a lost final delta.
// [EXT] It also carries the identity, which fan-out lanes need because their
// lease is consumer-local.
type DrainMarker struct {
	Identity ProducerIdentity
	Lease    Lease
	Expected uint64
}

// Type returns FrameDrainMarker.
func (*DrainMarker) Type() FrameType { return FrameDrainMarker }

// Heartbeat [EXT] is sent on idle streams with the publisher's last
// sequence; it does not advance the sequence.
type Heartbeat struct {
	Identity ProducerIdentity
	Lease    Lease
	Sequence uint64
}

// Type returns FrameHeartbeat.
func (*Heartbeat) Type() FrameType { return FrameHeartbeat }

// LoadReport is a DC's periodic load sample for the TTFT cost model
// (score: RTT + queue wait + prefill time). Counts are DC-wide sums over the
// pool's live workers at TimestampUnixNano; rates are measured over the last
// IntervalMs. A rate of 0 means "not measured" (the scorer then uses its
// default), never "infinitely slow". Receivers treat a report older than a
// few intervals as stale and exclude the DC rather than read it as zero.
type LoadReport struct {
	Identity          ProducerIdentity
	Sequence          uint64 // the CKF stream's last sequence when sampled
	TimestampUnixNano uint64 // sampling time, ns since the Unix epoch (relay clock)
	IntervalMs        uint32 // report period and rate window, ms

	ActiveBlocks        uint64 // KV blocks the relay tracks as cached on the pool's workers
	QueuedPrefillTokens uint64 // prompt tokens waiting for or in prefill (score.Candidate.ActivePrefillTokens)
	ActiveDecodeBlocks  uint64 // KV blocks held by running decodes (score.Candidate.ActiveDecodeBlocks)
	LiveWorkers         uint32 // workers that published an event or load sample within IntervalMs
	CapacityBlocks      uint64 // total KV capacity of the live workers, in blocks; 0: unknown
	// StoredBlocks counts the blocks the pool's workers reported stored
	// since the producer's incarnation began (every block of every
	// device-tier store event, re-stores of cached blocks included): a
	// monotonic counter whose increments between two reports of one
	// incarnation are the DC's inserts (score.InsertRate). 0: unknown
	// (older relays, or nothing stored yet); a receiver starts over when
	// the incarnation changes or the counter goes down.
	StoredBlocks uint64

	PrefillTokensPerMs float64 // one request's prefill speed on one worker, tokens/ms
	QueueTokensPerMs   float64 // rate the whole DC drains queued prefill tokens, tokens/ms
	DecodeBlocksPerMs  float64 // rate running decodes release KV blocks DC-wide, blocks/ms
}

// Type returns FrameLoadReport.
func (*LoadReport) Type() FrameType { return FrameLoadReport }

// Supersedes reports whether r replaces kept as a DC's last load report:
// r was sampled later, or it is the same sample carrying the StoredBlocks
// counter kept lacks (a relay publishes each sample in both layouts, on
// two subjects that arrive in either order). A repeat of kept does not.
func (r *LoadReport) Supersedes(kept *LoadReport) bool {
	if r.TimestampUnixNano != kept.TimestampUnixNano {
		return r.TimestampUnixNano > kept.TimestampUnixNano
	}
	return r.StoredBlocks != 0 && kept.StoredBlocks == 0
}
