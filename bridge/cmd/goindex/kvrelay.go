package main

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/goindex/goindex/bridge/kvrelay"
	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/relayproto"
)

// kvrelayUsage is goindex relay's help on the Pool Relay contract.
const kvrelayUsage = `
Output in Dynamo's Pool Relay contract (dynamo.kvrelay.v1.KvEventRelay, plaintext
gRPC; put a TLS proxy in front across a WAN):
  --kvrelay-listen H:P    serve the pool: GetRelayInfo, WatchKvPoolCatalog (the pool
                          with --model, --worker-role and --block-size), SubscribeKvPool
                          (the CBI1 chunks of a snapshot taken in the pool's writer loop,
                          then its deltas and heartbeats, apart from the NATS log: a
                          NATS or JetStream outage does not stop them; a rebuild or a
                          subscriber 4096 messages behind ends the stream and the
                          subscriber starts over),
                          SubscribeKvPoolLoad (a window every --load-every: KV blocks
                          in use = active decode blocks, total = capacity, ranks =
                          live workers), SubscribeServingReadiness (a topology per
                          --model, READY while a worker is live, sent again every
                          --heartbeat-every) and SubscribeServingLoad (every
                          --load-every: queued prefill tokens and active decode
                          blocks, COMPLETE once every live worker sent load samples,
                          and live workers; no model load: goindex sees no frontends)`

// kvrelayFlags are goindex relay's flags of the Pool Relay contract.
type kvrelayFlags struct {
	listen *string
	model  *string
	role   *string
}

func addKvRelayFlags(fs *flag.FlagSet) kvrelayFlags {
	return kvrelayFlags{
		listen: fs.String("kvrelay-listen", "", "serve the pool in Dynamo's Pool Relay gRPC contract on this host:port (empty: not served)"),
		model:  fs.String("model", "", "Pool Relay catalog: the canonical model id the pool serves (empty: no registration)"),
		role:   fs.String("worker-role", "aggregated", "Pool Relay catalog: the workers' role: aggregated, prefill, decode, encode or legacy"),
	}
}

// poolOf returns the catalog description of the relay's pool (nil when
// the contract is not served).
func (f kvrelayFlags) poolOf(scope relay.PoolConfig, blockSize int) (*kvrelay.Pool, error) {
	if *f.listen == "" {
		return nil, nil
	}
	role, ok := pb.WorkerRole_value["WORKER_ROLE_"+strings.ToUpper(*f.role)]
	if !ok || role == 0 {
		return nil, fmt.Errorf("relay: --worker-role %q: want aggregated, prefill, decode, encode or legacy: %w", *f.role, errUsage)
	}
	if blockSize <= 0 {
		return nil, fmt.Errorf("relay: --block-size %d: want a positive number of tokens: %w", blockSize, errUsage)
	}
	p := &kvrelay.Pool{ServingEndpoint: &pb.DynamoEndpointId{Namespace: scope.Namespace, Component: scope.Component, Endpoint: scope.Endpoint},
		QuerySemantics: &pb.KvQuerySemantics{KvBlockSize: uint32(blockSize), HashFormat: pb.KvQueryHashFormat_KV_QUERY_HASH_FORMAT_DYNAMO_STANDARD_V1},
		PoolRoles:      []pb.WorkerRole{pb.WorkerRole(role)}}
	if *f.model != "" {
		p.Registrations = []*pb.ModelRegistration{{CanonicalModelId: *f.model,
			Target: &pb.ModelTarget{Target: &pb.ModelTarget_Base{Base: &pb.BaseModelTarget{BaseModel: *f.model}}}}}
	}
	if err := kvrelay.CheckPool(p); err != nil {
		return nil, fmt.Errorf("relay: --model, --namespace, --component, --endpoint: %v: %w", err, errUsage)
	}
	return p, nil
}

// serve starts the Pool Relay server of r's pool of domain d, described by
// pool, when --kvrelay-listen is set: load windows every loadEvery, the
// readiness projection again every heartbeatEvery; stop ends it. A refused
// description is a usage error.
func (f kvrelayFlags) serve(log *slog.Logger, r *relay.Relay, d relayproto.DomainID, pool *kvrelay.Pool, loadEvery, heartbeatEvery time.Duration) (stop func(), err error) {
	if *f.listen == "" {
		return func() {}, nil
	}
	src, err := kvrelay.NewRelaySource(kvrelay.RelaySourceConfig{Relay: r, Pools: map[relayproto.DomainID]*kvrelay.Pool{d: pool}})
	if err != nil {
		return nil, fmt.Errorf("relay: %v: %w", err, errUsage)
	}
	// No Dynamo runtime stands behind goindex's relay: the instance id is
	// random per process, the incarnation the start time (new on every
	// start, as the contract asks).
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := &pb.RelayIdentity{DrtInstanceId: binary.LittleEndian.Uint64(b[:]), RelayIncarnation: uint64(time.Now().UnixNano())}
	s, err := kvrelay.NewServer(kvrelay.ServerConfig{Relay: id, Source: src, LoadInterval: loadEvery, ReadinessInterval: heartbeatEvery})
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	ln, err := net.Listen("tcp", *f.listen)
	if err != nil {
		return nil, fmt.Errorf("relay: --kvrelay-listen: %w", err)
	}
	g := grpc.NewServer(kvrelay.GRPCOptions()...)
	pb.RegisterKvEventRelayServer(g, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			log.Error("pool relay server stopped", "err", err)
		}
	}()
	log.Info("pool relay contract served", "addr", ln.Addr().String(), "relay_incarnation", id.GetRelayIncarnation())
	return func() { g.Stop(); <-done }, nil
}
