package kvrelay

import (
	"fmt"
	"sync"
	"time"

	"github.com/goindex/goindex/bridge/kvrelay/cbi1"
	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/shm"
)

// ReplicaLane is a Lane of goindex's shared replica file: what Follow
// installs and applies lands in one lane of the consumer's shm.Writer, so
// the router reads an upstream relay's pool like any goindex DC. The
// producer's CKF format must be the replica's (one format per consumer,
// spec §1); its words are stored with the table's atomic stores (spec
// §5.4), and the lane record tells the state, sequences and the producer.
type ReplicaLane struct {
	w    *shm.Writer
	lane int

	mu    sync.Mutex // Follow drives a lane from one goroutine; mu guards st against Retire from another
	st    shm.LaneState
	batch []ckf.Image
}

// NewReplicaLane returns the Lane of lane l of w.
func NewReplicaLane(w *shm.Writer, l int) (*ReplicaLane, error) {
	if l < 0 || l >= w.Table().Lanes() {
		return nil, fmt.Errorf("%w: lane %d of a replica of %d lanes", ErrInvalid, l, w.Table().Lanes())
	}
	return &ReplicaLane{w: w, lane: l}, nil
}

// Install checks the producer's format against the replica's and installs
// the snapshot (ready bit cleared first, set last).
func (r *ReplicaLane) Install(p *pb.ProducerIdentity, seq uint64, words []uint64) error {
	f, rf := p.GetCkfFormat(), r.w.Format()
	if f.GetSeed() != rf.Seed() || f.GetBucketCount() != rf.Buckets() {
		return fmt.Errorf("%w: the producer's CKF format (seed %#x, %d buckets) is not the replica's (seed %#x, %d buckets)",
			ErrInvalid, f.GetSeed(), f.GetBucketCount(), rf.Seed(), rf.Buckets())
	}
	if err := r.w.Table().Install(r.lane, words); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st = shm.LaneState{State: uint8(ingest.StateReady), Incarnation: p.GetProducerIncarnation(),
		LayoutGeneration: p.GetLayoutGeneration(), Epoch: r.st.Epoch + 1, Installed: seq, Latest: seq, AppliedAt: time.Now(),
		Faults: r.st.Faults, Snapshots: r.st.Snapshots + 1, Deltas: r.st.Deltas}
	r.w.SetState(r.lane, &r.st)
	return nil
}

// Apply stores the images and records the new sequence.
func (r *ReplicaLane) Apply(_, seq uint64, images []cbi1.Image) error {
	r.batch = r.batch[:0]
	for _, im := range images {
		r.batch = append(r.batch, ckf.Image{Bucket: im.Bucket, Word: im.Word})
	}
	if err := r.w.Table().Apply(r.lane, r.batch); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Installed, r.st.Latest, r.st.AppliedAt = seq, seq, time.Now()
	r.st.Deltas++
	r.w.SetState(r.lane, &r.st)
	return nil
}

// Retire clears the lane's ready bit and counts a fault; the words stay
// until the next snapshot replaces them.
func (r *ReplicaLane) Retire(error) {
	r.w.Table().ClearReady(r.lane)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.State = uint8(ingest.StateAwaiting)
	r.st.Faults++
	r.w.SetState(r.lane, &r.st)
}

// Stop clears the lane's ready bit and leaves its record idle, without
// counting a fault: its follower ended (the consumer stops).
func (r *ReplicaLane) Stop() {
	r.w.Table().ClearReady(r.lane)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.State = uint8(ingest.StateIdle)
	r.w.SetState(r.lane, &r.st)
}

// RecordLoad stores a load window's entry as the lane's load report
// (LoadReportOf), received now.
func (r *ReplicaLane) RecordLoad(e *Load) {
	now := time.Now()
	lr := LoadReportOf(e, now)
	ld := shm.LoadOf(&lr, now)
	r.w.SetLoad(r.lane, &ld)
}

// LoadReportOf returns a load window's entry as goindex's load report,
// sampled at: the pool's KV blocks in use as its active blocks and as the
// decode blocks the scorer weighs against the capacity (both are KV
// occupancy), the capacity only when every expected rank reported (a
// partial sum is never read as the pool's), the observed ranks as live
// workers. The contract's load carries no queue or rates: those stay
// unmeasured (0).
func LoadReportOf(e *Load, at time.Time) relayproto.LoadReport {
	capacity := e.GetTotalKvBlocks()
	if e.GetKvObservedRanks() < e.GetKvExpectedRanks() {
		capacity = 0
	}
	used := e.GetKvUsedBlocks()
	return relayproto.LoadReport{TimestampUnixNano: uint64(at.UnixNano()), ActiveBlocks: used, ActiveDecodeBlocks: used,
		CapacityBlocks: capacity, LiveWorkers: e.GetKvObservedRanks()}
}
