package discovery

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultCheckEvery is how often a watching source checks, with one
// request bounded by its RequestTimeout, that its backend still answers:
// a watch stream alone does not say when its server went away.
const DefaultCheckEvery = 5 * time.Second

// sourceDefaults returns a source's request bound, check period and
// logger with the unset ones at their defaults.
func sourceDefaults(request, check time.Duration, log *slog.Logger) (time.Duration, time.Duration, *slog.Logger) {
	if request <= 0 {
		request = DefaultRequestTimeout
	}
	if check <= 0 {
		check = DefaultCheckEvery
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return request, check, log
}

// health is a source's readiness: written by its Watch goroutine (and the
// checks it runs), read by Health from any goroutine.
type health struct {
	name   string
	mu     sync.Mutex
	listed bool      // a list succeeded since the source was made
	err    error     // the latest request's failure; nil once one succeeds
	since  time.Time // when the current run of failures began
}

// succeeded records a list or check that the backend answered; it returns
// the failure that this ends, if any.
func (h *health) succeeded(list bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ended := h.err
	h.listed = h.listed || list
	h.err = nil
	return ended
}

// failed records a request that failed; it reports whether the failure
// differs from the one before (a first failure, or another message), so
// that a source may log each distinct failure once.
func (h *health) failed(err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := h.err == nil || h.err.Error() != err.Error()
	if h.err == nil {
		h.since = time.Now()
	}
	h.err = err
	return changed
}

// state is what Health returns.
func (h *health) state() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil && h.listed {
		return nil
	}
	return &HealthError{Source: h.name, Listed: h.listed, Since: h.since, Err: h.err}
}

// checkEvery runs check every period until ctx ends, recording each result;
// the first failure cancels stop with it as the cause, so that the watch
// it guards ends and the source lists again.
func (h *health) checkEvery(ctx context.Context, period, timeout time.Duration, check func(context.Context) error,
	stop context.CancelCauseFunc) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := check(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			stop(&checkError{err: err})
			return
		}
		h.succeeded(false)
	}
}

// checkError is a failed check: the cause a watch was stopped with.
type checkError struct{ err error }

func (e *checkError) Error() string { return "check: " + e.err.Error() }
func (e *checkError) Unwrap() error { return e.err }
