package kvrelay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"

	"github.com/goindex/goindex/bridge/kvrelay/cbi1"
	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
)

// UpdateKind is the kind of one publication step a Source yields.
type UpdateKind int

// The kinds of Update.
const (
	Snapshot  UpdateKind = iota + 1 // Words is the whole lane at Sequence
	Delta                           // Images take Base to Sequence (Sequence = Base+1)
	Heartbeat                       // nothing changed; Sequence is the current one
	End                             // the publication cannot go on; Err says why, and the channel closes
)

// Update is one step of a pool's publication.
type Update struct {
	Kind     UpdateKind
	Base     uint64
	Sequence uint64
	Words    []uint64
	Images   []cbi1.Image
	Err      error // End's reason: ErrLagged, ErrProducerChanged, ErrUnavailable
}

// Pool is one pool a Source publishes: its catalog descriptor
// (producer identity, endpoint, models, query semantics, roles).
type Pool = pb.KvPoolDescriptor

// Load is one pool's KV occupancy window entry.
type Load = pb.KvPoolLoadEntry

// Source is what a Server publishes: goindex relay's pools, or a test's.
type Source interface {
	// Catalog returns the catalog's revision, every live pool, and a
	// channel closed when either changes.
	Catalog() (revision uint64, pools []*Pool, changed <-chan struct{})
	// Follow streams one producer's publication: a Snapshot first, then
	// contiguous Deltas, Heartbeats while idle. The channel closes when
	// the producer ends or ctx is done. ErrPoolNotFound and
	// ErrProducerChanged say why a producer cannot be followed.
	Follow(ctx context.Context, producer *pb.ProducerIdentity) (<-chan Update, error)
	// Loads returns every pool's current occupancy.
	Loads() []*Load
}

// ReadinessSource is a Source that also projects serving readiness:
// SubscribeServingReadiness streams it. A Source without it answers that
// RPC UNIMPLEMENTED.
type ReadinessSource interface {
	Source
	// Readiness returns the complete topology projection and its
	// revision, which moves whenever the projection changes.
	Readiness() (revision uint64, entries []*pb.TopologyEntry)
}

// ServingLoadSource is a Source that also reports serving load:
// SubscribeServingLoad streams it. A Source without it answers that RPC
// UNIMPLEMENTED.
type ServingLoadSource interface {
	Source
	// ServingLoad returns one complete window's pools and models.
	ServingLoad() ([]*pb.PoolServingLoad, []*pb.ModelServingLoad)
}

// ServerConfig configures a Server.
type ServerConfig struct {
	Relay        *pb.RelayIdentity // required: this relay's identity
	Source       Source            // required
	LoadInterval time.Duration     // optional; default: 1s
	// ReadinessInterval is how often the readiness projection is sent
	// again (its heartbeat) and checked for a new revision.
	ReadinessInterval time.Duration // optional; default: 1s
	// ChunkWords bounds the bucket words of one snapshot chunk.
	ChunkWords int // optional; default: cbi1.MaxChunkWords
}

// Server serves dynamo.kvrelay.v1.KvEventRelay from a Source.
type Server struct {
	pb.UnimplementedKvEventRelayServer
	cfg ServerConfig
}

// NewServer checks cfg and returns a Server; register it on a grpc.Server
// with pb.RegisterKvEventRelayServer.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Relay == nil || cfg.Source == nil {
		return nil, fmt.Errorf("%w: a server needs its relay identity and a source", ErrInvalid)
	}
	if cfg.LoadInterval <= 0 {
		cfg.LoadInterval = time.Second
	}
	if cfg.ReadinessInterval <= 0 {
		cfg.ReadinessInterval = time.Second
	}
	return &Server{cfg: cfg}, nil
}

// GRPCOptions are the server options the contract needs: its message
// sizes, and a check of every subscriber's connection (a ping after 30 s
// without traffic from the peer, answered within 10 s, or the connection is
// closed with its streams). Across a WAN a subscriber can vanish without a
// reset (a host gone, a firewall that dropped the flow); without the ping
// its streams, their goroutines and their watches would be held until TCP
// gave up on the data in flight, which takes minutes. The pings also keep
// a quiet flow alive through firewalls that expire idle ones; a server
// pinging its clients needs no permission from them.
func GRPCOptions() []grpc.ServerOption {
	return grpcOptions(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second})
}

func grpcOptions(ka keepalive.ServerParameters) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes), grpc.KeepaliveParams(ka)}
}

