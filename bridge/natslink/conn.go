package natslink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Client defaults shared by the commands: a WAN-tolerant ping and a
// reconnect policy that never gives up (a relay or consumer outlives NATS
// restarts and network partitions).
const (
	DefaultReconnectWait = 250 * time.Millisecond
	DefaultPingInterval  = 10 * time.Second
	// reconnectBufBytes buffers publishes while reconnecting (nats.go's
	// default is 8 MiB; a snapshot burst needs more).
	reconnectBufBytes = 64 << 20
)

// Connect opens a client connection to url without credentials; it is
// ConnectSecure with a zero Security.
func Connect(url, name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	return ConnectSecure(url, name, Security{}, log, extra...)
}

// ConnectSecure opens a client connection to url (one or more
// comma-separated server URLs) named name (shown in the server's
// connection list) with the shared options: sec's credentials and TLS,
// reconnect forever every DefaultReconnectWait, a reconnect buffer, and
// disconnects, reconnects and asynchronous errors (slow consumers) logged
// to log (optional; default: discarded). Extra nats options come last and
// win.
//
// The first attempt is made at once. A server that refuses the
// credentials fails with ErrAuth and a failed TLS setup with ErrTLS, since
// retrying cannot fix either; an unreachable server is not an error: the
// connection is returned reconnecting, so a relay may start before NATS.
// Error messages never show a password embedded in url.
func ConnectSecure(url, name string, sec Security, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	secOpts, err := sec.Options()
	if err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(DefaultReconnectWait),
		nats.ReconnectBufSize(reconnectBufBytes),
		nats.PingInterval(DefaultPingInterval),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if c.IsClosed() {
				return // closed by its owner: not worth a warning
			}
			log.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats reconnected", "url", c.ConnectedUrl())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("nats async error", "subject", subject, "err", err)
		}),
	}
	opts = append(opts, secOpts...)
	first := append(append(opts[:len(opts):len(opts)], nats.RetryOnFailedConnect(false)), extra...)
	nc, err := nats.Connect(url, first...)
	if err == nil {
		return nc, nil
	}
	shown := redactURLs(url)
	switch {
	case isAuthError(err):
		return nil, fmt.Errorf("%w: %s (auth %s): %w", ErrAuth, shown, sec.AuthMethod(), err)
	case isTLSError(err):
		return nil, fmt.Errorf("%w: %s: %w", ErrTLS, shown, err)
	}
	// Unreachable for now: come back reconnecting and keep trying.
	log.Warn("nats not reachable yet, retrying", "url", shown, "err", err)
	retry := append(append(opts, nats.RetryOnFailedConnect(true)), extra...)
	nc, err = nats.Connect(url, retry...)
	if err != nil {
		return nil, fmt.Errorf("natslink: connect %s: %w", shown, err)
	}
	return nc, nil
}

// awaitPoll spaces the checks of a connection still looking for its
// server, and awaitLogEvery the reminders that the caller still waits.
const (
	awaitPoll     = 50 * time.Millisecond
	awaitLogEvery = 30 * time.Second
)

// AwaitConnected waits until nc is connected: a connection ConnectSecure
// returned reconnecting (its server not up yet) keeps trying, but a
// caller's first requests, each with its own timeout, would give up
// before the server came. The wait is logged to log (optional) at once
// and every 30 s. It returns nil once connected, ctx's error when ctx ends
// first, and nats.ErrConnectionClosed for a connection closed meanwhile.
func AwaitConnected(ctx context.Context, nc *nats.Conn, log *slog.Logger) error {
	if nc.IsConnected() {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tick := time.NewTicker(awaitPoll)
	defer tick.Stop()
	var logged time.Time
	for !nc.IsConnected() {
		if nc.IsClosed() {
			return fmt.Errorf("natslink: %w", nats.ErrConnectionClosed)
		}
		if now := time.Now(); now.Sub(logged) >= awaitLogEvery {
			log.Warn("waiting for nats to be reachable", "servers", strings.Join(redactedServers(nc), ","))
			logged = now
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	log.Info("nats connected", "url", nc.ConnectedUrlRedacted())
	return nil
}

// redactedServers lists nc's known servers without their credentials.
func redactedServers(nc *nats.Conn) []string {
	out := nc.Servers()
	for i, u := range out {
		out[i] = redactURLs(u)
	}
	return out
}

// isAuthError reports a server's refusal of the credentials.
func isAuthError(err error) bool {
	for _, e := range []error{nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked,
		nats.ErrAccountAuthExpired, nats.ErrNkeysNotSupported} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// isTLSError reports a TLS setup or handshake failure, either side's.
func isTLSError(err error) bool {
	var (
		alert    tls.AlertError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		op       *net.OpError
	)
	// crypto/tls reports an alert from the peer (TLS 1.3: "certificate
	// required" after the client's half of the handshake) as a net.OpError
	// with Op "remote error".
	if errors.As(err, &op) && op.Op == "remote error" {
		return true
	}
	return errors.Is(err, nats.ErrTLS) || errors.Is(err, nats.ErrSecureConnWanted) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.As(err, &alert) || errors.As(err, &verify) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &record)
}

// redactURLs hides the user information (a user and password, or a
// token in the user position) of comma-separated server URLs.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = url.User("redacted")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}
