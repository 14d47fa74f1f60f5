package kvrelay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/goindex/goindex/bridge/kvrelay/cbi1"
	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
	"github.com/goindex/goindex/internal/backoff"
)

// Lane is what a Follower keeps in step with one upstream producer: a lane
// of goindex's consumer, or a test's.
type Lane interface {
	// Install replaces the lane's words with a whole snapshot at sequence
	// seq of producer; the lane is ready afterwards.
	Install(producer *pb.ProducerIdentity, seq uint64, words []uint64) error
	// Apply stores absolute bucket images, taking the lane from base to seq.
	Apply(base, seq uint64, images []cbi1.Image) error
	// Retire makes the lane not ready: the stream broke, or the producer
	// was withdrawn or replaced. The next Install revives it.
	Retire(reason error)
}

// FollowConfig configures Follow.
type FollowConfig struct {
	SubscriberID string // required: 1..128 bytes, unique per consumer
	DCID         uint64 // required: the dc_id of the pool to follow
	Lane         Lane   // required
	// Retry is the first wait before following again after a session
	// ended, and MaxRetry caps it: it doubles with each session that
	// ended, jittered (between half and all of it: internal/backoff), and
	// starts over after one that served a snapshot it installed for at
	// least MaxRetry (so a pool whose every session fails soon after its
	// install is not asked for a snapshot every Retry). Optional;
	// defaults: 1s and DefaultMaxRetry.
	Retry, MaxRetry time.Duration
	// OnRetry sees each session's end: why, how many sessions have ended
	// in a row since the wait last started over (1 after one that served)
	// and the wait before the next (a consumer's logs). Optional.
	OnRetry func(err error, failing int, wait time.Duration)
	// OnLoad receives the followed pool's entry of every load window.
	OnLoad func(*Load) // optional; default: the load stream is not read
	// OnUpdate sees every FilterUpdate the pool stream delivers, before
	// the stream rules judge it (a consumer's frame counters).
	OnUpdate func(*pb.FilterUpdate) // optional
	// OnRTT receives the round trip of a GetRelayInfo call, timed every
	// PingEvery while a session runs (the contract's cheapest exchange;
	// heartbeats are one-way and their send_ts_us is the relay's clock).
	OnRTT     func(time.Duration) // optional
	PingEvery time.Duration       // optional; default: 1s
	// CallTimeout bounds each GetRelayInfo: the session's first, and the
	// probe every PingEvery, of which MaxMissedProbes failing in a row end
	// the session (a relay that answers nothing, behind a connection that
	// stays up, would otherwise leave the pool stream open and silent for
	// as long as TCP lets it). Optional; default: DefaultCallTimeout.
	CallTimeout time.Duration
	// Resync, when it delivers, ends the current session: the lane is
	// retired with the value as the reason and follows again from a fresh
	// snapshot (a consumer found the lane's words damaged).
	Resync <-chan error // optional
}

// DefaultCallTimeout bounds a GetRelayInfo when FollowConfig leaves it
// open.
const DefaultCallTimeout = 5 * time.Second

// DefaultMaxRetry caps the wait between sessions when FollowConfig leaves
// it open: a relay down for an hour costs a few hundred attempts, not one
// every Retry.
const DefaultMaxRetry = 30 * time.Second

// MaxMissedProbes is how many liveness probes in a row may fail before a
// session ends as unavailable.
const MaxMissedProbes = 3

