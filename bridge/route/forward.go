package route

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/score"
)

// Headers the router adds.
const (
	// HopHeader marks a request a goindex router forwarded. A router
	// refuses a request that carries it (ErrLoop), so two routers pointed
	// at each other cannot bounce a request forever.
	HopHeader = "X-Goindex-Hop"
	// Diagnostic response headers: the DC that served, the ttft cost and
	// its parts (ms, under ttft only; what the prompt costs others only
	// when it was priced: Config.PriceOthers, or an eviction charge at a
	// DC whose insert rate is known), the DC's RTT (when measured), the
	// cached prefix in tokens, the policy applied, the DCs skipped
	// because they refused the connection or turned the request away
	// with 502, 503 or 529 (comma-separated, in order), and why the
	// decision was degraded (Decision.Degraded: no DC had fresh signals,
	// so the request was routed on the last known load and RTT, or to the
	// default DC), absent when it was not.
	HeaderDC           = "X-Goindex-DC"
	HeaderCostMs       = "X-Goindex-Cost-Ms"
	HeaderRTTMs        = "X-Goindex-RTT-Ms"
	HeaderQueueMs      = "X-Goindex-Queue-Ms"
	HeaderPrefillMs    = "X-Goindex-Prefill-Ms"
	HeaderOthersMs     = "X-Goindex-Others-Ms"
	HeaderCachedTokens = "X-Goindex-Cached-Tokens"
	HeaderPolicy       = "X-Goindex-Policy"
	HeaderFallback     = "X-Goindex-Fallback"
	HeaderDegraded     = "X-Goindex-Degraded"
)

// copyBufferBytes is the relay buffer of a response body: one read's worth
// is written and flushed at once, so an SSE event leaves as soon as it
// arrives.
const copyBufferBytes = 32 << 10

// hopByHop are the headers of one connection (RFC 9110 §7.6.1) that a proxy
// must not forward.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// newTransport returns the transport to the DC frontends: direct
// connections (no environment proxy, so a refused connect is the DC's),
// a bounded connect, and for https a bounded TLS handshake, whose failure
// is a *DialError (nothing was sent), a bounded wait for response
// headers, and bodies passed through as encoded (no transparent gzip).
// HTTP/1.1 only: the TLS dial offers no other protocol.
func newTransport(cfg *Config) *http.Transport {
	d := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, &DialError{DC: addr, Err: err}
		}
		return c, nil
	}
	return &http.Transport{
		DialContext: dial,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			host, _, _ := net.SplitHostPort(addr)
			tc := tls.Client(c, tlsConfig(cfg.TLS, host))
			hctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
			defer cancel()
			if err := tc.HandshakeContext(hctx); err != nil {
				c.Close()
				return nil, &DialError{DC: addr, Err: fmt.Errorf("tls handshake: %w", err)}
			}
			return tc, nil
		},
		ResponseHeaderTimeout: cfg.ResponseTimeout,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
	}
}

// tlsConfig returns base (or an empty config) for a handshake with host:
// host as the server name unless base names one, HTTP/1.1 as the protocol.
func tlsConfig(base *tls.Config, host string) *tls.Config {
	c := &tls.Config{}
	if base != nil {
		c = base.Clone()
	}
	if c.ServerName == "" {
		c.ServerName = host
	}
	c.NextProtos = []string{"http/1.1"}
	return c
}

