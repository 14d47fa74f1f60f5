// Package deploy holds goindex's deployment examples and the parser its
// tests check them with.
//
// # Examples
//
// The examples ingest from Dynamo as released (v1.3 and later: KV events
// and load on the ZMQ event plane, publishers found through discovery) and
// put goindex into Dynamo's frontend through the extension point Dynamo
// ships, the compile-time Rust scorer API.
//
//   - kubernetes/relay.yaml: one relay Deployment per DC (replicas 1,
//     strategy Recreate: one producer per pool), settings as GOINDEX_*
//     from a ConfigMap: GOINDEX_KUBE=true follows the workers through
//     Dynamo's Kubernetes discovery (their DynamoWorkerMetadata resources,
//     what the operator's DYN_DISCOVERY_BACKEND=kubernetes publishes), with
//     the ServiceAccount goindex-relay bound to a Role allowing get, list
//     and watch on dynamoworkermetadatas (group nvidia.com); comments say
//     what to set for Dynamo's NATS event plane, a ZMQ broker or etcd.
//     NATS (the hub's side) .creds and CA from Secrets, /readyz and
//     /healthz probes on the metrics port, 30 s to drain on SIGTERM.
//   - kubernetes/router-site.yaml: a router site's Pod: a custom Dynamo
//     frontend image with the goindex-scorer crate linked in, run with
//     --router-policy-config naming the policy YAML of the ConfigMap
//     goindex-worker-selection (dynamo/rust/goindex-scorer's
//     worker-selection.yaml with the site's replica and DC), libgoindex.so
//     copied in by an init container and named by GOINDEX_LIBRARY, the
//     consumer as a sidecar writing the replica into /dev/shm (an emptyDir
//     of medium Memory shared by the Pod's containers), and the optional
//     global proxy (route) reading the same replica. The C plugin's
//     DYN_ROUTER_WORKER_SELECTOR_PLUGIN / _CONFIG appear only in a comment,
//     for builds carrying one of the unmerged loaders.
//   - systemd/goindex-relay.service, systemd/goindex-consume.service and
//     their EnvironmentFiles relay.env and consume.env: the same two
//     commands on hosts, the relay following the workers through Dynamo's
//     etcd discovery (GOINDEX_ETCD, the workers' ETCD_ENDPOINTS), with the
//     NATS .creds passed as a systemd credential (%d) and the usual
//     sandboxing (no PrivateDevices for the consumer: routers must see its
//     /dev/shm).
//
// The examples name placeholder images and hosts (registry.example.com,
// *.example.com); replace them. The goindex image is assumed to hold the
// binary at /usr/local/bin/goindex and the library at
// /usr/lib/goindex/libgoindex.so.
//
// # Files
//
//   - manifest.go: the embedded examples; Kubernetes (YAML documents into
//     Object: ConfigMaps, Deployments, Roles, RoleBindings), Units (systemd
//     INI), EnvFile, and Invocations, every goindex command line the
//     examples run with its GOINDEX_* environment.
//
// # Tests
//
// Here: every document parses; every relay Deployment runs one replica
// with strategy Recreate, a distinct --dc and a grace period, and all
// relays agree on domain, seed and expected blocks; every relay has a
// ZMQ event-plane source (the Kubernetes ones --kube, the systemd one
// --etcd with http(s) URLs), names the workers' namespace, component and
// endpoint and publishes to a --nats; every relay Deployment with --kube
// runs as a ServiceAccount of the examples bound by a RoleBinding to a
// Role granting get, list and watch on dynamoworkermetadatas of
// nvidia.com; the router site shares a Memory emptyDir at /dev/shm
// between the frontend and the consumer, whose --shm lies in it; its
// frontend sets no DYN_ROUTER_WORKER_SELECTOR_* variable, runs
// dynamo.frontend --router-mode kv with --router-policy-config naming a
// key of a ConfigMap mounted read-only, whose YAML selects a policy of
// type goindex for every role with the parameters of the crate's
// worker-selection.yaml, whose config dynamo/selector accepts, with the
// consumer's replica and a relay's DC; GOINDEX_LIBRARY, when set, lies on
// a read-only volume an init container fills; every unit has its
// required keys, stops with SIGTERM and restarts on failure. In
// bridge/cmd/goindex: every Invocation's arguments and GOINDEX_* names
// parse against the real subcommand's flag set.
package deploy
