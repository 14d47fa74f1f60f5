package natslink

import "errors"

// ErrNotReady reports an embedded server that did not accept connections
// within its start timeout.
var ErrNotReady = errors.New("natslink: server not ready")

// ErrBadSecurity reports a Security that cannot work: conflicting
// authentication methods, a half-given client certificate, or a file that
// cannot be read or parsed. Nothing was dialed.
var ErrBadSecurity = errors.New("natslink: bad nats security settings")

// ErrAuth reports a server that refused the connection's credentials
// (authorization violation, expired or revoked credentials, or a server
// wanting credentials that were not given). Connect does not retry it.
var ErrAuth = errors.New("natslink: nats authentication failed")

// ErrTLS reports a failed TLS setup: a handshake error (unknown CA, wrong
// server name, missing client certificate) or a TLS mismatch between
// client and server. Connect does not retry it.
var ErrTLS = errors.New("natslink: nats tls failed")
