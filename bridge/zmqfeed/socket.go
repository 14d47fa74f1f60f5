package zmqfeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"syscall"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/internal/backoff"
	zmq "github.com/pebbe/zmq4"
)

// Socket settings, as Dynamo sets its own (dynamo-current §1.2) where it
// names them.
const (
	// DefaultMaxMessageBytes bounds one inbound part (libzmq's MAXMSGSIZE:
	// a peer that sends more is disconnected before the part is buffered):
	// the decoders' limit plus the 5-byte frame header.
	DefaultMaxMessageBytes = dynamo.MaxMessageBytes + 5
	// DefaultRecvHWM bounds the messages libzmq queues per socket while the
	// relay is behind; past it the publisher's messages are dropped, which
	// the relay sees as a sequence gap. With DefaultMaxMessageBytes it
	// bounds what one publisher can make the relay hold; Dynamo's batches
	// (≤ 8,192 blocks, a few hundred KiB) stay far below.
	DefaultRecvHWM = 1024
	// maxParts bounds the parts kept of one message: the event plane sends
	// four, engines three; the parts of a longer message are read and
	// dropped, and the message is delivered with maxParts+1 parts, which
	// the relay counts as bad frames.
	maxParts = 6
	// recvPoll is how often a waiting socket looks at its context.
	recvPoll = 100 * time.Millisecond
	// reconnectMin and reconnectMax are libzmq's reconnect backoff, the
	// values Dynamo's readiness sockets use.
	reconnectMin = 100 * time.Millisecond
	reconnectMax = 5 * time.Second
	// DefaultMaxSockets is the libzmq sockets a Plane's context may hold
	// (ZMQ_MAX_SOCKETS): three for each of 4,096 publishers (the relay's
	// own bound on live publishers, its duplicate and gap table) and a few
	// for brokers. A publisher takes its SUB socket, the monitor libzmq
	// attaches to it and the PAIR socket reading that monitor; libzmq's
	// default of 1023 sockets held 341 publishers, so a DC with more
	// workers lost every publisher past the 341st. Where a socket's wait
	// holds an OS thread (waiter_other.go), the bound also keeps the
	// threads below Go's limit of 10,000.
	DefaultMaxSockets = 3*4096 + 16
	// resubscribeMin and resubscribeMax bound the wait before a publisher
	// whose socket could not be made, or whose read loop failed, is
	// subscribed again (doubling from the first to the second).
	resubscribeMin = time.Second
	resubscribeMax = 30 * time.Second
)

// newContext returns a libzmq context that holds up to maxSockets sockets,
// or libzmq's default where the library refuses that many (logged).
func newContext(maxSockets int, log *slog.Logger) (*zmq.Context, error) {
	zctx, err := zmq.NewContext()
	if err != nil {
		return nil, fmt.Errorf("zmq context: %w", err)
	}
	if err := zctx.SetMaxSockets(maxSockets); err != nil {
		n, _ := zctx.GetMaxSockets()
		log.Warn("zmq context keeps its default socket limit", "max_sockets", n, "publishers", n/3, "err", err)
	}
	return zctx, nil
}

// resubscribeBackoff spaces the attempts to subscribe a publisher again,
// or to find brokers: from resubscribeMin doubling to resubscribeMax,
// jittered, so the publishers of a DC whose sockets failed together are
// not all made again in the same instant.
func resubscribeBackoff() backoff.Backoff {
	return backoff.Backoff{First: resubscribeMin, Max: resubscribeMax}
}

// socketConfig is what newSocket needs.
type socketConfig struct {
	kind            zmq.Type // zmq.SUB or zmq.DEALER
	endpoints       []string // connected, not bound
	subscribe       []string // SUB prefixes
	maxMessageBytes int64
	recvHWM         int
	// expiry, when positive, watches the connection: once it has been
	// down this long without a new handshake, readLoop calls gone (once
	// per outage). ZMTP heartbeats every expiry/4, answered within
	// expiry/2, make a peer that stops answering (a host gone without
	// closing its connection) count as down too.
	expiry time.Duration
	gone   func(down time.Duration) bool
}

