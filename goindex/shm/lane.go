package shm

import (
	"math"
	"sync/atomic"
	"time"
)

// LaneInfo is one lane's metadata as the consumer last wrote it. Each field
// is one shared word, written and read with sync/atomic; a record is not
// read atomically as a whole (a reader may see fields of two updates, as it
// may see buckets of two deltas, spec §5.4). Times are zero when unknown.
type LaneInfo struct {
	DC               uint64 // the lane's DC id (fixed at Create)
	State            uint8  // relayproto.State of the lane (0 unclaimed … 4 faulted)
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

// storeLane writes every field of info but DC into the record w.
func storeLane(w []uint64, info *LaneInfo) {
	st := func(i int, v uint64) { atomic.StoreUint64(&w[i], v) }
	st(lwState, uint64(info.State))
	st(lwIncarnation, info.Incarnation)
	st(lwLayoutGeneration, info.LayoutGeneration)
	st(lwEpoch, info.Epoch)
	st(lwInstalled, info.Installed)
	st(lwLatest, info.Latest)
	st(lwAppliedAt, unixNano(info.AppliedAt))
	st(lwRTTMicros, uint64(info.RTT/time.Microsecond))
	st(lwRTTAt, unixNano(info.RTTAt))
	st(lwLoadAt, unixNano(info.Load.At))
	st(lwLoadReceivedAt, unixNano(info.Load.ReceivedAt))
	st(lwActiveBlocks, info.Load.ActiveBlocks)
	st(lwQueuedPrefillTokens, info.Load.QueuedPrefillTokens)
	st(lwActiveDecodeBlocks, info.Load.ActiveDecodeBlocks)
	st(lwLiveWorkers, info.Load.LiveWorkers)
	st(lwCapacityBlocks, info.Load.CapacityBlocks)
	st(lwPrefillTokensPerMs, math.Float64bits(info.Load.PrefillTokensPerMs))
	st(lwQueueTokensPerMs, math.Float64bits(info.Load.QueueTokensPerMs))
	st(lwDecodeBlocksPerMs, math.Float64bits(info.Load.DecodeBlocksPerMs))
	st(lwFaults, info.Faults)
	st(lwSnapshots, info.Snapshots)
	st(lwDeltas, info.Deltas)
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
		},
		Faults:    ld(lwFaults),
		Snapshots: ld(lwSnapshots),
		Deltas:    ld(lwDeltas),
	}
}