// outgoing builds the request to dc: in's method, escaped path, query
// and headers (minus hop-by-hop ones) with body and HopHeader.
func outgoing(ctx context.Context, in *http.Request, dc *DC, body []byte) (*http.Request, error) {
	u := *dc.URL
	// The path as the client escaped it: a model id's %2F stays one
	// segment.
	u.Path = dc.URL.Path + in.URL.Path
	u.RawPath = dc.URL.EscapedPath() + in.URL.EscapedPath()
	u.RawQuery = in.URL.RawQuery
	out, err := http.NewRequestWithContext(ctx, in.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("route: request to dc %s: %w", dc.Name, err)
	}
	out.Header = in.Header.Clone()
	removeHopByHop(out.Header)
	out.Header.Set(HopHeader, "1")
	// A key without values is never sent, but it lets net/http send the
	// request again on a fresh connection when the DC closed a reused one
	// before answering (a keep-alive race: nothing was answered).
	if out.Header["Idempotency-Key"] == nil && out.Header["X-Idempotency-Key"] == nil {
		out.Header["Idempotency-Key"] = nil
	}
	if host, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		if prior := out.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			host = strings.Join(prior, ", ") + ", " + host
		}
		out.Header.Set("X-Forwarded-For", host)
	}
	return out, nil
}

// removeHopByHop deletes the hop-by-hop headers and those the Connection
// header names.
func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
}

// statusOverloaded is Dynamo's frontend answer when every worker is busy
// (DYN_HTTP_OVERLOAD_STATUS_CODE's default); it has no net/http name.
const statusOverloaded = 529

// turnedAway reports a DC answer that says the DC did not take the request
// on: its gateway found no frontend (502), or the frontend has no usable
// worker (503) or every worker is busy (529). Nothing ran, so the next DC
// may serve it.
func turnedAway(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == statusOverloaded
}

// maxDrainBytes bounds what is read of a turned-away answer so that its
// connection can be reused.
const maxDrainBytes = 64 << 10

// attempt is the outcome of trying the DCs of a decision in order.
type attempt struct {
	resp    *http.Response
	served  int      // index into the order of the DC that answered
	skipped []string // DCs that refused the connection or turned the request away, in order
	// cancel ends the DC's request (relay's idle cut); send calls it
	// itself when it returns an error, relay when the body is done.
	cancel context.CancelCauseFunc
}

// send tries order's DCs in turn until one takes the request: a
// *DialError, or an answer turnedAway from a DC that is not the last one,
// moves on to the next; any other failure (the DC accepted and then failed
// or timed out) ends the attempt with ErrUpstream, since the DC may have
// started on the request. The last DC's answer is returned whatever its
// status.
func (rt *Router) send(in *http.Request, order []Choice, body []byte) (*attempt, error) {
	ctx, cancel := context.WithCancelCause(in.Context())
	a := &attempt{cancel: cancel}
	a, err := rt.try(ctx, a, in, order, body)
	if err != nil {
		cancel(err)
	}
	return a, err
}

// try is send's loop over order, its requests made under ctx.
func (rt *Router) try(ctx context.Context, a *attempt, in *http.Request, order []Choice, body []byte) (*attempt, error) {
	for i := range order {
		dc := &order[i].DC
		out, err := outgoing(ctx, in, dc, body)
		if err != nil {
			return a, err
		}
		resp, err := rt.transport.RoundTrip(out)
		if err == nil && turnedAway(resp.StatusCode) && i+1 < len(order) {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrainBytes))
			resp.Body.Close()
			rt.stats.fallbacks.Add(1)
			rt.cfg.Logger.Warn("dc turned the request away, trying the next", "dc", dc.Name, "dc_id", dc.ID, "status", resp.StatusCode)
			a.skipped = append(a.skipped, dc.Name)
			continue
		}
		if err == nil {
			a.resp, a.served = resp, i
			return a, nil
		}
		if in.Context().Err() != nil {
			return a, fmt.Errorf("%w: waiting for dc %s: %w", ErrClientGone, dc.Name, in.Context().Err())
		}
		var de *DialError
		if !errors.As(err, &de) {
			return a, fmt.Errorf("%w: dc %s: %w", ErrUpstream, dc.Name, err)
		}
		rt.stats.fallbacks.Add(1)
		rt.cfg.Logger.Warn("dc refused the connection, trying the next", "dc", dc.Name, "dc_id", dc.ID, "err", err)
		a.skipped = append(a.skipped, dc.Name)
	}
	return a, fmt.Errorf("%w: tried %s", ErrUnreachable, strings.Join(a.skipped, ", "))
}

