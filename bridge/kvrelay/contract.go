package kvrelay

import (
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/goindex/goindex/bridge/kvrelay/cbi1"
	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
)

// The contract's envelope values.
const (
	// ContractMarker is field 127 of every top-level message: "KVR1".
	ContractMarker = 0x4B565231
	// ProtocolVersion is RELAY_PROTOCOL_VERSION.
	ProtocolVersion = 1
	// maxSubscriberID bounds subscriber_id, in bytes.
	maxSubscriberID = 128
	// MaxMessageBytes bounds one gRPC message either way: a full CBI1
	// chunk (4 MiB and its header) inside a FilterUpdate, with room to
	// spare, as upstream's 8 MiB.
	MaxMessageBytes = 8 << 20
)

// marked is a message carrying contract_marker.
type marked interface{ GetContractMarker() uint32 }

// response is a message carrying the response envelope.
type response interface {
	marked
	GetProtocolVersion() uint32
	GetRelay() *pb.RelayIdentity
}

func checkRequest(m marked) error {
	if got := m.GetContractMarker(); got != ContractMarker {
		return contractError("contract_marker %#x, want %#x", got, ContractMarker)
	}
	return nil
}

func checkResponse(m response) error {
	switch {
	case m.GetContractMarker() != ContractMarker:
		return contractError("contract_marker %#x, want %#x", m.GetContractMarker(), ContractMarker)
	case m.GetProtocolVersion() != ProtocolVersion:
		return contractError("protocol_version %d, want %d", m.GetProtocolVersion(), ProtocolVersion)
	case m.GetRelay() == nil:
		return invalid("response without the relay's identity")
	}
	return nil
}

func checkSubscriber(id string) error {
	if len(id) == 0 || len(id) > maxSubscriberID {
		return invalid("subscriber_id of %d bytes, want 1..%d", len(id), maxSubscriberID)
	}
	return nil
}

// checkProducer validates a producer identity as a subscription key: every
// part present, the CKF format one goindex and the CBI1 payload share.
func checkProducer(p *pb.ProducerIdentity) error {
	f := p.GetCkfFormat()
	switch {
	case p.GetPoolId() == nil || p.GetPoolId().GetIndexerDomain() == nil:
		return invalid("producer without a pool id and domain")
	case f == nil:
		return invalid("producer without a CKF format")
	case f.GetFormatVersion() != cbi1.FormatVersion || f.GetFingerprintBits() != cbi1.FingerprintBits || f.GetSlotsPerBucket() != cbi1.SlotsPerBucket:
		return invalid("CKF format v%d, %d-bit fingerprints × %d slots; want v%d, %d × %d", f.GetFormatVersion(),
			f.GetFingerprintBits(), f.GetSlotsPerBucket(), cbi1.FormatVersion, cbi1.FingerprintBits, cbi1.SlotsPerBucket)
	case f.GetBucketCount() < 2 || f.GetBucketCount() > 1<<24 || f.GetBucketCount()&(f.GetBucketCount()-1) != 0:
		return invalid("bucket_count %d is not a power of two in [2, 2^24]", f.GetBucketCount())
	}
	return nil
}

// checkDescriptor validates a catalog entry: its producer, a block size,
// a known hash format and at least one known role.
func checkDescriptor(d *pb.KvPoolDescriptor) error {
	if err := checkProducer(d.GetProducer()); err != nil {
		return err
	}
	return checkMeta(d)
}

// checkMeta validates a descriptor's metadata: a block size, a known hash
// format and at least one known role.
func checkMeta(d *pb.KvPoolDescriptor) error {
	q := d.GetQuerySemantics()
	switch {
	case q.GetKvBlockSize() == 0:
		return invalid("kv_block_size 0")
	case q.GetHashFormat() == pb.KvQueryHashFormat_KV_QUERY_HASH_FORMAT_UNSPECIFIED || pb.KvQueryHashFormat_name[int32(q.GetHashFormat())] == "":
		return invalid("hash format %d", q.GetHashFormat())
	case len(d.GetPoolRoles()) == 0:
		return invalid("no pool roles")
	}
	for _, r := range d.GetPoolRoles() {
		if r == pb.WorkerRole_WORKER_ROLE_UNSPECIFIED || pb.WorkerRole_name[int32(r)] == "" {
			return invalid("worker role %d", r)
		}
	}
	return nil
}

// trimmedText is upstream's rule for names: non-empty, without
// surrounding white space.
func trimmedText(s string) bool { return s != "" && strings.TrimSpace(s) == s }

// sameProducer is the contract's equality of subscription keys.
func sameProducer(a, b *pb.ProducerIdentity) bool { return proto.Equal(a, b) }

// samePool compares the stable pool ids of two producers.
func samePool(a, b *pb.ProducerIdentity) bool { return proto.Equal(a.GetPoolId(), b.GetPoolId()) }

func header(p *pb.ProducerIdentity, epoch uint64) cbi1.Header {
	f := p.GetCkfFormat()
	return cbi1.Header{Seed: f.GetSeed(), BucketCount: f.GetBucketCount(), DCID: p.GetPoolId().GetDcId(), Epoch: epoch}
}
