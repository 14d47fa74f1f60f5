// Package discovery follows which Dynamo workers publish KV events and load
// over the ZMQ event plane, and where: the EventChannel records Dynamo's
// discovery backends hold (dynamo-current §1.7). Etcd reads the etcd
// backend (Dynamo's default outside Kubernetes: keys under
// v1/event_channels/ on the workers' leases); Kube reads the
// DynamoWorkerMetadata resources of the Kubernetes backend through the API
// server's list and watch; Dir polls the file store backend
// (DYN_DISCOVERY_BACKEND=file: the same records as files under
// DYN_FILE_KV, for hosts without etcd). All are Sources of Updates that
// bridge/zmqfeed's Plane turns into subscriptions.
//
// # Concepts
//
// A secured etcd is read with the credentials Dynamo's own etcd client
// takes (EtcdCredentials: user and password, CA bundle, client
// certificate and key for mutual TLS).
//
// A Publisher is one direct-mode PUB endpoint with the publisher id it
// registered, the scope of its record and its topic. Only the pool's
// scopes are followed: its endpoint scope (KV events and load, v1.4 on),
// its component scope (KV events, older releases) and its namespace scope
// (load, older releases). A record's scope is its key's (KV stores, where
// the layout before EventScope, <ns>/<component>/<topic>/<id>, is read
// too) or its "scope" field (Kubernetes); v1.2 workers' records have no
// scope field but flat namespace and component fields, component "" for
// namespace scope. A NATS channel (DYN_EVENT_PLANE=nats) is a
// Publisher with NATS set and no endpoint: the relay reads NATS itself,
// but the record's going says its worker is gone. Broker channels are not
// publishers: Etcd's Brokers lists them once (the ZmqBroker channels of
// component zmq_broker in the pool's namespace, which Dynamo's broker
// registers in etcd only, and its DYN_ZMQ_BROKER_ENABLED looks up). A
// worker that dies disappears when its lease expires (etcd) or
// its resource is deleted with its pod (Kubernetes); a restarted worker
// registers a new publisher id under a new key.
//
// A KV event source record (v1.4 on; v1/event_sources/ in etcd,
// "type":"EventSource" in Kubernetes data) names the worker and dp rank a
// KV publisher feeds; one of the pool's component is a Publisher with
// KVSource set: nothing to connect to, but it says the worker is there
// before it has said anything.
//
// In broker mode Dynamo's publishers register no channel, so the worker
// itself is followed (EtcdConfig.Workers, KubeConfig.Workers): each
// worker serving the pool's endpoint holds an instance record
// (v1/instances/<ns>/<comp>/<endpoint>/<id, hex> under its lease; an
// endpoint instance in its DynamoWorkerMetadata), whose id is the
// worker_id of its KV events; a Publisher with Worker set stands for it.
//
// Record shapes marked [unverified] in the spec (the id's field name,
// the transport's serde tagging, EndpointId, where Kubernetes data holds
// the channels) are accepted in every plausible form and tested in each.
//
// # Errors
//
// A bad record is logged and skipped (ErrBadRecord); a lost connection or
// a compacted or expired watch is retried by listing again, reporting what
// vanished meanwhile as gone. Each list is bounded (RequestTimeout), so an
// etcd that cannot be reached is retried (after a second, doubling to
// MaxRetryDelay while it keeps failing) rather than waited for in silence; an etcd client that cannot be made (etcd unreachable or
// refusing the credentials) is made again; each distinct failure is
// logged once, and so is the list that ends it. The
// Kubernetes service account token is read from its file for every
// request, since the kubelet rotates it in place; a list the API server
// fails or refuses (401, 403) is retried with backoff (RetryDelay doubling
// to MaxRetryDelay, jittered: internal/backoff), each distinct failure
// logged once. Watch returns
// only when its context ends.
//
// # Health
//
// A watch stream does not say that its server went away (etcd's client
// waits for it; a silent API server leaves the stream open), so while
// watching each source checks every CheckEvery, with one request bounded
// by RequestTimeout (a count of the channels; a list of one resource),
// that its backend answers; a failed check ends the watch and lists again.
// Health is nil once a list has succeeded while the latest list or check
// succeeded, and a *HealthError naming the source and the failure
// otherwise, until a list succeeds; a watch that merely ended (compaction,
// an expired resource version, a closed stream) is not a failure. The
// relay's readiness reads it (relay.HealthReporter).
//
// # Files
//
//   - doc.go: this overview.
//   - errors.go: ErrBadConfig, ErrBadRecord, ErrNotChannel, HealthError.
//   - health.go: a source's health and its periodic check while watching.
//   - publisher.go: Publisher, Update, Source; EventChannel, KV event
//     source and endpoint instance record parsing.
//   - records.go: which records of the KV-store backends (etcd, the file
//     store) are the pool's publishers, by key and value.
//   - etcd.go: Etcd, the etcd backend's list and watch.
//   - dir.go: Dir, the file store backend (DYN_FILE_KV) polled.
//   - kube.go: Kube, the Kubernetes backend's list and watch.
//   - brokers.go: BrokerComponent, Etcd.Brokers and the broker record's
//     parser.
//   - etcd_test.go: against a real etcd (Debian's, etcdtest): records
//     listed and followed, lease revocation and expiry, a restart, skipped
//     scopes, transports and bad records; record forms; an unreachable
//     etcd retried (its failure logged once) until it is reached, then
//     listed; an etcd with
//     authentication on (a wrong password refused and logged, the right
//     one listed) and one requiring client certificates over TLS.
//   - dir_test.go: records written as Dynamo's file store writes them
//     (percent-encoded names, temp files renamed): followed from a store
//     not made yet, rewritten, deleted and expired; a bad record logged
//     once; nested directories; instance records; a root that is a file;
//     v1.2 records in the layout before EventScope.
//   - kube_test.go: against a fake API server: data as an object and as a
//     string, both EndpointId shapes, ADDED/MODIFIED/DELETED, a re-list
//     after the stream ends, a token rotated in its file taken at the
//     next request; a v1.2 worker's resource (channels without scope).
//   - health_test.go: Health before the first list, with etcd stopped and
//     started again (etcdtest), with a fake API server failing and
//     recovering; refused credentials (401, then 403) retried, logged once
//     each, until a token is accepted.
//   - workers_test.go: Workers mode against a real etcd (every record
//     form, other endpoints and channels ignored, lease revocation and
//     expiry, nobody gone through an etcd outage) and a fake API server;
//     instance record forms.
//   - sources_test.go: KV event source record forms; sources against a
//     real etcd (any key layout, other components and bad records
//     skipped, lease revocation, none read in Workers mode) and a fake
//     API server.
//   - brokers_test.go: broker records in both serde taggings; Brokers
//     against a real etcd (the namespace's brokers only, sorted, once).
//   - fuzz_test.go: records, scopes and Kubernetes data never panic the
//     parsers.
//   - etcdtest/: runs Debian's /usr/bin/etcd for tests, plain, with
//     authentication or with TLS and client certificates.
package discovery
