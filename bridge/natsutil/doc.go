// Package natsutil starts embedded NATS servers and opens client
// connections with the options every goindex command shares.
//
// Without --nats, `goindex relay` and `goindex consume` run an embedded
// nats-server with JetStream on a temporary store, so a demo needs nothing
// installed; the end-to-end tests build whole topologies from the same
// helper: a hub per router site and one leaf node per DC, each leaf with its
// own JetStream domain, joined over (latency-injecting) proxies.
//
// # Concurrency
//
// A Server's methods may be called from any goroutine; Restart and
// Shutdown must not race with each other. Connections are nats.go's and
// safe for concurrent use.
//
// # Files
//
//   - server.go: ServerConfig, Server (start, restart on the same ports and
//     store, shutdown).
//   - conn.go: Connect and the shared client options (reconnect forever,
//     logging of disconnects and slow consumers).
//   - errors.go: the package's errors.
//
// # Tests
//
// The tests start a JetStream server and a leaf node with its own domain,
// reach the leaf's JetStream from the hub through that domain, restart the
// leaf on the same port and store and find the stream's messages again.
package natsutil
