package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/goindex/goindex/dynamo"
)

// Publisher is one publisher of Dynamo's ZMQ event plane in direct mode: a
// PUB socket a subscriber connects to; or (NATS) a publisher of the NATS
// event plane, which has nothing to connect to but whose record says, by
// going away, that the worker behind it is gone.
type Publisher struct {
	// Key names the publisher across updates (its discovery key; the
	// endpoint for a static one).
	Key string
	// Endpoint is the PUB socket's address, "tcp://host:port" ("" for a
	// NATS publisher).
	Endpoint string
	// NATS marks a publisher of the NATS event plane (DYN_EVENT_PLANE=nats):
	// its envelopes, carrying PublisherID, arrive on the relay's NATS
	// subjects.
	NATS bool
	// PublisherID is the id the publisher registered; every message must
	// carry it. 0 accepts any (a static publisher), and a change of id
	// then marks a restart.
	PublisherID uint64
	// Scope is the scope the publisher registered; the zero Scope means
	// the subscriber's own.
	Scope dynamo.Scope
	// Topic is the topic the channel carries (kv-events or kv_metrics);
	// "" means both.
	Topic string
	// Worker marks not a channel but a worker's instance record
	// (EtcdConfig.Workers, for broker mode, where publishers register no
	// channel): nothing to connect to, but its going says the worker
	// WorkerID is gone.
	Worker   bool
	WorkerID uint64
	// KVSource marks not a channel but a KV event source record (v1.4 on,
	// registered beside the KV publisher's channel): nothing to connect
	// to, but while it is present the worker WorkerID (its rank DPRank) is
	// there, fed by publisher PublisherID, however long it is silent, which
	// is how a relay started after a worker's last event learns of it.
	// Its going ends only that: what the publisher fed is cleared by its
	// channel's going.
	KVSource bool
	DPRank   uint32
}

// Update is one change of the publisher set: a publisher that appeared or
// changed, or (Gone) one that left.
type Update struct {
	Publisher Publisher
	Gone      bool
}

// Source streams the set of event-plane publishers: Watch calls fn with
// every publisher present, then with every change, until ctx ends (fn is
// called from one goroutine at a time). Watch returns nil when ctx ends
// and an error when it cannot go on.
//
// Health says whether the source can be relied on, from any goroutine:
// nil once a list has succeeded while the latest request to the backend
// (a list, or the check every CheckEvery while watching, each bounded by
// RequestTimeout) succeeded; else a *HealthError saying why. A source
// that fails is ready again at its next successful list.
type Source interface {
	Watch(ctx context.Context, fn func(Update)) error
	Health() error
	String() string
}

// MaxRecordBytes bounds one discovery record (an etcd value, a resource's
// data); Dynamo's are a few hundred bytes.
const MaxRecordBytes = 64 << 10

// channel is what an EventChannel record says.
type channel struct {
	topic    string
	id       uint64
	hasID    bool
	endpoint string // "" when the transport is not direct-mode ZMQ
	kind     string // the transport kind as written
}

// nats reports a channel of the NATS event plane.
func (c *channel) nats() bool { return strings.EqualFold(c.kind, "nats") }

// channelRecord mirrors DiscoveryInstance::EventChannel (dynamo-current
// §1.7). Its exact serde shape is partly [unverified], so every plausible
// form is accepted: the id as instance_id or publisher_id, a number or a
// decimal string; the transport adjacently tagged
// ({"kind":"Zmq","config":{"endpoint":…}}) or externally tagged
// ({"Zmq":{"endpoint":…}}), its kind in any case.
type channelRecord struct {
	Type        string          `json:"type"`
	Topic       string          `json:"topic"`
	InstanceID  json.RawMessage `json:"instance_id"`
	PublisherID json.RawMessage `json:"publisher_id"`
	Transport   json.RawMessage `json:"transport"`
}

