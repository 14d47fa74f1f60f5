package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/goindex/goindex/bridge/kvrelay"
	"github.com/goindex/goindex/bridge/kvrelay/cbi1"
	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
)

// followUpstream runs lane i from a Dynamo Pool Relay at addr until ctx
// ends (hook for bridge/kvrelay; the lane's NATS runner and prober do not
// start): kvrelay.Follow writes the lane's words and record, and
// upstreamLane keeps its status, RTT and load as a native lane's.
func (c *Consumer) followUpstream(ctx context.Context, wg *sync.WaitGroup, i int, dc relayproto.DCID, addr string) error {
	rl, err := kvrelay.NewReplicaLane(c.w, i)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("consume: upstream relay of DC %d at %s: %w", dc, addr, err)
	}
	l := c.lanes[i]
	u := &upstreamLane{ReplicaLane: rl, l: l}
	// A lane found damaged (laneRunner.damaged) is kicked as a native one
	// is: its follower starts over from a fresh snapshot.
	resync := make(chan error, 1)
	kick := context.CancelCauseFunc(func(err error) {
		select {
		case resync <- err:
		default: // one is pending already
		}
	})
	l.kick.Store(&kick)
	cfg := kvrelay.FollowConfig{SubscriberID: fmt.Sprintf("goindex-consume-%x-%d", c.cfg.Instance, dc), DCID: uint64(dc),
		Lane: u, Retry: c.cfg.RetryEvery, MaxRetry: c.cfg.MaxRetryEvery, OnLoad: u.load, OnUpdate: u.received, OnRTT: u.rtt, PingEvery: c.cfg.PingEvery,
		Resync: resync, OnRetry: func(err error, failing int, wait time.Duration) { l.noteResync(ctx, err, failing, wait) }}
	wg.Go(func() {
		defer conn.Close()
		err := kvrelay.Follow(ctx, conn, cfg) // every callback has returned with it
		l.kick.Store(nil)
		u.stop()
		c.cfg.Logger.Info("upstream relay lane ended", "dc", dc, "relay", addr, "err", err)
	})
	return nil
}

// upstreamLane is a lane fed by a Dynamo Pool Relay: its ReplicaLane
// stores the words and the lane record, and it keeps the lane's status as
// a native lane's: state, incarnation, sequences, the frames received by
// kind (snapshot chunks, deltas, heartbeats, load windows), faults,
// resyncs, the RTT of the contract's GetRelayInfo and the load windows as
// load reports.
type upstreamLane struct {
	*kvrelay.ReplicaLane
	l *laneRunner
}

// Install installs a snapshot and marks the lane READY at its sequence.
func (u *upstreamLane) Install(p *pb.ProducerIdentity, seq uint64, words []uint64) error {
	err := u.ReplicaLane.Install(p, seq, words)
	u.l.count(func(st *LaneStatus) {
		if err != nil {
			st.Faults++
			st.LastFault = err.Error()
			return
		}
		st.State, st.Incarnation, st.Drained = ingest.StateReady.String(), p.GetProducerIncarnation(), false
		st.Epoch++
		st.Installed, st.Latest, st.Lag = seq, seq, 0
		st.Snapshots++
	})
	return err
}

// Apply applies a delta and moves the installed sequence.
func (u *upstreamLane) Apply(base, seq uint64, images []cbi1.Image) error {
	err := u.ReplicaLane.Apply(base, seq, images)
	u.l.count(func(st *LaneStatus) {
		if err != nil {
			st.Faults++
			st.LastFault = err.Error()
			return
		}
		st.Installed, st.Latest = seq, max(st.Latest, seq)
		st.Lag = st.Latest - st.Installed
		st.Deltas++
	})
	return err
}

// Retire clears the lane until the next snapshot: a resync, and a fault
// when the relay broke the contract's rules.
func (u *upstreamLane) Retire(reason error) {
	u.ReplicaLane.Retire(reason)
	u.l.count(func(st *LaneStatus) {
		st.State = ingest.StateAwaiting.String()
		st.Resyncs++
		if reason != nil {
			st.LastFault = reason.Error()
		}
		if errors.Is(reason, kvrelay.ErrInvalid) || errors.Is(reason, kvrelay.ErrContract) {
			st.Faults++
		}
	})
}

// stop leaves the lane idle when its follower ended.
func (u *upstreamLane) stop() {
	u.ReplicaLane.Stop()
	u.l.count(func(st *LaneStatus) { st.State = ingest.StateIdle.String() })
}

// received counts a FilterUpdate by kind; a heartbeat names the relay's
// sequence (the lane's lag is how far it is past the installed one).
func (u *upstreamLane) received(m *pb.FilterUpdate) {
	kind := frameInvalid
	switch m.GetKind() {
	case pb.FilterUpdateKind_FILTER_UPDATE_KIND_SNAPSHOT_CHUNK:
		kind = relayproto.FrameSnapshot.String()
	case pb.FilterUpdateKind_FILTER_UPDATE_KIND_DELTA:
		kind = relayproto.FrameDelta.String()
	case pb.FilterUpdateKind_FILTER_UPDATE_KIND_HEARTBEAT:
		kind = relayproto.FrameHeartbeat.String()
	}
	u.l.count(func(st *LaneStatus) {
		st.received(kind, proto.Size(m))
		if kind == relayproto.FrameHeartbeat.String() && st.State == ingest.StateReady.String() {
			st.Latest = max(st.Latest, m.GetSequence())
			st.Lag = st.Latest - st.Installed
		}
	})
}

// load records a load window's entry as the lane's load report.
func (u *upstreamLane) load(e *kvrelay.Load) {
	now := time.Now()
	lr := kvrelay.LoadReportOf(e, now)
	u.l.count(func(st *LaneStatus) { st.received(relayproto.FrameLoadReport.String(), proto.Size(e)) })
	u.l.recordLoad(&lr, now)
}

// rtt records a GetRelayInfo round trip as the lane's RTT.
func (u *upstreamLane) rtt(d time.Duration) { u.l.recordRTT(d, time.Now()) }
