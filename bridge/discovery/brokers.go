package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/goindex/goindex/dynamo"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BrokerComponent is the component under which Dynamo's ZMQ brokers
// register their event channel (its zmq_broker binary, when ETCD_ENDPOINTS
// is set), and where publishers and subscribers with
// DYN_ZMQ_BROKER_ENABLED look them up in their namespace
// (dynamo-current §1.8).
const BrokerComponent = "zmq_broker"

// Brokers lists, once, the XPUB endpoints of the ZMQ brokers registered in
// etcd for the pool's namespace: the event channels of component
// BrokerComponent, whatever their topic (under the scoped key layout and
// the one before it), whose transport is ZmqBroker
// (xsub_endpoints for publishers, xpub_endpoints for subscribers). The
// endpoints are sorted and each given once; none registered is an empty
// list, not an error. A record that is not a broker's is skipped (logged).
func (e *Etcd) Brokers(ctx context.Context) ([]string, error) {
	cli, err := e.client(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	var xpubs []string
	for _, prefix := range []string{
		dynamo.Scope{Namespace: e.cfg.Scope.Namespace, Component: BrokerComponent}.ChannelScopePrefix(),
		channelsRoot + e.cfg.Scope.Namespace + "/" + BrokerComponent + "/", // the layout before EventScope
	} {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("etcd %v: list %s: %w", e.cfg.Endpoints, prefix, err)
		}
		for _, kv := range resp.Kvs {
			eps, err := parseBroker(kv.Value)
			if err != nil {
				e.cfg.Logger.Warn("etcd record skipped", "key", string(kv.Key), "err", err)
				continue
			}
			xpubs = append(xpubs, eps...)
		}
	}
	slices.Sort(xpubs)
	return slices.Compact(xpubs), nil
}

// parseBroker reads a broker's EventChannel record and returns its XPUB
// endpoints. The transport is EventTransport::ZmqBroker{xsub_endpoints,
// xpub_endpoints}, its serde tagging read as the publishers'
// (splitTransport), since the broker's field layout is [unverified].
func parseBroker(b []byte) ([]string, error) {
	if len(b) > MaxRecordBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBadRecord, len(b), MaxRecordBytes)
	}
	var rec struct {
		Transport json.RawMessage `json:"transport"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	kind, config, err := splitTransport(rec.Transport)
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(kind, "ZmqBroker") {
		return nil, fmt.Errorf("%w: transport %q, not a broker's", ErrBadRecord, kind)
	}
	var eps struct {
		XPub []string `json:"xpub_endpoints"`
	}
	if err := json.Unmarshal(config, &eps); err != nil || len(eps.XPub) == 0 {
		return nil, fmt.Errorf("%w: broker record without xpub_endpoints: %s", ErrBadRecord, config)
	}
	return eps.XPub, nil
}