// parseChannel decodes an EventChannel record. A record of another type
// returns ErrNotChannel; a malformed one ErrBadRecord.
func parseChannel(b []byte) (channel, error) {
	if len(b) > MaxRecordBytes {
		return channel{}, fmt.Errorf("%w: %d bytes, limit %d", ErrBadRecord, len(b), MaxRecordBytes)
	}
	var r channelRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return channel{}, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if r.Type != "" && r.Type != "EventChannel" {
		return channel{}, fmt.Errorf("%w: type %q", ErrNotChannel, r.Type)
	}
	c := channel{topic: r.Topic}
	for _, raw := range []json.RawMessage{r.InstanceID, r.PublisherID} {
		if len(raw) == 0 || c.hasID {
			continue
		}
		id, err := parseID(raw)
		if err != nil {
			return channel{}, err
		}
		c.id, c.hasID = id, true
	}
	kind, endpoint, err := parseTransport(r.Transport)
	if err != nil {
		return channel{}, err
	}
	c.kind = kind
	if strings.EqualFold(kind, "zmq") {
		c.endpoint = endpoint
	}
	return c, nil
}

// parseID reads a publisher id: a JSON integer or a decimal string.
func parseID(raw json.RawMessage) (uint64, error) {
	s := string(bytes.Trim(bytes.TrimSpace(raw), `"`))
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: publisher id %s", ErrBadRecord, raw)
	}
	return id, nil
}

// parseTransport reads an EventTransport in either serde tagging: its kind
// and, for a ZMQ transport, its endpoint ("" for another transport).
func parseTransport(raw json.RawMessage) (kind, endpoint string, err error) {
	kind, config, err := splitTransport(raw)
	if err != nil {
		return "", "", err
	}
	var cfg struct {
		Endpoint string `json:"endpoint"`
	}
	if len(config) > 0 && json.Unmarshal(config, &cfg) != nil {
		cfg.Endpoint = "" // another transport's config
	}
	return kind, cfg.Endpoint, nil
}

// splitTransport returns an EventTransport's kind and its config, as serde
// tags it adjacently ({"kind": K, "config": C}) or externally ({K: C}):
// which one Dynamo's records use is [unverified], so both are read.
func splitTransport(raw json.RawMessage) (kind string, config json.RawMessage, err error) {
	if len(raw) == 0 {
		return "", nil, fmt.Errorf("%w: no transport", ErrBadRecord)
	}
	var adjacent struct {
		Kind   string          `json:"kind"`
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(raw, &adjacent); err != nil {
		return "", nil, fmt.Errorf("%w: transport: %v", ErrBadRecord, err)
	}
	if adjacent.Kind != "" {
		return adjacent.Kind, adjacent.Config, nil
	}
	var external map[string]json.RawMessage
	if err := json.Unmarshal(raw, &external); err != nil || len(external) != 1 {
		return "", nil, fmt.Errorf("%w: transport %s", ErrBadRecord, raw)
	}
	for k, v := range external {
		kind, config = k, v
	}
	return kind, config, nil
}

// instanceRecord mirrors DiscoveryInstance::Endpoint, a worker's record
// under v1/instances/<ns>/<comp>/<endpoint>/<instance id, hex> (Dynamo's
// EndpointInstanceId path). Its JSON is the Instance struct tagged
// "type":"Endpoint" by the enum; the tag and the id's form (a number or a
// decimal string) are [unverified], so a record without the tag, or with
// the id only in its key, is accepted.
type instanceRecord struct {
	Type       string          `json:"type"`
	InstanceID json.RawMessage `json:"instance_id"`
}

// parseInstance returns the worker id of an endpoint instance record: its
// instance_id, or keyID (the key's hex id) when the record has none. A
// record of another type returns ErrNotChannel; a malformed one
// ErrBadRecord.
func parseInstance(b []byte, keyID string) (uint64, error) {
	if len(b) > MaxRecordBytes {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrBadRecord, len(b), MaxRecordBytes)
	}
	var r instanceRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if r.Type != "" && r.Type != "Endpoint" {
		return 0, fmt.Errorf("%w: type %q", ErrNotChannel, r.Type)
	}
	if len(r.InstanceID) > 0 {
		return parseID(r.InstanceID)
	}
	id, err := strconv.ParseUint(keyID, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: no instance id in the record or its key", ErrBadRecord)
	}
	return id, nil
}

// kvSource is what a KV event source record says: the worker whose KV
// events publisher id feeds, and the endpoint whose KV state they are.
type kvSource struct {
	worker   uint64
	rank     uint32
	id       uint64 // 0: the record has none
	endpoint dynamo.Scope
}