// errIdle is the cause of a DC request relay cut for silence.
var errIdle = errors.New("route: dc sent nothing for the idle timeout")

// relay writes a's response to w: status, headers (minus hop-by-hop ones)
// plus extra, flushed at once, then the body, flushing after every read so
// streamed events pass through unbuffered. A body that breaks mid-way, or
// stays silent for Config.IdleTimeout, aborts the client's connection
// (http.ErrAbortHandler) rather than end it cleanly, so a cut stream never
// looks complete; it is logged and counted (Stats.Cut). A client that
// stops reading gets the same bound: each write (and the final flush net/http
// makes after relay returns) must go through within IdleTimeout, or the
// connection is closed and the DC's request cancelled. It returns when the
// body's first bytes came (zero if none did) and when it ended (zero
// unless it ended cleanly), for the calibration.
func (rt *Router) relay(w http.ResponseWriter, a *attempt, dc string, extra http.Header) (first, end time.Time) {
	resp := a.resp
	defer a.cancel(nil)
	defer resp.Body.Close()
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = append([]string(nil), vs...)
	}
	removeHopByHop(h)
	for k, vs := range extra {
		h[k] = vs
	}
	rc := http.NewResponseController(w)
	// Lifted by the next request's bound.
	_ = rc.SetWriteDeadline(time.Now().Add(rt.cfg.IdleTimeout))
	w.WriteHeader(resp.StatusCode)
	// The DC sent its headers; send them on now, or a stream's status and
	// the diagnostic headers would wait for its first event (a long
	// prefill).
	if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return first, end
	}
	idle := time.AfterFunc(rt.cfg.IdleTimeout, func() { a.cancel(errIdle) })
	defer idle.Stop()
	buf := make([]byte, copyBufferBytes)
	for {
		n, err := resp.Body.Read(buf)
		idle.Reset(rt.cfg.IdleTimeout)
		if n > 0 {
			if first.IsZero() {
				first = time.Now()
			}
			_ = rc.SetWriteDeadline(time.Now().Add(rt.cfg.IdleTimeout))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return first, end // the client went away
			}
			if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				return first, end
			}
		}
		if err == io.EOF {
			return first, time.Now()
		}
		if err != nil {
			switch cause := context.Cause(resp.Request.Context()); {
			case errors.Is(cause, errIdle):
				err = fmt.Errorf("%w (%v)", errIdle, rt.cfg.IdleTimeout)
			case cause != nil:
				return first, end // the client went away; the DC's request ended with it
			}
			rt.stats.cut.Add(1)
			rt.cfg.Logger.Warn("dc response cut mid-body, aborting the client's connection", "dc", dc, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
}

// diagnostics returns the response headers describing choice c under d.
func diagnostics(d *Decision, c *Choice, skipped []string) http.Header {
	h := http.Header{}
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	h.Set(HeaderDC, c.DC.Name)
	h.Set(HeaderPolicy, d.Policy.String())
	h.Set(HeaderCachedTokens, strconv.Itoa(c.CachedTokens))
	if d.Policy == score.TTFT {
		h.Set(HeaderCostMs, ms(c.Cost))
		h.Set(HeaderQueueMs, ms(c.Parts.QueueMs))
		h.Set(HeaderPrefillMs, ms(c.Parts.PrefillMs))
		if d.FleetUtilization > 0 || c.Parts.OthersMs != 0 {
			h.Set(HeaderOthersMs, ms(c.Parts.OthersMs))
		}
	}
	if c.HasRTT {
		h.Set(HeaderRTTMs, ms(float64(c.RTT)/float64(time.Millisecond)))
	}
	if len(skipped) > 0 {
		h.Set(HeaderFallback, strings.Join(skipped, ","))
	}
	if d.Degraded != follow.NotDegraded {
		h.Set(HeaderDegraded, d.Degraded.String())
	}
	return h
}

// isTimeout reports an error caused by a timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
