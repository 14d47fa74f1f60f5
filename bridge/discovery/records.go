package discovery

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/goindex/goindex/dynamo"
)

// records picks the pool's publishers out of the records of Dynamo's
// KV-store discovery, whichever store holds them (etcd, the file store):
// full keys such as "v1/event_channels/namespace/…/topic/kv-events/<id>"
// and their JSON values.
type records struct {
	scope   dynamo.Scope
	workers bool
	watched []watchedPrefix
	log     *slog.Logger
}

// checkPoolScope refuses a pool scope that is not a whole endpoint scope.
func checkPoolScope(sc dynamo.Scope) error {
	if sc.Namespace == "" || sc.Component == "" || sc.Endpoint == "" {
		return fmt.Errorf("%w: the pool's namespace, component and endpoint are required", ErrBadConfig)
	}
	return nil
}

// note records p as known under key and reports it when it is new or
// changed.
func note(known map[string]Publisher, key string, p Publisher, fn func(Update)) {
	if known[key] != p {
		known[key] = p
		fn(Update{Publisher: p})
	}
}

// sweep forgets, and reports gone, every known publisher whose key a
// complete listing did not see.
func sweep(known map[string]Publisher, seen map[string]bool, fn func(Update)) {
	for key, p := range known {
		if !seen[key] {
			delete(known, key)
			fn(Update{Publisher: p, Gone: true})
		}
	}
}

// watchedPrefix is one key prefix and what its channels are.
type watchedPrefix struct {
	prefix string
	scope  dynamo.Scope
	topic  string
}

// newRecords follows the channels of scope (an endpoint scope) that carry
// the pool's events and load: its endpoint scope (events and load), its
// component scope (events, older releases) and its namespace scope (load,
// older releases), the last two also in the key layout before EventScope,
// <ns>/<component>/<topic>/<id> with component "" for namespace scope
// [unverified: that layout is read from third-party notes and from the map
// keys of Dynamo's v1.2 Kubernetes fixture,
// lib/runtime/src/discovery/kube/fixtures/v1_2_dwm.json]; with workers,
// the instance records of the endpoint instead. Records are read by
// parseChannel, which takes no scope from the record, so v1.2 records,
// with flat namespace and component fields and no scope, count too.
func newRecords(scope dynamo.Scope, workers bool, log *slog.Logger) records {
	r := records{scope: scope, workers: workers, log: log}
	if workers {
		r.watched = []watchedPrefix{{prefix: instancesRoot + scope.Namespace + "/" + scope.Component + "/" + scope.Endpoint + "/", scope: scope}}
		return r
	}
	component := dynamo.Scope{Namespace: scope.Namespace, Component: scope.Component}
	namespace := dynamo.Scope{Namespace: scope.Namespace}
	for _, w := range []struct {
		scope dynamo.Scope
		topic string
	}{{scope, dynamo.EventTopic}, {component, dynamo.EventTopic}, {scope, dynamo.MetricsTopic}, {namespace, dynamo.MetricsTopic}} {
		r.watched = append(r.watched, watchedPrefix{prefix: w.scope.ChannelPrefix(w.topic), scope: w.scope, topic: w.topic})
		if w.scope.Endpoint == "" { // also in the layout before EventScope
			r.watched = append(r.watched, watchedPrefix{prefix: channelsRoot + w.scope.Namespace + "/" + w.scope.Component + "/" + w.topic + "/",
				scope: w.scope, topic: w.topic})
		}
	}
	return r
}

// publisher turns one key and record into a Publisher, if the key is one
// of the pool's channels and the record a direct-mode ZMQ or a NATS
// channel, or the record is a KV event source of the pool's component.
func (r *records) publisher(key string, value []byte) (Publisher, bool) {
	if strings.HasPrefix(key, sourcesRoot) && !r.workers {
		p, err := kvSourcePublisher(key, value, r.scope)
		if err != nil {
			if !errors.Is(err, ErrNotChannel) && !errors.Is(err, errOtherScope) {
				r.log.Warn("discovery record skipped", "key", key, "err", err)
			}
			return Publisher{}, false
		}
		return p, true
	}
	for _, w := range r.watched {
		rest, ok := strings.CutPrefix(key, w.prefix)
		if !ok || rest == "" || strings.Contains(rest, "/") {
			continue
		}
		if r.workers {
			return r.worker(key, rest, value)
		}
		c, err := parseChannel(value)
		if err != nil {
			if !errors.Is(err, ErrNotChannel) {
				r.log.Warn("discovery record skipped", "key", key, "err", err)
			}
			return Publisher{}, false
		}
		if c.endpoint == "" && !c.nats() {
			return Publisher{}, false // a broker channel
		}
		id := c.id
		if !c.hasID {
			if id, err = strconv.ParseUint(rest, 16, 64); err != nil {
				r.log.Warn("discovery record skipped: no publisher id", "key", key)
				return Publisher{}, false
			}
		}
		if c.topic != "" && c.topic != w.topic {
			r.log.Warn("discovery record skipped: topic differs from its key", "key", key, "topic", c.topic)
			return Publisher{}, false
		}
		return Publisher{Key: key, Endpoint: c.endpoint, NATS: c.nats(), PublisherID: id, Scope: w.scope, Topic: w.topic}, true
	}
	return Publisher{}, false
}

// worker turns an instance record of the pool's endpoint into a Publisher
// with Worker set.
func (r *records) worker(key, keyID string, value []byte) (Publisher, bool) {
	id, err := parseInstance(value, keyID)
	if err != nil {
		if !errors.Is(err, ErrNotChannel) {
			r.log.Warn("discovery record skipped", "key", key, "err", err)
		}
		return Publisher{}, false
	}
	return Publisher{Key: key, Worker: true, WorkerID: id, Scope: r.scope}, true
}
