package relay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/goindex/goindex/goindex/relayproto"
)

// statusTimeout bounds one Status call of Supervise.
const statusTimeout = time.Second

// Supervise runs r until ctx ends (Run) and every statusEvery (0: never)
// passes its pools' status to each (nil: none). It returns Run's error,
// or else the pools' status once Run has returned (the last one seen when
// that fails).
func (r *Relay) Supervise(ctx context.Context, statusEvery time.Duration, each func([]PoolStatus)) ([]PoolStatus, error) {
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var tick <-chan time.Time
	if statusEvery > 0 {
		t := time.NewTicker(statusEvery)
		defer t.Stop()
		tick = t.C
	}
	var last []PoolStatus
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, err
			}
			sctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
			defer cancel()
			if st, err := r.Status(sctx); err == nil {
				last = st
			}
			return last, nil
		case <-tick:
			sctx, cancel := context.WithTimeout(ctx, statusTimeout)
			st, err := r.Status(sctx)
			cancel()
			if err != nil {
				continue
			}
			last = st
			if each != nil {
				each(st)
			}
		}
	}
}

// LogStatus logs a line per pool of st at info level (warn, with the
// reason, while a feed does not work).
func LogStatus(log *slog.Logger, st []PoolStatus) {
	for _, p := range st {
		level, attrs := slog.LevelInfo, []any{PoolLogKey, PoolLogValue(relayproto.DomainID(p.Domain), relayproto.DCID(p.DC)),
			"incarnation", p.Incarnation, "events", p.Intake.Events, "tracked", p.Producer.TrackedBlocks,
			"load", fmt.Sprintf("%.3f", p.Producer.LoadFactor), "sequence", p.Publisher.LastSequence,
			"snapshots", p.Snapshots, "fence", p.Publisher.Fence.String(), "gaps", p.Intake.Gaps}
		if p.FeedErr != "" {
			level, attrs = slog.LevelWarn, append(attrs, "feeds_not_ready", p.FeedErr)
		}
		log.Log(context.Background(), level, "relay status", attrs...)
	}
}

// WriteStatus writes a line per pool of st.
func WriteStatus(w io.Writer, st []PoolStatus) error {
	for _, p := range st {
		if _, err := fmt.Fprintf(w, "pool %d/%d incarnation %d: %d events (%d rejected, %d gaps), %d blocks tracked, load %.3f, sequence %d, %d snapshots\n",
			p.Domain, p.DC, p.Incarnation, p.Intake.Events, p.Rejected, p.Intake.Gaps, p.Producer.TrackedBlocks,
			p.Producer.LoadFactor, p.Publisher.LastSequence, p.Snapshots); err != nil {
			return err
		}
		if p.FeedErr != "" {
			if _, err := fmt.Fprintf(w, "pool %d/%d feeds not ready: %s\n", p.Domain, p.DC, p.FeedErr); err != nil {
				return err
			}
		}
	}
	return nil
}
