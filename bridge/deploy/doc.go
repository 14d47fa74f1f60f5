// Package deploy holds goindex's deployment examples and the parser its
// tests check them with.
//
// # Examples
//
//   - kubernetes/relay.yaml: one relay Deployment per DC (replicas 1,
//     strategy Recreate: one producer per pool), settings as GOINDEX_*
//     from a ConfigMap, NATS .creds and CA from Secrets, /readyz and
//     /healthz probes on the metrics port, 30 s to drain on SIGTERM.
//   - kubernetes/router-site.yaml: a router site's Pod: Dynamo's frontend
//     with libgoindex.so copied in by an init container and selected by
//     DYN_ROUTER_WORKER_SELECTOR_PLUGIN / _CONFIG, the consumer as a sidecar
//     writing the replica into /dev/shm (an emptyDir of medium Memory shared
//     by the Pod's containers), and the optional global proxy (route)
//     reading the same replica.
//   - systemd/goindex-relay.service, systemd/goindex-consume.service and
//     their EnvironmentFiles relay.env and consume.env: the same two
//     commands on hosts, with the NATS .creds passed as a systemd
//     credential (%d) and the usual sandboxing (no PrivateDevices for the
//     consumer: routers must see its /dev/shm).
//
// The examples name placeholder images and hosts (registry.example.com,
// *.example.com); replace them. The goindex image is assumed to hold the
// binary at /usr/local/bin/goindex and the library at
// /usr/lib/goindex/libgoindex.so.
//
// # Files
//
//   - manifest.go: the embedded examples; Kubernetes (YAML documents into
//     Object), Units (systemd INI), EnvFile, and Invocations, every goindex
//     command line the examples run with its GOINDEX_* environment.
//
// # Tests
//
// Here: every document parses; every relay Deployment runs one replica
// with strategy Recreate, a distinct --dc and a grace period, and all
// relays agree on domain, seed and expected blocks; the router site shares
// a Memory emptyDir at /dev/shm between the frontend and the consumer,
// whose --shm lies in it, and mounts the library where the frontend's
// DYN_ROUTER_WORKER_SELECTOR_PLUGIN points; every unit has its required
// keys, stops with SIGTERM and restarts on failure. In bridge/cmd/goindex:
// every Invocation's arguments and GOINDEX_* names parse against the real
// subcommand's flag set.
package deploy
