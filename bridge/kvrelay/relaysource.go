package kvrelay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/goindex/goindex/bridge/kvrelay/cbi1"
	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/relayproto"
)

// poolIdentityVersion is KvPoolId.identity_version: upstream's
// POOL_IDENTITY_VERSION, the only one its consumers accept.
const poolIdentityVersion = 1

// digestBytes is the length upstream's consumers require of an indexer
// domain digest (validate_digest: exactly 16).
const digestBytes = 16

// The 8-byte tags that open goindex's domain digests: the domain id fills
// the other 8 bytes, so a goindex domain maps to one indexer domain and
// back.
var (
	cacheSemanticsTag = [8]byte{'g', 'o', 'i', 'n', 'd', 'e', 'x', 'C'}
	routingScopeTag   = [8]byte{'g', 'o', 'i', 'n', 'd', 'e', 'x', 'R'}
)

func domainDigest(tag [8]byte, d relayproto.DomainID) *pb.DigestIdentity {
	b := make([]byte, 0, digestBytes)
	b = append(b, tag[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(d))
	// The domain id is the operator's (goindex relay --domain): explicit.
	return &pb.DigestIdentity{Digest: b, Source: pb.IdentitySource_IDENTITY_SOURCE_EXPLICIT}
}

// ProducerOf returns the contract's producer identity of one of goindex's
// producer generations: dc_id is the DC, the indexer domain's two 16-byte
// digests carry the domain id, producer_incarnation and layout_generation
// are the relay's, and the CKF format is the pool's.
func ProducerOf(id relayproto.ProducerIdentity) *pb.ProducerIdentity {
	return &pb.ProducerIdentity{
		PoolId: &pb.KvPoolId{IdentityVersion: poolIdentityVersion, DcId: uint64(id.Pool.DC), IndexerDomain: &pb.IndexerDomainId{
			CacheSemantics: domainDigest(cacheSemanticsTag, id.Pool.Domain),
			RoutingScope:   domainDigest(routingScopeTag, id.Pool.Domain)}},
		ProducerIncarnation: id.Incarnation,
		LayoutGeneration:    id.LayoutGeneration,
		CkfFormat: &pb.CkfFormat{FormatVersion: uint32(id.Format.Version), Seed: id.Format.Seed, BucketCount: id.Format.Buckets,
			FingerprintBits: uint32(id.Format.FingerprintBits), SlotsPerBucket: uint32(id.Format.SlotsPerBucket)},
	}
}

// RelaySourceConfig configures a RelaySource.
type RelaySourceConfig struct {
	Relay *relay.Relay // required
	// Pools describes each published domain's pool in the catalog: its
	// serving endpoint, model registrations, query semantics and roles
	// (Producer is filled in from the relay). A domain of the relay
	// without an entry is not published; required, at least one.
	Pools map[relayproto.DomainID]*Pool
	// Buffer bounds the messages a subscriber may fall behind the relay's
	// publication before its stream ends (SUBSCRIBER_LAGGED).
	Buffer int // optional; default: relay.DefaultWatchBuffer
}

// RelaySource is the Source of a goindex relay (bridge/relay): its live
// pools make the catalog, a subscription is a relay.Watch (the pool's
// words at its last sequence, taken on the pool's writer goroutine, then
// its deltas and heartbeats: a publication of the pool's own, apart from
// its NATS delta log, so that a subscriber follows the pool through a NATS
// or JetStream outage), and its load reports make the load windows.
type RelaySource struct {
	cfg RelaySourceConfig

	mu        sync.Mutex // guards the readiness projection's revision
	revision  uint64
	readiness []*pb.TopologyEntry
}

// NewRelaySource checks cfg's pool descriptions and returns the Source.
func NewRelaySource(cfg RelaySourceConfig) (*RelaySource, error) {
	if cfg.Relay == nil || len(cfg.Pools) == 0 {
		return nil, fmt.Errorf("%w: a relay source needs a relay and at least one pool", ErrInvalid)
	}
	for d, p := range cfg.Pools {
		if err := CheckPool(p); err != nil {
			return nil, fmt.Errorf("pool of domain %d: %w", d, err)
		}
	}
	return &RelaySource{cfg: cfg}, nil
}

// CheckPool validates a pool description (Producer aside) as upstream's
// consumers will: a block size, a known hash format, known roles, an
// endpoint of three non-empty names without surrounding spaces, and each
// registration's model id and target. It returns an error wrapping
// ErrInvalid.
func CheckPool(p *Pool) error {
	if err := checkMeta(p); err != nil {
		return err
	}
	e := p.GetServingEndpoint()
	for _, s := range []string{e.GetNamespace(), e.GetComponent(), e.GetEndpoint()} {
		if !trimmedText(s) {
			return invalid("serving endpoint %q/%q/%q: each name non-empty, without surrounding spaces", e.GetNamespace(), e.GetComponent(), e.GetEndpoint())
		}
	}
	for _, r := range p.GetRegistrations() {
		t := r.GetTarget()
		switch {
		case !trimmedText(r.GetCanonicalModelId()):
			return invalid("model registration with canonical id %q", r.GetCanonicalModelId())
		case t.GetBase() == nil && t.GetLora() == nil:
			return invalid("model registration %q without a target", r.GetCanonicalModelId())
		}
	}
	return nil
}

// Catalog returns the relay's live, described pools with their current
// producers.
func (s *RelaySource) Catalog() (uint64, []*Pool, <-chan struct{}) {
	rev, infos, changed := s.cfg.Relay.Catalog()
	var pools []*Pool
	for _, info := range infos {
		tmpl, ok := s.cfg.Pools[relayproto.DomainID(info.Domain)]
		id, err := info.Identity()
		if !ok || err != nil {
			continue
		}
		d := proto.Clone(tmpl).(*Pool)
		d.Producer = ProducerOf(id)
		pools = append(pools, d)
	}
	return rev, pools, changed
}

// domainOf finds the domain of the catalog pool of want: ErrPoolNotFound
// when none is that pool, ErrProducerChanged when its producer is another
// generation.
func (s *RelaySource) domainOf(want *pb.ProducerIdentity) (relayproto.DomainID, error) {
	_, pools, _ := s.Catalog()
	for _, p := range pools {
		switch {
		case !samePool(p.GetProducer(), want):
		case !sameProducer(p.GetProducer(), want):
			return 0, fmt.Errorf("%w: dc %d's producer is incarnation %d, generation %d", ErrProducerChanged,
				want.GetPoolId().GetDcId(), p.GetProducer().GetProducerIncarnation(), p.GetProducer().GetLayoutGeneration())
		default:
			return poolDomain(p), nil
		}
	}
	return 0, fmt.Errorf("%w: dc %d", ErrPoolNotFound, want.GetPoolId().GetDcId())
}

// poolDomain returns the goindex domain of one of the source's own
// catalog entries (ProducerOf put it in the digest's last 8 bytes).
func poolDomain(p *Pool) relayproto.DomainID {
	return relayproto.DomainID(binary.BigEndian.Uint64(p.GetProducer().GetPoolId().GetIndexerDomain().GetCacheSemantics().GetDigest()[8:]))
}

// Follow watches the pool of want and streams its publication: the watch's
// start as the Snapshot, then its deltas and heartbeats, through any
// outage of the relay's NATS server or JetStream. A rebuild of the pool (a
// new identity), the drain marker, or a watch that fell behind end the
// stream with an End update: the subscriber starts over.
func (s *RelaySource) Follow(ctx context.Context, want *pb.ProducerIdentity) (<-chan Update, error) {
	d, err := s.domainOf(want)
	if err != nil {
		return nil, err
	}
	w, err := s.cfg.Relay.Watch(ctx, d, s.cfg.Buffer)
	switch {
	case errors.Is(err, relay.ErrClosed):
		return nil, fmt.Errorf("%w: %w", ErrPoolNotFound, err)
	case err != nil:
		return nil, err
	case !sameProducer(ProducerOf(w.Identity), want):
		w.Close()
		return nil, fmt.Errorf("%w: the pool moved to incarnation %d, generation %d", ErrProducerChanged, w.Identity.Incarnation, w.Identity.LayoutGeneration)
	}
	out := make(chan Update)
	go pump(ctx, w, out)
	return out, nil
}

// pump turns one watch into Updates until it ends or ctx is done.
func pump(ctx context.Context, w *relay.Watch, out chan<- Update) {
	defer close(out)
	defer w.Close()
	send := func(u Update) bool {
		select {
		case out <- u:
			return true
		case <-ctx.Done():
			return false
		}
	}
	end := func(err error) { send(Update{Kind: End, Err: err}) }
	if !send(Update{Kind: Snapshot, Sequence: w.Sequence, Words: w.Words}) {
		return
	}
	seq := w.Sequence
	for {
		var m relayproto.Message
		select {
		case <-ctx.Done():
			return
		case m = <-w.C:
		}
		switch m := m.(type) {
		case nil: // closed
			if errors.Is(w.Err(), relay.ErrLagged) {
				end(fmt.Errorf("%w: %w", ErrLagged, w.Err()))
			} else {
				end(fmt.Errorf("%w: %w", ErrUnavailable, w.Err()))
			}
			return
		case *relayproto.Delta:
			if m.Identity != w.Identity || m.Base != seq {
				end(fmt.Errorf("%w: the relay published delta %d→%d after %d", ErrUnavailable, m.Base, m.Sequence, seq))
				return
			}
			images := make([]cbi1.Image, len(m.Images))
			for i, im := range m.Images {
				images[i] = cbi1.Image{Bucket: im.Bucket, Word: im.Word}
			}
			if !send(Update{Kind: Delta, Base: m.Base, Sequence: m.Sequence, Images: images}) {
				return
			}
			seq = m.Sequence
		case *relayproto.Heartbeat:
			if !send(Update{Kind: Heartbeat, Sequence: seq}) {
				return
			}
		case *relayproto.Snapshot: // only after a rebuild: a new identity
			end(fmt.Errorf("%w: the relay rebuilt the pool as generation %d", ErrProducerChanged, m.Identity.LayoutGeneration))
			return
		case *relayproto.DrainMarker:
			end(fmt.Errorf("%w: the relay drained the pool at %d", ErrUnavailable, m.Expected))
			return
		}
	}
}

// Loads returns one entry per described live pool with a load report: KV
// blocks in use are the report's active decode blocks (Dynamo's
// kv_used_blocks where workers send only that), the total its capacity.
// goindex counts live workers, not ranks: every live worker is expected,
// and all count as observed only when the capacity is known (else none,
// so a consumer never reads a partial capacity as the pool's).
func (s *RelaySource) Loads() []*Load {
	_, pools, _ := s.Catalog()
	var out []*Load
	for _, p := range pools {
		pl, ok := s.load(p)
		if !ok {
			continue
		}
		lr := pl.Report
		e := &Load{Producer: p.GetProducer(), KvUsedBlocks: lr.ActiveDecodeBlocks, TotalKvBlocks: lr.CapacityBlocks,
			KvExpectedRanks: lr.LiveWorkers}
		if lr.CapacityBlocks > 0 {
			e.KvObservedRanks = lr.LiveWorkers
		}
		out = append(out, e)
	}
	return out
}

// load returns the last load of a catalog pool when it is of the pool's
// current producer.
func (s *RelaySource) load(p *Pool) (relay.PoolLoad, bool) {
	pl, ok := s.cfg.Relay.Load(poolDomain(p))
	id := pl.Report.Identity
	return pl, ok && id.Incarnation == p.GetProducer().GetProducerIncarnation() && id.LayoutGeneration == p.GetProducer().GetLayoutGeneration()
}

// Readiness projects one topology per (namespace, canonical model) of the
// described live pools, each pool a member linked to its pool id: READY
// while some member's last load report counts a live worker (its roles
// present), UNAVAILABLE when reports count none (the roles missing),
// UNKNOWN before any report. A pool without a model registration is in no
// topology. The revision moves whenever the projection changes.
func (s *RelaySource) Readiness() (uint64, []*pb.TopologyEntry) {
	_, pools, _ := s.Catalog()
	var entries []*pb.TopologyEntry
	index := map[[2]string]int{}
	for _, p := range pools {
		state := pb.ServingReadinessState_SERVING_READINESS_STATE_UNKNOWN
		if pl, ok := s.load(p); ok {
			state = pb.ServingReadinessState_SERVING_READINESS_STATE_UNAVAILABLE
			if pl.Report.LiveWorkers > 0 {
				state = pb.ServingReadinessState_SERVING_READINESS_STATE_READY
			}
		}
		member := &pb.TopologyMember{Endpoint: p.GetServingEndpoint(), Roles: p.GetPoolRoles(), PoolId: p.GetProducer().GetPoolId()}
		for _, r := range p.GetRegistrations() {
			key := [2]string{p.GetServingEndpoint().GetNamespace(), r.GetCanonicalModelId()}
			i, ok := index[key]
			if !ok {
				i = len(entries)
				index[key] = i
				entries = append(entries, &pb.TopologyEntry{Namespace: key[0], CanonicalModelId: key[1]})
			}
			e := entries[i]
			e.State = max(e.State, state) // READY over UNAVAILABLE over UNKNOWN
			e.Members = append(e.Members, member)
			if state == pb.ServingReadinessState_SERVING_READINESS_STATE_READY {
				e.PresentRoles = addRoles(e.PresentRoles, p.GetPoolRoles())
			}
		}
	}
	for _, e := range entries {
		for _, m := range e.Members {
			for _, r := range m.GetRoles() {
				if !slices.Contains(e.PresentRoles, r) && !slices.Contains(e.MissingRoles, r) {
					e.MissingRoles = append(e.MissingRoles, r)
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revision == 0 || !slices.EqualFunc(entries, s.readiness, func(a, b *pb.TopologyEntry) bool { return proto.Equal(a, b) }) {
		s.revision++
		s.readiness = entries
	}
	return s.revision, entries
}

// addRoles adds the roles not in set yet.
func addRoles(set, roles []pb.WorkerRole) []pb.WorkerRole {
	for _, r := range roles {
		if !slices.Contains(set, r) {
			set = append(set, r)
		}
	}
	return set
}

// ServingLoad reports each described live pool's scheduler load from its
// last load report: the queued prefill tokens and active decode blocks,
// COMPLETE when every live worker sent load samples (the gauges set, and
// the oldest sample's time), DEGRADED when some did not (the gauges
// unset: a partial sum would read as less load), UNAVAILABLE when none
// did or no report came yet; the live workers as its deployment. goindex's
// relay sees no frontends: no model load.
func (s *RelaySource) ServingLoad() ([]*pb.PoolServingLoad, []*pb.ModelServingLoad) {
	_, pools, _ := s.Catalog()
	var out []*pb.PoolServingLoad
	for _, p := range pools {
		psl := &pb.PoolServingLoad{Producer: p.GetProducer(), Load: &pb.LoadView{Status: pb.DataStatus_DATA_STATUS_UNAVAILABLE}}
		if pl, ok := s.load(p); ok {
			r, cov := pl.Report, pl.Coverage
			psl.Deployment = &pb.PoolDeploymentStatus{LiveWorkers: proto.Uint64(uint64(r.LiveWorkers))}
			if cov.Sampled > 0 {
				psl.Load.SourceObservedMs = uint64(cov.Oldest.UnixMilli())
				psl.Load.Status = pb.DataStatus_DATA_STATUS_DEGRADED
			}
			if cov.Sampled > 0 && cov.Sampled >= r.LiveWorkers {
				psl.Load.Status = pb.DataStatus_DATA_STATUS_COMPLETE
				psl.Load.Tokens = &pb.TokenLoadStats{ActivePrefillTokens: proto.Uint64(r.QueuedPrefillTokens),
					ActiveDecodeBlocks: proto.Uint64(r.ActiveDecodeBlocks)}
			}
		}
		out = append(out, psl)
	}
	return out, nil
}