// Follow keeps cfg.Lane in step with the pool of cfg.DCID on the relay at
// conn, until ctx is done: it checks the relay's contract, watches the
// catalog, subscribes to the pool's current producer, installs its
// snapshot and applies its contiguous deltas. A broken stream, a gap, a bad
// frame or a new producer generation retires the lane and starts over from
// a snapshot after cfg.Retry, backing off while sessions end without
// having served an install for cfg.MaxRetry. It returns ctx's error, or
// at once a contract mismatch (deployment skew: retrying cannot help).
func Follow(ctx context.Context, conn grpc.ClientConnInterface, cfg FollowConfig) error {
	if err := checkSubscriber(cfg.SubscriberID); err != nil || cfg.Lane == nil {
		return fmt.Errorf("kvrelay: follow needs a subscriber id and a lane: %w", errors.Join(err, ErrInvalid))
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.PingEvery <= 0 {
		cfg.PingEvery = time.Second
	}
	if cfg.MaxRetry <= 0 {
		cfg.MaxRetry = DefaultMaxRetry
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	lane := &installWatch{Lane: cfg.Lane}
	cfg.Lane = lane
	retry := backoff.Backoff{First: cfg.Retry, Max: cfg.MaxRetry}
	client := pb.NewKvEventRelayClient(conn)
	for {
		err := session(ctx, client, &cfg)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		lane.Retire(err)
		if errors.Is(err, ErrContract) {
			return err
		}
		retry.Served(lane.installed, time.Now())
		lane.installed = time.Time{}
		wait := retry.Next()
		if cfg.OnRetry != nil {
			cfg.OnRetry(err, retry.Failures(), wait)
		}
		if !backoff.Sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// installWatch is Follow's lane: it notes when a session first installed
// a snapshot (the lane was READY), which decides whether Follow's backoff
// starts over. Lane calls come from the session's goroutines, and all have
// returned when session does.
type installWatch struct {
	Lane
	installed time.Time // zero: nothing installed in this session
}

// Install installs through the lane and notes the first success.
func (w *installWatch) Install(producer *pb.ProducerIdentity, seq uint64, words []uint64) error {
	err := w.Lane.Install(producer, seq, words)
	if err == nil && w.installed.IsZero() {
		w.installed = time.Now()
	}
	return err
}

// recvOptions lets a FilterUpdate carry a full chunk.
var recvOptions = []grpc.CallOption{grpc.MaxCallRecvMsgSize(MaxMessageBytes)}

// session is one connection's worth of following: it returns why it ended.
func session(ctx context.Context, client pb.KvEventRelayClient, cfg *FollowConfig) error {
	if err := relayInfo(ctx, client, cfg); err != nil {
		return err
	}
	// Every goroutine of the session has ended when it returns, so no
	// callback or Lane call outlives Follow.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	catalog, err := client.WatchKvPoolCatalog(ctx, &pb.WatchKvPoolCatalogRequest{SubscriberId: cfg.SubscriberID, ContractMarker: ContractMarker})
	if err != nil {
		return fmt.Errorf("kvrelay: WatchKvPoolCatalog: %w", err)
	}
	producers := make(chan *pb.ProducerIdentity, 1)
	catalogErr := make(chan error, 1)
	wg.Go(func() { catalogErr <- watch(catalog, cfg.DCID, producers) })
	if cfg.OnLoad != nil {
		wg.Go(func() { loads(ctx, client, cfg) })
	}
	probeErr := make(chan error, 1)
	wg.Go(func() { probeErr <- probe(ctx, client, cfg) })
	var current *pb.ProducerIdentity
	var subCancel context.CancelFunc = func() {}
	subErr := make(chan error, 1)
	defer func() { subCancel() }()
	for {
		select {
		case err := <-catalogErr:
			return err
		case err := <-subErr:
			return err
		case err := <-probeErr:
			return err
		case err := <-cfg.Resync:
			return fmt.Errorf("kvrelay: resync asked: %w", err)
		case p := <-producers:
			if current != nil && sameProducer(p, current) {
				continue
			}
			subCancel()
			if current != nil {
				cfg.Lane.Retire(fmt.Errorf("%w: dc %d's producer was replaced or withdrawn", ErrProducerChanged, cfg.DCID))
				<-subErr // the old subscription has ended
			}
			current = p
			if p == nil {
				continue
			}
			subCtx, cancelSub := context.WithCancel(ctx)
			subCancel = cancelSub
			wg.Go(func() { subErr <- subscribe(subCtx, client, cfg, p) })
		}
	}
}

// watch reads complete catalogs and offers the producer of dcID (nil when
// the pool is absent) on producers, newest first.
func watch(stream grpc.ServerStreamingClient[pb.KvPoolCatalogUpdate], dcID uint64, producers chan *pb.ProducerIdentity) error {
	var last uint64
	for {
		u, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("kvrelay: catalog stream: %w", err)
		}
		if err := checkResponse(u); err != nil {
			return err
		}
		if u.GetRevision() < last {
			return invalid("catalog revision %d after %d", u.GetRevision(), last)
		}
		last = u.GetRevision()
		var found *pb.ProducerIdentity
		for _, d := range u.GetSnapshot().GetPools() {
			if d.GetProducer().GetPoolId().GetDcId() == dcID && checkDescriptor(d) == nil {
				found = d.GetProducer()
				break
			}
		}
		select { // keep only the newest
		case <-producers:
		default:
		}
		producers <- found
	}
}

// subscribe follows one producer until its stream ends or breaks a rule.
func subscribe(ctx context.Context, client pb.KvEventRelayClient, cfg *FollowConfig, producer *pb.ProducerIdentity) error {
	stream, err := client.SubscribeKvPool(ctx, &pb.SubscribeKvPoolRequest{SubscriberId: cfg.SubscriberID,
		ExpectedProducer: producer, ContractMarker: ContractMarker}, recvOptions...)
	if err != nil {
		return fmt.Errorf("kvrelay: SubscribeKvPool: %w", err)
	}
	f := follower{producer: producer, lane: cfg.Lane}
	for {
		u, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("kvrelay: pool stream of dc %d: %w", cfg.DCID, err)
		}
		if cfg.OnUpdate != nil {
			cfg.OnUpdate(u)
		}
		if err := f.step(u); err != nil {
			return err
		}
	}
}

// follower is one subscription's state: the snapshot being assembled and
// the sequence installed.
type follower struct {
	producer  *pb.ProducerIdentity
	lane      Lane
	asm       cbi1.Assembly
	ready     bool
	installed uint64
}

// step applies one FilterUpdate by the stream rules of the contract.
func (f *follower) step(u *pb.FilterUpdate) error {
	if err := checkResponse(u); err != nil {
		return err
	}
	if !sameProducer(u.GetProducer(), f.producer) {
		return invalid("a frame of another producer on the subscription")
	}
	switch u.GetKind() {
	case pb.FilterUpdateKind_FILTER_UPDATE_KIND_HEARTBEAT:
		if f.ready && u.GetSequence() > f.installed {
			return invalid("heartbeat at %d past installed %d: a delta was lost", u.GetSequence(), f.installed)
		}
		return nil
	case pb.FilterUpdateKind_FILTER_UPDATE_KIND_SNAPSHOT_CHUNK:
		if f.ready {
			return invalid("a snapshot chunk after the snapshot")
		}
		fr, err := f.decode(u)
		if err != nil || fr.Chunk == nil {
			return errors.Join(err, invalid("a snapshot chunk whose payload is not one"))
		}
		done, err := f.asm.Add(fr)
		if err != nil || !done {
			return err
		}
		_, words := f.asm.Snapshot()
		if err := f.lane.Install(f.producer, u.GetSequence(), words); err != nil {
			return fmt.Errorf("kvrelay: installing the snapshot at %d: %w", u.GetSequence(), err)
		}
		f.ready, f.installed, f.asm = true, u.GetSequence(), cbi1.Assembly{}
		return nil
	case pb.FilterUpdateKind_FILTER_UPDATE_KIND_DELTA:
		base, seq := u.GetBaseSequence(), u.GetSequence()
		switch {
		case !f.ready:
			return invalid("a delta before the snapshot")
		case base != f.installed || seq != base+1:
			return invalid("delta %d→%d on installed %d: not contiguous", base, seq, f.installed)
		}
		fr, err := f.decode(u)
		if err != nil || fr.Delta == nil || fr.Delta.BaseEpoch != base {
			return errors.Join(err, invalid("a delta payload that is not the delta %d→%d", base, seq))
		}
		if err := f.lane.Apply(base, seq, fr.Delta.Images); err != nil {
			return fmt.Errorf("kvrelay: applying delta %d→%d: %w", base, seq, err)
		}
		f.installed = seq
		return nil
	default:
		return invalid("filter update kind %d", u.GetKind())
	}
}

// decode decodes a payload and checks it belongs to the producer's format,
// dc and the frame's sequence.
func (f *follower) decode(u *pb.FilterUpdate) (cbi1.Frame, error) {
	fr, err := cbi1.Decode(u.GetPayload())
	if err != nil {
		return fr, err
	}
	if want := header(f.producer, u.GetSequence()); fr.Header != want {
		return fr, invalid("CBI1 header %+v, the frame says %+v", fr.Header, want)
	}
	return fr, nil
}

// loads hands the followed pool's load entries to cfg.OnLoad until ctx is
// done; a broken load stream ends only itself (the session's streams
// decide its fate).
func loads(ctx context.Context, client pb.KvEventRelayClient, cfg *FollowConfig) {
	stream, err := client.SubscribeKvPoolLoad(ctx, &pb.SubscribeKvPoolLoadRequest{SubscriberId: cfg.SubscriberID, ContractMarker: ContractMarker})
	if err != nil {
		return
	}
	for {
		u, err := stream.Recv()
		if err != nil || checkResponse(u) != nil {
			return
		}
		for _, e := range u.GetPools() {
			if e.GetProducer().GetPoolId().GetDcId() == cfg.DCID {
				cfg.OnLoad(e)
			}
		}
	}
}

// relayInfo asks the relay for its info, within cfg.CallTimeout, and
// checks that it keeps the contract.
func relayInfo(ctx context.Context, client pb.KvEventRelayClient, cfg *FollowConfig) error {
	c, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	defer cancel()
	info, err := client.GetRelayInfo(c, &pb.RelayInfoRequest{ContractMarker: ContractMarker})
	if err != nil {
		return fmt.Errorf("kvrelay: GetRelayInfo: %w", err)
	}
	return checkResponse(info)
}

// probe calls GetRelayInfo every cfg.PingEvery and hands the round trip of
// each answer that keeps the contract to cfg.OnRTT, until ctx is done
// (nil) or MaxMissedProbes calls in a row failed: then it returns why,
// wrapping ErrUnavailable, and the session ends.
func probe(ctx context.Context, client pb.KvEventRelayClient, cfg *FollowConfig) error {
	tick := time.NewTicker(cfg.PingEvery)
	defer tick.Stop()
	missed := 0
	for {
		start := time.Now()
		err := relayInfo(ctx, client, cfg)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			missed = 0
			if cfg.OnRTT != nil {
				cfg.OnRTT(time.Since(start))
			}
		default:
			if missed++; missed >= MaxMissedProbes {
				return fmt.Errorf("%w: the relay answered none of %d probes: %w", ErrUnavailable, missed, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
