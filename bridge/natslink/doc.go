// Package natslink links a goindex command to NATS: it starts embedded NATS
// servers and opens client connections with the options every command shares.
//
// Without --nats, `goindex relay` and `goindex consume` run an embedded
// nats-server with JetStream on a temporary store, so a demo needs nothing
// installed; the end-to-end tests build whole topologies from the same
// helper: a hub per router site and one leaf node per DC, each leaf with its
// own JetStream domain, joined over (latency-injecting) proxies.
//
// # Security
//
// A real deployment authenticates and encrypts: Security carries one
// authentication method (user and password, token, NKey seed file or
// .creds file) and TLS (CA bundle, client certificate and key, server
// name), validated and loaded before anything is dialed. ConnectSecure
// makes the first attempt at once and fails fast with ErrAuth or ErrTLS
// when the server refuses the credentials or the TLS setup fails: retrying
// cannot fix those, and a command that hangs reconnecting with bad
// credentials is worse than one that stops with the reason. An unreachable
// server is different: the connection comes back reconnecting, so a relay
// may start before its NATS; AwaitConnected then holds a caller's first
// requests (each with its own timeout: a relay's setup, a consumer's
// discovery) until the server is reached, logging the wait. Passwords and
// tokens embedded in a URL never appear in an error.
//
// The embedded server has no authentication and listens on loopback by
// default; ServerConfig.Configure lets tests (and only they) build secured
// servers from nats-server's own options.
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
//   - conn.go: Connect, ConnectSecure and the shared client options
//     (reconnect forever, logging of disconnects and slow consumers), the
//     classification of refused credentials and TLS failures,
//     AwaitConnected.
//   - security.go: Security (authentication method, TLS files), its
//     validation and nats.go options.
//   - errors.go: the package's errors.
//
// # Tests
//
// The tests start a JetStream server and a leaf node with its own domain,
// reach the leaf's JetStream from the hub through that domain, restart the
// leaf on the same port and store and find the stream's messages again.
// Secured servers (users, token, NKey users, operator mode with an
// in-memory account resolver, mutual TLS with a throwaway CA made with
// crypto/x509) accept the right credentials and refuse wrong or missing
// ones with ErrAuth or ErrTLS (wrong server name, no client certificate,
// untrusted CA, plain client against a TLS server); bad settings fail
// validation naming the problem; a URL's password never shows in an error;
// a client started before its server connects once the server is up, and
// AwaitConnected returns then, or when its caller stops waiting or the
// connection is closed.
package natslink
