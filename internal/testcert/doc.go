// Package testcert makes the throwaway public-key infrastructure tests of
// TLS need: a CA, a server certificate for the hosts a test names and a
// client certificate, all signed by the CA and written as PEM files into
// t.TempDir(). bridge/discovery/etcdtest (etcd with client certificates)
// and bridge/natslink's tests (NATS with mutual TLS) share it instead of
// each keeping a copy. It is for tests only and imports nothing of ours.
//
// The keys are ECDSA P-256; the certificates are valid from an hour ago
// to a day from now.
//
// # Files
//
//   - doc.go: this overview.
//   - testcert.go: Files, New, Files.ClientTLS, Files.ServerTLS.
//   - testcert_test.go: a TLS handshake between the two leaves succeeds,
//     a host the server certificate does not name is refused, and a
//     client without its certificate is refused.
package testcert