// sourceRecord mirrors DiscoveryInstance::EventSource, registered by the
// KV publisher beside its EventChannel since v1.4 (dynamo-current §1.7):
// its scope (the endpoint of kv_state_endpoint), topic and publisher id,
// and its metadata, a KvEventSource {kv_state_endpoint, worker: {worker_id,
// dp_rank}, publisher_id, recovery_target?}. The exact serde shape is
// [unverified]: the id is read as instance_id or publisher_id, at the top
// or in the metadata; the worker as a nested {worker_id, dp_rank} or flat
// fields; the endpoint from kv_state_endpoint or the scope.
type sourceRecord struct {
	Type        string          `json:"type"`
	Topic       string          `json:"topic"`
	Scope       json.RawMessage `json:"scope"`
	InstanceID  json.RawMessage `json:"instance_id"`
	PublisherID json.RawMessage `json:"publisher_id"`
	Metadata    struct {
		KVStateEndpoint json.RawMessage `json:"kv_state_endpoint"`
		PublisherID     json.RawMessage `json:"publisher_id"`
		WorkerID        json.RawMessage `json:"worker_id"`
		DPRank          json.RawMessage `json:"dp_rank"`
		Worker          struct {
			WorkerID json.RawMessage `json:"worker_id"`
			DPRank   json.RawMessage `json:"dp_rank"`
		} `json:"worker"`
	} `json:"metadata"`
}

// parseKVSource decodes an EventSource record. A record of another type
// returns ErrNotChannel; one that names no worker or endpoint, or whose
// topic is not kv-events, ErrBadRecord.
func parseKVSource(b []byte) (kvSource, error) {
	if len(b) > MaxRecordBytes {
		return kvSource{}, fmt.Errorf("%w: %d bytes, limit %d", ErrBadRecord, len(b), MaxRecordBytes)
	}
	var r sourceRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return kvSource{}, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if r.Type != "" && r.Type != "EventSource" {
		return kvSource{}, fmt.Errorf("%w: type %q", ErrNotChannel, r.Type)
	}
	if r.Topic != "" && r.Topic != dynamo.EventTopic {
		return kvSource{}, fmt.Errorf("%w: event source of topic %q", ErrBadRecord, r.Topic)
	}
	m := &r.Metadata
	var s kvSource
	worker := firstRaw(m.Worker.WorkerID, m.WorkerID)
	if len(worker) == 0 {
		return kvSource{}, fmt.Errorf("%w: event source names no worker", ErrBadRecord)
	}
	var err error
	if s.worker, err = parseID(worker); err != nil {
		return kvSource{}, err
	}
	if rank := firstRaw(m.Worker.DPRank, m.DPRank); len(rank) > 0 && string(rank) != "null" {
		r, err := parseID(rank)
		if err != nil || r > math.MaxUint32 {
			return kvSource{}, fmt.Errorf("%w: dp rank %s", ErrBadRecord, rank)
		}
		s.rank = uint32(r)
	}
	if id := firstRaw(r.InstanceID, r.PublisherID, m.PublisherID); len(id) > 0 {
		if s.id, err = parseID(id); err != nil {
			return kvSource{}, err
		}
	}
	switch {
	case len(m.KVStateEndpoint) > 0:
		s.endpoint, err = parseEndpointID(m.KVStateEndpoint)
	case len(r.Scope) > 0:
		s.endpoint, err = parseScope(r.Scope)
	default:
		err = fmt.Errorf("%w: event source names no endpoint", ErrBadRecord)
	}
	if err != nil {
		return kvSource{}, err
	}
	return s, nil
}

// kvSourcePublisher turns an EventSource record into a Publisher with
// KVSource set, if its endpoint is in the pool's namespace and component
// (which endpoint of the component a worker names as its KV state's is
// [unverified], so any is taken). A record of another type returns
// ErrNotChannel, one of another component ErrOtherScope.
func kvSourcePublisher(key string, value []byte, pool dynamo.Scope) (Publisher, error) {
	s, err := parseKVSource(value)
	if err != nil {
		return Publisher{}, err
	}
	if s.endpoint.Namespace != pool.Namespace || s.endpoint.Component != pool.Component {
		return Publisher{}, errOtherScope
	}
	return Publisher{Key: key, KVSource: true, WorkerID: s.worker, DPRank: s.rank, PublisherID: s.id,
		Scope: s.endpoint, Topic: dynamo.EventTopic}, nil
}

// firstRaw returns the first of raws that is present.
func firstRaw(raws ...json.RawMessage) json.RawMessage {
	for _, r := range raws {
		if len(r) > 0 {
			return r
		}
	}
	return nil
}