// socket is a connected libzmq socket and the monitor that tells it when
// a connection dropped. libzmq reconnects with backoff on its own after a
// peer goes away, so a publisher that starts later or restarts on the same
// endpoint is picked up; but after a protocol error (a part over
// MAXMSGSIZE, a bad handshake) it gives the endpoint up for good
// (libzmq 4.3). So every disconnect is answered, reconnectMin later, by a
// fresh connect of that endpoint.
type socket struct {
	s, mon    *zmq.Socket
	endpoints []string
	w         *waiter
	redial    map[string]time.Time // endpoint → when to connect it again
	// connects counts the connections made, the first included: a message
	// read after a later one may come from a restarted peer.
	connects uint64
	// downSince is when the connection dropped, zero while a handshake
	// has succeeded since (or it never dropped); expired says gone was
	// called for this outage.
	downSince time.Time
	expired   bool
	expiry    time.Duration
	gone      func(down time.Duration) bool
}

// newSocket makes a connected socket of cfg on zctx.
func newSocket(zctx *zmq.Context, cfg socketConfig) (*socket, error) {
	s, err := zctx.NewSocket(cfg.kind)
	if err != nil {
		return nil, fmt.Errorf("zmq socket: %w", err)
	}
	sk := &socket{s: s, endpoints: cfg.endpoints, redial: map[string]time.Time{}, expiry: cfg.expiry, gone: cfg.gone}
	fail := func(what string, err error) (*socket, error) {
		sk.close()
		return nil, fmt.Errorf("zmq %s: %w", what, err)
	}
	for _, o := range []struct {
		what string
		err  error
	}{
		{"linger", s.SetLinger(0)},
		{"maxmsgsize", s.SetMaxmsgsize(cfg.maxMessageBytes)},
		{"rcvhwm", s.SetRcvhwm(cfg.recvHWM)},
		{"reconnect_ivl", s.SetReconnectIvl(reconnectMin)},
		{"reconnect_ivl_max", s.SetReconnectIvlMax(reconnectMax)},
		{"tcp_keepalive", s.SetTcpKeepalive(1)},
		// Without ZMQ_IPV6 libzmq resolves IPv4 only: connecting to an
		// IPv6 publisher (Dynamo binds tcp://[::]:* and advertises an IPv6
		// DYN_EVENT_PLANE_HOST) succeeds but never makes a connection,
		// so its events are lost without an error. With it, IPv4
		// endpoints still connect.
		{"ipv6", s.SetIpv6(true)},
	} {
		if o.err != nil {
			return fail(o.what, o.err)
		}
	}
	if cfg.expiry > 0 {
		if err := s.SetHeartbeatIvl(max(cfg.expiry/4, time.Millisecond)); err != nil {
			return fail("heartbeat_ivl", err)
		}
		if err := s.SetHeartbeatTimeout(max(cfg.expiry/2, time.Millisecond)); err != nil {
			return fail("heartbeat_timeout", err)
		}
	}
	for _, p := range cfg.subscribe {
		if err := s.SetSubscribe(p); err != nil {
			return fail("subscribe "+p, err)
		}
	}
	// The socket's address names its monitor: unique while it lives.
	addr := fmt.Sprintf("inproc://zmqfeed-monitor-%p", s)
	if err := s.Monitor(addr, zmq.EVENT_DISCONNECTED|zmq.EVENT_CONNECTED|zmq.EVENT_HANDSHAKE_SUCCEEDED); err != nil {
		return fail("monitor", err)
	}
	if sk.mon, err = zctx.NewSocket(zmq.PAIR); err != nil {
		return fail("monitor socket", err)
	}
	if err := sk.mon.SetLinger(0); err != nil {
		return fail("monitor linger", err)
	}
	if err := sk.mon.Connect(addr); err != nil {
		return fail("monitor connect", err)
	}
	for _, ep := range cfg.endpoints {
		if err := s.Connect(ep); err != nil {
			return fail("connect "+ep, err)
		}
	}
	if sk.w, err = newWaiter(s, sk.mon); err != nil {
		return fail("waiter", err)
	}
	return sk, nil
}

func (sk *socket) close() {
	if sk.w != nil {
		sk.w.close()
	}
	if sk.mon != nil {
		sk.mon.Close()
	}
	sk.s.Close()
}

// interrupted reports a call cut short by a signal (retried).
func interrupted(err error) bool {
	return errors.Is(zmq.AsErrno(err), zmq.Errno(syscall.EINTR))
}

// recv reads one whole message from s, which has one waiting. At most
// maxParts+1 parts are kept; the rest are read and dropped.
func recv(s *zmq.Socket) ([][]byte, error) {
	first, err := s.RecvBytes(0)
	if err != nil {
		return nil, fmt.Errorf("zmq receive: %w", err)
	}
	parts := [][]byte{first}
	for {
		more, err := s.GetRcvmore()
		if err != nil {
			return nil, fmt.Errorf("zmq receive: %w", err)
		}
		if !more {
			return parts, nil
		}
		// The parts of one message arrive together (libzmq delivers a
		// message whole), so this does not wait.
		p, err := s.RecvBytes(0)
		if err != nil {
			return nil, fmt.Errorf("zmq receive part %d: %w", len(parts), err)
		}
		if len(parts) <= maxParts {
			parts = append(parts, p)
		}
	}
}

