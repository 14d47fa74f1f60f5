package relay

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/goindex/goindex/goindex/relayproto"
)

// DefaultPrefix is the first token of every goindex subject and JetStream
// asset name.
const DefaultPrefix = "goindex"

// PoolLogKey is the log attribute that names the pool a line concerns, in
// the relay's and the consumer's logs alike, so one pool's lines can be
// followed across both; its value is PoolLogValue's "domain/dc".
const PoolLogKey = "pool"

// PoolLogValue is the PoolLogKey attribute's value for pool (d, dc):
// "d/dc" in decimal.
func PoolLogValue(d relayproto.DomainID, dc relayproto.DCID) string {
	return strconv.FormatUint(uint64(d), 10) + "/" + strconv.FormatUint(uint64(dc), 10)
}

// Names are the NATS subjects and JetStream asset names of one pool, all
// derived from the prefix P, the domain D and the DC C (decimal ids):
//
//	P.D.C.delta      JetStream stream subject: the ordered delta log
//	                 (deltas, heartbeats, drain markers; one frame each)
//	P.D.C.load       core: load-report frames, every LoadEvery, without
//	                 the stored-blocks counter (the 12-field layout every
//	                 consumer decodes)
//	P.D.C.load-stored  core: the same samples with the counter (13 fields,
//	                 which consumers before the counter refuse), once
//	                 the pool has stored a block
//	P.D.C.ping       core request/reply: an Info (RTT probe, discovery)
//	P.D.C.snapshot   core request/reply: store a fresh snapshot, reply Info
//	P.D.C.worker-load  core: JSON WorkerLoad samples from workers (input)
//	P.D.discover     core request, every relay of domain D replies Info
//
//	stream  P-D-C-delta     (limits retention: MaxAge, MaxBytes, discard old)
//	object  P-D-C-snapshot  object "snapshot": the chunked snapshot frames
//	KV      P-D-C-state     keys "owner" (relay claim) and "load" (last report)
//
// In asset names P is escaped so that distinct prefixes never share an
// asset: a dot becomes a dash, a dash "_h" and an underscore "__" (AssetPrefix).
type Names struct {
	Prefix string
	Domain relayproto.DomainID
	DC     relayproto.DCID
}

func (n Names) base() string {
	return n.Prefix + "." + strconv.FormatUint(uint64(n.Domain), 10) + "." + strconv.FormatUint(uint64(n.DC), 10)
}

func (n Names) asset(kind string) string {
	return AssetPrefix(n.Prefix) + "-" + strconv.FormatUint(uint64(n.Domain), 10) + "-" +
		strconv.FormatUint(uint64(n.DC), 10) + "-" + kind
}

// assetEscaper turns a valid prefix into JetStream's name alphabet
// ([A-Za-z0-9_-]) one to one.
var assetEscaper = strings.NewReplacer(".", "-", "-", "_h", "_", "__")

// AssetPrefix is prefix p as it starts JetStream asset names: each dot
// becomes a dash, each dash "_h" and each underscore "__". The mapping is
// one to one on valid prefixes (an underscore always opens a two-byte
// escape, and a dash in the result always stands for a dot), so two
// tenants' prefixes never name one stream or bucket; "goindex" and dotted
// prefixes such as "tenant.a" keep the names they had before the escape.
func AssetPrefix(p string) string { return assetEscaper.Replace(p) }

// DeltaSubject is the delta log's subject.
func (n Names) DeltaSubject() string { return n.base() + ".delta" }

// LoadSubject carries load-report frames.
func (n Names) LoadSubject() string { return n.base() + ".load" }

// LoadStoredSubject carries load-report frames with the stored-blocks
// counter (relayproto.LoadReport.StoredBlocks); LoadSubject carries the
// same samples without it, for decoders that know 12 fields only.
func (n Names) LoadStoredSubject() string { return n.base() + ".load-stored" }

// PingSubject answers RTT probes with an Info.
func (n Names) PingSubject() string { return n.base() + ".ping" }

// SnapshotSubject asks the relay to store a fresh snapshot.
func (n Names) SnapshotSubject() string { return n.base() + ".snapshot" }

// WorkerLoadSubject receives workers' JSON load samples.
func (n Names) WorkerLoadSubject() string { return n.base() + ".worker-load" }

// DiscoverSubject is the domain-wide discovery request subject.
func (n Names) DiscoverSubject() string {
	return n.Prefix + "." + strconv.FormatUint(uint64(n.Domain), 10) + ".discover"
}

// LoadWildcard matches every DC's load subject of the domain.
func (n Names) LoadWildcard() string {
	return n.Prefix + "." + strconv.FormatUint(uint64(n.Domain), 10) + ".*.load"
}

// LoadStoredWildcard matches every DC's load-stored subject of the domain.
func (n Names) LoadStoredWildcard() string {
	return n.Prefix + "." + strconv.FormatUint(uint64(n.Domain), 10) + ".*.load-stored"
}

// Stream is the delta log's stream name.
func (n Names) Stream() string { return n.asset("delta") }

