package shm

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/relayproto"
)

// LaneInfo is one lane's metadata as the consumer last wrote it. Each field
// is one shared word, written and read with sync/atomic; a record is not
// read atomically as a whole (a reader may see fields of two updates, as it
// may see buckets of two deltas, spec §5.4). Times are zero when unknown.
type LaneInfo struct {
	DC               uint64 // the lane's DC id (fixed at Create)
	State            uint8  // ingest.State of the lane (0 unclaimed … 4 faulted)
	Incarnation      uint64 // assigned producer identity: relay incarnation
	LayoutGeneration uint64 // assigned producer identity: layout generation
	Epoch            uint64 // the lane's current lease epoch (consumer-local)
	Installed        uint64 // installed sequence
	Latest           uint64 // highest sequence the producer is known to have published
	AppliedAt        time.Time
	RTT              time.Duration // last measured round trip to the DC's relay, µs resolution; 0: unmeasured
	RTTAt            time.Time
	Load             Load
	Faults           uint64 // times the lane entered FAULTED
	Snapshots        uint64 // snapshots installed
	Deltas           uint64 // deltas applied
}

// Load is the last load report of a lane's DC (relayproto.LoadReport's
// fields, in the same units).
type Load struct {
	At                  time.Time // sampling time on the relay's clock
	ReceivedAt          time.Time // arrival at the consumer
	ActiveBlocks        uint64
	QueuedPrefillTokens uint64
	ActiveDecodeBlocks  uint64
	LiveWorkers         uint64
	CapacityBlocks      uint64
	PrefillTokensPerMs  float64
	QueueTokensPerMs    float64
	DecodeBlocksPerMs   float64
	// StoredBlocks is the report's stored-blocks counter (0: unknown), and
	// Incarnation the producer incarnation that counted it: a reader
	// differences the counter between two reports of one incarnation.
	StoredBlocks uint64
	Incarnation  uint64
}

// LoadOf returns the lane record's form of load report r, received at
// receivedAt.
func LoadOf(r *relayproto.LoadReport, receivedAt time.Time) Load {
	return Load{At: time.Unix(0, int64(r.TimestampUnixNano)), ReceivedAt: receivedAt,
		ActiveBlocks: r.ActiveBlocks, QueuedPrefillTokens: r.QueuedPrefillTokens, ActiveDecodeBlocks: r.ActiveDecodeBlocks,
		LiveWorkers: uint64(r.LiveWorkers), CapacityBlocks: r.CapacityBlocks, PrefillTokensPerMs: r.PrefillTokensPerMs,
		QueueTokensPerMs: r.QueueTokensPerMs, DecodeBlocksPerMs: r.DecodeBlocksPerMs,
		StoredBlocks: r.StoredBlocks, Incarnation: r.Identity.Incarnation}
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

func fromUnixNano(v uint64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(v))
}

// LaneState is the protocol part of a lane record, written by the lane's
// ingestor.
type LaneState struct {
	State            uint8
	Incarnation      uint64
	LayoutGeneration uint64
	Epoch            uint64
	Installed        uint64
	Latest           uint64
	AppliedAt        time.Time
	Faults           uint64
	Snapshots        uint64
	Deltas           uint64
}

func store(w []uint64, i int, v uint64) { atomic.StoreUint64(&w[i], v) }

// storeState writes the protocol words of the record w.
func storeState(w []uint64, s *LaneState) {
	store(w, lwState, uint64(s.State))
	store(w, lwIncarnation, s.Incarnation)
	store(w, lwLayoutGeneration, s.LayoutGeneration)
	store(w, lwEpoch, s.Epoch)
	store(w, lwInstalled, s.Installed)
	store(w, lwLatest, s.Latest)
	store(w, lwAppliedAt, unixNano(s.AppliedAt))
	store(w, lwFaults, s.Faults)
	store(w, lwSnapshots, s.Snapshots)
	store(w, lwDeltas, s.Deltas)
}

// storeRTT writes the RTT words of the record w.
func storeRTT(w []uint64, rtt time.Duration, at time.Time) {
	store(w, lwRTTMicros, uint64(rtt/time.Microsecond))
	store(w, lwRTTAt, unixNano(at))
}

// storeLoad writes the load words of the record w.
func storeLoad(w []uint64, l *Load) {
	store(w, lwLoadAt, unixNano(l.At))
	store(w, lwLoadReceivedAt, unixNano(l.ReceivedAt))
	store(w, lwActiveBlocks, l.ActiveBlocks)
	store(w, lwQueuedPrefillTokens, l.QueuedPrefillTokens)
	store(w, lwActiveDecodeBlocks, l.ActiveDecodeBlocks)
	store(w, lwLiveWorkers, l.LiveWorkers)
	store(w, lwCapacityBlocks, l.CapacityBlocks)
	store(w, lwPrefillTokensPerMs, math.Float64bits(l.PrefillTokensPerMs))
	store(w, lwQueueTokensPerMs, math.Float64bits(l.QueueTokensPerMs))
	store(w, lwDecodeBlocksPerMs, math.Float64bits(l.DecodeBlocksPerMs))
	store(w, lwStoredIncarnation, l.Incarnation)
	store(w, lwStoredBlocks, l.StoredBlocks)
}

// loadLane reads the record w.
func loadLane(w []uint64) LaneInfo {
	ld := func(i int) uint64 { return atomic.LoadUint64(&w[i]) }
	return LaneInfo{
		DC:               ld(lwDC),
		State:            uint8(ld(lwState)),
		Incarnation:      ld(lwIncarnation),
		LayoutGeneration: ld(lwLayoutGeneration),
		Epoch:            ld(lwEpoch),
		Installed:        ld(lwInstalled),
		Latest:           ld(lwLatest),
		AppliedAt:        fromUnixNano(ld(lwAppliedAt)),
		RTT:              time.Duration(ld(lwRTTMicros)) * time.Microsecond,
		RTTAt:            fromUnixNano(ld(lwRTTAt)),
		Load: Load{
			At:                  fromUnixNano(ld(lwLoadAt)),
			ReceivedAt:          fromUnixNano(ld(lwLoadReceivedAt)),
			ActiveBlocks:        ld(lwActiveBlocks),
			QueuedPrefillTokens: ld(lwQueuedPrefillTokens),
			ActiveDecodeBlocks:  ld(lwActiveDecodeBlocks),
			LiveWorkers:         ld(lwLiveWorkers),
			CapacityBlocks:      ld(lwCapacityBlocks),
			PrefillTokensPerMs:  math.Float64frombits(ld(lwPrefillTokensPerMs)),
			QueueTokensPerMs:    math.Float64frombits(ld(lwQueueTokensPerMs)),
			DecodeBlocksPerMs:   math.Float64frombits(ld(lwDecodeBlocksPerMs)),
			Incarnation:         ld(lwStoredIncarnation),
			StoredBlocks:        ld(lwStoredBlocks),
		},
		Faults:    ld(lwFaults),
		Snapshots: ld(lwSnapshots),
		Deltas:    ld(lwDeltas),
	}
}