func (s *Server) refuse(stream grpc.ServerStream, err error) error {
	switch {
	case errors.Is(err, ErrContract):
		return relayError(stream, codes.FailedPrecondition, pb.RelayErrorReason_RELAY_ERROR_REASON_CONTRACT_MISMATCH, "%v", err)
	case errors.Is(err, ErrPoolNotFound):
		return relayError(stream, codes.NotFound, pb.RelayErrorReason_RELAY_ERROR_REASON_POOL_NOT_FOUND, "%v", err)
	case errors.Is(err, ErrProducerChanged):
		return relayError(stream, codes.FailedPrecondition, pb.RelayErrorReason_RELAY_ERROR_REASON_PRODUCER_CHANGED, "%v", err)
	case errors.Is(err, ErrUnavailable):
		return relayError(stream, codes.Unavailable, pb.RelayErrorReason_RELAY_ERROR_REASON_PUBLICATION_UNAVAILABLE, "%v", err)
	case errors.Is(err, ErrLagged):
		return relayError(stream, codes.ResourceExhausted, pb.RelayErrorReason_RELAY_ERROR_REASON_SUBSCRIBER_LAGGED, "%v", err)
	default:
		return relayError(stream, codes.InvalidArgument, pb.RelayErrorReason_RELAY_ERROR_REASON_INVALID_REQUEST, "%v", err)
	}
}

// GetRelayInfo answers the protocol version and the relay's identity.
func (s *Server) GetRelayInfo(_ context.Context, req *pb.RelayInfoRequest) (*pb.RelayInfo, error) {
	if err := checkRequest(req); err != nil {
		return nil, s.refuse(nil, err)
	}
	return &pb.RelayInfo{ProtocolVersion: ProtocolVersion, Relay: s.cfg.Relay, ContractMarker: ContractMarker}, nil
}

// WatchKvPoolCatalog sends the complete catalog now and after every change.
func (s *Server) WatchKvPoolCatalog(req *pb.WatchKvPoolCatalogRequest, stream grpc.ServerStreamingServer[pb.KvPoolCatalogUpdate]) error {
	if err := s.checkStream(req, req.GetSubscriberId(), stream); err != nil {
		return err
	}
	for {
		rev, pools, changed := s.cfg.Source.Catalog()
		err := stream.Send(&pb.KvPoolCatalogUpdate{ProtocolVersion: ProtocolVersion, Relay: s.cfg.Relay, Revision: rev,
			Snapshot: &pb.KvPoolCatalogSnapshot{Pools: pools}, ContractMarker: ContractMarker})
		if err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		}
	}
}