// readLoop hands every message of the socket to fn until ctx ends or fn
// returns false, and connects dropped endpoints again. It owns the socket
// and closes it. Between messages it waits in the Go poller (waiter), so
// an idle socket holds no thread.
func (sk *socket) readLoop(ctx context.Context, fn func(parts [][]byte) bool) error {
	defer sk.close()
	stop := context.AfterFunc(ctx, sk.w.interrupt)
	defer stop()
	for ctx.Err() == nil {
		// Monitor events first: a connection's event is queued before any
		// of its messages can be read.
		mon, sub, err := sk.pending()
		if err != nil {
			return err
		}
		if mon {
			sk.monitorEvent()
		}
		if sub {
			parts, err := recv(sk.s)
			if err != nil {
				return err
			}
			if !fn(parts) {
				return nil
			}
		}
		if !mon && !sub {
			if err := sk.w.wait(ctx, sk.due(), sk.readable); err != nil {
				return err
			}
		}
		now := time.Now()
		sk.redialDue(now)
		if sk.expiry > 0 && !sk.downSince.IsZero() && !sk.expired && now.Sub(sk.downSince) >= sk.expiry {
			sk.expired = true
			if !sk.gone(now.Sub(sk.downSince)) {
				return nil
			}
		}
	}
	return nil
}

// pending reports whether the monitor and the socket have a message
// waiting.
func (sk *socket) pending() (mon, sub bool, err error) {
	if mon, err = hasInput(sk.mon); err != nil {
		return false, false, fmt.Errorf("zmq monitor events: %w", err)
	}
	if sub, err = hasInput(sk.s); err != nil {
		return false, false, fmt.Errorf("zmq events: %w", err)
	}
	return mon, sub, nil
}

// readable reports whether either socket has a message waiting (or cannot
// say: the read that follows reports the error).
func (sk *socket) readable() bool {
	mon, sub, err := sk.pending()
	return mon || sub || err != nil
}

// hasInput reports whether s has a message waiting (ZMQ_EVENTS).
func hasInput(s *zmq.Socket) (bool, error) {
	ev, err := s.GetEvents()
	for interrupted(err) {
		ev, err = s.GetEvents()
	}
	return ev&zmq.POLLIN != 0, err
}

// due is when the read loop has work without a message: the next redial,
// or the end of the current outage's expiry (zero: none).
func (sk *socket) due() time.Time {
	var at time.Time
	for _, t := range sk.redial {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	if sk.expiry > 0 && !sk.downSince.IsZero() && !sk.expired {
		if end := sk.downSince.Add(sk.expiry); at.IsZero() || end.Before(at) {
			at = end
		}
	}
	return at
}

// monitorEvent reads one monitor event: a connection counts, a drop is
// scheduled for a fresh connect and starts an outage (if none is under
// way), a handshake ends it. A TCP connection alone does not: a peer
// that accepts but never speaks ZMTP is still down.
func (sk *socket) monitorEvent() {
	ev, addr, _, err := sk.mon.RecvEvent(0)
	switch {
	case err != nil:
	case ev == zmq.EVENT_CONNECTED:
		sk.connects++
	case ev == zmq.EVENT_HANDSHAKE_SUCCEEDED:
		sk.downSince, sk.expired = time.Time{}, false
	case ev == zmq.EVENT_DISCONNECTED:
		sk.redial[addr] = time.Now().Add(reconnectMin)
		if sk.downSince.IsZero() {
			sk.downSince = time.Now()
		}
	}
}

// redialDue connects again the dropped endpoints whose time came. The
// monitor names an endpoint as libzmq resolved it; one the socket was not
// given by that name makes every endpoint reconnect.
func (sk *socket) redialDue(now time.Time) {
	for addr, at := range sk.redial {
		if now.Before(at) {
			continue
		}
		delete(sk.redial, addr)
		eps := []string{addr}
		if !slices.Contains(sk.endpoints, addr) {
			eps = sk.endpoints
		}
		for _, ep := range eps {
			_ = sk.s.Disconnect(ep) // already gone after a protocol error
			_ = sk.s.Connect(ep)
		}
	}
}
