package route

import (
	"errors"
	"fmt"
	"net/http"
)

// Errors of package route; test with errors.Is. Request errors reach the
// client as an OpenAI-shaped JSON error with the status StatusOf gives.
var (
	// ErrBadConfig reports an invalid Config or DC spec; New builds nothing.
	ErrBadConfig = errors.New("route: bad config")
	// ErrBodyTooLarge reports a request body over Config.MaxBodyBytes (413).
	ErrBodyTooLarge = errors.New("route: request body too large")
	// ErrTooManyTokens reports a prompt over Config.MaxPromptTokens, given
	// in the request or returned by the tokenizer (413).
	ErrTooManyTokens = errors.New("route: prompt has too many tokens")
	// ErrMalformed reports a request body that is not the JSON object the
	// endpoint takes, or a field of the wrong type (400).
	ErrMalformed = errors.New("route: malformed request")
	// ErrSlowBody reports a request body that did not arrive in full
	// within Config.BodyTimeout (408); the connection is closed after the
	// answer.
	ErrSlowBody = errors.New("route: request body too slow")
	// ErrMethod reports a method the endpoint does not serve (405).
	ErrMethod = errors.New("route: method not allowed")
	// ErrNotFound reports a path the router does not serve (404).
	ErrNotFound = errors.New("route: no such endpoint")
	// ErrLoop reports a request that already passed through a goindex
	// router (it carries HopHeader); routing it again could loop (508).
	ErrLoop = errors.New("route: request already routed once (loop prevention)")
	// ErrNoEligibleDC reports that no configured DC has every signal the
	// policy needs (no replica, stale load or RTT, no lane) (503).
	ErrNoEligibleDC = errors.New("route: no eligible DC")
	// ErrUnreachable reports that no DC took the request: the last one
	// tried refused or timed out the connection, and any before it did
	// too or turned the request away (502).
	ErrUnreachable = errors.New("route: no DC reachable")
	// ErrUpstream reports a DC that accepted the connection but failed
	// before a response arrived (502, or 504 on a timeout); the request is
	// not retried elsewhere because the DC may have started on it.
	ErrUpstream = errors.New("route: DC failed before responding")
	// ErrClientGone reports a client that went away (cancelled its
	// request) before a DC answered; it is nobody's failure but the
	// client's, so it is counted apart from upstream errors (499, the
	// status proxies log for it; the client never reads it).
	ErrClientGone = errors.New("route: client went away")
	// ErrTokenizer reports a tokenizer hook that failed or answered badly;
	// the request is then routed load-only, never refused.
	ErrTokenizer = errors.New("route: tokenizer")
)

// DialError marks a failure to connect to a DC (the TCP connect or, for
// https, the TLS handshake): nothing was sent, so the request is tried on
// the next DC.
type DialError struct {
	DC  string
	Err error
}

func (e *DialError) Error() string { return fmt.Sprintf("route: connect to dc %s: %v", e.DC, e.Err) }

// Unwrap returns the cause.
func (e *DialError) Unwrap() error { return e.Err }

// statusClientClosedRequest is the status proxies record for a request
// its client abandoned (nginx's 499); net/http has no name for it.
const statusClientClosedRequest = 499

// StatusOf returns the HTTP status the router answers for err: 413, 400,
// 408, 405, 404, 508, 503, 499, 502 or 504 for the sentinels above, 500
// otherwise.
func StatusOf(err error) int {
	switch {
	case errors.Is(err, ErrBodyTooLarge), errors.Is(err, ErrTooManyTokens):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrMalformed):
		return http.StatusBadRequest
	case errors.Is(err, ErrSlowBody):
		return http.StatusRequestTimeout
	case errors.Is(err, ErrMethod):
		return http.StatusMethodNotAllowed
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrLoop):
		return http.StatusLoopDetected
	case errors.Is(err, ErrNoEligibleDC):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrClientGone):
		return statusClientClosedRequest
	case errors.Is(err, ErrUnreachable):
		return http.StatusBadGateway
	case errors.Is(err, ErrUpstream):
		if isTimeout(err) {
			return http.StatusGatewayTimeout
		}
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}