// SubscribeKvPool streams the expected producer's snapshot chunks, then
// its deltas, with heartbeats between.
func (s *Server) SubscribeKvPool(req *pb.SubscribeKvPoolRequest, stream grpc.ServerStreamingServer[pb.FilterUpdate]) error {
	if err := checkRequest(req); err != nil {
		return s.refuse(stream, err)
	}
	want := req.GetExpectedProducer()
	if err := errors.Join(checkSubscriber(req.GetSubscriberId()), checkProducer(want)); err != nil {
		return s.refuse(stream, err)
	}
	updates, err := s.cfg.Source.Follow(stream.Context(), want)
	if err != nil {
		return s.refuse(stream, err)
	}
	var chunks [][]byte
	for u := range updates {
		msg := &pb.FilterUpdate{ProtocolVersion: ProtocolVersion, Relay: s.cfg.Relay, Producer: want, BaseSequence: u.Base,
			Sequence: u.Sequence, SendTsUs: uint64(time.Now().UnixMicro()), ContractMarker: ContractMarker}
		switch u.Kind {
		case Snapshot:
			chunks, err = cbi1.SnapshotChunks(chunks[:0], header(want, u.Sequence), u.Words, s.cfg.ChunkWords)
			if err != nil {
				return relayError(stream, codes.Internal, pb.RelayErrorReason_RELAY_ERROR_REASON_INVALID_PUBLICATION, "snapshot: %v", err)
			}
			msg.Kind, msg.BaseSequence = pb.FilterUpdateKind_FILTER_UPDATE_KIND_SNAPSHOT_CHUNK, u.Sequence
			for _, c := range chunks {
				msg.Payload = c
				if err := stream.Send(msg); err != nil {
					return err
				}
			}
			continue
		case Delta:
			msg.Kind = pb.FilterUpdateKind_FILTER_UPDATE_KIND_DELTA
			if msg.Payload, err = cbi1.AppendDelta(nil, header(want, u.Sequence), u.Base, u.Images); err != nil {
				return relayError(stream, codes.Internal, pb.RelayErrorReason_RELAY_ERROR_REASON_INVALID_PUBLICATION, "delta: %v", err)
			}
		case Heartbeat:
			msg.Kind, msg.BaseSequence = pb.FilterUpdateKind_FILTER_UPDATE_KIND_HEARTBEAT, u.Sequence
		case End:
			return s.refuse(stream, u.Err)
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	if stream.Context().Err() != nil {
		return nil
	}
	return relayError(stream, codes.Unavailable, pb.RelayErrorReason_RELAY_ERROR_REASON_PUBLICATION_UNAVAILABLE, "the producer's publication ended")
}

// SubscribeKvPoolLoad sends a complete load window every LoadInterval.
func (s *Server) SubscribeKvPoolLoad(req *pb.SubscribeKvPoolLoadRequest, stream grpc.ServerStreamingServer[pb.KvPoolLoadUpdate]) error {
	if err := s.checkStream(req, req.GetSubscriberId(), stream); err != nil {
		return err
	}
	return every(stream, s.cfg.LoadInterval, func(window uint64) error {
		return stream.Send(&pb.KvPoolLoadUpdate{ProtocolVersion: ProtocolVersion, Relay: s.cfg.Relay, WindowSequence: window,
			ObservedMs: uint64(time.Now().UnixMilli()), WindowMs: uint64(s.cfg.LoadInterval.Milliseconds()),
			Pools: s.cfg.Source.Loads(), ContractMarker: ContractMarker})
	})
}

// SubscribeServingReadiness sends the complete readiness projection now
// and every ReadinessInterval (its heartbeat), with its revision; a
// Source that projects none answers UNIMPLEMENTED.
func (s *Server) SubscribeServingReadiness(req *pb.SubscribeServingReadinessRequest, stream grpc.ServerStreamingServer[pb.ServingReadinessUpdate]) error {
	if err := s.checkStream(req, req.GetSubscriberId(), stream); err != nil {
		return err
	}
	src, ok := s.cfg.Source.(ReadinessSource)
	if !ok {
		return relayError(stream, codes.Unimplemented, pb.RelayErrorReason_RELAY_ERROR_REASON_UNSUPPORTED_FEATURE, "this relay projects no serving readiness")
	}
	return every(stream, s.cfg.ReadinessInterval, func(uint64) error {
		rev, entries := src.Readiness()
		return stream.Send(&pb.ServingReadinessUpdate{ProtocolVersion: ProtocolVersion, Relay: s.cfg.Relay, Revision: rev,
			Entries: entries, ContractMarker: ContractMarker})
	})
}

// SubscribeServingLoad sends a complete serving-load window every
// LoadInterval; a Source that reports none answers UNIMPLEMENTED.
func (s *Server) SubscribeServingLoad(req *pb.SubscribeServingLoadRequest, stream grpc.ServerStreamingServer[pb.ServingLoadUpdate]) error {
	if err := s.checkStream(req, req.GetSubscriberId(), stream); err != nil {
		return err
	}
	src, ok := s.cfg.Source.(ServingLoadSource)
	if !ok {
		return relayError(stream, codes.Unimplemented, pb.RelayErrorReason_RELAY_ERROR_REASON_UNSUPPORTED_FEATURE, "this relay reports no serving load")
	}
	return every(stream, s.cfg.LoadInterval, func(window uint64) error {
		pools, models := src.ServingLoad()
		return stream.Send(&pb.ServingLoadUpdate{ProtocolVersion: ProtocolVersion, Relay: s.cfg.Relay, WindowSequence: window,
			ObservedMs: uint64(time.Now().UnixMilli()), WindowMs: uint64(s.cfg.LoadInterval.Milliseconds()),
			Pools: pools, Models: models, ContractMarker: ContractMarker})
	})
}

// checkStream checks a streaming request's marker and subscriber id, and
// refuses the stream when either is wrong.
func (s *Server) checkStream(req marked, subscriber string, stream grpc.ServerStream) error {
	if err := checkRequest(req); err != nil {
		return s.refuse(stream, err)
	}
	if err := checkSubscriber(subscriber); err != nil {
		return s.refuse(stream, err)
	}
	return nil
}

// every calls send with 1, 2, … now and then every interval until the
// stream's context ends (nil) or send fails.
func every(stream grpc.ServerStream, interval time.Duration, send func(n uint64) error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := uint64(1); ; n++ {
		if err := send(n); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}