// SnapshotBucket is the object store holding the pool's snapshot.
func (n Names) SnapshotBucket() string { return n.asset("snapshot") }

// StateBucket is the KV bucket holding the owner claim and the last load.
func (n Names) StateBucket() string { return n.asset("state") }

// Keys and object names inside the pool's buckets, and snapshot metadata.
const (
	SnapshotObject = "snapshot"
	OwnerKey       = "owner"
	LoadKey        = "load"

	MetaSequence    = "sequence"     // terminal sequence N of the stored snapshot
	MetaIncarnation = "incarnation"  // producer incarnation
	MetaLogSequence = "log-sequence" // stream sequence of the last log message the snapshot reflects
)

// ValidPrefix checks that p is one or more subject tokens of [A-Za-z0-9_-]
// joined by dots: never a wildcard (`*`, `>`) that would reach other
// tenants' subjects, nor a byte that breaks a JetStream asset name. Relays
// and consumers refuse any other prefix with ErrBadConfig.
func ValidPrefix(p string) error {
	for _, tok := range strings.Split(p, ".") {
		if tok == "" {
			return fmt.Errorf("%w: prefix %q has an empty token", ErrBadConfig, p)
		}
		for i := 0; i < len(tok); i++ {
			c := tok[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
				return fmt.Errorf("%w: prefix %q: byte %q is not allowed", ErrBadConfig, p, c)
			}
		}
	}
	return nil
}

// MaxInfoBytes bounds an Info reply a consumer decodes.
const MaxInfoBytes = 4096

// Info is what a relay answers on its ping, snapshot and discover subjects:
// the pool's current producer identity, where its JetStream assets live,
// and the publisher's position. Consumers time the ping for RTT and take
// the identity for their lane's assignment.
type Info struct {
	Domain           uint64 `json:"domain"`
	DC               uint64 `json:"dc"`
	Name             string `json:"name,omitempty"` // the DC's human name
	Incarnation      uint64 `json:"incarnation"`
	LayoutGeneration uint64 `json:"layout_generation"`
	Seed             uint64 `json:"seed"`
	Buckets          uint64 `json:"buckets"`
	// JSDomain is the JetStream domain consumers reach the pool's assets
	// through ("" for the connection's own JetStream).
	JSDomain       string `json:"js_domain,omitempty"`
	Stream         string `json:"stream"`
	SnapshotBucket string `json:"snapshot_bucket"`
	StateBucket    string `json:"state_bucket"`
	LastSequence   uint64 `json:"last_sequence"`
	// SnapshotSequence is the terminal sequence of the stored snapshot.
	SnapshotSequence uint64 `json:"snapshot_sequence"`
	SentAtUnixNano   int64  `json:"sent_at_unix_nano"`
}

// Identity returns the producer identity Info describes.
func (i *Info) Identity() (relayproto.ProducerIdentity, error) {
	f, err := relayproto.NewFormat(i.Seed, i.Buckets)
	if err != nil {
		return relayproto.ProducerIdentity{}, err
	}
	return relayproto.ProducerIdentity{
		Pool:        relayproto.PoolID{Domain: relayproto.DomainID(i.Domain), DC: relayproto.DCID(i.DC)},
		Incarnation: i.Incarnation, LayoutGeneration: i.LayoutGeneration, Format: f,
	}, nil
}

// DecodeInfo decodes an Info reply of at most MaxInfoBytes.
func DecodeInfo(b []byte) (Info, error) {
	var info Info
	if len(b) > MaxInfoBytes {
		return info, fmt.Errorf("%w: info of %d bytes, limit %d", ErrTooLarge, len(b), MaxInfoBytes)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return Info{}, fmt.Errorf("%w: info: %v", ErrMalformed, err)
	}
	if _, err := info.Identity(); err != nil {
		return Info{}, fmt.Errorf("%w: info: %v", ErrMalformed, err)
	}
	return info, nil
}

// MaxWorkerLoadBytes bounds a worker load sample.
const MaxWorkerLoadBytes = 1024

// WorkerLoad is one worker's load sample, published as JSON on the pool's
// worker-load subject by the worker (or an adapter reading its metrics).
// The relay keeps each worker's latest sample and sums them over the live
// workers into its load reports.
type WorkerLoad struct {
	WorkerID            uint64 `json:"worker_id"`
	QueuedPrefillTokens uint64 `json:"queued_prefill_tokens"`
	ActiveDecodeBlocks  uint64 `json:"active_decode_blocks"`
	CapacityBlocks      uint64 `json:"capacity_blocks"`
}

// DecodeWorkerLoad decodes a sample of at most MaxWorkerLoadBytes.
func DecodeWorkerLoad(b []byte) (WorkerLoad, error) {
	var w WorkerLoad
	if len(b) > MaxWorkerLoadBytes {
		return w, fmt.Errorf("%w: worker load of %d bytes, limit %d", ErrTooLarge, len(b), MaxWorkerLoadBytes)
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return WorkerLoad{}, fmt.Errorf("%w: worker load: %v", ErrMalformed, err)
	}
	return w, nil
}
