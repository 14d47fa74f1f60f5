package natsutil

import (
	"fmt"
	"log/slog"
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

// Connect opens a client connection to url named name (shown in the
// server's connection list) with the shared options: reconnect forever
// every DefaultReconnectWait, a reconnect buffer, and disconnects,
// reconnects and asynchronous errors (slow consumers) logged to log
// (optional; default: discarded). Extra nats options come last and win.
func Connect(url, name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(DefaultReconnectWait),
		nats.ReconnectBufSize(reconnectBufBytes),
		nats.PingInterval(DefaultPingInterval),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
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
	nc, err := nats.Connect(url, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("natsutil: connect %s: %w", url, err)
	}
	return nc, nil
}
